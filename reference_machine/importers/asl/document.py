"""The document and the entry point: `convert` runs two conversion passes of a parsed ASL
document; `DocumentConverter` converts the top level and each state list, hands each state to
the part converting its type, and puts the synthetic state drawing the execution input in
front of the StartAt state."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reference_machine.errors import DefinitionError
from reference_machine.findings import Fatal, Finding, Severity
from reference_machine.importers._common import Imported
from reference_machine.importers.asl.analysis import read_before_written, reads_items, succeeds
from reference_machine.importers.asl.choices import ChoiceRules
from reference_machine.importers.asl.composites import CompositeStates
from reference_machine.importers.asl.conversion import Conversion, Part, Scope, safe_id
from reference_machine.importers.asl.data_paths import DataPaths, Expr
from reference_machine.importers.asl.expressions import Expressions
from reference_machine.importers.asl.paths import NATIVE_ID, coalesce, render
from reference_machine.importers.asl.retries import RetriesAndCatchers, synthetic_retry
from reference_machine.importers.asl.schemas import data_schema, infer_schemas
from reference_machine.importers.asl.states import LeafStates
from reference_machine.importers.asl.tools import read_tools_file

__all__ = ["DocumentConverter", "assemble", "convert"]

_COMMON = ("Type", "Comment", "QueryLanguage", "Assign")
_FLOW = ("Next", "End")
#: the fields of each state type the importer reads (others are left out with a finding)
_FIELDS: Mapping[str, frozenset[str]] = {kind: frozenset((*_COMMON, *fields)) for kind, fields in {
    "Task": (*_FLOW, "Resource", "Parameters", "Arguments", "InputPath", "ResultPath",
             "ResultSelector", "OutputPath", "Output", "TimeoutSeconds", "HeartbeatSeconds",
             "TimeoutSecondsPath", "HeartbeatSecondsPath", "Retry", "Catch"),
    "Pass": (*_FLOW, "Result", "Parameters", "ResultPath", "InputPath", "OutputPath", "Output"),
    "Wait": (*_FLOW, "Seconds", "SecondsPath", "Timestamp", "TimestampPath"),
    "Choice": ("Choices", "Default"),
    "Parallel": (*_FLOW, "Branches", "Retry", "Catch", "ResultPath"),
    "Map": (*_FLOW, "ItemProcessor", "Iterator", "ItemsPath", "Items", "MaxConcurrency",
            "ToleratedFailureCount", "ResultPath", "Retry", "Catch", "ItemReader",
            "ResultWriter", "ItemBatcher", "ItemSelector", "Parameters",
            "ToleratedFailurePercentage", "ToleratedFailurePercentagePath",
            "ToleratedFailureCountPath", "MaxConcurrencyPath", "Label"),
    "Succeed": (),
    "Fail": ("Error", "Cause", "ErrorPath", "CausePath"),
}.items()}
_TOP_FIELDS = frozenset(("StartAt", "States", "Comment", "Version", "TimeoutSeconds",
                         "QueryLanguage"))
_STATE_TYPES = ("Task", "Choice", "Wait", "Pass", "Parallel", "Map", "Succeed", "Fail")


def convert(data: Any, lines: Mapping[str, int], name: str) -> Imported:
    """Gives the native definition data of a parsed ASL document, with a warning for each
    feature approximated or left out (see `docs/importing.md`)."""
    if not isinstance(data, Mapping):
        raise DefinitionError([Finding(
            Severity.ERROR, "asl-invalid", "",
            f"an ASL document is a mapping with StartAt and States, got {type(data).__name__}")],
            name)
    tools_file = read_tools_file(name)
    # the first pass learns which results land below the top level (flat keys); the second
    # reads them where they are
    first = assemble(data, lines, name, tools_file, flat=frozenset())
    try:
        first.document.run()
    except Fatal:
        # only a refusal of the top level escapes a pass, before any other error is found
        raise DefinitionError(first.sink.errors, name) from None
    if first.sink.errors:
        raise DefinitionError(first.sink.errors, name)
    second = assemble(data, lines, name, tools_file, flat=frozenset(first.written_flat),
                      inferred=infer_schemas(first.result_writes, first.compared))
    native = second.document.run()
    return Imported(format="asl", data=native, findings=tuple(second.sink.warnings),
                    source=name)


def assemble(data: Mapping[str, Any], lines: Mapping[str, int], name: str,
             tools_file: Mapping[str, Any], flat: frozenset[tuple[str, ...]],
             inferred: Mapping[str, dict[str, Any]] | None = None) -> Conversion:
    """Gives a conversion pass of a document with every part in place."""
    conv = Conversion(data, lines, name, tools_file, flat, inferred)
    conv.document = DocumentConverter(conv)
    conv.leaf_states = LeafStates(conv)
    conv.choices = ChoiceRules(conv)
    conv.composites = CompositeStates(conv)
    conv.retries = RetriesAndCatchers(conv)
    conv.data_paths = DataPaths(conv)
    conv.expressions = Expressions(conv)
    conv.handlers = {
        "Task": conv.leaf_states.convert_task,
        "Pass": conv.leaf_states.convert_pass,
        "Wait": conv.leaf_states.convert_wait,
        "Succeed": conv.leaf_states.convert_succeed,
        "Fail": conv.leaf_states.convert_fail,
        "Choice": conv.choices.convert_choice,
        "Parallel": conv.composites.convert_parallel,
        "Map": conv.composites.convert_map,
    }
    return conv


class DocumentConverter(Part):
    """Converts the document: its top level, its state lists and the execution input."""

    def run(self) -> dict[str, Any]:
        """Gives the native definition data of the document."""
        self.conv.left_out(self.conv.data, _TOP_FIELDS, "", "the state machine")
        if not succeeds(self.conv.data):
            self.sink.warning("asl-never-succeeds", "StartAt",
                              "no path from StartAt reaches a Succeed state or an End: every run "
                              "ends in a Fail state or an error")
        top = self.scope(self.conv.data, "", None, "end")
        start = self.states_of(self.conv.data, top)
        self._execution_input(start)
        stem = Path(self.conv.name).name
        for ending in (".asl.json", ".asl.yaml", ".asl.yml", ".json", ".yaml", ".yml"):
            if stem.lower().endswith(ending):
                stem = stem[: -len(ending)]
                break
        native_name = safe_id(stem) or "asl_workflow"
        for key in ("TimeoutSeconds",):
            if key in self.conv.data:
                self.sink.warning("asl-execution-timeout", key,
                                  "the state machine's TimeoutSeconds is left out (no native "
                                  "budget fails a run on time)")
        native: dict[str, Any] = {
            "name": native_name,
            "version": str(self.conv.data.get("Version", "1")),
            "description": str(self.conv.data.get("Comment", "")),
            "context": {},
        }
        if self.conv.tools:
            native["tools"] = self.conv.tools
        if self.conv.events:
            native["events"] = self.conv.events
        native["states"] = self.conv.states
        self._tool_contracts()
        return native

    def _tool_contracts(self) -> None:
        unknown = sorted(t for t in self.conv.tools if t not in self.conv.tools_file
                         and t not in self.conv.synthetic)
        reads = [t for t in unknown if self.conv.tools[t].get("repeatable")]
        if reads:
            self.sink.warning("asl-tool-read-only", self.conv.tool_where[reads[0]],
                              f"{len(reads)} tool(s) read as repeatable (calling one twice is no "
                              f"duplicate effect) by the name of their action: {', '.join(reads)}")
        guessed = [t for t in self.conv.inferred_for if t not in self.conv.tools_file]
        if guessed:
            self.sink.warning("asl-output-inferred", "States",
                              f"{len(guessed)} output schema(s) guessed from what the Choice and "
                              f"Map states read of the results, so their branches are exercised: "
                              f"{', '.join(guessed)}")
        if unknown:
            side = Path(self.conv.name).name + ".tools.yaml"
            self.sink.warning("asl-tool-contract", self.conv.tool_where[unknown[0]],
                              f"{len(unknown)} tool(s) imported as honouring no idempotency keys, "
                              f"with no output schema (ASL does not say): {', '.join(unknown)}; "
                              f"declare them in {side}")

    def scope(self, holder: Mapping[str, Any], prefix: str, parent: str | None,
              key: str) -> Scope:
        """Gives the scope of a state list, with the native id of each of its states."""
        states = holder.get("States")
        location = f"{prefix}States"
        if not isinstance(states, Mapping) or not states:
            raise self.sink.fatal("asl-invalid", location,
                                  "expected a mapping of states (States) with at least one")
        ids: dict[str, str] = {}
        # names that are safe as they are keep them; the others are renamed after
        for asl_name in sorted(states, key=lambda n: safe_id(str(n)) != str(n)):
            base = safe_id(str(asl_name)) or "state"
            if parent is not None:
                base = f"{parent}__{base}"
            ids[str(asl_name)] = self.conv.unique(base)
        entry = {name: self.conv.unique(f"{ids[name]}__ItemReader") for name, state in
                 states.items() if reads_items(state)}
        return Scope(f"{location}.", parent, ids, key, entry=entry)

    def states_of(self, holder: Mapping[str, Any], scope: Scope) -> str:
        """Converts a state list (`StartAt` + `States`); gives the native id of its start."""
        start = holder.get("StartAt")
        where = scope.prefix[: -len("States.")] + "StartAt"
        if not isinstance(start, str):
            raise self.sink.fatal("asl-invalid", where,
                                  "expected StartAt: the name of the first state")
        if start not in scope.ids:
            raise self.sink.fatal("asl-invalid", where,
                                  f"StartAt names {start!r}, which is not in States")
        states = holder["States"]
        for asl_name, state in states.items():
            location = f"{scope.prefix}{asl_name}"
            if not isinstance(state, Mapping):
                self.sink.error("asl-invalid", location, "expected a mapping with a Type")
                continue
            try:
                self._state(str(asl_name), state, scope, location, initial=asl_name == start)
            except Fatal:
                continue  # its finding is in the sink; the other states are still converted
        return scope.entry.get(start, scope.ids[start])

    def _state(self, asl_name: str, state: Mapping[str, Any], scope: Scope, location: str,
               *, initial: bool) -> None:
        kind = state.get("Type")
        if kind not in _STATE_TYPES:
            raise self.sink.fatal("asl-invalid", f"{location}.Type",
                                  f"state type {kind!r}: expected one of "
                                  f"{', '.join(_STATE_TYPES)}")
        sid = scope.ids[asl_name]
        comment = state.get("Comment")
        label = asl_name if not comment else f"{asl_name}: {comment}"
        native: dict[str, Any] = {"description": label}
        if initial:
            native["initial"] = True
        jsonata = state.get("QueryLanguage", "JSONata" if self.conv.jsonata else "JSONPath") \
            == "JSONata"
        if state.get("Assign") is not None:
            assigns = self.conv.data_paths.assign(state["Assign"], f"{location}.Assign", jsonata)
        else:
            assigns = {}
        self.conv.left_out(state, _FIELDS[str(kind)], location, f"a {kind} state")
        handler = self.conv.handlers[str(kind)]
        self.conv.success_moves = []
        self.conv.current, self.conv.token_read = sid, False
        handler(sid, state, scope, location, native, jsonata)
        if self.conv.token_read:
            counter = render((f"asl_task_token_{sid}",))
            native.setdefault("entry", []).insert(
                0, {"assign": {f"asl_task_token_{sid}": f"{coalesce(counter, '0')} + 1"}})
        self.conv.current = None
        if assigns:
            self._add_assigns(native, assigns)
        self.conv.states[sid] = self.conv.with_parent(native, scope)

    def _add_assigns(self, native: dict[str, Any], assigns: dict[str, str]) -> None:
        """Puts the ASL variables' assignments on the moves a state takes when it succeeds
        (a state that moves by no transition of its own: on entry)."""
        moves = [m for m in self.conv.success_moves if isinstance(m, dict)]
        if not moves:
            native.setdefault("entry", []).append({"assign": assigns})
            return
        for move in moves:
            move.setdefault("actions", []).append({"assign": dict(assigns)})

    def _execution_input(self, start: str) -> None:
        """Puts in front of the StartAt state a synthetic state drawing the execution input: a
        run started with a context takes it as its input; one started with none calls a
        made-up, repeatable tool (`asl.execution_input`) whose output, shaped by what the file
        reads of the input before writing it, becomes the data."""
        tool = "asl.execution_input"
        keys = read_before_written(self.conv.data, self.conv.flat)
        schema = data_schema(self.conv.top_reads, keys, self.conv.flat, items_min=1)
        fields = sorted(k for k in schema["properties"] if NATIVE_ID.match(k))
        declared = "output" in self.conv.tools_file.get(tool, {})
        if (not fields and not declared) or self.sink.errors or start not in self.conv.states:
            return
        self.conv.tools[tool] = {
            "description": "the execution input (synthetic): what the file reads of it",
            "repeatable": True, "idempotency_keys": True, "output": schema,
            **self.conv.tools_file.get(tool, {})}
        self.conv.synthetic.add(tool)
        self.conv.tool_where[tool] = "StartAt"
        move: dict[str, Any] = {"target": start}
        self.conv.data_paths.write(move, Expr("event.payload"), "$", "StartAt")
        actions = move.setdefault("actions", [{"assign": {}}])
        for key in fields:
            actions[0]["assign"].setdefault(key, render((key,), "event.payload"))
        choice, draw = self.conv.unique("asl_execution_input"), self.conv.unique(
            "asl_execution_input__draw")
        self.conv.states[start].pop("initial", None)
        self.conv.states = {
            choice: {"type": "choice", "initial": True,
                     "description": "the execution input (synthetic): the run's context when "
                                    "it is started with one, else drawn",
                     "always": [{"target": start, "guard": "len(context) > 0",
                                 "description": "started with an input"},
                                {"target": draw}]},
            draw: {"description": "draws an execution input (synthetic)",
                   "step": {"tool": tool, "input": {}, "retry": synthetic_retry()},
                   "on": {"step.succeeded": move,
                          "step.failed": {"target": start,
                                          "description": "no input drawn: the empty input"}}},
            **self.conv.states}
        shaped = "as the tools side file declares" if declared else (
            f"its output guessed from what the file reads of the input: {', '.join(fields)}")
        self.sink.warning("asl-execution-input", "StartAt",
                          f"the execution input is drawn by a synthetic first state calling "
                          f"tool {tool!r}, {shaped}; a run started with a context takes it as "
                          "its input")
