"""Tests of `src=`: an `<invoke>` of a chart in a file beside the imported one (by `src`, or by a
`srcexpr` whose values are known at import) imports that chart as an inline `<content>` one
is, and `<data src=>` binds the file's content; what leaves the chart's directory (an absolute
path, `..`, a URL, a symbolic link out), a missing or oversized file, or a chart given as text
is refused, located at the element naming it; nothing outside the directory is looked at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from reference_machine import DefinitionError, load_definition
from reference_machine.importers import scxml, w3c
from reference_machine.importers.scxml.files import SrcFiles

HEAD = ('<?xml version="1.0"?>\n<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" '
        'datamodel="python" initial="s0">')
TAIL = '<final id="pass"/><final id="fail"/></scxml>'
DONE = '<final id="done"/>'


def chart(body: str) -> str:
    return f"{HEAD}\n{body}\n{TAIL}"


def child(body: str) -> str:
    return (f'<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" '
            f'datamodel="python">{body}</scxml>')


def invoking(invoke: str, then: str = "pass") -> str:
    """Gives a chart whose state s0 invokes (on line 3) and goes to `then` on done.invoke."""
    return chart(f'<datamodel><data id="x"/></datamodel><state id="s0">\n{invoke}'
                 f'<transition event="done.invoke" target="{then}"/>'
                 '<transition event="*" target="fail"/></state>')


def convert(folder: Path, text: str) -> scxml.Imported:
    (folder / "main.scxml").write_text(text, encoding="utf-8")
    return scxml.convert(text, {}, str(folder / "main.scxml"), directory=folder)


def ends(folder: Path, text: str) -> str:
    definition = load_definition(convert(folder, text).data)
    end = w3c.run_definition(definition)
    return end.state if end.final else f"stuck in {end.state}: {end.why}"


def refused(folder: Path, text: str) -> Any:
    with pytest.raises(DefinitionError, match=r"error") as caught:
        convert(folder, text)
    return caught.value.findings[0]


class TestInvokeSrc:
    @pytest.mark.parametrize("src", ["sub.scxml", "file:sub.scxml", "./sub.scxml"])
    def test_a_file_beside_the_chart_is_invoked_as_inline_content_is(
            self, tmp_path: Path, src: str) -> None:
        """A relative `src` (`file:` or not) names a chart in the directory, run as a child
        session: its end is done.invoke."""
        (tmp_path / "sub.scxml").write_text(child(DONE), encoding="utf-8")
        text = invoking(f'<invoke type="scxml" id="kid" src="{src}"/>')
        result = convert(tmp_path, text)
        assert set(result.data["context"][scxml.CHILDREN]) == {"kid"}
        assert ends(tmp_path, text) == "pass"

    def test_params_set_the_files_data(self, tmp_path: Path) -> None:
        """A `<param>` sets the invoked file's data item of its name (W3C 276)."""
        (tmp_path / "sub.scxml").write_text(child(
            '<datamodel><data id="v" expr="0"/></datamodel><state id="c">'
            '<transition cond="v == 1" target="done"><send target="#_parent" event="one"/>'
            '</transition><transition target="done"><send target="#_parent" event="zero"/>'
            f'</transition></state>{DONE}'), encoding="utf-8")
        text = chart('<state id="s0"><invoke type="scxml" src="sub.scxml">'
                     '<param name="v" expr="1"/></invoke>'
                     '<transition event="one" target="pass"/>'
                     '<transition event="zero" target="fail"/></state>')
        assert ends(tmp_path, text) == "pass"

    def test_a_file_below_names_its_own_files_from_its_directory(self, tmp_path: Path) -> None:
        """A chart in a subdirectory invokes a file beside it, named relative to it."""
        (tmp_path / "charts").mkdir()
        (tmp_path / "charts" / "outer.scxml").write_text(child(
            '<state id="c"><invoke type="scxml" src="inner.scxml"/>'
            '<transition event="done.invoke" target="done"/></state>' + DONE),
            encoding="utf-8")
        (tmp_path / "charts" / "inner.scxml").write_text(child(DONE), encoding="utf-8")
        assert ends(tmp_path, invoking('<invoke type="scxml" src="charts/outer.scxml"/>')) == \
            "pass"

    def test_a_symbolic_link_inside_the_directory_is_followed(self, tmp_path: Path) -> None:
        """A link whose target stays in the directory reads that target."""
        (tmp_path / "real.scxml").write_text(child(DONE), encoding="utf-8")
        (tmp_path / "alias.scxml").symlink_to("real.scxml")
        assert ends(tmp_path, invoking('<invoke type="scxml" src="alias.scxml"/>')) == "pass"

    def test_a_srcexpr_known_at_import_picks_its_chart_as_it_runs(self, tmp_path: Path) -> None:
        """A `srcexpr` over a data item set only to strings: each file is imported, and the
        value the item has as the invoke starts picks one (W3C 216)."""
        (tmp_path / "good.scxml").write_text(child(DONE), encoding="utf-8")
        text = chart('<datamodel><data id="where" expr="\'nothing.scxml\'"/></datamodel>'
                     '<state id="s0"><onentry><assign location="where" '
                     'expr="\'file:good.scxml\'"/></onentry>'
                     '<invoke type="scxml" id="kid" srcexpr="where"/>'
                     '<transition event="done.invoke" target="pass"/>'
                     '<transition event="*" target="fail"/></state>')
        result = convert(tmp_path, text)
        assert list(result.data["context"][scxml.CHILDREN]) == ["kid#2"]
        missing = [f for f in result.findings if f.code == "scxml-invoke-missing"]
        assert missing and "'nothing.scxml'" in missing[0].message
        assert ends(tmp_path, text) == "pass"

    def test_a_srcexpr_naming_no_file_raises_error_execution(self, tmp_path: Path) -> None:
        """The value a run gives names no file: the invoke cannot start, error.execution."""
        (tmp_path / "good.scxml").write_text(child(DONE), encoding="utf-8")
        text = chart('<datamodel><data id="where" expr="\'nothing.scxml\'"/></datamodel>'
                     '<state id="s0"><invoke type="scxml" srcexpr="where"/>'
                     '<transition event="error.execution" target="pass"/>'
                     '<transition event="*" target="fail"/></state>'
                     '<state id="s9"><onentry><assign location="where" '
                     'expr="\'good.scxml\'"/></onentry></state>')
        assert ends(tmp_path, text) == "pass"

    @pytest.mark.parametrize("srcexpr", ["x", "'sub' + '.scxml'", "_sessionid"])
    def test_a_srcexpr_not_known_at_import_is_refused(self, tmp_path: Path,
                                                      srcexpr: str) -> None:
        """A data item something other than a literal sets, or any other expression, is
        refused, located at the invoke."""
        text = chart('<datamodel><data id="x" expr="\'sub.scxml\'"/></datamodel>'
                     f'<state id="s0"><invoke type="scxml" srcexpr="{srcexpr}"/>\n'
                     '<onentry><assign location="x" expr="x + \'\'"/></onentry>'
                     '<transition event="done.invoke" target="pass"/></state>')
        finding = refused(tmp_path, text)
        assert finding.code == "scxml-invoke"
        assert finding.location == "scxml/state[@id='s0']/invoke[1]" and finding.line == 3
        assert "known at import" in finding.message

    def test_an_error_in_the_file_is_located_at_the_src(self, tmp_path: Path) -> None:
        """The invoked file's own errors name the file and their line in it, at the `src`."""
        (tmp_path / "sub.scxml").write_text(child(
            '\n\n<state id="c"><transition target="nowhere"/></state>'), encoding="utf-8")
        finding = refused(tmp_path, invoking('<invoke type="scxml" src="sub.scxml"/>'))
        assert finding.code == "scxml-unknown-target"
        assert finding.location == "scxml/state[@id='s0']/invoke[1]/@src"
        assert finding.line == 4
        assert finding.message.startswith("in sub.scxml (line 3, scxml/state[@id='c']/")


