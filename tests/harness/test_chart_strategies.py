"""`harness.strategies` with statecharts: the options, that each construct is drawn (and only
when asked for), that every drawn definition loads clean, and that a few drawn statecharts are
fuzzed under faults with every invariant holding (more of them in
`tests/harness/test_chart_properties.py`)."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.strategies
from harness import FuzzOptions, HarnessError, SimOptions, fuzz, simulate
from harness.sim.history import Committed
from harness.strategies import StatechartOptions, workflow_definitions, workflow_specs
from reference_machine import WorkflowDefinition, load_definition

CONSTRUCTS = tuple(f.name for f in dataclasses.fields(StatechartOptions))
FAST = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def drawn(strategy: st.SearchStrategy[dict[str, Any]], examples: int) -> list[dict[str, Any]]:
    """Gives the first `examples` specs `strategy` draws; always the same ones (derandomized,
    and the collecting function is the same for every strategy)."""
    specs: list[dict[str, Any]] = []

    @settings(FAST, max_examples=examples)
    @given(strategy)
    def collect(spec: dict[str, Any]) -> None:
        specs.append(spec)

    collect()
    return specs


@functools.cache
def charted(examples: int) -> tuple[dict[str, Any], ...]:
    """Gives the first `examples` specs drawn with every statechart construct on (shared by the
    tests; none of them changes a spec)."""
    return tuple(drawn(workflow_specs(statecharts=True), examples))


def unguarded(transition: Any) -> bool:
    """Tells whether a written transition has no guard."""
    return isinstance(transition, str) or "guard" not in transition


def features(spec: dict[str, Any]) -> set[str]:
    """Gives the statechart constructs (and their variants) `spec` uses."""
    states: dict[str, Any] = spec["states"]
    found: set[str] = set()
    for name, state in states.items():
        kind = state.get("type", "normal")
        always = state.get("always", [])
        assert kind != "choice" or unguarded(always[-1]), f"choice {name!r} has no default"
        routes_approval = any(states.get(t if isinstance(t, str) else t["target"], {}).get(
            "approval") for t in always)  # a conditional approval's choice
        if kind == "choice" and len(always) >= 2 and unguarded(always[-1]) and not any(
                unguarded(t) for t in always[:-1]) and not routes_approval:
            found.add("choices")
        if kind == "wait" and always:
            found.add("eventless")
        for event, written in state.get("on", {}).items():
            if isinstance(written, dict) and "target" not in written:
                assert not event.startswith(("step.", "approval.")), (name, event)
                found.add("internal")
        found |= {key for key in ("entry", "exit") if state.get(key)}
        if state.get("history"):
            left = [n for n, s in states.items()
                    if s.get("parent") == name and s.get("on", {}).get("pause") == "paused"]
            if left and states["paused"]["on"]["resume"] == name:
                found |= {"history", f"history {state['history']}"}
        if kind == "parallel":
            regions = [n for n, s in states.items() if s.get("parent") == name]
            found |= {"parallel", f"{len(regions)} regions",
                      f"on_region_failure {state['on_region_failure']}"}
            for region in regions:
                flow = [s for s in states.values() if s.get("parent") == region]
                found |= {f"region {s['outcome']} final" for s in flow if "outcome" in s}
                found |= {"region step undone" if "compensation" in s["step"] else
                          "region step" for s in flow if "step" in s}
        if kind == "map":
            items = spec["context"][state["items"].removeprefix("context.")]
            assert isinstance(items, list)
            found |= {"maps", "map over nothing" if not items else "map over items"}
            found |= {f"map {key}" for key in ("concurrency_max",) if key in state}
            if state["tolerated_failures"]:
                found.add("map tolerated_failures")
        approval = state.get("step", {}).get("needs_approval")
        if isinstance(approval, str):
            asking = [n for n, s in states.items()
                      if s.get("approval", {}).get("for_state") == name]
            routes = [s for s in states.values() if s.get("type") == "choice" and any(
                isinstance(t, dict) and t.get("target") in asking and t.get("guard") == approval
                for t in s["always"])]
            assert approval == "context.amount > 100" and asking and routes, name
            found.add("conditional_approvals")
    if any("correlate" in event for event in spec["events"].values()):
        found.add("correlation")
    return found


class TestStatechartOptions:
    def test_the_names_are_pinned(self) -> None:
        """Adding or removing a public name of harness.strategies is a deliberate change."""
        assert harness.strategies.__all__ == ["StatechartOptions", "workflow_definitions",
                                              "workflow_specs"]
        assert CONSTRUCTS == ("choices", "eventless", "internal", "entry_exit", "history",
                              "parallel", "maps", "conditional_approvals", "correlation")

    def test_none_switches_every_construct_off(self) -> None:
        """`none()` is every construct off; the default is every one on."""
        assert not any(dataclasses.astuple(StatechartOptions.none()))
        assert all(dataclasses.astuple(StatechartOptions()))

    @pytest.mark.parametrize("value", [1, "yes", None, {"parallel": True}])
    def test_anything_else_is_refused_with_what_is_expected(self, value: object) -> None:
        """A value that is neither a bool nor the options is a HarnessError naming both,
        raised as the strategy is made (not at the first draw)."""
        with pytest.raises(HarnessError, match=r"statecharts: expected True, False or a "
                                               r"StatechartOptions, got "):
            workflow_specs(statecharts=value)  # type: ignore[arg-type]
        with pytest.raises(HarnessError, match=r"statecharts: expected"):
            workflow_definitions(statecharts=value)  # type: ignore[arg-type]


class TestDefaultIsOff:
    def test_the_default_draws_what_it_drew_before_statecharts(self) -> None:
        """Without `statecharts` (or with it False, or none()) the very same specs are drawn,
        with no statechart construct in them."""
        before = drawn(workflow_specs(), 40)
        assert drawn(workflow_specs(statecharts=False), 40) == before
        assert drawn(workflow_specs(statecharts=StatechartOptions.none()), 40) == before
        assert [s for s in before if features(s)] == []
        assert {k for s in before for k in s["context"]} == {"order", "round", "count"}

    def test_workflow_definitions_passes_the_options_on(self) -> None:
        """`workflow_definitions(statecharts=...)` loads what `workflow_specs` draws."""
        seen: Counter[str] = Counter()

        @settings(FAST, max_examples=30)
        @given(workflow_definitions(blocks_max=3, statecharts=True))
        def tally(definition: WorkflowDefinition) -> None:
            assert isinstance(definition, WorkflowDefinition)
            seen.update({state.kind for state in definition.states.values()})
        tally()
        assert {"choice", "parallel", "map"} <= set(seen), seen


class TestEachConstructIsDrawn:
    def test_every_construct_and_its_variants_appear(self) -> None:
        """Over 200 draws each construct and each of its variants appears (the rarest,
        deep history, a few times), and so do plain definitions with no construct at all."""
        seen: Counter[str] = Counter()
        plain = 0
        for spec in charted(200):
            found = features(spec)
            seen.update(found)
            plain += not found
        variants = {"history shallow", "history deep", "2 regions", "3 regions",
                    "on_region_failure cancel", "on_region_failure wait", "region step",
                    "region step undone", "region success final", "region failure final",
                    "map over nothing", "map over items", "map concurrency_max",
                    "map tolerated_failures", "entry", "exit"}
        assert set(CONSTRUCTS) - {"entry_exit"} | variants <= set(seen), seen
        assert min(seen[name] for name in variants | set(CONSTRUCTS) - {"entry_exit"}) >= 3, \
            seen
        assert plain >= 5

    @pytest.mark.parametrize("construct", [c for c in CONSTRUCTS if c != "entry_exit"])
    def test_a_construct_switched_off_is_never_drawn(self, construct: str) -> None:
        """Each option turns its construct off and leaves the others on."""
        options = dataclasses.replace(StatechartOptions(), **{construct: False})
        seen = Counter(f for spec in drawn(workflow_specs(statecharts=options), 25)
                       for f in features(spec))
        assert construct not in seen
        assert {"choices", "parallel", "maps"} - {construct} <= set(seen), seen

    def test_entry_and_exit_switched_off_are_never_drawn(self) -> None:
        """`entry_exit=False` draws no entry and no exit action."""
        options = StatechartOptions(entry_exit=False)
        specs = drawn(workflow_specs(statecharts=options), 25)
        assert not any({"entry", "exit"} & features(spec) for spec in specs)

    def test_one_construct_alone(self) -> None:
        """Only parallel on: parallel states are drawn, and nothing else of statecharts."""
        options = dataclasses.replace(StatechartOptions.none(), parallel=True)
        seen = Counter(f for spec in drawn(workflow_specs(statecharts=options), 25)
                       for f in features(spec))
        assert {f.split(" ")[0] for f in seen} <= {"parallel", "2", "3", "on_region_failure",
                                                   "region"}
        assert seen["parallel"] >= 10


class TestEveryDrawnDefinitionLoads:
    @settings(FAST, max_examples=60)
    @given(workflow_specs(statecharts=True))
    def test_with_no_error_and_no_warning(self, spec: dict[str, Any]) -> None:
        """Each drawn statechart definition passes every load-time check, warnings too."""
        assert load_definition(spec).warnings == ()

    @pytest.mark.slow
    @settings(FAST, max_examples=1000)
    @given(workflow_specs(blocks_max=8, statecharts=True))
    def test_many_and_longer(self, spec: dict[str, Any]) -> None:
        """A thousand longer chains load clean as well."""
        assert load_definition(spec).warnings == ()


class TestDrawnStatechartsAreFuzzed:
    @settings(FAST, max_examples=6)
    @given(spec=workflow_specs(blocks_max=4, statecharts=True), swarm=st.booleans())
    def test_the_reference_runs_them_under_faults_without_misbehaving(
            self, spec: dict[str, Any], swarm: bool) -> None:
        """A few faulty runs of a few drawn statecharts: every invariant holds (the property
        test in tests/harness/test_chart_properties.py runs more; four runs need not
        exercise every fault kind: held or untested)."""
        report = fuzz(load_definition(spec), FuzzOptions(
            runs=4, swarm=swarm, shrink=False, replay_dir=None,
            sim=SimOptions(executions=2, steps_max=150, liveness_steps=100)))
        assert report.runs >= 4 and report.steps > 0  # and any aimed at what it left
        assert report.verdict in ("held", "untested"), [
            report.vacuous, *(str(v) for f in report.failures for v in f.violations)]

    def test_a_compound_left_is_entered_again_where_it_was_left(self) -> None:
        """Runs of drawn definitions with history pause in a wait of the compound and resume:
        the resumed run is back in the wait it left."""
        specs = [spec for spec in charted(200) if "history" in features(spec)]
        resumed = Counter[bool]()
        for spec in specs:
            left = next(n for n, s in spec["states"].items()
                        if s.get("on", {}).get("pause") == "paused")
            definition = load_definition(spec)
            for seed in range(5):
                resumed.update(record.state == left for record in simulate(definition, seed).history
                               if type(record) is Committed and record.moved == "resume")
        assert resumed[True] >= 1 and not resumed[False], resumed
