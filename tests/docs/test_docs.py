"""The documentation site (`docs/`, built by MkDocs) and the README: the site builds with
`--strict` (a broken link, anchor or page fails), and every code example runs as written.

Every Python block runs in a fresh process, from a folder laid out as the project's root (the
scenarios and the test support modules), so an example that stopped working fails here. A block
that needs what this test cannot give (a PostgreSQL server) says, in a comment just above it,
which test runs it: `<!-- docs: run by tests/FILE.py::NAME -->`, and that test must exist. Every
YAML block that is a definition (it has `states:`) loads with no error, and every other one
parses (a fragment says so on its first line: `# fragment`). Every `fsmharness` command of a
shell block is parsed by the command line itself: a renamed or removed option fails here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml

from harness.cli.main import cli
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_BY = re.compile(r"<!-- docs: run by (tests/[\w/]+\.py)::([\w:]+) -->\s*$")


def blocks(language: str) -> Iterator[tuple[str, str, str]]:
    """Gives (where, the block, the line just above it) for each fenced block of `language`
    on every page."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for found in re.finditer(rf"^```{language}\n(.*?)^```", text,
                                 flags=re.DOTALL | re.MULTILINE):
            before = text[:found.start()].rstrip("\n").rsplit("\n", 1)[-1]
            line = text.count("\n", 0, found.start()) + 1
            yield f"{page.relative_to(ROOT)}:{line}", found.group(1), before


