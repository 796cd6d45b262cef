"""Loading a definition from a path, YAML/JSON text, a dict or a Python object: the native
format is read and compiled here, the other formats go to their importer
(`reference_machine.importers`); reading the document itself is `reference_machine.documents`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reference_machine._definition import WorkflowDefinition, compile_definition, lint_spec
from reference_machine._spec import WorkflowSpec
from reference_machine.documents import (
    DEFINITION_BYTES_MAX,
    parse_text,
    read_document,
    unreadable,
    validate,
)
from reference_machine.errors import DefinitionError, DefinitionSyntaxError
from reference_machine.findings import Finding, LintReport, Severity

DefinitionSource = str | Path | Mapping[str, Any] | WorkflowSpec | WorkflowDefinition
Functions = Mapping[str, Callable[..., Any]]


def load_definition(
    source: DefinitionSource, *, functions: Functions | None = None,
    format: str | None = None,
) -> WorkflowDefinition:
    """Gives the checked definition from a path, YAML/JSON text, a dict or a `WorkflowSpec`.

    A path whose name tells another format (`*.asl.json`, `*.asl.yaml`, `*.xstate.json`,
    `*.scxml`), or any path given a `format` (`asl`, `xstate`, `scxml`; `native` for this
    format whatever the name), is read by its importer (`reference_machine.importers`).

    Raises `DefinitionSyntaxError` when the input cannot be read, and `DefinitionError` listing
    every error (with locations) when it is read but wrong.
    """
    if isinstance(source, WorkflowDefinition):
        return source
    imported = _import_format(source, format)
    if imported is not None:
        from reference_machine.importers import import_definition
        return import_definition(imported[1], format=imported[0], functions=functions)
    spec, lines, name = load_spec(source)
    return compile_definition(spec, functions=functions, source=name, lines=lines)


def lint(source: DefinitionSource, *, functions: Functions | None = None,
         format: str | None = None) -> list[Finding]:
    """Gives every finding, errors and warnings, for a definition (read as `load_definition`
    reads it), but the warnings it acknowledges under `lint: ignore:`; raises only when
    unreadable."""
    return list(lint_report(source, functions=functions, format=format).findings)


def lint_report(source: DefinitionSource, *, functions: Functions | None = None,
                format: str | None = None) -> LintReport:
    """Gives the findings for a definition (as `lint` does) and, apart, the warnings it
    acknowledges under `lint: ignore:`, each with its reason; raises only when unreadable."""
    if isinstance(source, WorkflowDefinition):
        return LintReport(tuple(source.warnings), source.acknowledged)
    imported = _import_format(source, format)
    if imported is not None:
        from reference_machine.importers import lint_imported
        return LintReport(tuple(lint_imported(imported[1], format=imported[0],
                                              functions=functions)))
    try:
        spec, lines, _ = load_spec(source)
    except DefinitionSyntaxError:
        raise
    except DefinitionError as exc:
        return LintReport(exc.findings)
    return lint_spec(spec, functions=functions, lines=lines)


def _import_format(source: DefinitionSource, format: str | None) -> tuple[str, Path] | None:
    """Gives the importer's format a source is read with, and its path; None for the native
    loader."""
    path = Path(source) if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source) else None
    if format == "native":
        return None
    if format is not None:
        if path is None:
            raise TypeError(f"format={format!r} reads a file: give its path")
        return format, path
    if path is None:
        return None
    from reference_machine.importers import format_of
    found = format_of(path)
    if found is None and path.suffix.lower() in _SOURCE_SUFFIXES:
        raise DefinitionSyntaxError([Finding(
            Severity.ERROR, "other-format", "",
            f"a {path.suffix} file is source code, not a definition: to read the XState "
            "machine it creates, name the format (--format xstate; format='xstate')")],
            str(path))
    return (found, path) if found is not None else None


#: Source files no definition is written in: XState's machines live in them.
_SOURCE_SUFFIXES = frozenset({".ts", ".tsx", ".js", ".jsx", ".mts", ".mjs", ".cts", ".cjs"})


def load_spec(source: DefinitionSource) -> tuple[WorkflowSpec, dict[str, int], str]:
    """Gives the validated spec, the line of each key path (YAML only) and the source's name."""
    if isinstance(source, WorkflowSpec):
        return source, {}, f"<{source.name}>"
    if isinstance(source, Mapping):
        return validate(source, {}, "<dict>"), {}, "<dict>"
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                     and source.rstrip().endswith((".yaml", ".yml", ".json"))):
        path = Path(source)
        name = str(path)
        try:
            data, lines = read_document(path, what="a definition",
                                        bytes_max=DEFINITION_BYTES_MAX)
        except FileNotFoundError as exc:
            raise unreadable(name, "file not found") from exc
        except OSError as exc:
            raise unreadable(name, f"cannot read: {exc}") from exc
        return validate(data, lines, name), lines, name
    if isinstance(source, str):
        name = "<text>"
        is_json = source.lstrip().startswith("{")
        data, lines = parse_text(source, name, is_json, "a definition", DEFINITION_BYTES_MAX)
        return validate(data, lines, name), lines, name
    msg = (f"a definition is a path, YAML/JSON text, a dict or a WorkflowSpec, "
           f"not {type(source).__name__}")
    raise TypeError(msg)
