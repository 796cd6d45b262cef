"""The W3C SCXML conformance tests, imported and run on the reference machine.

`conformance(folder)` imports each `*.scxml` test of the folder (the mandatory tests, as
python-statemachine keeps them: a test passes when the chart reaches its final state `pass`;
the helper charts some tests invoke, `test*sub*.scxml`, are not tests and are left out),
and runs each one imported with `decide`, playing SCXML's event loop around it: the events the
chart raises and sends to itself (the importer's outbox, `scxml.OUTBOX`) are taken out after
every decision and delivered, internal ones first, then external ones in the order they fall
due (a delayed send falls due on the virtual clock, which jumps to it), each with SCXML's event
fields in its payload (`scxml.EVENT_FIELDS`, `scxml.EVENT_DATA`). The start event sets the
system variables (`scxml.SYSTEM_KEYS`: the session id is the execution id). An event no
transition takes is dropped, as SCXML drops it. `markdown()` sums the results up.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_machine._decide import decide, new_execution, start_event
from reference_machine._definition import WorkflowDefinition, compile_definition
from reference_machine._records import Accepted, Event, Execution, Rejected, Status
from reference_machine.documents import validate
from reference_machine.errors import DefinitionError
from reference_machine.importers import scxml

__all__ = ["EVENTS_MAX", "OutboxReader", "Outgoing", "RunEnd", "W3CResult", "conformance",
           "is_helper", "markdown", "outgoing", "run_definition"]

#: Outbox entries about other sessions: an invoke started or cancelled, a send to the parent
#: or to a child.
_SESSIONS = frozenset({"invoke", "uninvoke", "parent", "child"})
_HELPER = re.compile(r"test\d+[a-z]?sub\d*")
_PROCESSOR = "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"
#: Events one run may take before it is stopped as one that does not finish.
EVENTS_MAX = 500


@dataclass(frozen=True, slots=True)
class W3CResult:
    """One test: whether it was imported, where its run ended, and the reason class."""

    test: str
    imported: bool
    passed: bool
    #: `passed`, or why not: `refused: <what>`, `reached fail`, `did not finish: ...`
    reason: str
    #: the final (or last) state the run reached; empty when not run
    state: str = ""
    warnings: int = 0


@dataclass(frozen=True, slots=True)
class RunEnd:
    """Where a run stopped: its state, whether that is final, and why it stopped."""

    state: str
    final: bool
    why: str


def conformance(folder: str | Path) -> list[W3CResult]:
    """Gives one result per `*.scxml` file of `folder`, in name order."""
    return [_one(path) for path in sorted(Path(folder).glob("*.scxml"))
            if not is_helper(path)]


def is_helper(path: str | Path) -> bool:
    """Tells whether a file is one of the W3C suite's helper charts (`test226sub1.scxml`: a
    chart another test invokes), which is not a test and is not counted."""
    return _HELPER.fullmatch(Path(path).stem) is not None


def _one(path: Path) -> W3CResult:
    test = path.stem
    try:
        imported = scxml.convert(path.read_text(encoding="utf-8"), {}, str(path),
                                 directory=path.parent)
    except DefinitionError as exc:
        return W3CResult(test, False, False, f"refused: {_reason(exc)}")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        return W3CResult(test, False, False, f"refused: cannot read it: {why}")
    try:
        spec = validate(imported.data, {}, imported.source)
        definition = compile_definition(spec, source=imported.source)
    except DefinitionError as exc:
        return W3CResult(test, False, False, f"refused: {_reason(exc)}")
    end = run_definition(definition)
    warnings = len(imported.findings)
    if end.final and end.state == "pass":
        return W3CResult(test, True, True, "passed", end.state, warnings)
    if end.final and end.state == "fail":
        return W3CResult(test, True, False, "reached fail", end.state, warnings)
    if end.final:
        return W3CResult(test, True, False, f"reached final {end.state}", end.state, warnings)
    return W3CResult(test, True, False, f"did not finish: {end.why}", end.state, warnings)


def _reason(exc: DefinitionError) -> str:
    """Gives the reason class of a refusal: the first error's code, with what it names."""
    finding = exc.findings[0] if exc.findings else None
    if finding is None:
        return "unknown"
    code = finding.code.removeprefix("scxml-")
    if code in ("element", "datamodel", "send-target", "send-type", "expression") and \
            finding.ids:
        return f"{code} {finding.ids[0]}" if code != "expression" else _expression_class(
            finding.message)
    return code


