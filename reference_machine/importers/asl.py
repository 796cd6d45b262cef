"""Amazon States Language (AWS Step Functions) to the native definition format.

`convert(data, lines, name)` reads a parsed ASL document and gives the native definition data,
with a warning finding (located in ASL terms, `States.ChargeCard.Retry[0].ErrorEquals`) for
each feature it approximated or left out. What it cannot import raises `DefinitionError`.

How the constructs map:

- **Task**: a state running a step. Its tool is named from the `Resource`: the
  `arn:aws:states:::` prefix and the `.sync`/`.waitForTaskToken` suffixes dropped, `:` as `.`,
  other odd characters as `_`; `lambda:invoke` adds its `FunctionName` (`lambda.invoke.Fn`).
  A `.waitForTaskToken` Task is a step that sends the token, then a wait state for the callback
  events `<state>.task_success` / `<state>.task_failure` under `TimeoutSeconds` (else
  `HeartbeatSeconds`). `Retry` becomes the step's retry policy, `Catch` guarded `step.failed`
  moves, `ResultPath` an assignment into the context.
- **Tools' contracts**: ASL says nothing of whether a service honours idempotency keys or what
  it returns, so every tool is imported as honouring none with no output schema, and a finding
  says so. A side file next to the input, `<file>.tools.yaml` (`x.asl.json.tools.yaml`),
  maps a tool name to a native tool declaration (`idempotency_keys`, `repeatable`, `output`,
  `description`), merged over those defaults; it is read with `yaml.safe_load`. Where the
  side file gives no `output`, one is guessed from what the file reads of the result (the
  fields its Choice rules compare, with every value the rules compare one field to, and a
  text each StringMatches pattern matches; the lists its Maps go over, their items shaped
  by what the item flow reads; the paths its inputs read), lenient (nothing required, any
  value of the type taken), so that the simulator's outputs take every branch; a finding
  names those tools. A service action that reads (`get*`, `describe*`, `list*`, `scan`,
  `query`, ...) is `repeatable`.
- **The execution input**: ASL runs on an input the file does not give; the native context
  starts fixed. Where the file reads keys of the input (`$.key` before any state on the way
  wrote them; a result replacing the data writes them all), a synthetic first state
  `asl_execution_input` (a choice) takes a run's context as its input when it is started
  with one, else goes to `asl_execution_input__draw`, a step of the made-up tool
  `asl.execution_input` (repeatable, honouring idempotency keys, retried on every
  retryable failure) whose output schema is guessed from those reads as for a tool's
  output (lists of at least one item); its output is the data, as a result with
  `ResultPath $` would be; a failed draw starts on the empty input. Then the StartAt state.
  A finding (`asl-execution-input`) says so; the side file may declare the tool's `output`.
- **Map items read by an ItemReader** (a CSV or JSON file, a bucket's objects): the Map is
  entered through a synthetic state `<map>__ItemReader`, a step of the made-up tool
  `asl.item_reader.<map>` (repeatable, honouring keys) sent the reader's Parameters, whose
  output `{items: [...]}` lists 1 to 3 items shaped by what the item flow reads of its item
  before writing it (with an `id`, so that items differ); the map goes over them, and the
  step's failure takes the Map's Catch. A finding (`asl-item-reader`) says so. The items of
  a Map over the input, or over a result, are shaped the same way.
- **Choice**: `type: choice` with guarded `always:` branches (every comparison operator, the
  `...Path` forms, `Is*` tests, `And`/`Or`/`Not`; timestamps are compared as text,
  `IsString`/`IsNumeric`/`IsTimestamp` as presence); no `Default` sends an unmatched run to a
  failure (`States.NoChoiceMatched`).
- **Wait** `after:`; **Pass** assignments on an eventless move; **Parallel** `type: parallel`
  (one region per branch); **Map** `type: map` (distributed maps read as inline); **Succeed** /
  **Fail** final states; an uncaught error ends the run (or the branch, or the map item) in a
  failure final state.
- **Data**: ASL's state data is the native context. `$.a.b` reads `context.a.b`; a result
  written below the top level (`ResultPath: $.a.b`) goes to the flat context key `a.b`, and
  reads under it follow. `ResultPath: $` (the default) replaces the data: every top-level key
  the file reads is set from the result. Intrinsic functions and JSONata expressions are
  translated where the native expression language says the same, else approximated.

Nothing is evaluated: guards are written as native expression text, which the native loader
compiles with its whitelist.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import keyword
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity, line_of
from reference_machine.importers._common import Imported
from reference_machine.importers._common import input_literal as _input_literal
from reference_machine.importers._common import literal as _literal

__all__ = ["convert", "tool_name"]

_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_ODD = re.compile(r"[^A-Za-z0-9_\-]+")
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: What an ASL retrier or catcher can match. Not `invalid_output`: Step Functions checks no
#: task output, so an output the file cannot read fails the run later (States.Runtime, which
#: States.ALL matches neither to retry nor to catch); natively it is a step failure the run
#: takes to its failure end, never retried (a retry would apply the call again)
_ALL = ("transient", "rate_limited", "timeout", "permanent")
#: The native type test of each ASL type test, and of each typed comparison's family.
_TYPE_TESTS = {"IsString": "is_string", "IsNumeric": "is_number", "IsBoolean": "is_bool",
               "IsTimestamp": "is_string"}
_FAMILY_TESTS = {"String": "is_string", "Timestamp": "is_string", "Numeric": "is_number",
                 "Boolean": "is_bool"}
_RETRYABLE = ("transient", "rate_limited", "timeout")
_READ_ONLY = re.compile(r"^(get|describe|list|query|scan|head|batchGet|search|lookup|"
                        r"select|read|poll|check|fetch)([A-Z_]|$)")
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
_RETRIER_FIELDS = frozenset(("ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate",
                             "MaxDelaySeconds", "JitterStrategy", "Comment"))
_CATCHER_FIELDS = frozenset(("ErrorEquals", "Next", "ResultPath", "Comment"))
_RULE_FIELDS = frozenset(("Next", "Comment", "Assign", "Condition"))
_TOP_FIELDS = frozenset(("StartAt", "States", "Comment", "Version", "TimeoutSeconds",
                         "QueryLanguage"))
_STATE_TYPES = ("Task", "Choice", "Wait", "Pass", "Parallel", "Map", "Succeed", "Fail")
_CALLBACK_TIMEOUT_DEFAULT_S = 365 * 86400
_WAIT_DEFAULT_S = 60
#: The output field a result compared whole is drawn in: a native output is a mapping.
SCALAR_FIELD = "asl_result"
_ITEMS_MAX = 3  # the items drawn for a map's list: a few, so that a run stays short
# a key may hold hyphens (`$.detail-type`, on every EventBridge event)
_ROOT_READ = re.compile(r"\$\.([A-Za-z_][A-Za-z0-9_\-]*)")
_COMPARISONS = {
    "Equals": "==", "LessThan": "<", "GreaterThan": ">",
    "LessThanEquals": "<=", "GreaterThanEquals": ">=",
}


class _Refused(Exception):
    """The document (or one part of it) cannot be imported; carries its located finding."""

    def __init__(self, location: str, message: str, code: str = "asl-invalid") -> None:
        super().__init__(message)
        self.finding = Finding(Severity.ERROR, code, location, message)


def convert(data: Any, lines: Mapping[str, int], name: str) -> Imported:
    """Gives the native definition data of a parsed ASL document, with a warning for each
    feature approximated or left out (see the module)."""
    if not isinstance(data, Mapping):
        raise DefinitionError([Finding(
            Severity.ERROR, "asl-invalid", "",
            f"an ASL document is a mapping with StartAt and States, got {type(data).__name__}")],
            name)
    tools_file = _read_tools_file(name)
    # the first pass learns which results land below the top level (flat keys); the second
    # reads them where they are
    first = _Converter(data, lines, name, tools_file, flat=frozenset())
    try:
        first.run()
    except _Refused as exc:
        raise DefinitionError([first.located(exc.finding)], name) from None
    if first.errors:
        raise DefinitionError(first.errors, name)
    second = _Converter(data, lines, name, tools_file, flat=frozenset(first.written_flat),
                        inferred=_infer_schemas(first.result_writes, first.compared))
    native = second.run()
    return Imported(format="asl", data=native, findings=tuple(second.warnings), source=name)


def tool_name(resource: str, parameters: Any = None) -> str:
    """Gives the native tool name of a Task's `Resource` (and, for `lambda:invoke`, its
    `FunctionName`): the name a `<file>.tools.yaml` side file declares it under."""
    text = resource.strip()
    text = re.sub(r"^arn:[^:]*:states:[^:]*:[^:]*:", "", text)
    text = re.sub(r"\.(sync(:\d+)?|waitForTaskToken)$", "", text)
    function = None
    if text in ("lambda:invoke", "lambda:invokeAsync") and isinstance(parameters, Mapping):
        raw = parameters.get("FunctionName")
        if isinstance(raw, str):
            function = raw.split(":function:")[-1].split(":")[0]
    if text.startswith("arn:") and ":function:" in text:
        function, text = text.split(":function:")[-1].split(":")[0], "lambda:invoke"
    parts = [p for p in re.split(r"[:/]", text) if p]
    if function:
        parts.append(function)
    cleaned = ".".join(_ODD.sub("_", p).strip("_") or "x" for p in parts) or "task"
    if not re.match(r"^[A-Za-z_]", cleaned):
        cleaned = "t_" + cleaned
    return cleaned


def _read_tools_file(name: str) -> dict[str, Any]:
    path = Path(name + ".tools.yaml")
    try:
        if not path.is_file():
            return {}
        with path.open(encoding="utf-8") as stream:
            loaded = yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as exc:
        raise DefinitionError([Finding(Severity.ERROR, "asl-tools-file", str(path),
                                       f"cannot read the tools side file: {exc}")], name) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping) or not all(
            isinstance(v, Mapping) for v in loaded.values()):
        raise DefinitionError([Finding(
            Severity.ERROR, "asl-tools-file", str(path),
            "the tools side file maps each tool name to a tool declaration "
            "(idempotency_keys, repeatable, output, description)")], name)
    return {str(k): dict(v) for k, v in loaded.items()}


# -- values: what a result or a Pass puts into the data ---------------------------------------


@dataclass(frozen=True)
class _Expr:
    text: str


@dataclass(frozen=True)
class _Record:
    fields: Mapping[str, Any]  # key -> _Expr | _Record


#: What a catcher's ResultPath gets, `{Error, Cause}`, from a native step failure.
_CATCH_OUTPUT = _Record({
    "Error": _Expr("'States.Timeout' if event.payload.category == 'timeout' else "
                   "'States.TaskFailed'"),
    "Cause": _Expr("event.payload.error")})


@dataclass
class _Scope:
    """Where a state list lives: the top level, a parallel branch (region) or a map's items."""

    prefix: str  # ASL location prefix, `States.` or `States.P.Branches[0].States.`
    parent: str | None  # native parent of its states
    ids: dict[str, str]  # ASL state name -> native id
    key: str  # unique key for synthesized finals
    finals: dict[str, str] = field(default_factory=dict)
    #: ASL state name -> the native id a move to it enters, where that is not its own (a Map
    #: with an ItemReader is entered through the synthetic state drawing its items)
    entry: dict[str, str] = field(default_factory=dict)


