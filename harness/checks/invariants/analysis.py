"""What the invariants derive and share: a tool input quoted, the owner of each call (the
commit that commanded it), the chart view of a definition's statechart constructs, the legal
transition tables and reachability, the states a move entered, which undo undid which effect
(the saga), and the action hashes a ledger input stands for.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from typing import Any, NamedTuple

from harness.checks.invariants.registry import History, per_definition, per_history
from harness.sim.history import Applied, Committed, Dispatched
from reference_machine import (
    STARTED,
    TIMER_FIRED,
    CompiledTransition,
    WorkflowDefinition,
    step_action_hash,
)

__all__ = [
    "ALWAYS",
    "COMPENSATED",
    "DONE",
    "INTERNAL",
    "QUOTED_MAX",
    "Chart",
    "Owner",
    "Saga",
    "Table",
    "action_hashes",
    "budgeted",
    "chart_of",
    "has_commits",
    "innermost",
    "key_state",
    "legal_table",
    "legal_targets",
    "owners_of",
    "plain_table",
    "quoted",
    "reachable",
    "region_identity",
    "resumes",
    "saga_of",
    "short",
    "states_entered",
    "tables",
    "visit_prefixes",
]


_UNDO = "/undo"  # a compensation's key is its step's key plus this (the reference's way)


#: A tool input a violation quotes whole up to this many characters; past it, its values
#: that are long are told by their size (the JSON stays whole: never cut mid-value).
QUOTED_MAX = 600


def quoted(input_json: str) -> str:
    """Gives a tool input (canonical JSON) as a violation quotes it: whole, or, when long,
    with each long value told by its size, so the keys and the short values that tell two
    actions apart still read."""
    if len(input_json) <= QUOTED_MAX:
        return input_json
    try:
        value = json.loads(input_json)
    except ValueError:
        return input_json
    if not isinstance(value, dict):
        return f"<{len(input_json):,} characters of {type(value).__name__}>"
    shown = {key: item if len(json.dumps(item)) <= 80 else
             f"<{len(json.dumps(item)):,} characters>" for key, item in value.items()}
    return json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def short(text: str, size: int = 80) -> str:
    return text if len(text) <= size else f"{text[:size - 3]}..."


def has_commits(history: History) -> bool:
    return any(type(record) is Committed for record in history)


class Owner(NamedTuple):
    execution: str
    state: str  # the state whose step commanded it (a region's, for a region's effect)
    compensation: bool
    key: str = ""
    position: int = -1  # the commit that first commanded it
    #: the execution's context when it was commanded (None for a region's: not recorded)
    context: Mapping[str, Any] | None = None


@per_history
def owners_of(definition: WorkflowDefinition, history: History) -> dict[str, Owner]:
    return _owners(history, definition)


def _owners(history: History, definition: WorkflowDefinition | None = None
            ) -> dict[str, Owner]:
    """Gives, for each key (and id) a commit commanded a call under, whose call it was: the
    execution, the state that commanded it (inside a parallel or map state, the region's state
    its key names), and whether it was a compensation. For effects whose key does not name
    their execution, and tools that several states use."""
    owners: dict[str, Owner] = {}
    chart = chart_of(definition) if definition is not None else None
    for index, record in enumerate(history):
        if type(record) is Committed and record.effects:
            contexts: dict[str, Mapping[str, Any]] | None = None  # made once a commit
            for effect in record.effects:
                if effect.key in owners and effect.id in owners:
                    continue
                state, context = record.state, record.context
                if chart is not None and chart.scoped and not effect.compensation and (
                        record.state in chart.scoped or record.state not in chart.states):
                    inner = key_state(chart, effect.key)
                    if inner:
                        if contexts is None:
                            contexts = _region_contexts_of(record)
                        region = innermost(contexts, effect.key)
                        state, context = inner, contexts[region] if region else None
                owner = Owner(record.execution, state, effect.compensation, effect.key, index,
                              context)
                owners.setdefault(effect.key, owner)
                owners.setdefault(effect.id, owner)
    return owners


def _region_contexts_of(record: Committed) -> dict[str, Mapping[str, Any]]:
    """Gives each region's context after a commit, by region id (those recorded)."""
    return dict(zip((rid for rid, _, _ in record.regions), record.region_contexts,
                    strict=False))