def _expression_class(message: str) -> str:
    """Gives what an expression refusal is about (`_event.origin`, `hasattr()`, ...)."""
    detail = message.split(": ", 1)[-1]
    return f"expression: {detail[:60]}"


def run_definition(definition: WorkflowDefinition, *, events_max: int = EVENTS_MAX) -> RunEnd:
    """Runs an imported chart from its start, delivering what it raises and sends to itself,
    and running the charts it invokes as sessions of their own (`scxml.CHILDREN`), until it
    is final, nothing is left to deliver, or `events_max` events were delivered."""
    return _Driver(events_max).run(definition)


@dataclass(eq=False)
class _Session:
    """One running chart: the top one, or one a chart invoked."""

    definition: WorkflowDefinition
    execution: Execution
    origin: str  # its address, `#_scxml_<session id>`
    parent: _Session | None = None
    invokeid: str = ""
    autoforward: bool = False
    alive: bool = True
    internal: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    #: invokes to start once its macrostep ends: (invoke id, params, autoforward, the key
    #: of its chart under `scxml.CHILDREN`)
    starting: list[tuple[str, dict[str, Any], bool, str]] = field(default_factory=list)
    children: dict[str, _Session] = field(default_factory=dict)


class _Driver:
    """SCXML's event loop around `decide`, for a chart and the sessions it invokes: each
    session's internal events first, then the invokes of the macrostep that ended, then the
    external event due first (of any session), on one virtual clock."""

    def __init__(self, events_max: int) -> None:
        self.events_max = events_max
        self.sessions: list[_Session] = []
        #: (due, order, session, event, payload, send id, the session that sent it when
        #: it was delayed: a delayed send ends with the session that sent it)
        self.external: list[tuple[int, int, _Session, str, dict[str, Any], str,
                                  _Session | None]] = []
        self.now = 0
        self.order = 0
        self.delivered = 0
        self.compiled: dict[tuple[int, str], WorkflowDefinition] = {}

    def run(self, definition: WorkflowDefinition) -> RunEnd:
        root = self._start(definition, None, "", {}, autoforward=False)
        if isinstance(root, str):
            return RunEnd("", False, root)
        while root.execution.status != Status.FINAL:
            if self.delivered >= self.events_max:
                return RunEnd(root.execution.state, False, f"over {self.events_max} events")
            if not self._step():
                return RunEnd(root.execution.state, False, f"no event left to deliver in "
                                                           f"state {root.execution.state}")
        return RunEnd(root.execution.state, True, "final")

    def _step(self) -> bool:
        """Does the next thing there is to do; tells whether there was one."""
        live = [s for s in self.sessions if s.alive]
        session = next((s for s in live if s.internal), None)
        if session is not None:
            name, payload = session.internal.popleft()
            self._deliver(session, name, payload)
            return True
        session = next((s for s in live if s.starting), None)
        if session is not None:
            starting, session.starting = session.starting, []
            for ident, params, autoforward, chart in starting:
                self._invoke(session, ident, params, autoforward, chart)
            return True
        while self.external:
            due, _, session, name, payload, _, sender = heapq.heappop(self.external)
            if not session.alive or (sender is not None and not sender.alive):
                continue  # a session that ended drops what was sent to it, and its delayed sends
            self.now = max(self.now, due)
            for child in session.children.values():
                if child.autoforward and child.alive:
                    self._push(child, name, payload, 0, "")
            invokeid = payload.get(scxml.EVENT_FIELDS, {}).get("invokeid")
            if invokeid and f"{scxml.FINALIZE}{invokeid}" in session.definition.events:
                # the invoke's <finalize> runs first, on the child's event data
                self._deliver(session, f"{scxml.FINALIZE}{invokeid}", payload)
            self._deliver(session, name, payload)
            return True
        return False

    def _start(self, definition: WorkflowDefinition, parent: _Session | None, invokeid: str,
               params: dict[str, Any], *, autoforward: bool) -> _Session | str:
        """Gives a started session (or why its start was refused)."""
        ident = "w3c" if parent is None else f"w3c-{len(self.sessions) + 1}"
        declared = {k: v for k, v in params.items() if k in definition.initial_context}
        execution = new_execution(definition, ident, context=declared)
        origin = f"#_scxml_{ident}"
        system = {scxml.SYSTEM_KEYS["_sessionid"]: ident,
                  scxml.SYSTEM_KEYS["_ioprocessors"]: {
                      name: {"location": origin} for name in (_PROCESSOR, "scxml")}}
        decision = decide(definition, execution, start_event(ident, system), self.now)
        if not isinstance(decision, Accepted):
            why = decision.reason if isinstance(decision, Rejected) else "ignored"
            return f"the start was refused ({why})"
        session = _Session(definition, decision.execution, origin, parent, invokeid,
                           autoforward)
        self.sessions.append(session)
        self._collect(session)
        return session

    def _invoke(self, parent: _Session, ident: str, params: dict[str, Any],
                autoforward: bool, chart: str) -> None:
        """Starts the chart `parent` invokes as `ident` (the one under key `chart` of its
        `scxml.CHILDREN`); one that cannot start, or names no chart, raises error.execution
        in the parent."""
        key = (id(parent.definition), chart)
        definition = self.compiled.get(key)
        data = parent.definition.initial_context.get(scxml.CHILDREN, {}).get(chart)
        if definition is None and isinstance(data, dict):
            try:
                spec = validate(data, {}, f"{parent.definition.name}#{chart}")
                definition = self.compiled[key] = compile_definition(spec)
            except DefinitionError:
                definition = None
        started = None if definition is None else self._start(
            definition, parent, ident, params, autoforward=autoforward)
        if not isinstance(started, _Session):
            parent.internal.append(("error.execution", _payload("platform", None, "", None)))
            return
        parent.children[ident] = started

    def _deliver(self, session: _Session, name: str, payload: dict[str, Any]) -> None:
        self.delivered += 1
        if name not in session.definition.events:
            return  # no transition names it: SCXML drops it
        event = Event(f"w3c/{self.delivered}", name, "system", payload)
        decision = decide(session.definition, session.execution, event, self.now)
        if isinstance(decision, Accepted):
            session.execution = decision.execution
            self._collect(session)

    def _push(self, session: _Session, name: str, payload: dict[str, Any], delay: int,
              send_id: str, sender: _Session | None = None) -> None:
        self.order += 1
        heapq.heappush(self.external, (self.now + delay, self.order, session, name, payload,
                                       send_id, sender if delay else None))

    def _collect(self, session: _Session) -> None:
        """Takes what the session's last step put in its outbox, and acts on it; a session
        that ended tells its parent (`done.invoke.<id>`) and ends its children."""
        session.execution, entries = _take_outbox(session.execution)
        for item in entries:
            queue, name, delay, data, send_id, target = _entry(item)
            if queue == "invoke":
                params = data if isinstance(data, dict) else {}
                # [autoforward, type] and, for a srcexpr's, the key of the chart it names
                autoforward, kind, *chart = target if isinstance(target, list) else (
                    False, "scxml")
                if kind not in scxml.INVOKE_TYPES:  # a typeexpr's, known only now
                    session.internal.append(("error.execution",
                                             _payload("platform", None, "", None)))
                    continue
                session.starting.append((name, params, bool(autoforward),
                                         str(chart[0]) if chart else name))
            elif queue == "uninvoke":
                session.starting = [s for s in session.starting if s[0] != name]
                child = session.children.pop(name, None)
                if child is not None:
                    _end(child)
            elif queue in ("parent", "child"):
                to = session.parent if queue == "parent" else session.children.get(str(target))
                if to is None or not to.alive:
                    session.internal.append(("error.communication",
                                             _payload("platform", None, send_id, None)))
                    continue
                fields = _payload("external", data, send_id, session.origin)
                fields[scxml.EVENT_FIELDS]["invokeid"] = (session.invokeid or None
                                                          if queue == "parent" else None)
                self._push(to, name, fields, delay, send_id, session)
            else:
                for out in outgoing([item], session.origin):
                    if out.queue == "cancel":
                        self.external = [e for e in self.external
                                         if e[2] is not session or e[5] != out.name]
                        heapq.heapify(self.external)
                    elif out.queue == "internal":
                        session.internal.append((out.name, out.payload))
                    else:
                        self._push(session, out.name, out.payload, out.delay_ms, out.send_id)
        if session.execution.status == Status.FINAL and session.alive:
            _end(session)
            parent = session.parent
            if parent is not None and parent.alive:
                done = _payload("external", None, "", session.origin)
                done[scxml.EVENT_FIELDS]["invokeid"] = session.invokeid
                self._push(parent, f"done.invoke.{session.invokeid}", done, 0, "")