class _Converter:
    def __init__(self, data: Mapping[str, Any], lines: Mapping[str, int], name: str,
                 tools_file: Mapping[str, Any], flat: frozenset[tuple[str, ...]],
                 inferred: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.data = data
        self.lines = lines
        self.name = name
        self.tools_file = tools_file
        self.flat = flat
        self.written_flat: set[tuple[str, ...]] = set()
        self.warnings: list[Finding] = []
        self.errors: list[Finding] = []
        self.states: dict[str, dict[str, Any]] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        self.tool_where: dict[str, str] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.taken: set[str] = set()
        self.success_moves: list[Any] = []
        self.current: str | None = None  # the native id of the state being converted
        self.token_read = False
        self.inferred = inferred or {}
        self.scalars = scalar_results(self.inferred)
        self.inferred_for: list[str] = []
        #: where results land: (tool or event, ResultPath segments, OutputPath segments,
        #: ResultSelector key -> result path segments)
        self.result_writes: list[tuple[str, tuple[str, ...], tuple[str | int, ...],
                                       dict[str, tuple[str | int, ...]] | None]] = []
        #: what Choice rules and Map states read: (data path, operator family, literal)
        self.compared: list[tuple[tuple[str | int, ...], str, Any]] = []
        #: the same, per data they read: the top level's (and its branches'), then a list per
        #: map item flow being converted (an item's data is the item)
        self.top_reads: list[tuple[tuple[str | int, ...], str, Any]] = []
        self.sinks = [self.top_reads]
        self.synthetic: set[str] = set()  # the tools the importer made up (input, item readers)
        self.regions_of: dict[str, list[str]] = {}
        self.jsonata = data.get("QueryLanguage") == "JSONata"
        self.roots_read = sorted({key for text in _strings(data)
                                  for key in _ROOT_READ.findall(text)} | (
            {"items"} if _maps_over_data(data) else set()))

    # -- findings ----------------------------------------------------------------------------
    def warn(self, code: str, location: str, message: str) -> None:
        self.warnings.append(Finding(Severity.WARNING, code, location, message,
                                     line=self._line(location)))

    def error(self, location: str, message: str, code: str = "asl-invalid") -> None:
        self.errors.append(Finding(Severity.ERROR, code, location, message,
                                   line=self._line(location)))

    def located(self, finding: Finding) -> Finding:
        """Gives the finding with the line of its location, where the document told it."""
        return dataclasses.replace(finding, line=self._line(finding.location))

    def _line(self, location: str) -> int | None:
        return line_of(self.lines, location)

    # -- the document --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self._left_out(self.data, _TOP_FIELDS, "", "the state machine")
        if not _succeeds(self.data):
            self.warn("asl-never-succeeds", "StartAt",
                      "no path from StartAt reaches a Succeed state or an End: every run "
                      "ends in a Fail state or an error")
        top = self._scope(self.data, "", None, "end")
        start = self._states_of(self.data, top)
        self._execution_input(start)
        stem = Path(self.name).name
        for ending in (".asl.json", ".asl.yaml", ".asl.yml", ".json", ".yaml", ".yml"):
            if stem.lower().endswith(ending):
                stem = stem[: -len(ending)]
                break
        native_name = self._safe(stem) or "asl_workflow"
        for key in ("TimeoutSeconds",):
            if key in self.data:
                self.warn("asl-execution-timeout", key,
                          "the state machine's TimeoutSeconds is left out (no native budget "
                          "fails a run on time)")
        native: dict[str, Any] = {
            "name": native_name,
            "version": str(self.data.get("Version", "1")),
            "description": str(self.data.get("Comment", "")),
            "context": {},
        }
        if self.tools:
            native["tools"] = self.tools
        if self.events:
            native["events"] = self.events
        native["states"] = self.states
        self._tool_contracts()
        return native

    def _tool_contracts(self) -> None:
        unknown = sorted(t for t in self.tools if t not in self.tools_file
                         and t not in self.synthetic)
        reads = [t for t in unknown if self.tools[t].get("repeatable")]
        if reads:
            self.warn("asl-tool-read-only", self.tool_where[reads[0]],
                      f"{len(reads)} tool(s) read as repeatable (calling one twice is no "
                      f"duplicate effect) by the name of their action: {', '.join(reads)}")
        guessed = [t for t in self.inferred_for if t not in self.tools_file]
        if guessed:
            self.warn("asl-output-inferred", "States",
                      f"{len(guessed)} output schema(s) guessed from what the Choice and Map "
                      f"states read of the results, so their branches are exercised: "
                      f"{', '.join(guessed)}")
        if unknown:
            side = Path(self.name).name + ".tools.yaml"
            self.warn("asl-tool-contract", self.tool_where[unknown[0]],
                      f"{len(unknown)} tool(s) imported as honouring no idempotency keys, with "
                      f"no output schema (ASL does not say): {', '.join(unknown)}; declare "
                      f"them in {side}")

    def _scope(self, holder: Mapping[str, Any], prefix: str, parent: str | None,
               key: str) -> _Scope:
        states = holder.get("States")
        location = f"{prefix}States"
        if not isinstance(states, Mapping) or not states:
            raise _Refused(location, "expected a mapping of states (States) with at least one")
        ids: dict[str, str] = {}
        # names that are safe as they are keep them; the others are renamed after
        for asl_name in sorted(states, key=lambda n: self._safe(str(n)) != str(n)):
            base = self._safe(str(asl_name)) or "state"
            if parent is not None:
                base = f"{parent}__{base}"
            ids[str(asl_name)] = self._unique(base)
        entry = {name: self._unique(f"{ids[name]}__ItemReader") for name, state in
                 states.items() if _reads_items(state)}
        return _Scope(f"{location}.", parent, ids, key, entry=entry)

    def _states_of(self, holder: Mapping[str, Any], scope: _Scope) -> str:
        """Converts a state list (`StartAt` + `States`); gives the native id of its start."""
        start = holder.get("StartAt")
        where = scope.prefix[: -len("States.")] + "StartAt"
        if not isinstance(start, str):
            raise _Refused(where, "expected StartAt: the name of the first state")
        if start not in scope.ids:
            raise _Refused(where, f"StartAt names {start!r}, which is not in States")
        states = holder["States"]
        for asl_name, state in states.items():
            location = f"{scope.prefix}{asl_name}"
            if not isinstance(state, Mapping):
                self.error(location, "expected a mapping with a Type")
                continue
            try:
                self._state(str(asl_name), state, scope, location, initial=asl_name == start)
            except _Refused as exc:
                self.errors.append(self.located(exc.finding))
        return scope.entry.get(start, scope.ids[start])

    # -- ids -------------------------------------------------------------------------------
    @staticmethod
    def _safe(text: str) -> str:
        cleaned = _ODD.sub("_", text).strip("_")
        if cleaned and not re.match(r"^[A-Za-z_]", cleaned):
            cleaned = "s_" + cleaned
        return cleaned

    def _unique(self, base: str) -> str:
        candidate, n = base, 2
        while candidate in self.taken:
            candidate, n = f"{base}_{n}", n + 1
        self.taken.add(candidate)
        return candidate

    def _final(self, scope: _Scope, outcome: str, why: str) -> str:
        """Gives the synthesized final state of a scope for an outcome, made when first used."""
        if outcome not in scope.finals:
            sid = self._unique(f"{scope.parent}__{outcome}" if scope.parent else
                               f"{scope.key}_{outcome}")
            self.states[sid] = self._with_parent(
                {"type": "final", "outcome": outcome, "description": why}, scope)
            scope.finals[outcome] = sid
        return scope.finals[outcome]

    @staticmethod
    def _with_parent(state: dict[str, Any], scope: _Scope) -> dict[str, Any]:
        return {"parent": scope.parent, **state} if scope.parent else state

    def _next(self, state: Mapping[str, Any], scope: _Scope, location: str) -> str:
        if state.get("End") is True:
            return self._final(scope, "success", "the end of the flow (End: true)")
        target = state.get("Next")
        if not isinstance(target, str):
            raise _Refused(f"{location}.Next", "expected Next (a state name) or End: true")
        return self._target(target, scope, f"{location}.Next")

    def _target(self, target: Any, scope: _Scope, location: str) -> str:
        if not isinstance(target, str) or target not in scope.ids:
            known = ", ".join(sorted(scope.ids))
            raise _Refused(location, f"names the state {target!r}, which is not in this "
                                     f"state list (known: {known})", "asl-unknown-state")
        return scope.entry.get(target, scope.ids[target])

    # -- one state ---------------------------------------------------------------------------
    def _state(self, asl_name: str, state: Mapping[str, Any], scope: _Scope, location: str,
               *, initial: bool) -> None:
        kind = state.get("Type")
        if kind not in _STATE_TYPES:
            raise _Refused(f"{location}.Type", f"state type {kind!r}: expected one of "
                                               f"{', '.join(_STATE_TYPES)}")
        sid = scope.ids[asl_name]
        comment = state.get("Comment")
        label = asl_name if not comment else f"{asl_name}: {comment}"
        native: dict[str, Any] = {"description": label}
        if initial:
            native["initial"] = True
        jsonata = state.get("QueryLanguage", "JSONata" if self.jsonata else "JSONPath") \
            == "JSONata"
        if state.get("Assign") is not None:
            assigns = self._assign(state["Assign"], f"{location}.Assign", jsonata)
        else:
            assigns = {}
        self._left_out(state, _FIELDS[str(kind)], location, f"a {kind} state")
        handler = getattr(self, f"_{str(kind).lower()}")
        self.success_moves = []
        self.current, self.token_read = sid, False
        handler(sid, state, scope, location, native, jsonata)
        if self.token_read:
            counter = _render((f"asl_task_token_{sid}",))
            native.setdefault("entry", []).insert(
                0, {"assign": {f"asl_task_token_{sid}": f"{_or(counter, '0')} + 1"}})
        self.current = None
        if assigns:
            self._add_assigns(native, assigns)
        self.states[sid] = self._with_parent(native, scope)

    def _add_assigns(self, native: dict[str, Any], assigns: dict[str, str]) -> None:
        """Puts the ASL variables' assignments on the moves a state takes when it succeeds
        (a state that moves by no transition of its own: on entry)."""
        moves = [m for m in self.success_moves if isinstance(m, dict)]
        if not moves:
            native.setdefault("entry", []).append({"assign": assigns})
            return
        for move in moves:
            move.setdefault("actions", []).append({"assign": dict(assigns)})

    def _assign(self, spec: Any, location: str, jsonata: bool) -> dict[str, str]:
        if not isinstance(spec, Mapping):
            self.warn("asl-assign", location, "Assign is not a mapping: left out")
            return {}
        out: dict[str, str] = {}
        for key, value in spec.items():
            name = str(key)[:-2] if str(key).endswith(".$") else str(key)
            target = "var_" + self._safe(name)
            if jsonata:
                expr = self._jsonata(value, f"{location}.{key}", "context")
            elif str(key).endswith(".$") and isinstance(value, str):
                expr = self._dynamic(value, f"{location}.{key}", "context", ())
            else:
                expr = _literal(value)
            if expr is None:
                self.warn("asl-assign", f"{location}.{key}",
                          f"variable {name!r} is not expressible natively: left unset")
                continue
            out[target] = expr
        return out

    def _succeed(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
                 native: dict[str, Any], jsonata: bool) -> None:
        native.update(type="final", outcome="success")

    def _fail(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
              native: dict[str, Any], jsonata: bool) -> None:
        error = state.get("Error")
        outcome = "failure"
        if scope.parent is not None and isinstance(error, str) and self._safe(error):
            # a failed branch tells its error by its outcome, so the Parallel's Catch can
            outcome = f"failure.{self._safe(error)}"
        native.update(type="final", outcome=outcome)
        for key in ("Error", "Cause", "ErrorPath", "CausePath"):
            if key in state:
                native["description"] += f" [{key}: {state[key]}]"

    def _left_out(self, holder: Mapping[str, Any], known: frozenset[str], location: str,
                  what: str) -> None:
        for key in holder:
            if key not in known:
                self.warn("asl-field-ignored", f"{location}.{key}" if location else str(key),
                          f"{key} of {what} is not modelled natively: left out")

    def _wait(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
              native: dict[str, Any], jsonata: bool) -> None:
        target = self._next(state, scope, location)
        seconds = state.get("Seconds")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
            delay: float = seconds
        else:
            delay = _WAIT_DEFAULT_S
            used = next((k for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath")
                         if k in state), "Seconds")
            self.warn("asl-wait-dynamic", f"{location}.{used}",
                      f"the wait's length ({used}: {state.get(used)!r}) is not known when "
                      f"the definition is read: approximated as {delay} s")
        native.update(type="wait", after={"delay": _seconds(delay), "target": target})

    def _pass(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
              native: dict[str, Any], jsonata: bool) -> None:
        target = self._next(state, scope, location)
        move: dict[str, Any] = {"target": target}
        value: _Expr | _Record | None = None
        if jsonata and "Output" in state:
            value = self._value(state["Output"], f"{location}.Output", "context", jsonata=True)
            self._write(move, value, "$", f"{location}.Output")
        else:
            if "Result" in state:
                value = self._const(state["Result"], f"{location}.Result")
            elif "Parameters" in state:
                value = self._value(state["Parameters"], f"{location}.Parameters", "context",
                                    base=self._input_base(state, location))
            if value is not None:
                self._write(move, value, state.get("ResultPath", "$"), f"{location}.ResultPath")
            self._output_path(state, location)
        native["always"] = [move]
        self.success_moves = [move]

    def _output_path(self, state: Mapping[str, Any], location: str) -> None:
        if state.get("OutputPath") not in (None, "$"):
            self.warn("asl-data-path", f"{location}.OutputPath",
                      "OutputPath narrows the data passed on; natively the whole context "
                      "goes on: left out")

    def _input_base(self, state: Mapping[str, Any], location: str) -> tuple[str | int, ...]:
        path = state.get("InputPath")
        if path is None or path == "$":
            return ()
        if not isinstance(path, str):
            return ()
        parsed = _parse_path(path)
        if parsed is None or parsed[0] != "$":
            self.warn("asl-data-path", f"{location}.InputPath",
                      f"InputPath {path!r} is not a plain path: left out")
            return ()
        return tuple(parsed[1])

    # -- Task --------------------------------------------------------------------------------
    def _task(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
              native: dict[str, Any], jsonata: bool) -> None:
        resource = state.get("Resource")
        if not isinstance(resource, str) or not resource:
            raise _Refused(f"{location}.Resource", "a Task needs a Resource (what it calls)")
        params_key = "Arguments" if jsonata else "Parameters"
        params = state.get(params_key)
        tool = tool_name(resource, params)
        if tool not in self.tools:
            # each Task state's call is its own action (a loop polling with the same input,
            # two states calling one function): only a call applied twice is a duplicate
            self.tools[tool] = {"description": f"ASL resource {resource}", "action": "call"}
            if _READ_ONLY.match(tool.split(".")[-1]) and not tool.startswith("lambda."):
                self.tools[tool]["repeatable"] = True
            if f"tool:{tool}" in self.inferred:
                self.tools[tool]["output"] = self.inferred[f"tool:{tool}"]
                self.inferred_for.append(tool)
            self.tools[tool].update(self.tools_file.get(tool, {}))
            self.tool_where[tool] = f"{location}.Resource"
        callback = resource.endswith(".waitForTaskToken")
        base = self._input_base(state, location)
        if params is None:
            step_input: dict[str, Any] = {"input": "=" + _render(base) if base else "=context"}
        else:
            translated = self._template(params, f"{location}.{params_key}", base, jsonata)
            step_input = translated if isinstance(translated, dict) else {"input": translated}
        step: dict[str, Any] = {"tool": tool, "input": step_input}
        timeout = state.get("TimeoutSeconds")
        if "TimeoutSecondsPath" in state or "HeartbeatSecondsPath" in state:
            key = "TimeoutSecondsPath" if "TimeoutSecondsPath" in state else "HeartbeatSecondsPath"
            self.warn("asl-timeout-dynamic", f"{location}.{key}",
                      f"{key} is read at run time: the step has no timeout natively")
        if isinstance(timeout, int | float) and timeout > 0 and not callback:
            step["timeout"] = _seconds(timeout)
        if "HeartbeatSeconds" in state and not callback:
            self.warn("asl-heartbeat", f"{location}.HeartbeatSeconds",
                      "a heartbeat of a task that sends none back is left out (the "
                      "TimeoutSeconds stays)")
        step["retry"] = self._retry(state.get("Retry"), f"{location}.Retry", tool)
        catches = self._catches(state.get("Catch"), scope, f"{location}.Catch")
        succeeded_target = self._next(state, scope, location)
        success: dict[str, Any] = {"target": succeeded_target}
        result = self._task_result(state, location, jsonata)
        target = f"event:{sid}.task_success" if callback else f"tool:{tool}"
        if (target in self.scalars and isinstance(result, _Expr) and result.text == "event.payload"
                and "output" not in self.tools_file.get(tool, {})):
            result = _Expr(f"at(event.payload, {SCALAR_FIELD!r})")
            self.warn("asl-result-scalar", f"{location}.ResultPath",
                      "a Choice compares this task's whole result (a text or number) or reads "
                      "it as a list; a "
                      f"native output is a mapping, so the result is drawn as its field "
                      f"{SCALAR_FIELD!r} (declare the tool's output in the side file to say "
                      "otherwise)")
        if not jsonata:
            self._note_write(f"event:{sid}.task_success" if callback else f"tool:{tool}",
                             state)
        if callback:
            wait_id = self._unique(f"{sid}__callback")
            ok, failed = f"{sid}.task_success", f"{sid}.task_failure"
            # one answer a token, and a new token each visit (a Choice looping back to the
            # task waits for a new callback): no `sends_max`, which counts an execution's
            # sends; the sender sends while the wait takes the event
            self.events[ok] = {"description": f"SendTaskSuccess for {sid}'s task token",
                               "sources": ["system"]}
            if f"event:{ok}" in self.inferred:
                self.events[ok]["payload"] = self.inferred[f"event:{ok}"]
                self.inferred_for.append(ok)
            self.events[failed] = {"description": f"SendTaskFailure for {sid}'s task token",
                                   "sources": ["system"]}
            self._write(success, result, state.get("ResultPath", "$"), f"{location}.ResultPath")
            delay = timeout if isinstance(timeout, int | float) and timeout > 0 else None
            if delay is None and isinstance(state.get("HeartbeatSeconds"), int | float):
                delay = state["HeartbeatSeconds"]
            elif delay is not None and "HeartbeatSeconds" in state:
                self.warn("asl-heartbeat", f"{location}.HeartbeatSeconds",
                          "heartbeats are not modelled: the callback waits for TimeoutSeconds")
            if delay is None:
                delay = _CALLBACK_TIMEOUT_DEFAULT_S
                # a time read at run time bounds it there (`asl-timeout-dynamic` says so)
                bounded = any(key in state for key in ("TimeoutSecondsPath",
                                                       "HeartbeatSecondsPath"))
            else:
                bounded = True
            if not bounded:
                self.warn("asl-callback-unbounded", location,
                          "a callback task with no TimeoutSeconds and no HeartbeatSeconds: a "
                          "callback that is lost holds the execution until the execution "
                          "times out (a year in Step Functions; the native wait ends after "
                          "365 days)")
            timeout_catch = next((c for c in catches if c["categories"] is None
                                  or "timeout" in c["categories"]), None)
            timeout_target = timeout_catch["target"] if timeout_catch else self._final(
                scope, "failure", "an uncaught error")
            if timeout_catch and timeout_catch["actions"]:
                self.warn("asl-catch-output", f"{location}.TimeoutSeconds",
                          "a callback that times out takes its catcher without the catcher's "
                          "ResultPath (a native timeout carries no actions)")
            failure_moves = [self._catch_move(c, "callback") for c in catches
                             if c["categories"] is None or set(c["categories"]) - {"timeout"}]
            failure_moves.append({"target": self._final(scope, "failure", "an uncaught error")})
            wait_state = {
                "type": "wait",
                "description": f"{native['description']} (waiting for the task token's "
                               "callback)",
                "after": {"delay": _seconds(delay), "target": timeout_target},
                "on": {ok: success, failed: failure_moves},
            }
            self.states[wait_id] = self._with_parent(wait_state, scope)
            success_move: dict[str, Any] = {"target": wait_id}
        else:
            self._write(success, result, state.get("ResultPath", "$"), f"{location}.ResultPath")
            success_move = success
        self.success_moves = [success]
        failed_moves = [self._catch_move(c, "step") for c in catches]
        # every step failure the catchers do not take (an output the file cannot read, which
        # no catcher matches) ends the run in failure
        failed_moves.append({"target": self._final(scope, "failure", "an uncaught error")})
        native["step"] = step
        native["on"] = {"step.succeeded": success_move, "step.failed": failed_moves}

    def _task_result(self, state: Mapping[str, Any], location: str, jsonata: bool
                     ) -> _Expr | _Record | None:
        if jsonata:
            if "Output" in state:
                return self._value(state["Output"], f"{location}.Output", "event.payload",
                                   jsonata=True)
            return _Expr("event.payload")
        value: _Expr | _Record | None = _Expr("event.payload")
        if "ResultSelector" in state:
            value = self._value(state["ResultSelector"], f"{location}.ResultSelector",
                                "event.payload")
        output = state.get("OutputPath")
        if output not in (None, "$"):
            parsed = _parse_path(output) if isinstance(output, str) else None
            result_path = state.get("ResultPath", "$")
            if result_path == "$" and parsed is not None and parsed[0] == "$" and isinstance(
                    value, _Expr):
                value = _Expr(_render(tuple(parsed[1]), value.text,
                                      nullable=value.text != "event.payload"))
            else:
                self.warn("asl-data-path", f"{location}.OutputPath",
                          "OutputPath narrows the data passed on; natively the whole context "
                          "goes on: left out")
        return value

    def _note_write(self, target: str, state: Mapping[str, Any]) -> None:
        """Notes where a Task's result lands, for the output schemas guessed from reads."""
        result_path = state.get("ResultPath", "$")
        parsed = _parse_path(result_path) if isinstance(result_path, str) else None
        if parsed is None or parsed[0] != "$" or any(isinstance(s, int) for s in parsed[1]):
            return
        landing = tuple(str(s) for s in parsed[1])
        prefix: tuple[str | int, ...] = ()
        output = state.get("OutputPath")
        if not landing and isinstance(output, str):
            out = _parse_path(output)
            if out is not None and out[0] == "$":
                prefix = tuple(out[1])
        selector = None
        if isinstance(state.get("ResultSelector"), Mapping):
            selector = {}
            for key, value in state["ResultSelector"].items():
                chosen = _parse_path(value) if str(key).endswith(".$") and isinstance(
                    value, str) else None
                if chosen is not None and chosen[0] == "$":
                    selector[str(key)[:-2]] = tuple(chosen[1])
        self.result_writes.append((target, landing, prefix, selector))

    def _retry(self, spec: Any, location: str, tool: str) -> dict[str, Any]:
        if spec is None:
            return {"attempts_max": 1}
        if not isinstance(spec, list):
            raise _Refused(location, "Retry is a list of retriers")
        if not spec:
            return {"attempts_max": 1}
        categories: list[str] = []
        for index, retrier in enumerate(spec):
            where = f"{location}[{index}]"
            errors = self._error_names(retrier, _RETRIER_FIELDS, where, "a retrier")
            for err_index, error in enumerate(errors):
                found = self._categories(error, f"{where}.ErrorEquals[{err_index}]")
                for category in found:
                    if category in _RETRYABLE and category not in categories:
                        categories.append(category)
                if "permanent" in found:
                    self.warn("asl-retry-permanent", f"{where}.ErrorEquals[{err_index}]",
                              f"error {error!r} is a permanent failure natively, which is "
                              "never retried")
        first = spec[0]
        if len(spec) > 1:
            self.warn("asl-retry-merged", f"{location}[1]",
                      f"{len(spec)} retriers merged into one policy: the errors of all, the "
                      "attempts and delays of the first")
        attempts = first.get("MaxAttempts", 3)
        if not _whole(attempts) or attempts < 0:
            raise _Refused(f"{location}[0].MaxAttempts", "MaxAttempts is a whole number >= 0")
        for name, low, high in (("IntervalSeconds", 1, _SECONDS_MAX),
                                ("MaxDelaySeconds", 1, _SECONDS_MAX)):
            given = first.get(name)
            if given is not None and (not _whole(given) or not low <= given <= high):
                raise _Refused(f"{location}[0].{name}",
                               f"{name} is a whole number of seconds from {low} to {high:,}")
        rate = first.get("BackoffRate")
        if rate is not None and (not _number(rate) or not 1.0 <= rate <= 1_000.0):
            raise _Refused(f"{location}[0].BackoffRate",
                           "BackoffRate is a number from 1.0 to 1,000")
        if attempts + 1 > 100:
            self.warn("asl-retry-bounds", f"{location}[0].MaxAttempts",
                      f"MaxAttempts {attempts} capped at 99 retries (the native bound)")
            attempts = 99
        interval = first.get("IntervalSeconds", 1)
        backoff = first.get("BackoffRate", 2.0)
        policy: dict[str, Any] = {
            "attempts_max": attempts + 1,
            "delay_initial": _seconds(interval if isinstance(interval, int | float) else 1),
            "multiplier": max(float(backoff), 1.0) if isinstance(backoff, int | float) else 2.0,
        }
        if isinstance(backoff, int | float) and backoff < 1:
            self.warn("asl-retry-bounds", f"{location}[0].BackoffRate",
                      f"BackoffRate {backoff} below 1 read as 1")
        max_delay = first.get("MaxDelaySeconds")
        initial_s = interval if isinstance(interval, int | float) else 1
        if isinstance(max_delay, int | float):
            policy["delay_max"] = _seconds(max(max_delay, initial_s))
        else:
            policy["delay_max"] = _seconds(max(60, initial_s) if attempts < 2 else min(max(
                initial_s * policy["multiplier"] ** min(attempts - 1, 64), 60), _SECONDS_MAX))
        jitter = first.get("JitterStrategy")
        if jitter == "FULL":
            policy["jitter"] = 1.0
        elif jitter not in (None, "NONE"):
            self.warn("asl-retry-jitter", f"{location}[0].JitterStrategy",
                      f"JitterStrategy {jitter!r} is not FULL or NONE: no jitter")
        declared = self.tools.get(tool, {})
        if "timeout" in categories and not (declared.get("idempotency_keys")
                                            or declared.get("repeatable")):
            categories.remove("timeout")
            self.warn("asl-retry-timeout", f"{location}[0].ErrorEquals",
                      f"a timeout of tool {tool!r} is not retried: it is not known to honour "
                      "idempotency keys, so the call may have applied (an ambiguous failure "
                      "takes the Catch); declare it in the tools side file")
        if not categories:
            self.warn("asl-retry-unmapped", f"{location}[0].ErrorEquals",
                      "no retried error maps to a native category that may be retried: "
                      "the step is not retried")
            return {"attempts_max": 1}
        policy["retry_on"] = categories
        return policy

    def _error_names(self, entry: Any, fields: frozenset[str], where: str, what: str
                     ) -> list[str]:
        """Gives a retrier's or catcher's ErrorEquals, refusing an entry that is not a mapping
        or lacks a non-empty list of error names (its other fields left out are warned)."""
        if not isinstance(entry, Mapping):
            raise _Refused(where, f"{what} is a mapping with ErrorEquals")
        self._left_out(entry, fields, where, what)
        errors = entry.get("ErrorEquals")
        if not isinstance(errors, list) or not errors or not all(
                isinstance(e, str) for e in errors):
            raise _Refused(f"{where}.ErrorEquals",
                           f"{what} needs ErrorEquals, a non-empty list of error names")
        return errors

    def _categories(self, error: str, location: str) -> tuple[str, ...]:
        """Gives the native failure categories an ASL error name stands for."""
        if error == "States.ALL":
            return _ALL
        if error in ("States.Timeout", "States.HeartbeatTimeout"):
            return ("timeout",)
        if error == "States.TaskFailed":
            return ("transient", "rate_limited", "permanent")
        lowered = error.lower()
        if any(w in lowered for w in ("throttl", "toomanyrequests", "rateexceeded",
                                      "limitexceeded", "throughputexceeded", "slowdown")):
            return ("rate_limited",)
        if "timeout" in lowered or "timedout" in lowered:
            return ("timeout",)
        if any(w in lowered for w in ("serviceexception", "sdkclientexception",
                                      "awslambdaexception", "unavailable", "internalserver",
                                      "internalfailure", "internalerror", "serviceerror",
                                      "connection", "econnreset", "transient", "unknown")):
            return ("transient",)
        self.warn("asl-error-name", location,
                  f"error {error!r} has no native category: read as a permanent failure")
        return ("permanent",)

    def _catches(self, spec: Any, scope: _Scope, location: str) -> list[dict[str, Any]]:
        if spec is None:
            return []
        if not isinstance(spec, list):
            raise _Refused(location, "Catch is a list of catchers")
        out: list[dict[str, Any]] = []
        for index, catcher in enumerate(spec):
            where = f"{location}[{index}]"
            errors = self._error_names(catcher, _CATCHER_FIELDS, where, "a catcher")
            if "Next" not in catcher:
                raise _Refused(f"{where}.Next", "a catcher needs Next (a state name)")
            found: list[str] = []
            for err_index, error in enumerate(errors):
                for category in self._categories(error, f"{where}.ErrorEquals[{err_index}]"):
                    if category not in found:
                        found.append(category)
            target = self._target(catcher["Next"], scope, f"{where}.Next")
            actions: list[dict[str, Any]] = []
            result_path = catcher.get("ResultPath", "$")
            if result_path is not None:
                move: dict[str, Any] = {}
                self._write(move, _CATCH_OUTPUT, result_path, f"{where}.ResultPath")
                actions = move.get("actions", [])
                self.warn("asl-catch-output", f"{where}.ResultPath",
                          "the error output's Error is States.Timeout for a timeout and "
                          "States.TaskFailed for any other failure (a task's own error names "
                          "are not known), its Cause the failure's message")
            out.append({"categories": None if set(found) >= set(_ALL) else found,
                        "target": target, "actions": actions})
        return out

    @staticmethod
    def _catch_move(catch: Mapping[str, Any], kind: str) -> dict[str, Any]:
        move: dict[str, Any] = {"target": catch["target"]}
        if kind == "step":  # a catch-all (None) catches what ASL can: not an unread output
            move["guard"] = f"event.payload.category in {list(catch['categories'] or _ALL)!r}"
        if catch["actions"]:
            move["actions"] = catch["actions"]
        return move

    # -- Choice ----------------------------------------------------------------------------
    def _choice(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
                native: dict[str, Any], jsonata: bool) -> None:
        rules = state.get("Choices")
        if not isinstance(rules, list) or not rules:
            raise _Refused(f"{location}.Choices", "a Choice needs Choices, a non-empty list")
        branches: list[Any] = []
        for index, rule in enumerate(rules):
            where = f"{location}.Choices[{index}]"
            if not isinstance(rule, Mapping) or "Next" not in rule:
                raise _Refused(where, "a choice rule is a mapping with a Next")
            target = self._target(rule["Next"], scope, f"{where}.Next")
            if jsonata or "Condition" in rule:
                guard = self._jsonata(rule.get("Condition"), f"{where}.Condition", "context")
                if guard is None:
                    raise _jsonata_refused(rule.get("Condition"), f"{where}.Condition")
            else:
                guard = self._rule(rule, where)
            branch: dict[str, Any] = {"target": target, "guard": guard}
            if "Assign" in rule:
                assigns = self._assign(rule["Assign"], f"{where}.Assign", jsonata)
                if assigns:
                    branch["actions"] = [{"assign": assigns}]
            branches.append(branch)
        default = state.get("Default")
        if default is not None:
            branches.append(self._target(default, scope, f"{location}.Default"))
        else:
            branches.append({"target": self._final(scope, "failure", "an uncaught error"),
                             "description": "States.NoChoiceMatched"})
            self.warn("asl-choice-no-default", location,
                      "a Choice with no Default: a run no rule matches fails with "
                      "States.NoChoiceMatched (give it a Default, or a last rule that takes "
                      "the rest)")
        for index, branch in enumerate(branches):
            if isinstance(branch, str):
                branches[index] = {"target": branch}
        native.update(type="choice", always=branches)
        self.success_moves = list(branches)

    def _rule(self, rule: Mapping[str, Any], location: str) -> str:
        """Gives the guard text of an ASL (JSONPath) choice rule."""
        if not isinstance(rule, Mapping):
            raise _Refused(location, "a choice rule is a mapping")
        if "And" in rule or "Or" in rule:
            key = "And" if "And" in rule else "Or"
            parts = rule[key]
            if not isinstance(parts, list) or not parts:
                raise _Refused(f"{location}.{key}", f"{key} is a non-empty list of rules")
            joined = f" {key.lower()} ".join(
                f"({self._rule(p, f'{location}.{key}[{i}]')})" for i, p in enumerate(parts))
            return joined
        if "Not" in rule:
            inner = self._rule(rule["Not"], f"{location}.Not")
            # a comparison of a variable that is not there fails the run in Step Functions,
            # and matches no rule here: neither does its negation (else a loop whose exit
            # compares the head of a list emptied ran on forever)
            there = sorted({self._present(path, f"{location}.Not") for path in
                            _compared_paths(rule["Not"])} - {"True"})
            if not there:
                return f"not ({inner})"
            return f"({' and '.join(there)} and not ({inner}))"
        variable = rule.get("Variable")
        if not isinstance(variable, str):
            raise _Refused(f"{location}.Variable", "a comparison needs a Variable (a path)")
        var = self._read(variable, f"{location}.Variable")
        operators = [k for k in rule if k not in ("Variable", "Next", "Comment", "Assign")]
        parsed_var = _parse_path(variable)
        if parsed_var is not None and parsed_var[0] == "$" and len(operators) == 1:
            self._note(tuple(parsed_var[1]), operators[0], rule[operators[0]])
        if len(operators) != 1:
            raise _Refused(location, f"expected one comparison operator, got {operators}")
        op = operators[0]
        value = rule[op]
        where = f"{location}.{op}"
        if op.endswith("Path"):
            if not isinstance(value, str):
                raise _Refused(where, f"{op} takes a path")
            other = self._read(value, where)
            base = op[: -len("Path")]
        else:
            other = None
            base = op
        if base == "IsPresent":
            # a result that replaced the data leaves the keys it lacks as null, not absent
            self.warn("asl-is-present", where, "IsPresent reads as 'not null'")
            return f"{var} is not None" if value else f"{var} is None"
        if base == "IsNull":
            test = f"{var} is None"
            return test if value else f"{var} is not None"
        if base in _TYPE_TESTS:
            if base == "IsTimestamp":
                self.warn("asl-choice-type-test", where,
                          "IsTimestamp reads as 'a text' (its format is not checked)")
            test = f"{_TYPE_TESTS[base]}({var})"
            return test if value else f"not {test}"
        if base == "StringMatches":
            if not isinstance(value, str):
                raise _Refused(where, "StringMatches takes a pattern string")
            # a value of another type matches no pattern (a comparison of types is false)
            return f"(is_string({var}) and ({self._matches(var, value, where)}))"
        for family in ("String", "Numeric", "Boolean", "Timestamp"):
            if base.startswith(family) and base[len(family):] in _COMPARISONS:
                symbol = _COMPARISONS[base[len(family):]]
                break
        else:
            raise _Refused(where, f"unknown comparison operator {op!r}")
        if family == "Timestamp":
            self.warn("asl-timestamp-text", where,
                      "timestamps are compared as text (exact for ISO 8601 in one time zone)")
        if other is None:
            self._check_operand(family, value, where)
            other = _literal(value) or "None"
        # a typed comparison of a value of another type is false, never an error (a text is
        # not less than 5; true is no number, 0 no boolean)
        test = _FAMILY_TESTS[family]
        return f"({test}({var}) and {test}({other}) and {var} {symbol} {other})"

    @staticmethod
    def _check_operand(family: str, value: Any, where: str) -> None:
        ok = {
            "String": isinstance(value, str),
            "Timestamp": isinstance(value, str),
            "Numeric": isinstance(value, int | float) and not isinstance(value, bool),
            "Boolean": isinstance(value, bool),
        }[family]
        if not ok:
            raise _Refused(where, f"a {family} comparison takes a {family.lower()}, got "
                                  f"{value!r}")

    def _matches(self, var: str, pattern: str, where: str) -> str:
        parts, current, escaped = [], "", False
        for ch in pattern:
            if escaped:
                current += ch
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == "*":
                parts.append(current)
                current = ""
            else:
                current += ch
        parts.append(current)
        if len(parts) == 1:
            return f"{var} == {parts[0]!r}"
        prefix, suffix, middle = parts[0], parts[-1], [p for p in parts[1:-1] if p]
        if middle:
            self.warn("asl-string-matches", where,
                      f"pattern {pattern!r}: only its start {prefix!r} and end {suffix!r} are "
                      "checked natively")
        tests = [f"{var} is not None", f"len({var}) >= {len(prefix) + len(suffix)}"]
        tests += [f"{var}[{i}] == {c!r}" for i, c in enumerate(prefix)]
        tests += [f"{var}[{i - len(suffix)}] == {c!r}" for i, c in enumerate(suffix)]
        text = " and ".join(tests)
        if len(text) > 900:
            self.warn("asl-string-matches", where,
                      f"pattern {pattern!r} is too long to check natively: read as 'present'")
            return f"{var} is not None"
        return f"({text})"

    # -- Parallel and Map ------------------------------------------------------------------
    def _parallel(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
                  native: dict[str, Any], jsonata: bool) -> None:
        branches = state.get("Branches")
        if not isinstance(branches, list) or not branches:
            raise _Refused(f"{location}.Branches", "a Parallel needs Branches, a non-empty list")
        native["type"] = "parallel"
        for index, branch in enumerate(branches):
            where = f"{location}.Branches[{index}]"
            if not isinstance(branch, Mapping):
                raise _Refused(where, "a branch is a mapping with StartAt and States")
            region = self._unique(f"{sid}__branch{index + 1}")
            self.states[region] = {"parent": sid,
                                   "description": f"branch {index + 1} of {sid}"}
            self.regions_of.setdefault(location, []).append(region)
            inner = self._scope(branch, f"{where}.", region, region)
            self._states_of(branch, inner)
        if state.get("Retry"):
            self.warn("asl-retry-composite", f"{location}.Retry",
                      "a Parallel or Map is not retried natively: its Retry is left out")
        native["done"] = self._join(state, scope, location, "merged contexts of the branches")

    def _join(self, state: Mapping[str, Any], scope: _Scope, location: str, what: str,
              catches: list[dict[str, Any]] | None = None) -> list[Any]:
        moves: list[Any] = []
        if catches is None:
            catches = self._catches(state.get("Catch"), scope, f"{location}.Catch")
        for index, catch in enumerate(catches):
            guard = "event.payload.failing"
            if catch["categories"] is not None:
                guard = self._composite_guard(state, location, index) or guard
            move: dict[str, Any] = {"target": catch["target"], "guard": guard}
            if catch["actions"]:
                move["actions"] = catch["actions"]
            moves.append(move)
        if not catches or catches[-1]["categories"] is not None:
            moves.append({"target": self._final(scope, "failure", "an uncaught error"),
                          "guard": "event.payload.failing"})
        success: dict[str, Any] = {"target": self._next(state, scope, location)}
        if state["Type"] == "Parallel":
            where = f"{location}.ResultPath" if "ResultPath" in state else location
            self.warn("asl-parallel-result", where,
                      f"the branches' outputs are not gathered in an array: the {what} go on")
        moves.append(success)
        self.success_moves = [success]
        return moves

    def _composite_guard(self, state: Mapping[str, Any], location: str, index: int
                         ) -> str | None:
        """Gives the guard of a Parallel's catcher of named errors: a branch ended in a Fail
        state of that error; None (any failure) where that cannot be told."""
        where = f"{location}.Catch[{index}].ErrorEquals"
        errors = state["Catch"][index]["ErrorEquals"]
        named = [e for e in errors if not e.startswith("States.") or e not in (
            "States.TaskFailed", "States.Timeout", "States.HeartbeatTimeout",
            "States.Permissions", "States.Runtime")]
        regions = self.regions_of.get(location, [])
        if state.get("Type") != "Parallel" or len(named) != len(errors) or not regions:
            self.warn("asl-catch-composite", where,
                      "a failed branch or item tells no error natively: this catcher "
                      "takes every failure")
            return None
        tests = [f"event.payload.outcomes[{region!r}] == {('failure.' + self._safe(e))!r}"
                 for region in regions for e in named]
        return f"event.payload.failing and ({' or '.join(tests)})"

    def _map(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
             native: dict[str, Any], jsonata: bool) -> None:
        key = "ItemProcessor" if "ItemProcessor" in state else "Iterator"
        flow = state.get(key)
        if not isinstance(flow, Mapping):
            raise _Refused(f"{location}.ItemProcessor",
                           "a Map needs ItemProcessor (or Iterator) with StartAt and States")
        config = flow.get("ProcessorConfig")
        if isinstance(config, Mapping) and config.get("Mode") == "DISTRIBUTED":
            self.warn("asl-map-distributed", f"{location}.{key}.ProcessorConfig",
                      "a distributed map is read as an inline one (its items in the context)")
        reader = scope.entry.get(location[len(scope.prefix):])
        for extra in ("ItemReader", "ResultWriter", "ItemBatcher", "ItemSelector",
                      "Parameters", "ToleratedFailurePercentage",
                      "ToleratedFailurePercentagePath", "ToleratedFailureCountPath",
                      "MaxConcurrencyPath", "Label"):
            if extra in state and not (extra == "ItemReader" and reader is not None):
                self.warn("asl-map-field", f"{location}.{extra}",
                          f"{extra} is not modelled natively (each item's context is the item)"
                          ": left out")
        native["type"] = "map"
        items_read: tuple[str | int, ...] | None = None  # where the items are in the data
        items: str | None
        if reader is not None:
            items = _render((f"asl_items_{sid}",))
        elif jsonata and "Items" in state:
            items = self._jsonata(state["Items"], f"{location}.Items", "context")
            if items is None:
                raise _jsonata_refused(state["Items"], f"{location}.Items")
        else:
            path = state.get("ItemsPath", "$")
            if path == "$":
                items = "context.items"
                items_read = ("items",)
                self.warn("asl-map-items", f"{location}.ItemsPath",
                          "the map's input is its items (ItemsPath $): natively the context is "
                          "a mapping, so the items are read from context.items")
            else:
                items = self._read(str(path), f"{location}.ItemsPath")
                parsed_items = _parse_path(str(path))
                if parsed_items is not None and parsed_items[0] == "$":
                    items_read = tuple(parsed_items[1])
        native["items"] = _or(items, "[]") if items != "[]" else items
        concurrency = state.get("MaxConcurrency")
        if isinstance(concurrency, int) and concurrency > 0:
            native["concurrency_max"] = concurrency
        tolerated = state.get("ToleratedFailureCount")
        if isinstance(tolerated, int) and tolerated > 0:
            native["tolerated_failures"] = tolerated
        percent = state.get("ToleratedFailurePercentage")
        if isinstance(percent, int | float) and percent >= 100:
            native["tolerated_failures"] = 1_000_000
        catches = self._catches(state.get("Catch"), scope, f"{location}.Catch")
        if reader is not None:
            # drawn before the item flow's reads are known: they shape the items, below
            initial = native.pop("initial", False)
            reader_state = self._item_reader(sid, state, scope, location, catches, jsonata)
            if initial:
                reader_state["initial"] = True
        self.sinks.append([])
        inner = self._scope(flow, f"{location}.{key}.", sid, sid)
        self._states_of(flow, inner)
        # an item's data is the item: what its flow reads before writing it shapes the items
        shape = _shape(self.sinks.pop(), _read_before_written(flow, self.flat), self.flat,
                       items_min=1, identified=True)
        if items_read:
            self._note(items_read, "Items", shape)
        if reader is not None:
            tool = reader_state["step"]["tool"]
            if "output" not in self.tools_file.get(tool, {}):
                self.tools[tool]["output"] = {
                    "type": "object", "required": ["items"], "properties": {"items": {
                        "type": "array", "minItems": 1, "maxItems": _ITEMS_MAX, "items": shape}}}
            self.states[reader] = self._with_parent(reader_state, scope)
        result_path = state.get("ResultPath", "$")
        results = None
        if isinstance(result_path, str):
            parsed = _parse_path(result_path)
            if parsed and parsed[0] == "$" and len(parsed[1]) == 1 and isinstance(
                    parsed[1][0], str) and _ID.match(parsed[1][0]):
                results = parsed[1][0]
        if "ResultSelector" in state:
            results = None  # the items' results are not what the file reads there
        if results is None:
            results = f"results_{sid}"
            if result_path is not None:
                self.warn("asl-map-result", f"{location}.ResultPath",
                          f"the items' results go to the context key {results!r} "
                          f"(ResultPath {result_path!r} is not one top-level key)")
        native["results"] = results
        native["done"] = self._join(state, scope, location, "items' results", catches)
        if state.get("Retry"):
            self.warn("asl-retry-composite", f"{location}.Retry",
                      "a Parallel or Map is not retried natively: its Retry is left out")

    def _item_reader(self, sid: str, state: Mapping[str, Any], scope: _Scope, location: str,
                     catches: list[dict[str, Any]], jsonata: bool) -> dict[str, Any]:
        """Gives the synthetic state drawing a Map's items in its ItemReader's place: a step of
        a made-up, repeatable tool (`asl.item_reader.<map>`) whose output lists the items, put
        in the context key the map goes over; its failure takes the Map's catchers."""
        spec = state["ItemReader"]
        where = f"{location}.ItemReader"
        resource = spec.get("Resource") if isinstance(spec, Mapping) else None
        tool = f"asl.item_reader.{sid}"
        self.tools[tool] = {
            "description": f"the items of map {sid} (in place of its ItemReader, {resource})",
            "repeatable": True, "idempotency_keys": True, **self.tools_file.get(tool, {})}
        self.synthetic.add(tool)
        self.tool_where[tool] = where
        params_key = "Arguments" if jsonata else "Parameters"
        params = spec.get(params_key) if isinstance(spec, Mapping) else None
        step_input: dict[str, Any] = {}
        if params is not None:
            translated = self._template(params, f"{where}.{params_key}", (), jsonata)
            step_input = translated if isinstance(translated, dict) else {"input": translated}
        failed = [self._catch_move(c, "step") for c in catches]
        failed.append({"target": self._final(scope, "failure", "an uncaught error")})
        self.warn("asl-item-reader", where,
                  f"the items the ItemReader reads ({resource}) are drawn by a synthetic state "
                  f"calling tool {tool!r} (1 to {_ITEMS_MAX} items, shaped by what the item "
                  "flow reads); its failure takes the Map's Catch")
        return {
            "description": f"{sid}'s ItemReader (synthetic): draws the map's items",
            "step": {"tool": tool, "input": step_input, "retry": _synthetic_retry()},
            "on": {"step.succeeded": {"target": sid, "actions": [
                       {"assign": {f"asl_items_{sid}": "event.payload.items"}}]},
                   "step.failed": failed},
        }

    def _execution_input(self, start: str) -> None:
        """Puts in front of the StartAt state a synthetic state drawing the execution input: a
        run started with a context takes it as its input; one started with none calls a
        made-up, repeatable tool (`asl.execution_input`) whose output, shaped by what the file
        reads of the input before writing it, becomes the data."""
        tool = "asl.execution_input"
        keys = _read_before_written(self.data, self.flat)
        schema = _shape(self.top_reads, keys, self.flat, items_min=1)
        fields = sorted(k for k in schema["properties"] if _ID.match(k))
        declared = "output" in self.tools_file.get(tool, {})
        if (not fields and not declared) or self.errors or start not in self.states:
            return
        self.tools[tool] = {
            "description": "the execution input (synthetic): what the file reads of it",
            "repeatable": True, "idempotency_keys": True, "output": schema,
            **self.tools_file.get(tool, {})}
        self.synthetic.add(tool)
        self.tool_where[tool] = "StartAt"
        move: dict[str, Any] = {"target": start}
        self._write(move, _Expr("event.payload"), "$", "StartAt")
        actions = move.setdefault("actions", [{"assign": {}}])
        for key in fields:
            actions[0]["assign"].setdefault(key, _render((key,), "event.payload"))
        choice, draw = self._unique("asl_execution_input"), self._unique(
            "asl_execution_input__draw")
        self.states[start].pop("initial", None)
        self.states = {
            choice: {"type": "choice", "initial": True,
                     "description": "the execution input (synthetic): the run's context when "
                                    "it is started with one, else drawn",
                     "always": [{"target": start, "guard": "len(context) > 0",
                                 "description": "started with an input"},
                                {"target": draw}]},
            draw: {"description": "draws an execution input (synthetic)",
                   "step": {"tool": tool, "input": {}, "retry": _synthetic_retry()},
                   "on": {"step.succeeded": move,
                          "step.failed": {"target": start,
                                          "description": "no input drawn: the empty input"}}},
            **self.states}
        shaped = "as the tools side file declares" if declared else (
            f"its output guessed from what the file reads of the input: {', '.join(fields)}")
        self.warn("asl-execution-input", "StartAt",
                  f"the execution input is drawn by a synthetic first state calling tool "
                  f"{tool!r}, {shaped}; a run started with a context takes it as its input")

    # -- data: reads, values and writes -------------------------------------------------------
    def _note(self, path: tuple[str | int, ...], operator: str, literal: Any) -> None:
        """Notes what a rule, a map or an input reads of the data, for the guessed schemas."""
        self.compared.append((path, operator, literal))
        self.sinks[-1].append((path, operator, literal))

    def _flat_prefix(self, segments: tuple[str | int, ...]) -> int | None:
        for size in range(len(segments), 1, -1):
            if segments[:size] in self.flat:
                return size
        return None

    def _render_read(self, segments: tuple[str | int, ...], root: str = "context") -> str:
        if root == "context":
            size = self._flat_prefix(segments)
            if size is not None:
                key = ".".join(str(s) for s in segments[:size])
                return _render(segments[size:], f"context[{key!r}]", nullable=True)
        return _render(segments, root)

    def _read(self, path: str, location: str, root: str = "context",
              base: tuple[str | int, ...] = ()) -> str:
        """Gives the expression reading an ASL path (`$.a.b`, `$$.Map.Item.Value`, `$var`)."""
        sliced = _SLICE.match(path.strip())
        if sliced is not None:  # `$.list[1:]`: the items from the second on
            inner = self._read(sliced.group(1), location, root, base)
            bounds = [str(int(b)) if b else "None" for b in sliced.group(2, 3)]
            return f"slice({inner}, {', '.join(bounds)})"
        parsed = _parse_path(path)
        if parsed is None:
            self.warn("asl-path", location,
                      f"path {path!r} (filters, wildcards, slices) is not expressible "
                      "natively: read as null")
            return "None"
        kind, segments = parsed
        if kind == "$" and segments and isinstance(segments[0], int) and not base:
            # the data is an array (a Parallel's outputs, a Map's results): natively the
            # branches' data is merged into the one context
            segments = segments[1:]
            rest = "".join(f".{s}" if isinstance(s, str) else f"[{s}]" for s in segments)
            self.warn("asl-parallel-result", location,
                      f"{path} reads an item of data that is an array in Step Functions (a "
                      "Parallel's or Map's outputs); natively the branches' data is merged: "
                      f"read as ${rest}")
        if kind == "$":
            if root == "context":
                self._note(base + tuple(segments), "Read", None)
            return self._render_read(base + tuple(segments), root)
        if kind == "$$":
            if tuple(segments[:3]) == ("Map", "Item", "Value"):
                return _render(tuple(segments[3:]), "context")
            if tuple(segments[:2]) == ("Task", "Token") and self.current is not None:
                # a token is new each time the task runs: the state's visits count them
                self.token_read = True
                return f"[{self.current!r}, {_render((f'asl_task_token_{self.current}',))}]"
            if tuple(segments[:3]) == ("Map", "Item", "Index"):
                self.warn("asl-context-object", location,
                          "the map item's index is not in an item's context: read as 0")
                return "0"
            self.warn("asl-context-object", location,
                      f"the context object ({path}) is not modelled: read as the text {path!r}")
            return repr(path)
        return _render((f"var_{self._safe(kind[1:])}", *segments))

    def _present(self, path: str, location: str) -> str:
        """Gives the test that the data holds what `path` reads (even a null): `has(...)`,
        or, where a flat key or another root stands in the way, that the read is not null."""
        parsed = _parse_path(path)
        if parsed is None or parsed[0] != "$":
            return f"{self._read(path, location)} is not None"
        segments = tuple(parsed[1])
        if segments and isinstance(segments[0], int):  # an array's item: the merged data
            segments = segments[1:]
        if not segments:
            return "True"
        if self._flat_prefix(segments) is not None:
            return f"{self._read(path, location)} is not None"
        return f"has(context, {', '.join(repr(s) for s in segments)})"

    def _dynamic(self, text: str, location: str, root: str,
                 base: tuple[str | int, ...]) -> str | None:
        """Gives the expression of a `.$` value: a path or an intrinsic function call."""
        stripped = text.strip()
        if stripped.startswith("States."):
            return self._intrinsic(stripped, location, root, base)
        if stripped.startswith("$"):
            return self._read(stripped, location, root, base)
        return None

    def _template(self, params: Any, location: str, base: tuple[str | int, ...],
                  jsonata: bool) -> Any:
        """Gives the native step input of Parameters (or JSONata Arguments)."""
        if jsonata:
            if isinstance(params, str):
                expr = self._jsonata(params, location, "context")
                if expr is None:
                    raise _jsonata_refused(params, location)
                return "=" + expr
            if isinstance(params, Mapping):
                return {str(k): self._template(v, f"{location}.{k}", base, True)
                        for k, v in params.items()}
            return _input_literal(params)
        if isinstance(params, Mapping):
            out: dict[str, Any] = {}
            for key, value in params.items():
                key = str(key)
                where = f"{location}.{key}"
                if key.endswith(".$"):
                    name = key[:-2]
                    expr = self._dynamic(value, where, "context", base) if isinstance(
                        value, str) else None
                    if expr is None:
                        self.warn("asl-intrinsic", where,
                                  f"{value!r} is not expressible natively: sent as its text")
                        out[name] = _input_literal(value)
                    else:
                        out[name] = "=" + expr
                else:
                    out[key] = self._template(value, where, base, False)
            return out
        if isinstance(params, list):
            if any(isinstance(v, Mapping) and any(str(k).endswith(".$") for k in v)
                   for v in params):
                self.warn("asl-parameters-list", location,
                          "paths inside a list are sent as their text (a native step input "
                          "evaluates no expression inside a list)")
            return params
        return _input_literal(params)

    def _const(self, value: Any, location: str) -> _Expr | _Record | None:
        if isinstance(value, Mapping):
            fields: dict[str, Any] = {}
            for key, inner in value.items():
                converted = self._const(inner, f"{location}.{key}")
                if converted is not None:
                    fields[str(key)] = converted
            return _Record(fields)
        literal = _literal(value)
        if literal is None:
            self.warn("asl-result-value", location,
                      "a mapping inside a list cannot be written natively: written as null")
            return _Expr("None")
        return _Expr(literal)

    def _value(self, spec: Any, location: str, root: str, *, jsonata: bool = False,
               base: tuple[str | int, ...] = ()) -> _Expr | _Record | None:
        """Gives what Parameters, ResultSelector or Output make of the data."""
        if jsonata:
            if isinstance(spec, Mapping):
                fields = {str(k): self._value(v, f"{location}.{k}", root, jsonata=True)
                          for k, v in spec.items()}
                return _Record({k: v for k, v in fields.items() if v is not None})
            if isinstance(spec, str) and spec.strip().startswith("{%"):
                expr = self._jsonata(spec, location, root)
                if expr is None:
                    raise _jsonata_refused(spec, location)
                return _Expr(expr)
            return self._const(spec, location)
        if isinstance(spec, Mapping):
            record: dict[str, Any] = {}
            for key, value in spec.items():
                key = str(key)
                where = f"{location}.{key}"
                if key.endswith(".$"):
                    expr = self._dynamic(value, where, root, base) if isinstance(
                        value, str) else None
                    if expr is None:
                        self.warn("asl-intrinsic", where,
                                  f"{value!r} is not expressible natively: written as its text")
                        expr = _literal(value) or "None"
                    record[key[:-2]] = _Expr(expr)
                else:
                    inner = self._value(value, where, root, base=base)
                    if inner is not None:
                        record[key] = inner
            return _Record(record)
        return self._const(spec, location)

    def _write(self, move: dict[str, Any], value: _Expr | _Record | None, result_path: Any,
               location: str) -> None:
        """Adds to a move the assignments that put `value` at `result_path`."""
        if value is None or result_path is None:
            return
        if not isinstance(result_path, str):
            raise _Refused(location, "ResultPath is a path or null")
        parsed = _parse_path(result_path)
        if parsed is None or parsed[0] != "$" or any(isinstance(s, int) for s in parsed[1]):
            self.warn("asl-result-path", location,
                      f"ResultPath {result_path!r} is not a plain path: the result is dropped")
            return
        segments = tuple(str(s) for s in parsed[1])
        assigns: dict[str, str] = {}
        if not segments:
            # the result replaces the data: every top-level key read is set from it
            if isinstance(value, _Record):
                self._flatten(assigns, (), value, location)
                for key in self.roots_read:
                    if key not in value.fields:
                        assigns.setdefault(key, "None")
            else:
                for key in self.roots_read:
                    assigns[key] = _render((key,), value.text,
                                           nullable=value.text != "event.payload")
            for flat in sorted(self.flat):
                assigns.setdefault(".".join(flat), "None") if not isinstance(
                    value, _Expr) else assigns.setdefault(
                    ".".join(flat), _render(flat, value.text,
                                            nullable=value.text != "event.payload"))
        else:
            self._flatten(assigns, segments, value, location)
        assigns = {k: v for k, v in assigns.items() if _ID.match(k)}
        if assigns:
            move.setdefault("actions", []).append({"assign": assigns})

    def _flatten(self, assigns: dict[str, str], segments: tuple[str, ...],
                 value: _Expr | _Record, location: str) -> None:
        if isinstance(value, _Expr):
            if not segments:
                return
            if len(segments) > 1:
                self.written_flat.add(segments)
                key = ".".join(segments)
                if key not in assigns and (segments in self.flat):
                    self.warn("asl-result-flat", location,
                              f"the value at {'$.' + key} is kept under the flat context key "
                              f"{key!r}")
            key = ".".join(segments)
            if not _ID.match(key):
                self.warn("asl-result-path", location,
                          f"the key {key!r} is not a native context key: dropped")
                return
            assigns[key] = value.text
            # the flat keys kept below it (`job.status` under `job`) are replaced with it, as
            # ASL replaces the whole of `$.job`: else a read of `$.job.status` saw the old value
            for flat in sorted(self.flat):
                if len(flat) > len(segments) and flat[:len(segments)] == segments:
                    inner = ".".join(flat)
                    if _ID.match(inner):
                        assigns.setdefault(inner, _render(
                            flat[len(segments):], value.text,
                            nullable=value.text != "event.payload"))
            return
        if not segments and not value.fields:
            return
        if segments and not value.fields:
            assigns[".".join(segments)] = "[]"
            self.warn("asl-result-value", location,
                      "an empty mapping is written as an empty list natively")
            return
        for key, inner in value.fields.items():
            self._flatten(assigns, (*segments, key), inner, location)

    # -- intrinsic functions and JSONata ----------------------------------------------------
    def _intrinsic(self, text: str, location: str, root: str,
                   base: tuple[str | int, ...]) -> str | None:
        try:
            call, rest = _parse_intrinsic(text, 0)
        except ValueError:
            call, rest = None, 0
        if call is None or text[rest:].strip():
            raise _Refused(location, f"{text!r} is not an intrinsic function call Step "
                                     "Functions would take", "asl-intrinsic")
        return self._lower_call(call, location, root, base)

    def _lower_call(self, node: Any, location: str, root: str,
                    base: tuple[str | int, ...]) -> str | None:
        if isinstance(node, tuple) and node[0] == "path":
            return self._read(node[1], location, root, base)
        if isinstance(node, tuple) and node[0] == "lit":
            return _literal(node[1])
        name, args = node
        lowered = [self._lower_call(a, location, root, base) for a in args]
        if any(a is None for a in lowered):
            return None
        a = [str(x) for x in lowered]
        if name == "States.Array":
            return f"[{', '.join(a)}]"
        if name == "States.ArrayLength" and len(a) == 1:
            return f"len({_or(a[0], '[]')})"
        if name == "States.ArrayGetItem" and len(a) == 2:
            return f"{_or(a[0], '[]')}[{a[1]}]"
        if name == "States.ArrayContains" and len(a) == 2:
            return f"{a[1]} in {_or(a[0], '[]')}"
        if name == "States.MathAdd" and len(a) == 2:
            return f"{_or(a[0], '0')} + {_or(a[1], '0')}"
        if name == "States.JsonToString" and len(a) == 1:
            return f"json_text({a[0]})"
        # null-safe, as the importer's reads are (Step Functions would fail the run on data
        # that is missing or of another type; a run on drawn data must not)
        if name == "States.StringToJson" and len(a) == 1:
            return f"json_value({a[0]}, None)"
        if name == "States.JsonMerge" and len(a) == 3:
            if a[2] != "False":
                raise _Refused(location, "States.JsonMerge's third argument must be false "
                                         "(a shallow merge: Step Functions refuses true)",
                               "asl-intrinsic")
            return f"(merge({a[0]}, {a[1]}) if is_object({a[0]}) and is_object({a[1]}) else None)"
        if name == "States.StringSplit" and len(a) == 2:
            return f"(split({a[0]}, {a[1]}) if is_string({a[0]}) else None)"
        if name == "States.ArrayRange" and len(a) == 3:
            whole = " and ".join(f"is_number({x}) and {x} == round({x})" for x in a
                                 if not x.lstrip("-").isdigit())
            made = f"number_range({a[0]}, {a[1]}, {a[2]})"
            return f"({made} if {whole} else None)" if whole else made
        if name == "States.Format" and a:
            return f"format({', '.join(a)})"
        if name == "States.UUID" and not a and self.current is not None:
            # unique to the state's visit, as a token: drawn the same way in every run
            self.token_read = True
            self.warn("asl-intrinsic", location,
                      "States.UUID is a text unique to the state's visit (the state's name "
                      "and visit), the same in every run: not random")
            return (f"format('{{}}-{{}}', {self.current!r}, "
                    f"{_or(_render((f'asl_task_token_{self.current}',)), '0')})")
        raise _Refused(location, f"{name} with {len(a)} argument(s) is not translated (the "
                                 "intrinsics translated: States.Format, StringToJson, "
                                 "JsonToString, Array, ArrayLength, ArrayGetItem, ArrayContains, "
                                 "ArrayRange, JsonMerge, StringSplit, MathAdd, UUID)",
                       "asl-intrinsic")

    def _jsonata(self, text: Any, location: str, root: str) -> str | None:
        """Gives the native expression of a small, safe subset of JSONata, or None."""
        if not isinstance(text, str):
            return _literal(text) if text is not None else None
        stripped = text.strip()
        if not (stripped.startswith("{%") and stripped.endswith("%}")):
            return repr(text)
        body = stripped[2:-2].strip()
        out: list[str] = []
        for token in _jsonata_tokens(body):
            if token is None:
                return None
            if token.startswith("$states.input"):
                segments = token[len("$states.input"):].split(".")[1:]
                out.append(self._render_read(tuple(segments)))
            elif token.startswith("$states.result"):
                segments = token[len("$states.result"):].split(".")[1:]
                out.append(_render(tuple(segments), "event.payload"))
            elif token.startswith("$states"):
                return None
            elif token.startswith("$"):
                name, _, rest = token[1:].partition(".")
                out.append(_render((f"var_{self._safe(name)}",
                                    *(rest.split(".") if rest else ()))))
            else:
                out.append(token)
        expr = " ".join(out)
        try:
            compile_expression(expr)
        except ExpressionSyntaxError:
            return None
        return expr


# -- helpers -----------------------------------------------------------------------------------


def _infer_schemas(writes: list[tuple[str, tuple[str, ...], tuple[str | int, ...],
                                     dict[str, tuple[str | int, ...]] | None]],
                   compared: list[tuple[tuple[str | int, ...], str, Any]],
                   items_min: int = 0) -> dict[str, dict[str, Any]]:
    """Gives, per tool (`tool:name`) or callback event (`event:name`), an output schema
    holding the fields the Choice rules compare and the lists the Map states read, at the
    place the result lands: a guess, so that the simulator's outputs take the branches."""
    schemas: dict[str, dict[str, Any]] = {}
    # lists first, then the deepest paths (a field read deeper must be an object, not a
    # guessed text), on one path comparisons before tests of presence and type, and reads
    # last: the first guess placed wins
    ordered = sorted(compared, key=lambda c: (
        0 if c[1] == "Items" else 1, -len(c[0]),
        2 if c[1] == "Read" else 1 if c[1].startswith("Is") else 0))
    # the values several rules compare one path to are all guessed (a status tested for
    # TRAINED, then HOSTED): the first rule's leaf takes the others' values
    leaves: dict[tuple[str | int, ...], dict[str, Any]] = {}
    for path, operator, literal in ordered:
        leaf = _leaf_schema(operator, literal, items_min)
        first = leaves.setdefault(path, leaf)
        if first is not leaf and "anyOf" in first and "anyOf" in leaf:
            values = first["anyOf"][0]["enum"]
            values.extend(v for v in leaf["anyOf"][0]["enum"] if v not in values)
    for target, landing, prefix, selector in writes:
        for path in leaves:
            if landing and tuple(path[:len(landing)]) != landing:
                continue
            rest = tuple(path[len(landing):])
            if not rest or isinstance(rest[0], int):
                # the whole result compared (a text, a number) or read as a list: a native
                # output is a mapping, so the result is its field SCALAR_FIELD (see
                # `scalar_results`)
                if landing and selector is None and not prefix:
                    root = schemas.setdefault(target, {"type": "object", "properties": {}})
                    _place(root, (SCALAR_FIELD, *rest), copy.deepcopy(leaves[path]))
                continue
            if selector is not None:
                if not rest or rest[0] not in selector:
                    continue
                inner = selector[str(rest[0])] + rest[1:]
            else:
                inner = prefix + rest
            if not inner:
                continue
            root = schemas.setdefault(target, {"type": "object", "properties": {}})
            _place(root, inner, copy.deepcopy(leaves[path]))
    return schemas


def scalar_results(schemas: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """Gives the tools (`tool:name`) and callback events whose whole result a Choice compares
    as a text or number, or reads as a list, where it lands (`ResultPath: $.kind`, then
    `Variable: $.kind`; `ResultPath: $.list`, then `Variable: $.list[0]`)."""
    return frozenset(target for target, schema in schemas.items()
                     if set(schema.get("properties", {})) == {SCALAR_FIELD})


def _succeeds(flow: Mapping[str, Any]) -> bool:
    """Tells whether some path from a flow's StartAt reaches a Succeed state or an `End`
    (through Next, Default, the Choices' and the Catchers' Next); a malformed flow is said to
    (the conversion reports what is wrong with it)."""
    states = flow.get("States")
    if not isinstance(states, Mapping):
        return True
    todo, seen = [flow.get("StartAt")], set()
    while todo:
        name = todo.pop()
        if not isinstance(name, str) or name in seen:
            continue
        seen.add(name)
        state = states.get(name)
        if not isinstance(state, Mapping):
            return True
        if state.get("Type") == "Succeed" or (state.get("End") is True
                                               and state.get("Type") != "Fail"):
            return True
        todo.append(state.get("Next"))
        todo.append(state.get("Default"))
        for key in ("Choices", "Catch"):
            if isinstance(state.get(key), list):
                todo += [rule.get("Next") for rule in state[key] if isinstance(rule, Mapping)]
    return False


def _compared_paths(rule: Any) -> Iterator[str]:
    """Gives the paths a choice rule compares (its `Variable`s and `...Path` operands), but
    those tested for presence or null, which a missing value answers."""
    if not isinstance(rule, Mapping):
        return
    for key in ("And", "Or"):
        if isinstance(rule.get(key), list):
            # a path the group tests for presence or null is the group's to answer missing
            tested = {part.get("Variable") for part in rule[key] if isinstance(part, Mapping)
                      and ("IsPresent" in part or "IsNull" in part)}
            for part in rule[key]:
                yield from (path for path in _compared_paths(part) if path not in tested)
    if "Not" in rule:
        yield from _compared_paths(rule["Not"])
    if any(key in rule for key in ("IsPresent", "IsNull")):
        return
    for key, value in rule.items():
        if isinstance(value, str) and (key == "Variable" or key.endswith("Path")):
            yield value


def _leaf_schema(operator: str, literal: Any, items_min: int = 0) -> dict[str, Any]:
    if operator == "Items":  # `literal`: the items' schema (see _shape)
        items = copy.deepcopy(literal) if isinstance(literal, Mapping) else _identified({
            "type": "object", "properties": {}})
        listed: dict[str, Any] = {"type": "array", "maxItems": _ITEMS_MAX, "items": items}
        if items_min:
            listed["minItems"] = items_min
        return listed
    if operator in ("Read", "IsPresent", "IsNull"):
        return {}
    if operator.startswith("String") and "Matches" not in operator and isinstance(literal, str
                                                                                  ) and not \
            operator.endswith("Path"):
        return {"anyOf": [{"enum": [literal, literal + "_other"]}, {"type": "string"}]}
    if operator == "StringMatches" and isinstance(literal, str):
        # a text the pattern matches (each `*` as `x`), and one it does not
        example = re.sub(r"\\(.)|\*", lambda m: m.group(1) or "x", literal)
        return {"anyOf": [{"enum": [example, "_" + example + "_other"]}, {"type": "string"}]}
    if operator.startswith("Numeric") and not operator.endswith("Path") and isinstance(
            literal, int | float) and not isinstance(literal, bool):
        return {"anyOf": [{"enum": sorted({literal - 1, literal, literal + 1})},
                          {"type": "number"}]}
    if operator.startswith(("Boolean", "IsBoolean")):
        return {"type": "boolean"}
    if operator.startswith(("Numeric", "IsNumeric")):
        return {"type": "number"}
    return {"type": "string"}


def _place(node: dict[str, Any], path: tuple[str | int, ...], leaf: dict[str, Any]) -> None:
    """Puts `leaf` at `path` in an object schema, making the objects and arrays on the way;
    what is already there is kept (the first guess wins). Nothing is required and no value
    is refused that ASL would take: the guess shapes what the simulator draws, and a real
    output it did not foresee still passes."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        if node.get("type") != "array":
            return
        node["minItems"] = max(node.get("minItems", 0), head + 1)
        child = node.setdefault("items", {} if rest else leaf)
    else:
        if node.get("type") != "object":
            return
        properties = node.setdefault("properties", {})
        if head not in properties:
            properties[head] = leaf if not rest else (
                {"type": "array"} if isinstance(rest[0], int) else
                {"type": "object", "properties": {}})
        child = properties[head]
    if rest:
        if not child:
            child.update({"type": "array"} if isinstance(rest[0], int) else
                         {"type": "object", "properties": {}})
        _place(child, rest, leaf)


def _identified(shape: dict[str, Any]) -> dict[str, Any]:
    """Gives an item's object schema with an `id` (unless the flow reads one of its own):
    records of their own, an id tells one item from the next."""
    properties = shape.setdefault("properties", {})
    if "id" not in properties:
        properties["id"] = {"type": "integer", "minimum": 1, "maximum": 10**9}
        shape["required"] = [*shape.get("required", ()), "id"]
    return shape


def _shape(reads: list[tuple[tuple[str | int, ...], str, Any]], keys: set[str],
           flat: frozenset[tuple[str, ...]], *, items_min: int = 0, identified: bool = False
           ) -> dict[str, Any]:
    """Gives the object schema of data (the execution input, a map's item) of which a flow
    reads the context `keys` before writing them: the reads under those keys placed as for
    a tool's output (lenient: nothing required, any value of the type taken)."""
    entries = [r for r in reads if r[0] and isinstance(r[0][0], str)
               and _data_key(r[0], flat) in keys]
    shape = _infer_schemas([("data", (), (), None)], entries, items_min).get(
        "data", {"type": "object", "properties": {}})
    for key in sorted(k for k in keys if "." not in k):
        shape["properties"].setdefault(key, {})
    return _identified(shape) if identified else shape


def _synthetic_retry() -> dict[str, Any]:
    """The retry policy of a synthetic step (an input or items drawn): its tool honours
    idempotency keys, so every retryable failure is retried."""
    return {"attempts_max": 3, "delay_initial": "1s", "delay_max": "4s",
            "retry_on": [*_RETRYABLE, "invalid_output"]}


def _reads_items(state: Any) -> bool:
    """A Map whose items an ItemReader reads (from S3: a CSV or JSON file, a bucket's
    objects), not the data: a synthetic state draws them."""
    return isinstance(state, Mapping) and state.get("Type") == "Map" and isinstance(
        state.get("ItemReader"), Mapping) and "ItemsPath" not in state and "Items" not in state


_DATA_READ = re.compile(r"(?<![$\w])\$((?:\.[A-Za-z_][A-Za-z0-9_\-]*)+)")
#: the fields of a state that read its result or an item, not its input
_NOT_INPUT = frozenset(("ResultPath", "ResultSelector", "OutputPath", "ItemProcessor",
                        "Iterator", "Branches", "Catch", "Next", "Default", "Comment"))


def _data_key(path: tuple[str | int, ...], flat: frozenset[tuple[str, ...]]) -> str:
    """Gives the native context key a read of `path` reads under: its flat key (`a.b`, where
    a result was written below the top level), else its first segment."""
    for size in range(len(path), 1, -1):
        if path[:size] in flat:
            return ".".join(str(s) for s in path[:size])
    return str(path[0])


def _maps_over_data(value: Any) -> bool:
    """Tells whether a Map of the document goes over its whole input (ItemsPath `$`), which
    is natively `context.items`: a result replacing the data then sets `items`."""
    if isinstance(value, Mapping):
        if value.get("Type") == "Map" and value.get("ItemsPath", "$") == "$" and not (
                _reads_items(value) or "Items" in value):
            return True
        return any(_maps_over_data(v) for v in value.values())
    if isinstance(value, list):
        return any(_maps_over_data(v) for v in value)
    return False


def _read_before_written(flow: Mapping[str, Any], flat: frozenset[tuple[str, ...]]
                         ) -> set[str]:
    """Gives the context keys (see `_data_key`) of a flow's input (`StartAt` + `States`)
    that some state may read (`$.key`) before a state on the way there wrote them: the keys
    the input itself must give. A result replacing the data (ResultPath `$`) writes every
    key; a Parallel's branches read as flows of their own; a Map's item flow reads its
    items, not the data."""
    states, start = flow.get("States"), flow.get("StartAt")
    if not isinstance(states, Mapping) or not isinstance(start, str) or start not in states:
        return set()
    reads: dict[str, set[str]] = {}
    edges: dict[str, list[tuple[str, set[str] | None]]] = {}
    for name, state in states.items():
        if not isinstance(state, Mapping):
            continue
        found = {_data_key(tuple(path[1:].split(".")), flat)
                 for field_name, value in state.items() if field_name not in _NOT_INPUT
                 for text in _strings(value) for path in _DATA_READ.findall(text)}
        if state.get("Type") == "Parallel" and isinstance(state.get("Branches"), list):
            for branch in state["Branches"]:
                if isinstance(branch, Mapping):
                    found |= _read_before_written(branch, flat)
        if state.get("Type") == "Map" and state.get("ItemsPath", "$") == "$" and not (
                _reads_items(state) or "Items" in state):
            found.add("items")  # natively the items of ItemsPath $ are context.items
        reads[str(name)] = found
        written = _writes(state)
        targets = [state.get("Next"), state.get("Default"), *(
            r.get("Next") for r in state.get("Choices") or () if isinstance(r, Mapping))]
        edges[str(name)] = [(t, written) for t in targets if isinstance(t, str)]
        for catcher in state.get("Catch") or ():
            if isinstance(catcher, Mapping) and isinstance(catcher.get("Next"), str):
                edges[str(name)].append((catcher["Next"], _path_writes(
                    catcher.get("ResultPath", "$"))))
    everything = set().union(*reads.values()) if reads else set()
    unwritten: dict[str, set[str]] = {start: set(everything)}
    work = [start]
    while work:
        name = work.pop()
        for target, written in edges.get(name, ()):
            passed = set() if written is None else {
                key for key in unwritten[name]
                if not any(key == w or key.startswith(w + ".") for w in written)}
            if target not in unwritten or not passed <= unwritten[target]:
                unwritten[target] = unwritten.get(target, set()) | passed
                work.append(target)
    return {key for name, left in unwritten.items() for key in reads.get(name, set()) & left}


def _path_writes(result_path: Any) -> set[str] | None:
    """Gives the context keys a result written at `result_path` sets, with the flat keys
    below them (`a.b` sets `a.b.c`); None: all of them (the result replaces the data)."""
    if result_path is None or not isinstance(result_path, str):
        return set()
    parsed = _parse_path(result_path)
    if parsed is None or parsed[0] != "$":
        return set()
    if not parsed[1]:
        return None
    # a result below the top level goes to a flat key (`a.b`): the key `a` stays as it was
    return {".".join(str(s) for s in parsed[1])}


def _writes(state: Mapping[str, Any]) -> set[str] | None:
    """Gives the top-level keys a state's success sets natively (None: all of them)."""
    kind = state.get("Type")
    jsonata = state.get("QueryLanguage") == "JSONata"
    if kind == "Task":
        return None if jsonata else _path_writes(state.get("ResultPath", "$"))
    if kind == "Pass":
        if jsonata:
            return None if "Output" in state else set()
        if "Result" in state or "Parameters" in state:
            return _path_writes(state.get("ResultPath", "$"))
        return set()
    if kind == "Map":  # natively the items' results go to one key; the data stays
        written = _path_writes(state.get("ResultPath", "$"))
        return written if written and not any("." in key for key in written) else set()
    return set()  # a Parallel's branches may write nothing: the keys stay unwritten


#: The deepest path read (each segment is a level of the data and of its guessed schema).
_PATH_SEGMENTS_MAX = 50
#: The longest span ASL gives in seconds (a year and a day, as MaxDelaySeconds allows).
_SECONDS_MAX = 31_622_400


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _seconds(value: float) -> str:
    """Gives the native duration of ASL seconds, written with its unit."""
    if value == int(value):
        return f"{int(value)}s"
    return f"{round(value * 1000)}ms"


def _strings(value: Any) -> Iterator[str]:
    """Gives every text in a document, its keys included (each container once)."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping | list) and id(item) not in seen:
            seen.add(id(item))
            if isinstance(item, Mapping):
                stack.extend(str(k) for k in item)
                stack.extend(item.values())
            else:
                stack.extend(item)


def _or(expr: str, fallback: str) -> str:
    """Gives `expr`, or `fallback` when it is null (a native `or` gives a boolean)."""
    return f"({expr} if {expr} is not None else {fallback})"


def _render(segments: tuple[str | int, ...] | list[str | int], root: str = "context",
            *, nullable: bool = False) -> str:
    """Gives the expression reading `segments` below `root`: null when a step on the way is
    missing or is not a mapping or list (ASL would fail the run there; a run started with
    unknown input must not). `nullable`: `root` itself may be null, or not a mapping (a Pass
    whose `Result` is text replaces the data with that text)."""
    first = 0 if nullable else 1
    if len(segments) <= first:
        return _render_plain(segments, root)
    head = _render_plain(segments[:first], root)
    return f"at({head}, {', '.join(repr(s) for s in segments[first:])})"


def _render_plain(segments: tuple[str | int, ...] | list[str | int], root: str) -> str:
    out = root
    for seg in segments:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _PLAIN.match(seg) and not keyword.iskeyword(seg):
            out += f".{seg}"
        else:
            out += f"[{seg!r}]"
    return out


_SEGMENT = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


_SLICE = re.compile(r"^(\$.*)\[(-?\d*):(-?\d*)\]$")


def _parse_path(path: str) -> tuple[str, list[str | int]] | None:
    """Parses a plain JSONPath: `$`, `$$` or `$name`, then `.key`, `['key']` or `[0]`
    segments; gives None for filters, wildcards and slices."""
    match = re.match(r"^(\$\$|\$[A-Za-z_][A-Za-z0-9_]*|\$)", path.strip())
    if match is None:
        return None
    head, rest = match.group(1), path.strip()[match.end():].replace(".[", "[")
    segments: list[str | int] = []
    position = 0
    while position < len(rest):
        if len(segments) >= _PATH_SEGMENTS_MAX:  # read as not expressible, as a filter is
            return None
        seg = _SEGMENT.match(rest, position)
        if seg is None:
            return None
        name, index, quoted, dquoted = seg.groups()
        if index is not None:
            segments.append(int(index))
        else:
            text = name if name is not None else (quoted if quoted is not None else dquoted)
            if text is None or "*" in text or "?" in text:
                return None
            segments.append(text)
        position = seg.end()
    return head, segments


def _parse_intrinsic(text: str, pos: int) -> tuple[Any, int]:
    """Parses `States.Name(arg, ...)`; an argument is a literal, a path or a call."""
    match = re.compile(r"\s*(States\.[A-Za-z]+)\s*\(").match(text, pos)
    if match is None:
        raise ValueError(text)
    name, pos = match.group(1), match.end()
    args: list[Any] = []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text) and text[pos] == ")":
            return (name, args), pos + 1
        if text.startswith("States.", pos):
            arg, pos = _parse_intrinsic(text, pos)
        elif pos < len(text) and text[pos] == "'":
            end, buf = pos + 1, ""
            while end < len(text) and text[end] != "'":
                if text[end] == "\\" and end + 1 < len(text):
                    end += 1
                buf += text[end]
                end += 1
            if end >= len(text):
                raise ValueError(text)
            arg, pos = ("lit", buf), end + 1
        else:
            token = re.compile(r"[^,()\s]+").match(text, pos)
            if token is None:
                raise ValueError(text)
            raw, pos = token.group(0), token.end()
            if raw.startswith("$"):
                arg = ("path", raw)
            else:
                try:
                    arg = ("lit", json.loads(raw))
                except json.JSONDecodeError as exc:
                    raise ValueError(raw) from exc
        args.append(arg)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == ")":
            continue
        else:
            raise ValueError(text)


_JSONATA_TOKEN = re.compile(
    r"\s*(?:(?P<path>\$[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"|(?P<num>\d+(?:\.\d+)?)|(?P<str>'[^'\\]*'|\"[^\"\\]*\")"
    r"|(?P<op>!=|<=|>=|=|<|>|\(|\)|\[|\]|,|\+|-|\*|/)"
    r"|(?P<word>and|or|true|false|null|in)\b)")


def _jsonata_refused(text: Any, location: str) -> _Refused:
    """The refusal of a JSONata expression outside the subset translated (a function call such
    as `$count(...)`, a filter, `$states.context`): nothing of it is evaluated."""
    shown = text if len(str(text)) <= 80 else f"{str(text)[:77]}..."
    return _Refused(location, f"JSONata {shown!r} is outside what is translated safely (paths "
                              "of $states.input, $states.result and variables, comparisons, "
                              "and/or, literals)")


def _jsonata_tokens(body: str) -> Iterator[str | None]:
    """Gives native tokens of a JSONata expression, None at the first one outside the subset
    (function calls such as `$count(...)` included)."""
    position = 0
    words = {"and": "and", "or": "or", "true": "True", "false": "False", "null": "None",
             "in": "in"}
    while position < len(body.rstrip()):
        match = _JSONATA_TOKEN.match(body, position)
        if match is None:
            yield None
            return
        position = match.end()
        if match.group("path"):
            if body[position:position + 1] == "(":
                yield None
                return
            yield match.group("path")
        elif match.group("num"):
            yield match.group("num")
        elif match.group("str"):
            yield repr(match.group("str")[1:-1])
        elif match.group("op"):
            op = match.group("op")
            yield "==" if op == "=" else op
        else:
            yield words[match.group("word")]
