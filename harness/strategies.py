"""Hypothesis strategies for workflow definitions, for property tests of machines and tools.

    from hypothesis import given
    from harness.strategies import workflow_definitions

    @given(workflow_definitions())
    def test_my_machine_holds(definition):
        report = fuzz(definition, FuzzOptions(runs=5, replay_dir=None), machine=MyMachine)
        assert report.held, report.summary()

A drawn definition is valid (it loads with no error) and is made of blocks in a chain, each
one of: a step (a tool with a retry policy, maybe a compensation, a timeout, guarded outcomes),
a wait for an event (with a timeout, maybe a loop back to an earlier block), or an approval gate
in front of an irreversible step. Blocks may sit inside a compound parent whose `cancel`
applies to all of them; budgets, escalation to a person and compensation failure are drawn too.
Shrinking goes towards fewer, plainer blocks.

`statecharts=True` (or a `StatechartOptions` naming the constructs wanted) draws statechart
definitions as well: blocks that are a choice (guarded branches and a default), a parallel state
(two or three regions, each a small flow of steps and waits ending in a success or a failure
final; `on_region_failure` cancel or wait), a map over a context list (`concurrency_max`,
`tolerated_failures`) or a conditional approval (a choice on `context.amount > 100` in front of
the approval that a step's `needs_approval: "context.amount > 100"` asks for); and on the plain
blocks eventless `always` on waits, internal transitions on user events, entry and exit
actions, a compound parent with `history` that a wait inside leaves and re-enters, and events
whose payload is `correlate`d with the context. Each construct is drawn or not per definition,
so the plain shapes are still drawn. Off by default: a caller gets the very definitions (draw
for draw, so its example database still replays) it got before statecharts, and a machine that
is no statechart engine is not handed constructs it cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hypothesis import strategies as st

from harness.errors import HarnessError
from reference_machine import WorkflowDefinition, load_definition

__all__ = ["StatechartOptions", "workflow_definitions", "workflow_specs"]

_OUTPUT = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
_COUNT = {"type": "object", "required": ["n"],
          "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}
_PLAIN = ("step", "wait", "approval")
_ENTRY = {"step": "s", "wait": "w", "approval": "a", "choice": "c", "parallel": "p", "map": "m",
          "conditional": "q"}
#: the condition of a conditional approval: the choice in front and the step's needs_approval
_LARGE = "context.amount > 100"


@dataclass(frozen=True, slots=True)
class StatechartOptions:
    """Which statechart constructs drawn definitions may use. Each one on is still drawn or
    not per definition (and shrinks away), so the plain shapes keep being drawn."""

    choices: bool = True  # a choice block: guarded branches and a default
    eventless: bool = True  # `always` on a wait, taken once its guard holds
    internal: bool = True  # transitions with no target on user events
    entry_exit: bool = True  # `entry`/`exit` assign actions
    history: bool = True  # `history` on the compound parent, left and re-entered
    parallel: bool = True  # a parallel block: regions, their finals and the join
    maps: bool = True  # a map block over a context list
    conditional_approvals: bool = True  # needs_approval: "context.amount > 100"
    correlation: bool = True  # an event's `correlate:` on context.order

    @classmethod
    def none(cls) -> StatechartOptions:
        """Gives the options with every construct off: the definitions drawn before
        statecharts."""
        return cls(**{f.name: False for f in fields(cls)})

    def blocks(self) -> tuple[str, ...]:
        """Gives the statechart block kinds these options draw besides the plain ones."""
        return tuple(kind for kind, on in (("choice", self.choices), ("parallel", self.parallel),
                                           ("map", self.maps),
                                           ("conditional", self.conditional_approvals)) if on)


def _options(statecharts: object) -> StatechartOptions:
    if isinstance(statecharts, StatechartOptions):
        return statecharts
    if isinstance(statecharts, bool):
        return StatechartOptions() if statecharts else StatechartOptions.none()
    msg = (f"statecharts: expected True, False or a StatechartOptions, got "
           f"{type(statecharts).__name__} {statecharts!r:.60}")
    raise HarnessError(msg)


@dataclass(slots=True)
class _Draft:
    """What the blocks drawn so far add to the definition."""

    charts: StatechartOptions
    states: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)
    events: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    refers: set[str] = field(default_factory=set)


@st.composite
def _step(draw: st.DrawFn, index: int, gated: bool, condition: str | None = None
          ) -> dict[str, Any]:
    """Draws one step block's state, its tools and what it refers to."""
    honours = draw(st.booleans()) or gated
    repeatable = not honours and draw(st.booleans())
    compensated = draw(st.booleans())
    on_exhausted = draw(st.sampled_from(("fail", "compensate", "escalate")))
    step: dict[str, Any] = {
        "tool": f"t{index}",
        "input": {"order": "=context.order", "round": "=context.round"},
        "retry": {"attempts_max": draw(st.integers(1, 3)), "delay_initial": "1s",
                  "jitter": draw(st.sampled_from((0, 0.5))), "on_exhausted": on_exhausted},
    }
    if draw(st.booleans()):
        step["timeout"] = draw(st.sampled_from(("5s", "30s")))
    if draw(st.booleans()):
        step["cost"] = 0.25
    if gated:
        step["needs_approval"] = condition or True
        step["reversible"] = False
    tools: dict[str, Any] = {f"t{index}": {"idempotency_keys": honours,
                                          "repeatable": repeatable, "output": _OUTPUT}}
    refers: set[str] = set()
    if compensated:
        step["compensation"] = {"tool": f"u{index}",
                                "input": {"order": "=context.order", "round": "=context.round"},
                                "attempts_max": draw(st.integers(1, 2))}
        tools[f"u{index}"] = {"idempotency_keys": draw(st.booleans())}
        refers.add("needs_human")
    if on_exhausted == "escalate" or not (honours or repeatable):
        step["escalate_to"] = "needs_human"  # an ambiguous failure asks a person
        refers.add("needs_human")
    guarded = draw(st.booleans())
    return {"step": step, "tools": tools, "refers": refers, "guarded": guarded}