def _end(session: _Session) -> None:
    """Ends a session and, with it, the sessions it invoked."""
    session.alive = False
    for child in session.children.values():
        _end(child)


def _payload(queue: str, data: Any, send_id: str, origin: str | None) -> dict[str, Any]:
    """Gives an event's payload: SCXML's event fields and its data."""
    external = queue == "external"
    fields = {"type": queue, "sendid": send_id or None, "invokeid": None,
              "origin": origin if external else None,
              "origintype": _PROCESSOR if external else None}
    return {scxml.EVENT_FIELDS: fields, scxml.EVENT_DATA: data}


def _resolved(target: Any, origin: str, name: str, data: Any) -> tuple[str, str, Any]:
    """Gives the queue, event and data of a send whose target (or type) was an expression:
    this session or `#_internal`; an unknown type raises error.execution, an unreachable
    target error.communication."""
    kind = _PROCESSOR
    if isinstance(target, list) and len(target) == 2:
        target, kind = target
    if kind not in (_PROCESSOR, "scxml"):
        return "platform", "error.execution", None
    queue = {None: "external", origin: "external", "#_internal": "internal"}.get(target, "")
    if not queue:
        return "platform", "error.communication", None
    return queue, name, data


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One event a chart raised or sent to itself (or a cancel), as its driver delivers it."""

    #: `internal` (a raise, an error the platform raises: delivered before any external one),
    #: `external` (a send to this session, due `delay_ms` after it was sent) or `cancel`
    queue: str
    #: the event's name; for a cancel, the send id of the sends it takes back
    name: str
    delay_ms: int = 0
    #: SCXML's event fields and data (`scxml.EVENT_FIELDS`, `scxml.EVENT_DATA`)
    payload: dict[str, Any] = field(default_factory=dict)
    send_id: str = ""


def outgoing(entries: Iterable[Any], origin: str) -> list[Outgoing]:
    """Gives what outbox entries (`scxml.OUTBOX`, in the order written) ask the driver to
    deliver; `origin` is this session's address (`#_scxml_<session id>`), which a send whose
    target is an expression may name."""
    out = []
    for queue, name, delay, data, send_id, target in map(_entry, entries):
        if queue in _SESSIONS:
            continue  # another session's business: a driver that runs sessions reads it
        if queue == "target":
            queue, name, data = _resolved(target, origin, name, data)
        if queue == "cancel":
            out.append(Outgoing("cancel", name))
            continue
        payload = _payload(queue, data, send_id, origin)
        internal = queue in ("internal", "platform")
        out.append(Outgoing("internal" if internal else "external", name,
                            0 if internal else delay, payload, send_id))
    return out


class OutboxReader:
    """Reads what one execution's chart raised and sent since the last commit read, for a
    driver that cannot empty the outbox (it does not own the execution: the simulator).

    An outbox only grows along an execution's line: each context's new entries are those past
    the longest outbox read at the last commit (or earlier in this one) that begins it. So a
    region's copy of its parallel state's outbox, or the outbox a join takes from a region,
    gives nothing twice."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self._last: list[list[Any]] = []

    def read(self, execution: Execution) -> list[Outgoing]:
        """Gives what the execution's contexts (its own, then its regions', depth first)
        hold that was not read before, in order."""
        found: list[Any] = []
        current: list[list[Any]] = []
        for context in _contexts(execution):
            box = context.get(scxml.OUTBOX)
            if not isinstance(box, list):
                continue
            known = max((len(seen) for seen in (*self._last, *current)
                         if len(seen) <= len(box) and box[:len(seen)] == seen), default=0)
            found += box[known:]
            current.append(box)
        self._last = current
        return outgoing(found, self.origin)


