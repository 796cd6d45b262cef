"""Fault plans: loading, refusing bad plans with located errors, swarm draws and round trips."""

from __future__ import annotations

import json
import pickle
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest
from small_workflow import base

from fault_injection._catalogue import (
    DESCRIPTIONS,
    FORGED_VARIANTS,
    MALFORMED_VARIANTS,
    TOOL_FAULTS,
    FaultKind,
)
from fault_injection._plan import (
    DEFAULT_RATES,
    SPECS,
    FaultPlan,
    FaultRate,
    FaultsSpec,
    default_plan,
    load_plan,
    no_faults,
)
from fault_injection.errors import FaultInjectionError, FaultPlanError
from reference_machine import CRASH_POINTS, WorkflowDefinition, load_definition


def _write(tmp_path: Path, name: str, text: str) -> Path:
    """Gives the path of a file `name` holding dedented `text`."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _refused(source: Any, **kwargs: Any) -> FaultPlanError:
    """Gives the FaultPlanError that loading `source` raises."""
    with pytest.raises(FaultPlanError, match=r".") as info:
        load_plan(source, **kwargs)
    return info.value


def _get(plan: FaultPlan, kind: FaultKind) -> FaultRate:
    """Gives the plan's rate record for `kind`, which the test expects to be there."""
    entry = plan.get(kind)
    assert entry is not None, f"{kind} is not in the plan"
    return entry


def _no_tools() -> WorkflowDefinition:
    """Gives a valid definition that declares no tools."""
    return load_definition({
        "name": "bare",
        "version": "1",
        "events": {"go": {}},
        "states": {
            "start": {"initial": True, "type": "wait", "on": {"go": "done"},
                      "after": {"delay": "1h", "target": "done"}},
            "done": {"type": "final", "outcome": "success"},
        },
    })


class TestCatalogue:
    def test_order(self) -> None:
        """The kinds are the catalogue, in catalogue order."""
        assert [kind.value for kind in FaultKind] == [
            "crash", "duplicate_event", "late_event", "reordered_events", "dropped_event",
            "tool_transient", "tool_rate_limited", "tool_permanent", "tool_timeout_before_apply",
            "tool_timeout_after_apply", "slow_tool", "malformed_output", "timer_skew",
            "store_write_failure", "second_worker", "forged_approval", "wrong_correlation",
        ]

    def test_tool_faults(self) -> None:
        """The tool faults are the tool_* kinds, slow_tool and malformed_output."""
        expected = {kind for kind in FaultKind if kind.value.startswith("tool_")}
        assert expected | {FaultKind.SLOW_TOOL, FaultKind.MALFORMED_OUTPUT} == TOOL_FAULTS

    def test_every_kind_described_specified_and_rated(self) -> None:
        """Every kind has a description, a spec model, a plan field and a default rate."""
        assert set(DESCRIPTIONS) == set(SPECS) == set(DEFAULT_RATES) == set(FaultKind)
        assert list(FaultsSpec.model_fields) == [kind.value for kind in FaultKind]
        assert all(0 < rate <= 1 for rate in DEFAULT_RATES.values())

    def test_variants(self) -> None:
        """The malformed-output and forged-approval variants are the documented four each."""
        assert MALFORMED_VARIANTS == ("wrong_shape", "missing_field", "wrong_type", "unknown_event")
        assert FORGED_VARIANTS == ("wrong_source", "wrong_role", "stale_request", "changed_hash")