def workflow_specs(*, blocks_max: int = 5, statecharts: bool | StatechartOptions = False
                   ) -> st.SearchStrategy[dict[str, Any]]:
    """Draws valid workflow definitions as the mapping a definition file holds; with
    `statecharts` (True, or the constructs wanted) statechart constructs too."""
    return _specs(blocks_max, _options(statecharts))


@st.composite
def _specs(draw: st.DrawFn, blocks_max: int, charts: StatechartOptions) -> dict[str, Any]:
    draft = _Draft(charts, context={"order": "o-1", "round": 0, "count": 0})
    if charts != StatechartOptions.none():
        draft.context.update(pings=0, entered=0, left=0,
                             amount=draw(st.sampled_from((50, 150))))
    count = draw(st.integers(1, blocks_max))
    kinds = draw(st.lists(st.sampled_from(_PLAIN + charts.blocks()), min_size=count,
                          max_size=count))
    entries = [f"{_ENTRY[kind]}{i}" for i, kind in enumerate(kinds)]
    states, tools, events, refers = draft.states, draft.tools, draft.events, draft.refers
    for i, kind in enumerate(kinds):
        after = entries[i + 1] if i + 1 < count else "done"
        if kind == "wait":
            # a loop back into a map would run its items again with the same input: the loop
            # stays after the last map block
            low = max((j + 1 for j in range(i) if kinds[j] == "map"), default=0)
            _wait(draw, draft, i, after, entries[low:i])
            continue
        if kind == "choice":
            _choice(draw, draft, i, after, entries[i + 2] if i + 2 < count else "done")
            continue
        if kind == "parallel":
            _parallel(draw, draft, i, after)
            continue
        if kind == "map":
            _map(draw, draft, i, after)
            continue
        gated = kind in ("approval", "conditional")
        condition = _LARGE if kind == "conditional" else None
        drawn = draw(_step(i, gated, condition))
        tools.update(drawn["tools"])
        refers |= drawn["refers"]
        succeeded: Any = after
        if drawn["guarded"]:
            succeeded = [{"target": "rejected", "guard": "not event.payload.ok"},
                         {"target": after, "actions": [{"assign": {
                             "count": "context.count + 1"}}]}]
            refers.add("rejected")
        on: dict[str, Any] = {"step.succeeded": succeeded}
        if drawn["step"]["retry"]["on_exhausted"] != "escalate":
            on["step.failed"] = "failed"  # an escalating step's failures go to a person
        states[f"s{i}" if not gated else f"g{i}"] = {"step": drawn["step"], "on": on}
        if gated:
            expiry = draw(st.sampled_from(("deny", "escalate")))
            approval: dict[str, Any] = {
                "for_state": f"g{i}", "summary": "Approve order {order}",
                "evidence": ["order"],
                "roles": draw(st.sampled_from((["supervisor"], ["supervisor", "lead"]))),
                "expires_after": "1h", "on_expiry": expiry}
            if expiry == "escalate":
                approval["escalate_to"] = "needs_human"
                refers.add("needs_human")
            states[f"a{i}"] = {"type": "wait", "approval": approval,
                               "on": {"approval.granted": f"g{i}",
                                      "approval.denied": "rejected"}}
            refers.add("rejected")
        if kind == "conditional":  # the approval is asked for only when the step needs it
            states[f"q{i}"] = {"type": "choice", "always": [
                {"target": f"a{i}", "guard": _LARGE}, f"g{i}"]}
        _internal(draw, draft, f"s{i}" if not gated else f"g{i}", i)
        _entry_exit(draw, draft, f"s{i}" if not gated else f"g{i}")
    spec: dict[str, Any] = {"name": "drawn", "version": 1, "context": draft.context,
                            "tools": tools, "events": events, "states": states}
    if draw(st.booleans()):
        spec["budgets"] = {"transitions_max": draw(st.integers(8, 30)),
                           "visits_max": draw(st.integers(2, 4)), "on_exceeded": "needs_human"}
        refers.add("needs_human")
    if any("compensation" in s.get("step", {}) for s in states.values()):
        spec["compensation_failed"] = "needs_human"
    _nest(draw, draft, entries, kinds)
    first = states[entries[0]]
    top = first.get("parent")
    (states[top] if top else first)["initial"] = True
    if "needs_human" in refers:
        states["needs_human"] = {"type": "wait", "after": {"delay": "1d", "target": "failed"},
                                 "on": {"resolve": "failed"}}
        events["resolve"] = {"sources": ["human"]}
    states["done"] = {"type": "final", "outcome": "success"}
    if "failed" in _targets(states):
        states["failed"] = {"type": "final", "outcome": "failure"}
    if "rejected" in refers:
        states["rejected"] = {"type": "final", "outcome": "rejected"}
    return spec


