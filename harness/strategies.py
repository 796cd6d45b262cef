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
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from reference_machine import WorkflowDefinition, load_definition

__all__ = ["workflow_definitions", "workflow_specs"]

_OUTPUT = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
_COUNT = {"type": "object", "required": ["n"],
          "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}


@st.composite
def _step(draw: st.DrawFn, index: int, gated: bool) -> dict[str, Any]:
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
        step["needs_approval"] = True
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


@st.composite
def workflow_specs(draw: st.DrawFn, *, blocks_max: int = 5) -> dict[str, Any]:
    """Draws a valid workflow definition as the mapping a definition file holds."""
    count = draw(st.integers(1, blocks_max))
    kinds = draw(st.lists(st.sampled_from(("step", "wait", "approval")), min_size=count,
                          max_size=count))
    entries = [{"step": f"s{i}", "wait": f"w{i}", "approval": f"a{i}"}[kind]
               for i, kind in enumerate(kinds)]
    states: dict[str, Any] = {}
    tools: dict[str, Any] = {}
    events: dict[str, Any] = {}
    refers: set[str] = set()
    for i, kind in enumerate(kinds):
        after = entries[i + 1] if i + 1 < count else "done"
        if kind == "wait":
            on: dict[str, Any] = {f"e{i}": after}
            events[f"e{i}"] = {"sources": ["human"]}
            if draw(st.booleans()):
                events[f"e{i}"]["payload"] = _COUNT
                on[f"e{i}"] = [{"target": after, "guard": "event.payload.n > 2"},
                               {"target": "failed"}]
            if i > 0 and draw(st.booleans()):
                back = entries[draw(st.integers(0, i - 1))]
                events[f"r{i}"] = {"sources": ["human", "system"]}
                on[f"r{i}"] = {"target": back,
                               "actions": [{"assign": {"round": "context.round + 1"}}]}
            states[f"w{i}"] = {"type": "wait", "on": on, "after": {
                "delay": draw(st.sampled_from(("1m", "1h"))),
                "target": draw(st.sampled_from((after, "failed")))}}
            continue
        gated = kind == "approval"
        drawn = draw(_step(i, gated))
        tools.update(drawn["tools"])
        refers |= drawn["refers"]
        succeeded: Any = after
        if drawn["guarded"]:
            succeeded = [{"target": "rejected", "guard": "not event.payload.ok"},
                         {"target": after, "actions": [{"assign": {
                             "count": "context.count + 1"}}]}]
            refers.add("rejected")
        states[f"s{i}" if not gated else f"g{i}"] = {
            "step": drawn["step"],
            "on": {"step.succeeded": succeeded, "step.failed": "failed"},
        }
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
    spec: dict[str, Any] = {"name": "drawn", "version": 1,
                            "context": {"order": "o-1", "round": 0, "count": 0},
                            "tools": tools, "events": events, "states": states}
    if draw(st.booleans()):
        spec["budgets"] = {"transitions_max": draw(st.integers(8, 30)),
                           "visits_max": draw(st.integers(2, 4)), "on_exceeded": "needs_human"}
        refers.add("needs_human")
    if any("compensation" in s.get("step", {}) for s in states.values()):
        spec["compensation_failed"] = "needs_human"
    _nest(draw, states, entries, kinds, events)
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


def _nest(draw: st.DrawFn, states: dict[str, Any], entries: list[str], kinds: list[str],
          events: dict[str, Any]) -> None:
    """Maybe puts a run of blocks inside a compound parent whose `cancel` ends any of them."""
    if len(entries) < 2 or not draw(st.booleans()):
        return
    start = draw(st.integers(0, len(entries) - 2))
    end = draw(st.integers(start + 1, len(entries) - 1))
    members = []
    for i in range(start, end + 1):
        members.append(entries[i])
        if kinds[i] == "approval":
            members.append(f"g{i}")
    for name in members:
        states[name]["parent"] = "phase"
    states[entries[start]]["initial"] = True
    states["phase"] = {"on": {"cancel": "failed"}}
    events["cancel"] = {"sources": ["human"]}


def workflow_definitions(*, blocks_max: int = 5) -> st.SearchStrategy[WorkflowDefinition]:
    """Draws valid, loaded workflow definitions (see the module's docstring)."""
    return workflow_specs(blocks_max=blocks_max).map(load_definition)
