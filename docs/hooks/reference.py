"""MkDocs hook: the reference pages, generated from the code at each build, never copied.

`reference/cli.md` from the commands (what each one's `--help` prints), `reference/invariants.md`
from the invariant registry (each invariant's own description, where its checker is),
`reference/faults.md` from the fault catalogue (each kind's description and its default rate),
`reference/definition-schema.md` from the definition's JSON Schema (each field's description,
and the schema whole). `pages()` gives the same pages to the tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: object) -> str:
    """Gives text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_page() -> str:
    import click
    from click.testing import CliRunner

    from harness.cli.main import cli

    lines = [
        "# Command line",
        "",
        "Every `fsmharness` command and its options, as `fsmharness COMMAND --help` prints them",
        "(this page is made from the commands themselves when the site is built). Exit codes are",
        "the same for every command: 0 every target held (`lint`: no error), 1 a rule broke or a",
        "campaign was vacuous (`lint`: errors found), 2 bad input or usage, with one line on",
        "stderr and no traceback.",
        "",
    ]
    runner = CliRunner()
    for name in sorted(cli.commands):
        # the program's name as installed, not the click group's function (`cli`)
        shown = runner.invoke(cli, [name, "--help"], prog_name="fsmharness", terminal_width=100,
                              catch_exceptions=False).output
        command = cli.commands[name]
        summary = command.get_short_help_str(limit=200) if isinstance(command,
                                                                        click.Command) else ""
        lines += [f"## fsmharness {name}", "", summary, "", "```text", shown.rstrip(), "```", ""]
    return "\n".join(lines)


def invariants_page() -> str:
    import harness

    rows = []
    for name, invariant in sorted(harness.INVARIANTS.items()):
        check = invariant.check
        where = f"`{check.__module__}.{check.__qualname__}`"  # wherever harness is installed
        when = "at the run's end" if invariant.final_only else "at every step"
        rows.append(f"| `{name}` | {_cell(invariant.description)} | {when} | {where} |")
    return "\n".join([
        "# Invariants",
        "",
        "Every invariant the harness checks, as registered (`harness.INVARIANTS`), with the",
        "description its checker carries. Which of them need what from a machine of yours is in",
        "[the machine-under-test guide](../machine-protocol.md); how to add your own is in",
        "[Checking invariants](../invariants.md).",
        "",
        "| invariant | what it holds | judged | checker |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
    ])


def faults_page() -> str:
    from fault_injection import DESCRIPTIONS, FaultKind, default_plan

    plan = default_plan()
    rows = []
    for kind in FaultKind:
        rate = plan.get(kind)
        rows.append(f"| `{kind.value}` | {_cell(DESCRIPTIONS[kind])} | "
                    f"{'-' if rate is None else f'{rate.rate:g}'} |")
    return "\n".join([
        "# Fault catalogue",
        "",
        "Every fault kind the injector knows (`fault_injection.FaultKind`), what it does, and its",
        "rate in the default plan (the chance, at each place it can strike, that it does). A",
        "plan file sets other rates (`--plan PLAN.yaml`, see [Simulating with",
        "faults](../simulation.md)); `--faults KINDS` keeps some kinds only.",
        "",
        "| kind | what happens | default rate |",
        "| --- | --- | --- |",
        *rows,
        "",
    ])


def _type_of(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    """Gives a field's type as a reader reads it: another object a link to its table, an enum
    its values."""
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        if "properties" in defs.get(name, {}):
            return f"[`{name}`](#{name.lower()})"
        return _type_of(defs.get(name, {}), defs)
    if "anyOf" in spec:
        return " or ".join(_type_of(part, defs) for part in spec["anyOf"])
    if "enum" in spec:
        return " ".join(f"`{value}`" for value in spec["enum"])
    kind = spec.get("type", "any")
    if kind == "array" and "items" in spec:
        return f"list of {_type_of(spec['items'], defs)}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"mapping to {_type_of(spec['additionalProperties'], defs)}"
    return f"`{kind}`"


def _fields(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    return [f"| `{name}` | {_type_of(spec, defs)} | {'yes' if name in required else ''} | "
            f"{_cell(spec.get('description', ''))} |"
            for name, spec in schema.get("properties", {}).items()]


def schema_page() -> str:
    from click.testing import CliRunner

    from harness.cli.main import cli

    printed = CliRunner().invoke(cli, ["schema"], catch_exceptions=False)
    schema = json.loads(printed.output)  # what `fsmharness schema` prints
    defs = schema.get("$defs", {})
    lines = [
        "# Definition schema",
        "",
        "The JSON Schema of a definition file as written (`fsmharness schema` prints it;",
        "editors that read JSON Schema complete and check definitions with it). The fields of",
        "each object, then the schema whole. How to write one is in [the authoring",
        "guide](../authoring.md).",
        "",
        "## The definition",
        "",
        _cell(schema.get("description", "")),
        "",
        "| field | type | required | what it is |",
        "| --- | --- | --- | --- |",
        *_fields(schema, defs),
    ]
    for name, part in sorted(defs.items()):
        if "properties" not in part:
            continue
        lines += ["", f"## {name}", "", _cell(part.get("description", "")), "",
                  "| field | type | required | what it is |", "| --- | --- | --- | --- |",
                  *_fields(part, defs)]
    lines += ["", "## The schema whole", "", "```json", json.dumps(schema, indent=2), "```", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Gives each generated page's text by its path in the site."""
    return {"reference/cli.md": cli_page(),
            "reference/invariants.md": invariants_page(),
            "reference/faults.md": faults_page(),
            "reference/definition-schema.md": schema_page()}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, text in pages().items():
        files.append(File.generated(config, uri, content=text))
    return files
