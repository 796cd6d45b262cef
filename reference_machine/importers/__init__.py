"""Importers: definitions other tools write (Amazon States Language, XState, SCXML) turned into
`WorkflowDefinition`s, so a user fuzzes the file they have instead of rewriting it.

Each format has a module (`asl`, `xstate`, `scxml`) with one function,
`convert(data, lines, name) -> Imported`: from the parsed document to the native definition
data (what `load_definition` reads from YAML), with a warning finding for every feature it had
to approximate or leave out, located in the source (`States.ChargeCard.Retry[0].ErrorEquals`),
never a silent drop. What it cannot import at all raises `DefinitionError` with located
findings, as the YAML loader does.

A file's format is told by its name (`FORMATS`: `*.asl.json`, `*.asl.yaml`, `*.xstate.json`,
`*.scxml`) or named (`format=`). Like the rest of `reference_machine`, this package imports
nothing of `fault_injection` or `harness`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from reference_machine._definition import WorkflowDefinition, check_spec, compile_definition
from reference_machine.documents import DEFINITION_BYTES_MAX, read_document, validate
from reference_machine.errors import DefinitionError, DefinitionSyntaxError
from reference_machine.findings import Finding, Severity
from reference_machine.importers._common import Imported

__all__ = ["FORMATS", "Imported", "format_of", "import_definition", "import_document",
           "lint_imported", "to_yaml"]

#: Each format the importers read, and the file-name endings that tell it.
FORMATS: Mapping[str, tuple[str, ...]] = {
    "asl": (".asl.json", ".asl.yaml", ".asl.yml"),
    "xstate": (".xstate.json",),
    "scxml": (".scxml",),
}


def format_of(path: str | Path) -> str | None:
    """Gives the format a file's name tells (`asl`, `xstate`, `scxml`), or None for a native
    definition (or a name no importer claims)."""
    name = Path(path).name.lower()
    for fmt, endings in FORMATS.items():
        if name.endswith(endings):
            return fmt
    return None


def import_document(path: str | Path, *, format: str | None = None) -> Imported:
    """Reads a file of another format and converts it (see the module).

    Raises `DefinitionSyntaxError` when the file cannot be read, and `DefinitionError` with
    located findings when it is read but cannot be imported."""
    fmt = format or format_of(path)
    if fmt is None:
        endings = ", ".join(f"*{e}" for each in FORMATS.values() for e in each)
        raise DefinitionError([Finding(
            Severity.ERROR, "unknown-format", "",
            f"its name tells no format to import ({endings}); name one with --format")],
            str(path))
    if fmt not in FORMATS:
        raise DefinitionError([Finding(Severity.ERROR, "unknown-format", "",
                                       f"format {fmt!r}: expected one of "
                                       f"{', '.join(FORMATS)}")], str(path))
    name = str(path)
    data: Any
    lines: dict[str, int] = {}
    try:
        if fmt == "scxml" or (fmt == "xstate" and name.endswith((".ts", ".js", ".tsx", ".jsx"))):
            data = _read_text(Path(path))
        else:
            data, lines = read_document(path, what="a definition",
                                        bytes_max=DEFINITION_BYTES_MAX,
                                        yaml_ok=not name.lower().endswith(".json"))
    except FileNotFoundError as exc:
        raise DefinitionSyntaxError([Finding(Severity.ERROR, "unreadable", "",
                                             "file not found")], name) from exc
    except OSError as exc:
        raise DefinitionSyntaxError([Finding(Severity.ERROR, "unreadable", "",
                                             f"cannot read: {exc}")], name) from exc
    module = importlib.import_module(f"reference_machine.importers.{fmt}")
    if fmt == "scxml":  # a `src=` may name a file beside the chart (scxml.files.SrcFiles)
        scxml_chart: Imported = module.convert(data, lines, name, directory=Path(path).parent)
        return scxml_chart
    imported: Imported = module.convert(data, lines, name)
    return imported


def import_definition(path: str | Path, *, format: str | None = None,
                      functions: Mapping[str, Callable[..., Any]] | None = None
                      ) -> WorkflowDefinition:
    """Gives the checked definition of a file of another format; its `warnings` hold what the
    importer approximated, then the native checks' own."""
    imported = import_document(path, format=format)
    spec = validate(imported.data, {}, imported.source)
    merged = {**imported.functions, **(functions or {})}
    return compile_definition(spec, functions=merged, source=imported.source,
                              imported=imported.findings)


def lint_imported(path: str | Path, *, format: str | None = None,
                  functions: Mapping[str, Callable[..., Any]] | None = None) -> list[Finding]:
    """Gives every finding for a file of another format: the importer's, then the native
    checks' of what it made. Raises only when the file is unreadable."""
    try:
        imported = import_document(path, format=format)
    except DefinitionSyntaxError:
        raise
    except DefinitionError as exc:
        return list(exc.findings)
    try:
        spec = validate(imported.data, {}, imported.source)
    except DefinitionError as exc:
        return [*imported.findings, *exc.findings]
    merged = {**imported.functions, **(functions or {})}
    return [*imported.findings, *check_spec(spec, functions=merged)]


def to_yaml(imported: Imported) -> str:
    """Gives the native YAML of an imported document, its findings as a header comment, so a
    user can see and edit what was read."""
    head = [f"# imported from {imported.source} ({imported.format}) by fsmharness import"]
    head += [f"# {finding.render()}" for finding in imported.findings]
    body = yaml.safe_dump(imported.data, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(head) + "\n" + body


def _read_text(path: Path) -> str:
    with path.open("rb") as stream:
        raw = stream.read(DEFINITION_BYTES_MAX + 1)
    if len(raw) > DEFINITION_BYTES_MAX:
        raise DefinitionSyntaxError(
            [Finding(Severity.ERROR, "too-large", "",
                     f"over the {DEFINITION_BYTES_MAX // 1000} kB a definition may be")],
            str(path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionSyntaxError(
            [Finding(Severity.ERROR, "unreadable", "", f"not UTF-8 text at offset {exc.start}",
                     line=raw.count(b"\n", 0, exc.start) + 1)], str(path)) from exc