class TestLoadPlan:
    def test_yaml(self, tmp_path: Path) -> None:
        """A YAML file gives the plan, with bare rates, parameters and durations."""
        path = _write(tmp_path, "plan.yaml", """
            faults:
              crash: {rate: 0.1, points: [before_commit]}
              duplicate_event: 0.2
              slow_tool: {rate: 0.3, tools: [svc.call], latency: 2m}
              timer_skew: {rate: 0.4, max_skew: 500ms}
              dropped_event: {rate: 0.5, redeliver_after: 10}
              late_event: {rate: 0.6, delay: 1.5}
              malformed_output: {rate: 0.7, variants: [wrong_type]}
              forged_approval: {rate: 0.8, variants: [changed_hash, wrong_role]}
            swarm: true
        """)
        plan = load_plan(path)
        assert plan.swarm
        assert _get(plan, FaultKind.CRASH) == FaultRate(FaultKind.CRASH, 0.1,
                                                        points=("before_commit",))
        assert plan.rate(FaultKind.DUPLICATE_EVENT) == 0.2
        slow = plan.get(FaultKind.SLOW_TOOL)
        assert slow is not None
        assert (slow.tools, slow.latency_ms) == (("svc.call",), 120_000)
        assert _get(plan, FaultKind.TIMER_SKEW).max_skew_ms == 500
        assert _get(plan, FaultKind.DROPPED_EVENT).redeliver_after_ms == 10_000
        assert _get(plan, FaultKind.LATE_EVENT).delay_ms == 1_500
        assert _get(plan, FaultKind.MALFORMED_OUTPUT).variants == ("wrong_type",)
        forged = plan.get(FaultKind.FORGED_APPROVAL)
        assert forged is not None
        assert forged.variants == ("changed_hash", "wrong_role")

    def test_json(self, tmp_path: Path) -> None:
        """A JSON file gives the same plan as the equal dict."""
        data = {"faults": {"crash": 0.1, "tool_transient": {"rate": 0.2}}, "swarm": False}
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        assert load_plan(str(path)) == load_plan(data)

    def test_dict_defaults(self) -> None:
        """Parameters left out take their defaults; rates come back in catalogue order."""
        plan = load_plan({"faults": {
            "forged_approval": 0.1, "slow_tool": 0.1, "timer_skew": 0.1, "dropped_event": 0.1,
            "late_event": 0.1, "malformed_output": 0.1, "crash": 0.1,
        }})
        assert [entry.kind for entry in plan.rates] == [
            FaultKind.CRASH, FaultKind.LATE_EVENT, FaultKind.DROPPED_EVENT, FaultKind.SLOW_TOOL,
            FaultKind.MALFORMED_OUTPUT, FaultKind.TIMER_SKEW, FaultKind.FORGED_APPROVAL,
        ]
        assert _get(plan, FaultKind.CRASH).points == ()  # every point the machine names
        assert _get(plan, FaultKind.SLOW_TOOL).latency_ms == 60_000
        assert _get(plan, FaultKind.SLOW_TOOL).tools is None
        assert _get(plan, FaultKind.TIMER_SKEW).max_skew_ms == 5_000
        assert _get(plan, FaultKind.DROPPED_EVENT).redeliver_after_ms == 30_000
        assert _get(plan, FaultKind.LATE_EVENT).delay_ms == 60_000
        assert _get(plan, FaultKind.MALFORMED_OUTPUT).variants == MALFORMED_VARIANTS
        assert _get(plan, FaultKind.FORGED_APPROVAL).variants == FORGED_VARIANTS
        assert not plan.swarm

    def test_bare_rates(self) -> None:
        """A bare number is the rate, the same as `{rate: n}`."""
        assert load_plan({"faults": {"crash": 0.25, "second_worker": 1}}) == load_plan(
            {"faults": {"crash": {"rate": 0.25}, "second_worker": {"rate": 1.0}}})

    def test_zero_rate_kept_but_not_enabled(self) -> None:
        """A kind written with rate 0 is in the plan but not among its enabled kinds."""
        plan = load_plan({"faults": {"crash": 0, "duplicate_event": 0.1}})
        assert [entry.kind for entry in plan.rates] == [FaultKind.CRASH, FaultKind.DUPLICATE_EVENT]
        assert plan.kinds == (FaultKind.DUPLICATE_EVENT,)

    def test_custom_crash_points(self) -> None:
        """`crash_points=` sets the points a plan may name."""
        plan = load_plan({"faults": {"crash": {"rate": 0.1, "points": ["b"]}}},
                         crash_points=("a", "b"))
        assert _get(plan, FaultKind.CRASH).points == ("b",)

    def test_empty_faults(self) -> None:
        """A plan without faults injects nothing."""
        assert load_plan({}) == load_plan({"faults": {}}) == no_faults()

    def test_not_a_path_or_mapping(self) -> None:
        """A source that is neither a path nor a mapping is a TypeError."""
        with pytest.raises(TypeError, match="path or a mapping"):
            load_plan(42)  # type: ignore[arg-type]