def innermost(regions: Collection[str], call: str) -> str:
    """Gives the region whose id `call` (a key or a call's id) extends, the innermost when
    regions nest ("" when none does): the longest of the call's `/`-prefixes that is a
    region's id, looked up (a map of a hundred items commands a hundred calls at once)."""
    ids = regions if isinstance(regions, Set | Mapping) else frozenset(regions)
    cut = len(call)
    while (cut := call.rfind("/", 0, cut)) > 0:
        if call[:cut] in ids:
            return call[:cut]
    return ""


# -- statecharts: what the checks derive of a definition -----------------------------------

INTERNAL = "internal"
ALWAYS = "always"
DONE = "done"
COMPENSATED = "compensated"
_FORCED_TARGETS = ("transitions_max", "visits_max", "cost_max", "deadline")
_SCOPED_KINDS = frozenset({"parallel", "map"})


class Chart(NamedTuple):
    """What the checks need to know of a definition's statechart constructs, derived once."""

    used: bool  # some construct is used: without one, every statechart step is skipped
    states: Mapping[str, Any]
    scoped: frozenset[str]  # the parallel and map states
    roots: Mapping[str, frozenset[str]]  # parallel/map state -> the scopes its regions run in
    owner: Mapping[str, str]  # scope (a region, or a map state) -> its parallel/map state
    starts: Mapping[str, str]  # scope -> the leaf a region or map item starts in
    landings: Mapping[str, frozenset[str]]  # declared target -> every leaf a move there enters
    onward: Mapping[str, frozenset[str]]  # state -> where its eventless moves may carry a run
    internal: frozenset[tuple[str, str]]  # (state, event) some transition without target takes
    resumed: Mapping[str, tuple[str, ...]]  # leaf -> each child of a history compound above it
    conditional: frozenset[str]  # states whose step needs an approval only when a guard holds
    results_kept: frozenset[str]  # maps whose results key no action can overwrite
    memo: dict[tuple[str, str], frozenset[str]]  # region moves' targets, filled as asked
    guarded: frozenset[tuple[str, str]]  # (state, event) whose transitions have a guard
    exiting: frozenset[str]  # parallel and map states a state inside has exit actions in


@per_definition
def chart_of(definition: WorkflowDefinition) -> Chart:
    """Gives what the statechart checks derive of a definition."""
    states = definition.states
    children: dict[str, list[str]] = defaultdict(list)
    for name, state in states.items():
        if state.parent:
            children[state.parent].append(name)
    scoped = frozenset(name for name, state in states.items() if state.kind in _SCOPED_KINDS)
    roots: dict[str, frozenset[str]] = {}
    owner: dict[str, str] = {}
    for name in scoped:
        state = states[name]
        roots[name] = (frozenset({name}) if state.kind == "map"
                       else frozenset(region for region, _ in state.regions))
        for root in roots[name]:
            owner[root] = name
    landings: dict[str, frozenset[str]] = {}

    def land(name: str) -> frozenset[str]:
        known = landings.get(name)
        if known is not None:
            return known
        state = states[name]
        child = state.initial_child
        if child is None or child not in states or state.kind in _SCOPED_KINDS:
            found = {name}
        else:
            found = set(land(child))
            if definition.scoped and state.history == "deep":
                found |= {below for below, inner in states.items() if name in inner.ancestors
                          and inner.scope == state.scope
                          and (below not in children or inner.kind in _SCOPED_KINDS)}
            elif definition.scoped and state.history == "shallow":
                for member in children[name]:
                    found |= land(member)
        landings[name] = frozenset(found)
        return landings[name]

    edges: dict[str, set[str]] = {}
    resumed: dict[str, tuple[str, ...]] = {}
    internal: set[tuple[str, str]] = set()
    for name, state in states.items():
        land(name)
        for transition in (*state.always, *state.done):
            edges.setdefault(name, set()).update(land(transition.target))
        for event, transitions in state.on.items():
            if any(transition.internal for transition in transitions):
                internal.add((name, event))
        chain = (name, *state.ancestors)
        above = tuple(chain[position - 1] for position in range(1, len(chain))
                      if states[chain[position]].history)
        if above and definition.scoped:
            resumed[name] = above
    onward: dict[str, frozenset[str]] = {}
    for name in edges:
        seen: set[str] = set()
        todo = list(edges[name])
        while todo:
            reached = todo.pop()
            if reached not in seen:
                seen.add(reached)
                todo += edges.get(reached, ())
        onward[name] = frozenset(seen)
    conditional = frozenset(name for name, state in states.items()
                            if state.step is not None and state.step.approval_when is not None)
    used = bool(scoped or internal or edges or resumed or conditional)
    guarded = frozenset((name, event) for name, state in states.items()
                        for event, transitions in state.on.items()
                        if any(transition.guard is not None for transition in transitions))
    return Chart(used, states, scoped, roots, owner,
                 {root: scope.initial for root, scope in definition.scopes.items()},
                 landings, onward, frozenset(internal), resumed, conditional,
                 _results_kept(definition, scoped), {}, guarded,
                 frozenset(name for name in scoped if any(
                     inner.exit for inner in states.values() if name in inner.ancestors)))