def _ids(language: str) -> list[tuple[str, str, str]]:
    return list(blocks(language))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the project's root, for the examples' relative paths."""
    folder = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "scenarios", folder / "scenarios")
    (folder / "tests").symlink_to(ROOT / "tests")  # read only: support modules, workflows
    return folder


@pytest.mark.parametrize(("where", "code", "before"), _ids("python"),
                         ids=[where for where, _, _ in _ids("python")])
def test_every_python_example_runs(where: str, code: str, before: str, project: Path,
                                   tmp_path: Path) -> None:
    run_by = RUN_BY.search(before)
    if run_by is not None:  # a test of its own runs it: that test must be there
        path, name = run_by.groups()
        source = (ROOT / path).read_text(encoding="utf-8")
        assert f"def {name.rsplit('::', 1)[-1]}(" in source, f"{where}: no test {path}::{name}"
        return
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=project, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(ROOT),
                               "HOME": str(tmp_path)})
    assert done.returncode == 0, f"{where}:\n{code}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(("where", "text", "before"), _ids("yaml"),
                         ids=[where for where, _, _ in _ids("yaml")])
def test_every_yaml_example_parses_and_every_definition_loads(where: str, text: str,
                                                               before: str) -> None:
    parsed = yaml.safe_load(text)
    if text.startswith("# fragment") or not isinstance(parsed, dict) or "states" not in parsed:
        return
    definition = load_definition(text)
    assert definition.name, where


def _commands(script: str) -> Iterator[list[str]]:
    """Gives each `fsmharness` command of a shell block, as its arguments."""
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("#"):
            continue
        for part in re.split(r"&&|\|\||;|\|(?!\|)", line):
            words = shlex.split(part.split(">", 1)[0], posix=True)  # not where it goes
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # an environment variable set for the command
            if words and words[0] == "fsmharness":
                yield words[1:]


def _shell_blocks() -> list[tuple[str, str, str]]:
    return [block for block in _ids("bash") if "fsmharness " in block[1]]


@pytest.mark.parametrize(("where", "script", "before"), _shell_blocks(),
                         ids=[where for where, _, _ in _shell_blocks()])
def test_every_command_of_the_site_parses(where: str, script: str, before: str) -> None:
    """The command line itself reads each documented command: its command and options exist
    and take the values given (paths are not looked at)."""
    commands = list(_commands(script))
    assert commands, f"{where}: no fsmharness command found in {script!r}"
    for arguments in commands:
        try:
            with cli.make_context("fsmharness", list(arguments)) as context:
                name, command, rest = cli.resolve_command(context, list(arguments))
                assert command is not None, f"{where}: no command in {arguments}"
                command.make_context(name or "", rest, parent=context)
        except click.exceptions.Exit:
            continue  # --help, --version
        except click.UsageError as error:
            pytest.fail(f"{where}: fsmharness {shlex.join(arguments)}: {error.format_message()}")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`, as .ci/run builds it: a broken link, a missing anchor or page,
    a page out of the navigation, or a reference page that cannot be generated fails."""
    pytest.importorskip("mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False, env={"NO_MKDOCS_2_WARNING": "1",
                                                         "PATH": str(Path(sys.executable).parent)})
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("reference/cli/index.html", "reference/invariants/index.html",
                 "reference/faults/index.html", "reference/definition-schema/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    commands = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for name in cli.commands:  # generated from the commands: each one is there
        assert f'id="fsmharness-{name}"' in commands, name


def _generated() -> dict[str, str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_reference",
                                                  ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pages: dict[str, str] = module.pages()
    return pages


def test_the_reference_pages_are_the_codes() -> None:
    """Each invariant registered, each fault kind and each definition field is on its page,
    with the words the code gives it."""
    import harness
    from fault_injection import DESCRIPTIONS, FaultKind

    pages = _generated()
    for name, invariant in harness.INVARIANTS.items():
        row = next((line for line in pages["reference/invariants.md"].splitlines()
                    if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"invariant {name} is not on the page"
        assert " ".join(invariant.description.split())[:60] in row.replace("\\|", "|")
    for kind in FaultKind:
        assert f"| `{kind.value}` | {' '.join(DESCRIPTIONS[kind].split())}" in (
            pages["reference/faults.md"]), kind
    commands = pages["reference/cli.md"]
    for name, command in cli.commands.items():  # each command, with what its --help says
        assert f"## fsmharness {name}\n" in commands, name
        for option in command.params:
            if isinstance(option, click.Option):
                for flag in option.opts:
                    assert flag in commands, f"{name} {flag}"
    assert "Sentinel" not in commands  # no value that is none shown as an object
    assert "| `no_duplicate_effect` |" in pages["reference/invariants.md"]
    assert "`harness.checks.invariants.effects.no_duplicate_effect`" in (
        pages["reference/invariants.md"])
    schema = pages["reference/definition-schema.md"]
    for field in ("name", "states", "tools", "budgets", "secrets"):
        assert f"| `{field}` |" in schema


def test_the_command_line_page_names_the_program_as_typed() -> None:
    """Each command's usage on the command-line page reads `fsmharness COMMAND`, as a user
    types it, never the name of the click group's function (`Usage: cli fuzz`)."""
    commands = _generated()["reference/cli.md"]
    assert "Usage: cli" not in commands
    for name in cli.commands:
        assert f"Usage: fsmharness {name} " in commands, name


def test_a_100_column_code_block_fits_the_content_column() -> None:
    """mkdocs.yml registers a stylesheet that widens the theme's grid until its content
    column, between the two sidebars, holds a 100-column code block unclipped."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    sheets = [ROOT / "docs" / sheet for sheet in config.get("extra_css", [])]
    assert sheets and all(sheet.is_file() for sheet in sheets), sheets
    widths = [float(width) for sheet in sheets for width in re.findall(
        r"\.md-grid\s*\{[^}]*max-width:\s*([\d.]+)rem", sheet.read_text(encoding="utf-8"))]
    assert widths, "no stylesheet of extra_css sets the .md-grid max-width"
    # the theme's sidebars are 12.1rem and the content's margins 1.2rem, each side; its code
    # is 0.68rem, 0.6em a column, and a block's padding 2.35em: 100 columns take 63em
    assert max(widths) - 2 * (12.1 + 1.2) >= 63 * 0.68