def _wait(draw: st.DrawFn, draft: _Draft, i: int, after: str, earlier: list[str]) -> None:
    """Draws a wait block: an event on to `after` (maybe guarded by its payload, maybe
    correlated), a timeout, maybe a loop back to one of `earlier`; with statecharts maybe an
    internal transition, an eventless way on, entry and exit actions."""
    events = draft.events
    on: dict[str, Any] = {f"e{i}": after}
    events[f"e{i}"] = {"sources": ["human"]}
    if draw(st.booleans()):
        events[f"e{i}"]["payload"] = _COUNT
        on[f"e{i}"] = [{"target": after, "guard": "event.payload.n > 2"},
                       {"target": "failed"}]
    if bool(earlier) and draw(st.booleans()):
        back = earlier[draw(st.integers(0, len(earlier) - 1))]
        events[f"r{i}"] = {"sources": ["human", "system"]}
        on[f"r{i}"] = {"target": back,
                       "actions": [{"assign": {"round": "context.round + 1"}}]}
    name = f"w{i}"
    draft.states[name] = {"type": "wait", "on": on, "after": {
        "delay": draw(st.sampled_from(("1m", "1h"))),
        "target": draw(st.sampled_from((after, "failed")))}}
    charts = draft.charts
    if charts.correlation and draw(st.booleans()):
        # the sender must name the run's order; another's is refused as uncorrelated
        schema = events[f"e{i}"].get("payload", {"type": "object", "properties": {}})
        events[f"e{i}"]["payload"] = {
            **schema, "required": [*schema.get("required", ()), "order"],
            "properties": {**schema["properties"], "order": {"type": "string"}}}
        events[f"e{i}"]["correlate"] = {"order": "context.order"}
    pinged = _internal(draw, draft, name, i)
    if charts.eventless and draw(st.booleans()):
        guards = ("context.pings >= 2",) if pinged else ("context.round > 0", "context.count > 0")
        draft.states[name]["always"] = [{"target": after, "guard": draw(st.sampled_from(guards)),
                                         "actions": [{"assign": {"pings": "0"}}]}]
    _entry_exit(draw, draft, name)


def _internal(draw: st.DrawFn, draft: _Draft, name: str, i: int) -> bool:
    """Maybe gives state `name` an internal transition on a user event (`ping{i}`, counting
    pings); tells whether it did."""
    if not (draft.charts.internal and draw(st.booleans())):
        return False
    draft.events[f"ping{i}"] = {"sources": ["human", "agent"]}
    draft.states[name].setdefault("on", {})[f"ping{i}"] = {
        "actions": [{"assign": {"pings": "context.pings + 1"}}]}
    return True