def _results_kept(definition: WorkflowDefinition, scoped: frozenset[str]) -> frozenset[str]:
    """Gives the map states whose `results` key only their join writes: no action assigns it,
    no other map shares it, and no action is a function (which may assign anything)."""
    assigned: set[str] = set()
    for spec in definition.spec.states.values():
        lists = [spec.entry, spec.exit, *(t.actions for t in spec.eventless()),
                 *(t.actions for t in spec.joins()),
                 *(t.actions for event in spec.on for t in spec.transitions(event))]
        for actions in lists:
            for action in actions:
                if action.function is not None:
                    return frozenset()
                assigned.update(action.assign or ())
    keys = [definition.states[name].results for name in scoped
            if definition.states[name].kind == "map"]
    return frozenset(name for name in scoped if definition.states[name].kind == "map"
                     and definition.states[name].results not in assigned
                     and keys.count(definition.states[name].results) == 1)


def key_state(chart: Chart, key: str) -> str:
    """Gives the state a region's effect key names (`{region}/{state}/{visit}`, with or without
    `/undo`), or "" when the key names no state inside a region or map item."""
    if key.endswith(_UNDO):
        key = key[:-len(_UNDO)]
    head, _, visit = key.rpartition("/")
    state = head.rpartition("/")[2]
    inner = chart.states.get(state)
    if inner is None or inner.scope is None or not visit.isdigit():
        return ""
    return state


def region_identity(chart: Chart, key: str) -> str:
    """Gives the region (or map item) a region effect's key belongs to, without its visit
    numbers (`{execution}/{P}/{region}`): what makes two effects of one input two actions.
    "" for a key of no region."""
    if not key_state(chart, key):
        return ""
    parts = (key[:-len(_UNDO)] if key.endswith(_UNDO) else key).split("/")[:-2]
    kept: list[str] = []
    while len(parts) >= 3 and parts[-3] in chart.scoped and parts[-2].isdigit():
        kept[:0] = (parts[-3], parts[-1])
        del parts[-3:]
    return "/".join((*parts, *kept)) if kept else ""


def visit_prefixes(regions: tuple[tuple[str, str, str], ...]) -> set[str]:
    """Gives the visits of parallel and map states a commit's region snapshot shows active
    (`{execution}/{P}/{visit}/`, nested ones too)."""
    return {rid[:rid.rindex("/") + 1] for rid, _, _ in regions if "/" in rid}