class TestBadPlans:
    def test_unknown_kind(self) -> None:
        """An unknown kind is refused at `faults.<kind>`, with a suggestion and the known kinds."""
        error = _refused({"faults": {"crsh": 0.1}})
        assert error.location == "faults.crsh"
        assert "did you mean 'crash'?" in error.message
        assert "forged_approval" in error.message

    def test_unknown_crash_point(self) -> None:
        """A crash point the runtime lacks is refused at its index, naming the known points."""
        error = _refused({"faults": {"crash": {"rate": 0.1,
                                               "points": ["before_commit", "before_comit"]}}})
        assert error.location == "faults.crash.points[1]"
        assert "did you mean 'before_commit'?" in error.message
        assert all(point in error.message for point in CRASH_POINTS)

    @pytest.mark.parametrize(("fault", "location"), [
        (-0.1, "faults.crash"),
        (1.5, "faults.crash"),
        ({"rate": -0.1}, "faults.crash.rate"),
        ({"rate": 1.01}, "faults.crash.rate"),
        ({"rate": float("nan")}, "faults.crash.rate"),
        ({"rate": True}, "faults.crash.rate"),
    ])
    def test_rate_out_of_range(self, fault: Any, location: str) -> None:
        """A rate outside [0, 1] (or not a number) is refused, naming the rate."""
        error = _refused({"faults": {"crash": fault}})
        assert error.location == location
        assert error.message.startswith("rate must be a number from 0 to 1")

    def test_not_a_rate_or_mapping(self) -> None:
        """A fault that is neither a number nor a mapping is refused at the fault."""
        error = _refused({"faults": {"crash": "often"}})
        assert error.location == "faults.crash"
        assert "expected a rate" in error.message

    def test_missing_rate(self) -> None:
        """A mapping without `rate:` is refused."""
        error = _refused({"faults": {"crash": {"points": ["before_commit"]}}})
        assert error.location == "faults.crash.rate"
        assert "missing" in error.message

    def test_unknown_parameter(self) -> None:
        """A parameter the kind lacks is refused, with a suggestion and the kind's parameters."""
        error = _refused({"faults": {"slow_tool": {"rate": 0.1, "latncy": "1s"}}})
        assert error.location == "faults.slow_tool.latncy"
        assert "did you mean 'latency'?" in error.message
        assert "rate, tools, latency" in error.message

    def test_parameter_of_another_kind(self) -> None:
        """A parameter of another kind is refused too (crash has no `tools:`)."""
        error = _refused({"faults": {"crash": {"rate": 0.1, "tools": ["svc.call"]}}})
        assert error.location == "faults.crash.tools"

    def test_unknown_top_level_key(self) -> None:
        """A top-level key other than `faults`/`swarm` is refused."""
        error = _refused({"fault": {"crash": 0.1}})
        assert error.location == "fault"
        assert "did you mean 'faults'?" in error.message

    def test_swarm_not_boolean(self) -> None:
        """`swarm:` must be a boolean, not a string."""
        error = _refused({"swarm": "yes"})
        assert error.location == "swarm"

    @pytest.mark.parametrize(("kind", "variant", "suggestion"), [
        ("malformed_output", "wrong_shap", "wrong_shape"),
        ("forged_approval", "wrong_sauce", "wrong_source"),
    ])
    def test_unknown_variant(self, kind: str, variant: str, suggestion: str) -> None:
        """A variant the kind lacks is refused at its index, with a suggestion."""
        error = _refused({"faults": {kind: {"rate": 0.1, "variants": [variant]}}})
        assert error.location == f"faults.{kind}.variants[0]"
        assert f"did you mean {suggestion!r}?" in error.message

    @pytest.mark.parametrize(("kind", "parameter", "values"), [
        ("crash", "points", ["before_commit", "after_commit_before_dispatch", "before_commit"]),
        ("tool_transient", "tools", ["a", "b", "a"]),
        ("malformed_output", "variants", ["wrong_type", "wrong_shape", "wrong_type"]),
        ("forged_approval", "variants", ["wrong_role", "wrong_source", "wrong_role"]),
    ])
    def test_duplicate_entries(self, kind: str, parameter: str, values: list[str]) -> None:
        """A repeated list entry is refused at the repeat, naming the first."""
        error = _refused({"faults": {kind: {"rate": 0.1, parameter: values}}})
        assert error.location == f"faults.{kind}.{parameter}[2]"
        assert "duplicate" in error.message
        assert "first at [0]" in error.message

    def test_empty_list(self) -> None:
        """An empty list is refused: leaving the parameter out means all."""
        error = _refused({"faults": {"tool_permanent": {"rate": 0.1, "tools": []}}})
        assert error.location == "faults.tool_permanent.tools"

    def test_bad_duration(self) -> None:
        """A duration that does not parse is refused at its parameter."""
        error = _refused({"faults": {"late_event": {"rate": 0.1, "delay": "soon"}}})
        assert error.location == "faults.late_event.delay"
        assert "expected a duration" in error.message

    def test_line_of_offending_key(self, tmp_path: Path) -> None:
        """An error in a YAML file carries the line of the key at fault."""
        path = _write(tmp_path, "plan.yaml", """
            # comment
            faults:
              crash: 0.1
              slow_tool:
                rate: 0.2
                latncy: 1s
        """)
        error = _refused(path)
        assert (error.source, error.line, error.location) == (str(path), 6,
                                                              "faults.slow_tool.latncy")
        assert str(error).startswith(f"{path}:6: faults.slow_tool.latncy: unknown parameter")

    def test_line_of_list_entry(self, tmp_path: Path) -> None:
        """An unknown crash point in a YAML block list carries that entry's line."""
        path = _write(tmp_path, "plan.yml", """
            faults:
              crash:
                rate: 0.1
                points:
                  - before_commit
                  - nowhere
        """)
        error = _refused(path)
        assert (error.line, error.location) == (6, "faults.crash.points[1]")

    def test_line_of_bare_rate(self, tmp_path: Path) -> None:
        """A bad bare rate carries the line of its kind."""
        error = _refused(_write(tmp_path, "plan.yaml", "swarm: true\nfaults:\n  crash: 2\n"))
        assert (error.line, error.location) == (3, "faults.crash")

    def test_yaml_syntax(self, tmp_path: Path) -> None:
        """Bad YAML syntax is refused with its line."""
        error = _refused(_write(tmp_path, "plan.yaml", "faults:\n  crash: [0.1\n  slow: 1\n"))
        assert error.line is not None
        assert "YAML syntax" in error.message

    def test_yaml_duplicate_key(self, tmp_path: Path) -> None:
        """A key given twice in YAML is refused at its second line."""
        error = _refused(_write(tmp_path, "plan.yaml", "faults:\n  crash: 0.1\n  crash: 0.2\n"))
        assert (error.line, error.location) == (3, "faults.crash")
        assert "duplicate key" in error.message

    def test_yaml_unsafe_tag(self, tmp_path: Path) -> None:
        """A Python object tag is refused by the safe loader, not constructed."""
        path = _write(tmp_path, "plan.yaml", "faults: !!python/object/apply:os.system [echo]\n")
        assert "YAML syntax" in _refused(path).message

    def test_json_syntax(self, tmp_path: Path) -> None:
        """Bad JSON syntax is refused with its line."""
        path = tmp_path / "plan.json"
        path.write_text('{\n  "faults": {"crash": 0.1,}\n}\n', encoding="utf-8")
        error = _refused(path)
        assert error.line == 2
        assert "JSON syntax" in error.message

    def test_empty_file(self, tmp_path: Path) -> None:
        """An empty file is refused as empty."""
        error = _refused(_write(tmp_path, "plan.yaml", "# nothing\n"))
        assert "empty" in error.message
        assert "faults" in error.message

    @pytest.mark.parametrize("text", ["- crash\n", "0.5\n"])
    def test_not_a_mapping(self, tmp_path: Path, text: str) -> None:
        """A file whose top level is not a mapping is refused."""
        error = _refused(_write(tmp_path, "plan.yaml", text))
        assert error.location == ""
        assert "expected a mapping" in error.message

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is refused, naming the file."""
        path = tmp_path / "absent.yaml"
        error = _refused(path)
        assert (error.source, error.message) == (str(path), "file not found")
        assert str(error) == f"{path}: file not found"

    def test_unknown_suffix(self, tmp_path: Path) -> None:
        """A file that is neither YAML nor JSON is refused."""
        error = _refused(_write(tmp_path, "plan.toml", "x = 1\n"))
        assert "expected a .yaml, .yml or .json file" in error.message

    def test_error_type(self) -> None:
        """FaultPlanError is a ValueError under the package root, and pickles with its details."""
        error = _refused({"faults": {"crsh": 0.1}})
        assert isinstance(error, FaultInjectionError)
        assert isinstance(error, ValueError)
        copy = pickle.loads(pickle.dumps(error))
        assert (copy.location, copy.message, copy.source, copy.line, str(copy)) == (
            error.location, error.message, error.source, error.line, str(error))
        assert str(error).startswith("<plan>: faults.crsh: unknown fault kind 'crsh'")


class TestCheck:
    def test_tool_fault_without_tools(self) -> None:
        """An enabled tool fault is refused for a definition without tools, naming it."""
        plan = load_plan({"faults": {"crash": 0.1, "tool_transient": 0.1}})
        with pytest.raises(FaultPlanError, match="'bare' declares no tools") as info:
            plan.check(_no_tools())
        assert info.value.location == "faults.tool_transient"

    def test_disabled_tool_fault_without_tools(self) -> None:
        """A tool fault at rate 0, and non-tool faults, pass against a definition without tools."""
        load_plan({"faults": {"crash": 0.1, "slow_tool": 0}}).check(_no_tools())

    def test_unknown_tool(self) -> None:
        """A `tools:` entry the definition lacks is refused at its index, with a suggestion."""
        plan = load_plan({"faults": {"tool_permanent": {"rate": 0.1,
                                                        "tools": ["svc.call", "svc.cal"]}}})
        with pytest.raises(FaultPlanError, match=r"did you mean 'svc\.call'") as info:
            plan.check(load_definition(base()))
        assert info.value.location == "faults.tool_permanent.tools[1]"

    def test_known_tools(self) -> None:
        """The default plan and one naming declared tools pass against the small workflow."""
        definition = load_definition(base())
        default_plan().check(definition)
        load_plan({"faults": {"slow_tool": {"rate": 0.1, "tools": ["svc.undo"]}}}).check(
            definition)


class TestFaultPlan:
    def test_rate_of_absent_kind(self) -> None:
        """The rate of a kind the plan leaves out is 0.0, and `get` gives None."""
        plan = load_plan({"faults": {"crash": 0.1}})
        assert plan.rate(FaultKind.SECOND_WORKER) == 0.0
        assert plan.get(FaultKind.SECOND_WORKER) is None
        assert no_faults().rate(FaultKind.CRASH) == 0.0
        assert no_faults().kinds == ()

    def test_default_plan(self) -> None:
        """The default plan turns every kind on at its default rate."""
        plan = default_plan()
        assert plan.kinds == tuple(FaultKind)
        assert all(plan.rate(kind) == DEFAULT_RATES[kind] for kind in FaultKind)
        assert not plan.swarm
        assert default_plan(swarm=True).swarm

    def test_rates_sorted_and_unique(self) -> None:
        """A plan built by hand sorts its rates into catalogue order and refuses repeats."""
        plan = FaultPlan((FaultRate(FaultKind.SECOND_WORKER, 0.1), FaultRate(FaultKind.CRASH, 0.2)))
        assert plan.kinds == (FaultKind.CRASH, FaultKind.SECOND_WORKER)
        with pytest.raises(FaultPlanError, match="more than once"):
            FaultPlan((FaultRate(FaultKind.CRASH, 0.1), FaultRate(FaultKind.CRASH, 0.2)))

    def test_fault_rate_checks_rate(self) -> None:
        """A FaultRate built by hand refuses a rate outside [0, 1]."""
        with pytest.raises(FaultPlanError, match="rate must be a number from 0 to 1"):
            FaultRate(FaultKind.CRASH, 1.5)

    def test_hashable(self) -> None:
        """Equal plans hash equal, so they can key caches."""
        assert hash(default_plan()) == hash(default_plan())

    @pytest.mark.parametrize("plan", [
        default_plan(),
        default_plan(swarm=True),
        no_faults(),
        FaultPlan((FaultRate(FaultKind.CRASH, 0.0, points=("after_commit_before_dispatch",)),
                   FaultRate(FaultKind.SLOW_TOOL, 0.123456789, tools=("a", "b"), latency_ms=1),
                   FaultRate(FaultKind.FORGED_APPROVAL, 1.0, variants=("stale_request",)),
                   FaultRate(FaultKind.TIMER_SKEW, 0.5, max_skew_ms=0))),
    ])
    def test_round_trip(self, plan: FaultPlan) -> None:
        """`load_plan(plan.to_dict())` gives an equal plan, also through JSON text."""
        assert load_plan(plan.to_dict()) == plan
        assert load_plan(json.loads(json.dumps(plan.to_dict()))) == plan

    def test_round_trip_drawn(self) -> None:
        """A swarm-drawn plan round-trips too."""
        plan = default_plan(swarm=True).for_run(random.Random(7))
        assert load_plan(plan.to_dict()) == plan


class TestForRun:
    def test_not_swarm_gives_same_plan(self) -> None:
        """Without swarm mode the plan is used as is, and no randomness is drawn."""
        plan = default_plan()
        rng = random.Random(3)
        state = rng.getstate()
        assert plan.for_run(rng) is plan
        assert rng.getstate() == state

    def test_deterministic(self) -> None:
        """The same seed draws the same plan."""
        plan = default_plan(swarm=True)
        assert plan.for_run(random.Random(42)) == plan.for_run(random.Random(42))

    def test_seeds_differ(self) -> None:
        """Different seeds eventually draw different plans."""
        plan = default_plan(swarm=True)
        drawn = {plan.for_run(random.Random(seed)) for seed in range(20)}
        assert len(drawn) > 1

    @pytest.mark.parametrize("seed", range(50))
    def test_drawn_plan_bounds(self, seed: int) -> None:
        """A drawn plan is non-swarm, non-empty, a subset, with rates in [rate/4, rate]."""
        plan = load_plan({"faults": {"crash": 0.4, "slow_tool": {"rate": 0.8, "latency": "3s"},
                                     "timer_skew": 0, "second_worker": 1},
                          "swarm": True})
        drawn = plan.for_run(random.Random(seed))
        assert not drawn.swarm
        assert drawn.kinds
        assert set(drawn.kinds) <= set(plan.kinds)
        for entry in drawn.rates:
            original = plan.get(entry.kind)
            assert original is not None
            assert original.rate / 4 <= entry.rate <= original.rate
            assert entry.latency_ms == original.latency_ms

    def test_single_kind_always_kept(self) -> None:
        """With one enabled kind, every draw keeps it."""
        plan = load_plan({"faults": {"crash": 0.2}, "swarm": True})
        for seed in range(20):
            assert plan.for_run(random.Random(seed)).kinds == (FaultKind.CRASH,)

    def test_nothing_enabled(self) -> None:
        """A swarm plan with nothing enabled draws a non-swarm plan with nothing enabled."""
        drawn = load_plan({"faults": {"crash": 0}, "swarm": True}).for_run(random.Random(1))
        assert (drawn.kinds, drawn.swarm) == ((), False)

    def test_subsets_vary(self) -> None:
        """Across seeds, swarm mode draws different subsets of kinds."""
        plan = default_plan(swarm=True)
        subsets = {plan.for_run(random.Random(seed)).kinds for seed in range(20)}
        assert len(subsets) > 1


def test_a_swarm_plans_rates_are_drawn_as_dataclasses_replace_would_make_them() -> None:
    """`FaultRate.with_rate` skips `dataclasses.replace` (a swarm plan draws a rate per kind
    for every run): it must make the same fault, and refuse a rate out of range alike."""
    import dataclasses
    import random

    from fault_injection import default_plan
    from fault_injection._plan import HOT_RATES

    plan = default_plan(swarm=True)
    for entry in plan.rates:
        assert entry.with_rate(entry.rate / 3) == dataclasses.replace(entry, rate=entry.rate / 3)
        assert repr(entry.with_rate(0.5)) == repr(dataclasses.replace(entry, rate=0.5))
        with pytest.raises(ValueError, match="rate must be a number from 0 to 1"):
            entry.with_rate(1.5)
    drawn = plan.for_run(random.Random(7))
    assert drawn.rates and not drawn.swarm
    assert all(plan.rate(entry.kind) / 4 <= entry.rate <= plan.rate(entry.kind)
               or entry.rate == max(plan.rate(entry.kind), HOT_RATES[entry.kind])
               for entry in drawn.rates)