def _entry_exit(draw: st.DrawFn, draft: _Draft, name: str) -> None:
    """Maybe gives state `name` entry and exit actions, counting entries and exits."""
    if not draft.charts.entry_exit:
        return
    state = draft.states[name]
    if draw(st.booleans()):
        state["entry"] = [{"assign": {"entered": "context.entered + 1"}}]
    if draw(st.booleans()):
        state["exit"] = [{"assign": {"left": "context.left + 1"}}]


def _choice(draw: st.DrawFn, draft: _Draft, i: int, after: str, beyond: str) -> None:
    """Draws a choice block: a guarded branch that skips the next block (on to `beyond`),
    maybe one out of the run once it has looped, then the default on to `after` (so that a
    choice the run starts in does not end it there: the context it starts with holds no
    guard)."""
    guard = draw(st.sampled_from(("context.count > 0", "context.round > 0", _LARGE)))
    branches: list[Any] = [{"target": beyond, "guard": guard,
                            "actions": [{"assign": {"count": "context.count + 1"}}]}]
    if draw(st.booleans()):
        out = draw(st.sampled_from(("rejected", "failed")))
        branches.append({"target": out, "guard": "context.round > 2"})
        draft.refers.add(out)
    branches.append(after)
    draft.states[f"c{i}"] = {"type": "choice", "always": branches}
    _entry_exit(draw, draft, f"c{i}")


def _scoped_step(draw: st.DrawFn, draft: _Draft, name: str, tool: str, inputs: dict[str, str],
                 succeeded: str, failed: str) -> None:
    """Draws a step inside a region or a map item: it ends in the scope's own finals, so it
    never escalates and is never compensated on its own (the parallel or map state's failure
    undoes it)."""
    honours = draw(st.booleans())
    repeatable = not honours and draw(st.booleans())
    step: dict[str, Any] = {"tool": tool, "input": inputs, "retry": {
        "attempts_max": draw(st.integers(1, 3)), "delay_initial": "1s", "on_exhausted": "fail"}}
    draft.tools[tool] = {"idempotency_keys": honours, "repeatable": repeatable,
                         "output": _OUTPUT}
    if draw(st.booleans()):
        undo = f"{tool}_undo"
        step["compensation"] = {"tool": undo, "input": inputs}
        draft.tools[undo] = {"idempotency_keys": draw(st.booleans())}
        draft.refers.add("needs_human")
    on: Any = succeeded
    if draw(st.booleans()):
        on = [{"target": failed, "guard": "not event.payload.ok"}, succeeded]
    draft.states[name] = {"step": step, "on": {"step.succeeded": on, "step.failed": failed}}


def _done(draw: st.DrawFn, after: str) -> list[Any]:
    """Draws a join: on to `after` unless a region (an item past the tolerance) failed."""
    guard = draw(st.sampled_from(("not event.payload.failed", "not event.payload.failing")))
    return [{"target": after, "guard": guard}, "failed"]


def _parallel(draw: st.DrawFn, draft: _Draft, i: int, after: str) -> None:
    """Draws a parallel block: two or three regions, each a chain of one or two steps and
    waits ending in a success final (a step's failure in a failure final), and the join."""
    name = f"p{i}"
    states = draft.states
    states[name] = {"type": "parallel", "done": _done(draw, after),
                    "on_region_failure": draw(st.sampled_from(("cancel", "wait")))}
    if draw(st.booleans()):  # its own transitions leave it, abandoning every region
        draft.events[f"abort{i}"] = {"sources": ["human"]}
        states[name]["on"] = {f"abort{i}": "failed"}
    _entry_exit(draw, draft, name)
    for k in range(draw(st.integers(2, 3))):
        region = f"{name}r{k}"
        states[region] = {"parent": name}
        _entry_exit(draw, draft, region)
        kinds = draw(st.lists(st.sampled_from(("step", "wait")), min_size=1, max_size=2))
        ok, ko = f"{region}ok", f"{region}ko"
        for j, kind in enumerate(kinds):
            here = f"{region}s{j}"
            on = f"{region}s{j + 1}" if j + 1 < len(kinds) else ok
            if kind == "step":
                _scoped_step(draw, draft, here, f"t{i}r{k}s{j}",
                             {"order": "=context.order", "round": "=context.round"}, on, ko)
            else:
                event = f"tick{i}r{k}"
                draft.events[event] = {"sources": ["human", "system"]}
                states[here] = {"type": "wait", "on": {event: on}, "after": {
                    "delay": draw(st.sampled_from(("1m", "1h"))), "target": on}}
                _internal(draw, draft, here, i)
            states[here]["parent"] = region
        states[f"{region}s0"]["initial"] = True
        states[ok] = {"parent": region, "type": "final", "outcome": "success"}
        if "step" in kinds:
            states[ko] = {"parent": region, "type": "final", "outcome": "failure"}