def _own_visits(regions: tuple[tuple[str, str, str], ...], base: str) -> set[str]:
    """Gives the visits (`{base}{visit}/`) of one parallel or map state (`base` is
    `{execution}/{state}/`) that a region snapshot shows, its nested states' left out."""
    return {prefix for prefix in visit_prefixes(regions)
            if prefix.startswith(base) and prefix.count("/") == base.count("/") + 1}


def resumes(chart: Chart, leaf: str, visited: set[str]) -> bool:
    """Tells whether a run that was in `visited` may resume `leaf` through history: some
    child of a history compound above `leaf` (on its way to it) was active before."""
    states = chart.states
    for child in chart.resumed.get(leaf, ()):
        for seen in visited:
            inner = states.get(seen)
            if seen == child or (inner is not None and child in inner.ancestors):
                return True
    return False


# -- legal transitions ---------------------------------------------------------------------


def legal_targets(definition: WorkflowDefinition, source: str, moved: str, forced: str
                  ) -> frozenset[str]:
    """Gives the states a transition from `source` on `moved` may reach when `forced` (a
    budget, a policy, "internal" or "") is what forced it. `moved` may be `always` (the
    state's eventless transitions) or `done` (a parallel or map state's join); a target that
    is a compound with history gives every leaf it may resume."""
    return legal_table(definition).get((source, moved, forced), frozenset())


@per_definition
def budgeted(definition: WorkflowDefinition) -> bool:
    """Tells whether the definition sets any budget (a cost budget included)."""
    budgets = definition.budgets
    return budgets.any_limit or budgets.cost_max is not None or budgets.deadline_ms is not None


Table = dict[tuple[str, str, str], frozenset[str]]


def legal_table(definition: WorkflowDefinition) -> Table:
    """Gives every (source, event, forced) -> targets the definition allows (built once)."""
    return tables(definition)[0]


def plain_table(definition: WorkflowDefinition) -> Table:
    """Gives `legal_table` without the leaves only history can resume: where each declared
    transition goes the first time."""
    return tables(definition)[1]


@per_definition
def tables(definition: WorkflowDefinition) -> tuple[Table, Table]:
    """Gives the legal table and the plain one (see `plain_table`)."""
    chart = chart_of(definition)
    legal: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    plain: dict[tuple[str, str, str], set[str]] = defaultdict(set)

    def add(key: tuple[str, str, str], leaf: str, declared: str = "") -> None:
        plain[key].add(leaf)
        legal[key].add(leaf)
        if declared:
            legal[key].update(chart.landings.get(declared, ()))

    def onward(key: tuple[str, str, str], transitions: Iterable[CompiledTransition]) -> None:
        # where a run goes once undone was chosen when undoing began, eventless moves after
        # it included (the choice is kept, not the path)
        for transition in transitions:
            for leaf in chart.landings.get(transition.target, {transition.target_leaf}):
                add(key, leaf)
                for later in chart.onward.get(leaf, ()):
                    add(key, later)

    add(("", STARTED, ""), definition.initial)
    budgets = definition.budgets
    for reason in _FORCED_TARGETS:
        if budgets.on_exceeded:  # the first step may already be over a budget (its cost)
            add(("", "*", reason), budgets.on_exceeded)
    for name, state in definition.states.items():
        if state.final:
            continue
        for event, transitions in state.on.items():
            for transition in transitions:
                if transition.internal:
                    add((name, event, INTERNAL), name)
                else:
                    add((name, event, ""), transition.target_leaf, transition.target)
        for transition in state.always:
            add((name, ALWAYS, ""), transition.target_leaf, transition.target)
        for transition in state.done:
            add((name, DONE, ""), transition.target_leaf, transition.target)
        if state.done:
            onward((name, "*", COMPENSATED), state.done)
        if state.after_target is not None:
            add((name, TIMER_FIRED, ""), state.after_target)
        for reason in _FORCED_TARGETS:
            if budgets.on_exceeded:
                add((name, "*", reason), budgets.on_exceeded)
        if budgets.on_cycle:
            add((name, "*", "cycle"), budgets.on_cycle)
        if definition.compensation_failed:
            add((name, "*", "compensation_failed"), definition.compensation_failed)
        step = state.step
        if step is not None:
            if step.escalate_to:
                add((name, "*", "ambiguous_failure"), step.escalate_to)
                add((name, "*", "retries_exhausted"), step.escalate_to)
            onward((name, "*", COMPENSATED), state.on.get("step.failed", ()))
            # where the run goes once undone is chosen when undoing begins: a budget
            # exceeded then sends it to the budget's state
            for target in (budgets.on_exceeded, budgets.on_cycle):
                if target and budgeted(definition):
                    add((name, "*", COMPENSATED), target)
        if state.approval is not None and state.approval.escalate_to:
            add((name, "*", "approval_expired"), state.approval.escalate_to)
    return ({key: frozenset(targets) for key, targets in legal.items()},
            {key: frozenset(targets) for key, targets in plain.items()})