def _contexts(execution: Execution) -> list[Any]:
    contexts = [execution.context]
    for region in execution.regions:
        contexts += _contexts(region)
    return contexts


def _take_outbox(execution: Execution) -> tuple[Execution, list[Any]]:
    """Gives the execution with its outbox (and its regions') emptied, and what they held."""
    found: list[list[Any]] = []
    seen: list[Any] = []

    def empty(ex: Execution) -> Execution:
        context = ex.context
        box = context.get(scxml.OUTBOX)
        if box:
            if box not in seen:  # a parallel state's own action is copied to each region
                seen.append(box)
                found.extend(box)
            context = {**context, scxml.OUTBOX: []}
        regions = tuple(empty(r) for r in ex.regions)
        if context is ex.context and regions == ex.regions:
            return ex
        return ex._replace(context=context, regions=regions)

    return empty(execution), found


def _entry(item: Any) -> tuple[str, str, int, Any, str, Any]:
    """Gives an outbox entry's queue, event, delay, data (named values, one value, or None),
    send id and target (queue `target`: the send's evaluated `targetexpr`)."""
    queue, name, delay, pairs, send_id, target = [*list(item), 0, [], "", None][:6]
    if isinstance(delay, str):
        delay = scxml.parse_delay_ms(delay) or 0
    named = {str(k): v for k, v in pairs} if isinstance(pairs, list) else {}
    data: Any = named or None
    if set(named) == {scxml.EVENT_DATA}:
        data = named[scxml.EVENT_DATA]
    return str(queue), str(name), int(delay or 0), data, str(send_id), target


def markdown(results: Iterable[W3CResult]) -> str:
    """Gives the summary: passed N of M, the counts by reason class, and each test not passed."""
    listed = list(results)
    passed = sum(1 for r in listed if r.passed)
    imported = sum(1 for r in listed if r.imported)
    classes: dict[str, int] = {}
    for result in listed:
        if not result.passed:
            key = result.reason if result.reason.startswith("refused") else (
                "imported, " + result.reason.split(" in state ")[0])
            classes[key] = classes.get(key, 0) + 1
    lines = ["# W3C SCXML conformance (mandatory tests) on the reference machine", "",
             f"Passed {passed} of {len(listed)}; imported {imported}.", "",
             "| reason | tests |", "| --- | --- |"]
    lines += [f"| {reason} | {count} |" for reason, count in
              sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += ["", "| test | imported | reason |", "| --- | --- | --- |"]
    lines += [f"| {r.test} | {'yes' if r.imported else 'no'} | {r.reason} |"
              for r in listed if not r.passed]
    return "\n".join(lines) + "\n"