def _map(draw: st.DrawFn, draft: _Draft, i: int, after: str) -> None:
    """Draws a map block over a context list of none to three items (mappings, or plain
    values an item reads as `context.item`), each running one step to a success or a failure
    final."""
    name = f"m{i}"
    mappings = draw(st.booleans())
    items: list[Any] = [f"m{i}-{n}" for n in range(draw(st.integers(0, 3)))]
    if mappings:
        items = [{"url": item} for item in items]
    draft.context[f"items{i}"] = items
    state: dict[str, Any] = {
        "type": "map", "items": f"context.items{i}", "done": _done(draw, after),
        "tolerated_failures": draw(st.integers(0, 1)),
        "on_region_failure": draw(st.sampled_from(("cancel", "wait")))}
    concurrency = draw(st.sampled_from((None, 1, 2)))
    if concurrency is not None:
        state["concurrency_max"] = concurrency
    if draw(st.booleans()):
        state["results"] = f"results{i}"
    draft.states[name] = state
    _entry_exit(draw, draft, name)
    key = "url" if mappings else "item"
    step = f"{name}s"
    _scoped_step(draw, draft, step, f"t{i}", {key: f"=context.{key}"}, f"{name}ok",
                 f"{name}ko")
    draft.states[step].update(parent=name, initial=True)
    draft.states[f"{name}ok"] = {"parent": name, "type": "final", "outcome": "success"}
    draft.states[f"{name}ko"] = {"parent": name, "type": "final", "outcome": "failure"}


def _targets(value: Any) -> set[str]:
    """Gives every state name a part of a definition moves to (a target or an escalation)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("target", "escalate_to") and isinstance(item, str):
                found.add(item)
            elif key == "on" and isinstance(item, dict):
                found |= {t for t in item.values() if isinstance(t, str)}
                found |= _targets(list(item.values()))
            else:
                found |= _targets(item)
    elif isinstance(value, list):
        for item in value:
            found |= {item} if isinstance(item, str) else _targets(item)
    return found


def _nest(draw: st.DrawFn, draft: _Draft, entries: list[str], kinds: list[str]) -> None:
    """Maybe puts a run of blocks inside a compound parent whose `cancel` ends any of them;
    with statecharts maybe with `history`, left from a wait inside and entered again."""
    states, events = draft.states, draft.events
    if len(entries) < 2 or not draw(st.booleans()):
        return
    start = draw(st.integers(0, len(entries) - 2))
    end = draw(st.integers(start + 1, len(entries) - 1))
    members = []
    for i in range(start, end + 1):
        members.append(entries[i])
        if kinds[i] in ("approval", "conditional"):
            members.append(f"g{i}")
        if kinds[i] == "conditional":
            members.append(f"a{i}")
    for name in members:
        states[name]["parent"] = "phase"
    states[entries[start]]["initial"] = True
    states["phase"] = {"on": {"cancel": "failed"}}
    events["cancel"] = {"sources": ["human"]}
    # leaving from a wait (never from a step, whose effect the return would do again)
    waits = [name for name in members if states[name].get("type") == "wait"]
    charts = draft.charts
    if charts.history and waits and draw(st.booleans()):
        states["phase"]["history"] = draw(st.sampled_from(("shallow", "deep")))
        states[draw(st.sampled_from(waits))]["on"]["pause"] = "paused"
        states["paused"] = {"type": "wait", "on": {"resume": "phase"},
                            "after": {"delay": "1h", "target": "failed"}}
        events["pause"] = {"sources": ["human"]}
        events["resume"] = {"sources": ["human"]}
    _entry_exit(draw, draft, "phase")


def workflow_definitions(*, blocks_max: int = 5, statecharts: bool | StatechartOptions = False
                         ) -> st.SearchStrategy[WorkflowDefinition]:
    """Draws valid, loaded workflow definitions (see the module's docstring)."""
    return workflow_specs(blocks_max=blocks_max, statecharts=statecharts).map(load_definition)