@per_definition
def reachable(definition: WorkflowDefinition) -> dict[str, frozenset[str]]:
    """Gives, per state, every state some sequence of legal transitions reaches."""
    edges: dict[str, set[str]] = defaultdict(set)
    for (source, _, _), targets in legal_table(definition).items():
        edges[source] |= targets
    reach: dict[str, frozenset[str]] = {}
    for start in definition.states:
        seen: set[str] = set()
        todo = list(edges.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += edges.get(name, ())
        reach[start] = frozenset(seen)
    return reach


def states_entered(chart: Chart, record: Committed, prev: Committed | None) -> tuple[str, ...]:
    """Gives the states a committed move entered, one per transition it made, as the machine
    counts them against its budgets: the eventless ones on its path included; none for an
    internal transition's own move, for a region's move inside a parallel or map state (the
    state is not entered again), or for a join that began undoing."""
    if not chart.used:
        return (record.state,)
    nodes = (*record.via, record.state)
    if record.forced == INTERNAL:
        return nodes[1:]
    source = record.from_state
    if source == record.state and source in chart.scoped and not record.via:
        if record.moved == DONE or prev is None:
            return ()
        base = f"{record.execution}/{source}/"
        again = _own_visits(record.regions, base) - _own_visits(prev.regions, base)
        return (source,) if again else ()  # entered again: a new visit
    return nodes


# -- compensation: which undo undid which effect -------------------------------------------


def _compensable(definition: WorkflowDefinition) -> dict[str, tuple[str, ...]]:
    """Gives, per compensation tool, the forward tools it undoes."""
    undoes: dict[str, list[str]] = defaultdict(list)
    for state in definition.states.values():
        step = state.step
        if step is not None and step.compensation is not None and (
                step.tool not in undoes[step.compensation.tool]):
            undoes[step.compensation.tool].append(step.tool)
    return {tool: tuple(forward) for tool, forward in undoes.items()}


class _Undo(NamedTuple):
    position: int  # the compensation's Applied record
    forward: int  # the Applied record of the effect it undid


class Saga(NamedTuple):
    pairs: dict[str, list[_Undo]]  # per execution, each undo with what it undid
    forward: dict[str, list[int]]  # per execution, every compensable effect
    undo_tools: dict[str, tuple[str, ...]]
    owners: dict[str, Owner]
    completed: dict[str, int]  # per key, the commit that took its step's success

    def execution_of(self, record: Applied | Dispatched) -> str:
        owner = self.owners.get(record.key)
        return record.execution or (owner.execution if owner is not None else "")

    def newer(self, history: History, effect: int, than: int) -> bool:
        """Tells whether the effect applied at `effect` is newer than the one at `than`: it
        was commanded once `than`'s step had succeeded (so regions running side by side are
        neither newer, nor is a step still waiting to retry an uncertain attempt), or,
        without regions, applied after it."""
        if not self.completed:  # no region ran side by side with another
            return than < effect
        later = self.owners.get(history[effect].key)  # type: ignore[union-attr]
        earlier = self.owners.get(history[than].key)  # type: ignore[union-attr]
        if later is None or earlier is None or later.position < 0 or earlier.position < 0:
            return than < effect
        answered = self.completed.get(earlier.key)
        return answered is not None and answered <= later.position


@per_history
def saga_of(definition: WorkflowDefinition, history: History) -> Saga:
    """Pairs each compensation applied with the effect it undid: the one whose key its key
    extends (`{key}/undo`), or, for a machine with other keys, the newest effect of its forward
    tools not undone yet. A compensable effect is one of a state whose step declares a
    compensation (told by the commit that commanded it, or by its tool when no state without
    a compensation uses that tool); one applied again with the same input is the same logical
    effect (of the same region or map item), which one undo covers."""
    undoes = _compensable(definition)
    compensable = {name for name, state in definition.states.items()
                   if state.step is not None and state.step.compensation is not None}
    plain = {state.step.tool for state in definition.states.values()
             if state.step is not None and state.step.compensation is None}
    forward_tools = {tool for tools in undoes.values() for tool in tools}
    owners = owners_of(definition, history)
    chart = chart_of(definition)
    saga = Saga(defaultdict(list), defaultdict(list), undoes, owners, {})
    actions: dict[tuple[str, str, str], int] = {}  # each logical effect's latest application
    taken_back: set[int] = set()  # the effects an undo paired with
    for index, record in enumerate(history):
        if type(record) is Committed:
            if chart.scoped and record.answers and record.decision == "accepted" and (
                    record.event_type == "step.succeeded"):
                answered = owners.get(record.answers)
                if answered is not None and not answered.compensation and _succeeded(
                        record, answered.state):
                    saga.completed.setdefault(answered.key, index)
            continue
        if type(record) is not Applied:
            continue
        owner = owners.get(record.key)
        eid = record.execution or (owner.execution if owner is not None else "")
        if record.tool in undoes and (owner is None or owner.compensation):
            undone = {pair.forward for pair in saga.pairs[eid]}
            if record.key.endswith(_UNDO):
                # the key names what it undoes: pair exactly; an undo of an effect that
                # never took place pairs with nothing
                undoing = record.key[:-len(_UNDO)]
                target = next((i for i in reversed(saga.forward[eid]) if i not in undone
                               and history[i].key == undoing), None)  # type: ignore[union-attr]
            else:
                target = next((i for i in reversed(saga.forward[eid]) if i not in undone
                               and history[i].tool in undoes[record.tool]),  # type: ignore[union-attr]
                              None)
            if target is not None:
                saga.pairs[eid].append(_Undo(index, target))
                taken_back.add(target)
            continue
        if record.tool not in forward_tools:
            continue
        if owner is not None:
            if owner.state not in compensable:
                continue
        elif record.tool in plain:
            continue  # a state without a compensation uses the tool too: cannot tell
        region = region_identity(chart, record.key) if chart.scoped else ""
        action = (region or eid, record.tool, record.input)
        if action not in actions or actions[action] in taken_back:  # new, or done again
            actions[action] = index
            saga.forward[eid].append(index)
    return saga


def _succeeded(record: Committed, state: str) -> bool:
    """Tells whether an accepted step.succeeded took the success of `state`'s step (not an
    unusable output taken as a failure): the move it made from that state, the region's one
    inside a parallel or map state."""
    if record.from_state == state:
        return record.moved == "step.succeeded"
    return any(source == state and event == "step.succeeded"
               for source, event, _ in record.inner)


# -- approval hashes -----------------------------------------------------------------------


def action_hashes(definition: WorkflowDefinition, states: Sequence[str], text: str
                  ) -> frozenset[str] | None:
    """Gives the action hashes a ledger input stands for in the gated states (None: unknown,
    with secrets, as the hash covers references the ledger shows revealed)."""
    if definition.secrets:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return frozenset()
    hashes = set()
    for name in states:
        step = definition.states[name].step
        if step is not None and isinstance(value, Mapping):
            hashes.add(step_action_hash(step, value))
    return frozenset(hashes)