class TestInvokeSrcRefusals:
    @pytest.mark.parametrize(("src", "named"), [
        ("/etc/hosts", "absolute path"),
        ("file:///etc/hosts", "absolute path"),
        ("../outside.scxml", "'..'"),
        ("sub/../../outside.scxml", "'..'"),
        ("http://example.com/sub.scxml", "URL"),
        ("C:/charts/sub.scxml", "URL"),
        ("missing.scxml", "no such file"),
        ("", "names no file"),
        ("folder", "not a regular file"),
        ("escape.scxml", "symbolic link"),
        ("escape_dir/sub.scxml", "symbolic link"),
        ("big.scxml", "kB"),
        ("latin1.scxml", "not UTF-8"),
    ])
    def test_what_leaves_the_directory_or_is_not_there_is_refused_located(
            self, tmp_path: Path, src: str, named: str) -> None:
        """Each is an error at the `<invoke>`, with its line, saying why; the file named is
        never opened."""
        root = tmp_path / "charts"
        root.mkdir()
        (tmp_path / "outside.scxml").write_text(child(DONE), encoding="utf-8")
        (root / "folder").mkdir()
        (root / "escape.scxml").symlink_to(tmp_path / "outside.scxml")
        (root / "escape_dir").symlink_to("../")
        (root / "big.scxml").write_bytes(b" " * (scxml.SRC_BYTES_MAX + 1))
        (root / "latin1.scxml").write_bytes(child(DONE).replace("1.0", "\xe9").encode("latin-1"))
        finding = refused(root, invoking(f'<invoke type="scxml" src="{src}"/>'))
        assert finding.code == "scxml-invoke"
        assert finding.location == "scxml/state[@id='s0']/invoke[1]" and finding.line == 4
        assert f"<invoke src={src!r}> is refused" in finding.message, finding.message
        assert named in finding.message, finding.message

    def test_nothing_outside_the_directory_is_looked_at(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every path the import looks at or opens is inside the chart's directory, even
        for a symbolic link that leads out."""
        root = tmp_path / "charts"
        root.mkdir()
        (tmp_path / "outside.scxml").write_text(child(DONE), encoding="utf-8")
        (root / "escape.scxml").symlink_to(tmp_path / "outside.scxml")
        (root / "up.scxml").symlink_to("../outside.scxml")
        (root / "sub.scxml").write_text(child(DONE), encoding="utf-8")
        seen: list[str] = []
        readlink = os.readlink
        for name in ("lstat", "stat", "open", "readlink"):
            real = getattr(os, name)

            def spy(path: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
                where = os.fspath(path)
                if kwargs.get("dir_fd") is not None:  # a name in a directory opened before
                    where = os.path.join(readlink(f"/proc/self/fd/{kwargs['dir_fd']}"), where)
                seen.append(where)
                return _real(path, *args, **kwargs)

            monkeypatch.setattr(os, name, spy)
        for src in ("escape.scxml", "up.scxml", "../outside.scxml", "/etc/hosts"):
            text = invoking(f'<invoke type="scxml" src="{src}"/>')
            with pytest.raises(DefinitionError, match=r"error"):
                scxml.convert(text, {}, "main.scxml", directory=root)
        scxml.convert(invoking('<invoke type="scxml" src="sub.scxml"/>'), {}, "main.scxml",
                      directory=root)
        assert seen and all(path == str(root) or path.startswith(str(root) + os.sep)
                            for path in seen), seen

    @pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")
    def test_a_directory_swapped_for_a_link_after_the_walk_is_not_followed(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Someone who can write in the chart's directory swaps a folder the walk found for
        a link leading out before the file is opened: the open follows no link, so the
        file outside is never read (the import is refused)."""
        root = tmp_path / "charts"
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "value.txt").write_text("1", encoding="utf-8")
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "value.txt").write_text("'SECRET outside'", encoding="utf-8")
        walk = SrcFiles.walk

        def racing(start: str, names: tuple[str, ...]) -> tuple[str, ...]:
            found = walk(start, names)
            (root / "sub").rename(root / "was")
            (root / "sub").symlink_to(tmp_path / "out")
            return found

        monkeypatch.setattr(SrcFiles, "walk", staticmethod(racing))
        text = chart('<datamodel><data id="v" src="sub/value.txt"/></datamodel>'
                     '<state id="s0"><transition target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"cannot be read") as caught:
            convert(root, text)
        assert "SECRET" not in str(caught.value)

    def test_charts_nested_through_many_files_are_refused_located(
            self, tmp_path: Path) -> None:
        """Each file `src=` names nests within the last: deep enough, the import says so
        instead of failing with a traceback."""
        depth = 12
        for number in range(scxml.SRC_FILES_MAX):
            inner = f'<invoke type="scxml" src="c{number + 1}.scxml"/>'
            for _ in range(depth):
                state = '<state id="n">' + inner + "</state>"
                inner = f'<invoke type="scxml"><content>{child(state)}</content></invoke>'
            (tmp_path / f"c{number}.scxml").write_text(
                child(f'<state id="top">{inner}</state>'), encoding="utf-8")
        (tmp_path / f"c{scxml.SRC_FILES_MAX}.scxml").write_text(child(DONE), encoding="utf-8")
        with pytest.raises(DefinitionError) as caught:
            convert(tmp_path, invoking('<invoke type="scxml" src="c0.scxml"/>'))
        assert caught.value.findings[0].code in ("scxml-nesting", "scxml-invoke")

    def test_a_chart_given_as_text_reads_no_file(self, tmp_path: Path) -> None:
        """With no directory (a chart given as text), `src` is refused even for a file that
        is there beside the name the chart is given."""
        (tmp_path / "sub.scxml").write_text(child(DONE), encoding="utf-8")
        text = invoking('<invoke type="scxml" src="sub.scxml"/>')
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(text, {}, str(tmp_path / "main.scxml"))
        finding = caught.value.findings[0]
        assert finding.code == "scxml-invoke" and finding.line == 4
        assert "as text, without its directory" in finding.message

    def test_a_file_that_invokes_itself_is_read_a_bounded_number_of_times(
            self, tmp_path: Path) -> None:
        """Each `src` is a file read; past `SRC_FILES_MAX` the import is refused."""
        (tmp_path / "loop.scxml").write_text(child(
            '<state id="c"><invoke type="scxml" src="loop.scxml"/></state>'), encoding="utf-8")
        finding = refused(tmp_path, invoking('<invoke type="scxml" src="loop.scxml"/>'))
        assert finding.code == "scxml-invoke"
        assert f"more than {scxml.SRC_FILES_MAX} files" in finding.message

    @pytest.mark.parametrize("invoke", [
        '<invoke type="scxml" src="sub.scxml"><content><scxml/></content></invoke>',
        '<invoke type="scxml" src="sub.scxml" srcexpr="\'sub.scxml\'"/>',
    ])
    def test_a_chart_named_twice_is_refused(self, tmp_path: Path, invoke: str) -> None:
        """`src`, `srcexpr` and `<content>` are exclusive."""
        (tmp_path / "sub.scxml").write_text(child(DONE), encoding="utf-8")
        finding = refused(tmp_path, invoking(invoke))
        assert finding.code == "scxml-invoke" and "names its chart once" in finding.message


class TestDataSrc:
    def test_the_files_content_is_the_value(self, tmp_path: Path) -> None:
        """The file's content is read as a `<data>` element's content is: an expression."""
        (tmp_path / "value.txt").write_text("[1, 2, 3]\n", encoding="utf-8")
        text = chart('<datamodel><data id="v" src="file:value.txt"/></datamodel>'
                     '<state id="s0"><transition cond="len(v) == 3" target="pass"/>'
                     '<transition target="fail"/></state>')
        assert convert(tmp_path, text).data["context"]["v"] == [1, 2, 3]
        assert ends(tmp_path, text) == "pass"

    def test_an_empty_file_leaves_it_unset(self, tmp_path: Path) -> None:
        """An empty file is no value: the data item is None."""
        (tmp_path / "value.txt").write_text("", encoding="utf-8")
        text = chart('<datamodel><data id="v" src="value.txt"/></datamodel>'
                     '<state id="s0"><transition target="pass"/></state>')
        assert convert(tmp_path, text).data["context"]["v"] is None

    @pytest.mark.parametrize(("src", "named"), [
        ("/etc/hostname", "absolute path"),
        ("../value.txt", "'..'"),
        ("https://example.com/value.txt", "URL"),
        ("missing.txt", "no such file"),
        ("big.txt", "kB"),
    ])
    def test_what_leaves_the_directory_or_is_not_there_is_refused_located(
            self, tmp_path: Path, src: str, named: str) -> None:
        """Each is an error at the `<data>`, with its line, saying why."""
        root = tmp_path / "charts"
        root.mkdir()
        (tmp_path / "value.txt").write_text("1", encoding="utf-8")
        (root / "big.txt").write_bytes(b"1" * (scxml.SRC_BYTES_MAX + 1))
        text = chart(f'<datamodel>\n<data id="v" src="{src}"/></datamodel>'
                     '<state id="s0"><transition target="pass"/></state>')
        finding = refused(root, text)
        assert finding.code == "scxml-data-src"
        assert finding.location == "scxml/datamodel[1]/data[@id='v']" and finding.line == 4
        assert f"<data src={src!r}> is refused" in finding.message
        assert named in finding.message, finding.message

    def test_a_chart_given_as_text_reads_no_data_file(self) -> None:
        """Without a directory `<data src=>` is refused."""
        text = chart('<datamodel><data id="v" src="value.txt"/></datamodel>'
                     '<state id="s0"><transition target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"as text, without its directory") as caught:
            scxml.convert(text, {}, "main.scxml")
        assert caught.value.findings[0].code == "scxml-data-src"


class TestFromTheCommandLine:
    """`lint`, `import` and `fuzz` read a chart as a file, so its `src=` names files beside
    it (through `import_document`), as the W3C runner does."""

    def test_a_file_beside_the_chart_is_invoked_and_one_outside_refused(
            self, tmp_path: Path) -> None:
        from reference_machine.importers import import_document

        charts = tmp_path / "charts"
        charts.mkdir()
        (charts / "sub.scxml").write_text(child(DONE), encoding="utf-8")
        (charts / "main.scxml").write_text(invoking('<invoke id="kid" src="sub.scxml"/>'),
                                           encoding="utf-8")
        imported = import_document(charts / "main.scxml")
        assert set(imported.data["context"][scxml.CHILDREN]) == {"kid"}
        (tmp_path / "outside.scxml").write_text(child(DONE), encoding="utf-8")
        (charts / "escape.scxml").write_text(invoking('<invoke src="../outside.scxml"/>'),
                                             encoding="utf-8")
        with pytest.raises(DefinitionError, match=r"'\.\.'") as caught:
            import_document(charts / "escape.scxml")
        assert caught.value.findings[0].code == "scxml-invoke"
