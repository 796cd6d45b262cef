"""Regression tests for the commit "Fixes from review": one test per fix, each showing that the
fixed behaviour works and that the bad input is refused the way it should be. Tests marked
xfail(strict) document defects the fixes left behind (see their reasons)."""

from __future__ import annotations

import copy
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from driving import Run, load_variant
from small_workflow import base as _base
from small_workflow import step_of as _step

from reference_machine import (
    COMPENSATION_FAILED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    Decision,
    DefinitionError,
    DefinitionSyntaxError,
    Event,
    GuardError,
    Rejected,
    RejectReason,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    Severity,
    Status,
    TimerPurpose,
    Transition,
    action_hash,
    lint,
    load_definition,
    start_event,
)
from reference_machine._expr import ExpressionSyntaxError, compile_expression

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = Path(__file__).resolve().parent / "workflows"
HOUR = 3_600_000

# A small valid workflow: `start` waits for `go`, then `work` runs one step.






def _rejected(decision: Decision, reason: RejectReason, pattern: str) -> None:
    """Asserts `decision` is a rejection for `reason` whose detail matches `pattern`."""
    assert isinstance(decision, Rejected), decision
    assert decision.reason == reason, decision
    assert re.search(pattern, decision.detail), decision.detail




def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs `python -m harness.cli ARGS` in `cwd` and gives the finished process."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


# -- 1. JSON Schema $ref -------------------------------------------------------------------------


def test_json_schema_ref_must_be_local_and_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL or dangling $ref is bad-schema at load; a local $defs ref checks payloads, no I/O."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"amount": {"$ref": "#/$defs/amount"}},
        "$defs": {"amount": {"type": "integer", "minimum": 1}},
    }
    refused = (("https://schemas.example/amount.json", "is not a local JSON pointer"),
               ("#/$defs/missing", "points to nothing in the schema"))
    for reference, problem in refused:
        data = _base()
        data["events"]["go"]["payload"] = copy.deepcopy(schema)
        data["events"]["go"]["payload"]["properties"]["amount"]["$ref"] = reference
        with pytest.raises(DefinitionError,
                           match=rf"events\.go\.payload: \$ref {re.escape(repr(reference))} "
                                 rf"{problem}.*\[bad-schema\]") as info:
            load_definition(data)
        assert [(f.code, f.location) for f in info.value.findings] == [
            ("bad-schema", "events.go.payload")]
    data = _base()
    data["tools"]["svc.call"]["output"] = {"$ref": "http://schemas.example/out.json"}
    with pytest.raises(DefinitionError, match=r"tools\.svc\.call\.output: \$ref .*\[bad-schema\]"):
        load_definition(data)

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a payload check tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    data = _base()
    data["events"]["go"]["payload"] = schema
    run = Run(load_definition(data))
    run.start()
    _rejected(run.decide(run.user("go", {"amount": "ten"})), RejectReason.INVALID_PAYLOAD,
              r"payload of 'go' does not match its schema: amount: 'ten' is not of type "
              r"'integer'")
    _rejected(run.decide(run.user("go", {"amount": 0})), RejectReason.INVALID_PAYLOAD,
              r"amount: 0 is less than the minimum of 1")
    accepted = run.apply(run.user("go", {"amount": 10}))
    assert accepted.transition == Transition("start", "go", "work", "")


# -- 2. inputs that fail at run time -------------------------------------------------------------


def test_failing_step_approval_and_compensation_inputs_are_action_errors() -> None:
    """Inputs that raise when evaluated become Rejected(action_error) naming the state."""
    # on start: the initial state's step input fails
    data = _base()
    data["states"]["start"] = {"initial": True, "step": {"tool": "svc.call",
                                                         "input": {"n": "=context.a + 1"}},
                               "on": {"step.succeeded": "done", "step.failed": "failed"}}
    del data["states"]["work"]
    definition = load_definition(data)
    run = Run(definition)
    _rejected(run.decide(start_event(run.ex.id)), RejectReason.ACTION_ERROR,
              r"^step input of state 'start' failed: TypeError: unsupported operand")
    run = Run(definition, context={"a": 1})
    (command,) = [c for c in run.start().commands if isinstance(c, RunEffect)]
    assert command.input == {"n": 2}

    # on entering a later state
    data = _base()
    _step(data)["input"] = {"n": "=context.a + 1"}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    _rejected(run.decide(run.user("go")), RejectReason.ACTION_ERROR,
              r"^step input of state 'work' failed: TypeError")
    assert run.ex.state == "start"
    run = Run(definition, context={"a": 41})
    run.start()
    (command,) = [c for c in run.apply(run.user("go")).commands if isinstance(c, RunEffect)]
    assert command.input == {"n": 42}

    # a compensation input, planned from the context after the success transition's actions
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.undo", "input": {"id": "=context.b + 1"}}
    data["states"]["work"]["on"]["step.succeeded"] = {
        "target": "done", "actions": [{"assign": {"b": "event.payload.b"}}]}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    run.apply(run.user("go"))
    _rejected(run.decide(run.result({})), RejectReason.ACTION_ERROR,
              r"^compensation input of state 'work' failed: TypeError")
    assert run.ex.effect is not None and run.ex.state == "work"
    run.apply(run.result({"b": 1}))
    assert [(s.tool, s.input) for s in run.ex.completed] == [("svc.undo", {"id": 2})]

    # an approval state whose gated step's input fails
    data = _base()
    data["states"]["start"]["on"] = {"go": "asking"}
    data["states"]["asking"] = {
        "type": "wait",
        "approval": {"for_state": "work", "summary": "Run for {a}", "roles": ["boss"],
                     "expires_after": "1h"},
        "on": {"approval.granted": "work", "approval.denied": "failed"},
    }
    _step(data).update(input={"n": "=context.a + 1"}, needs_approval=True)
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    _rejected(run.decide(run.user("go")), RejectReason.ACTION_ERROR,
              r"^approved step's input of state 'asking' failed: TypeError")
    run = Run(definition, context={"a": 1})
    run.start()
    (request,) = [c for c in run.apply(run.user("go")).commands
                  if isinstance(c, RequestApproval)]
    assert request.action_hash == action_hash(definition, "work", run.ex.context)


# -- 3. malformed events -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [STEP_FAILED, STEP_SUCCEEDED, "go"])
def test_malformed_event_is_invalid_payload_not_a_crash(kind: str) -> None:
    """A None or list payload, or a list type or source, is Rejected(invalid_payload)."""
    run = Run(load_definition(_base()))
    run.start()
    user = kind == "go"
    if not user:
        run.apply(run.user("go"))

    def event(payload: Any, *, kind_: Any = kind, source: Any = None) -> Event:
        answers = "" if user or run.ex.effect is None else run.ex.effect.effect_id
        if source is None:
            source = "human" if user else "tool"
        return Event(run.next_id(), kind_, source, payload, answers)

    good = {"category": "permanent"} if kind == STEP_FAILED else {}
    bad_events = {
        "payload None": event(None),
        "payload list": event([good]),
        "type list": event(good, kind_=[kind]),
        "source list": event(good, source=["human" if user else "tool"]),
    }
    for label, bad in bad_events.items():
        decision = run.decide(bad)
        assert isinstance(decision, Rejected), (label, decision)
        assert decision.reason == RejectReason.INVALID_PAYLOAD, (label, decision)
        assert "payload a mapping" in decision.detail, (label, decision.detail)
    expected = {STEP_FAILED: "failed", STEP_SUCCEEDED: "done", "go": "work"}[kind]
    assert run.apply(event(good)).execution.state == expected


# -- 4. compensation inputs checked at load ------------------------------------------------------


def test_compensation_input_expressions_are_checked_at_load() -> None:
    """A bad compensation input expression is located at ...compensation.input.KEY."""
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.undo",
                                   "input": {"ok": "=context.count", "bad": "=foo(",
                                             "nested": {"worse": "=context._secret"}}}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.compensation\.input\.bad: expression") as info:
        load_definition(data)
    assert sorted((f.code, f.location) for f in info.value.findings) == [
        ("bad-expression", "states.work.step.compensation.input.bad"),
        ("bad-expression", "states.work.step.compensation.input.nested.worse"),
    ]
    _step(data)["compensation"]["input"] = {"ok": "=context.count", "fixed": 1}
    step = load_definition(data).states["work"].step
    assert step is not None and step.compensation is not None
    assert step.compensation.input({"count": 3}) == {"ok": 3, "fixed": 1}


# -- 5. guards -----------------------------------------------------------------------------------


def test_guards_refuse_string_formatting_and_count_columns_as_written() -> None:
    """str % is a GuardError (guard_error in decide); numeric % works; columns count indents."""
    started = time.perf_counter()
    with pytest.raises(GuardError, match=r"string formatting with % is not allowed"):
        compile_expression('"%09999999d" % 1')({}, None)
    assert time.perf_counter() - started < 1.0  # refused, not built
    assert compile_expression("7 % 3 == 1")({}, None) is True

    data = _base()
    data["context"]["n"] = 7
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": "context.n % 3 == 1"}
    data["states"]["start"]["on"]["submit"] = {"target": "work",
                                               "guard": '"%09999999d" % context.n != ""'}
    run = Run(load_definition(data))
    run.start()
    _rejected(run.decide(run.user("submit")), RejectReason.GUARD_ERROR,
              r"failed: GuardError: string formatting with % is not allowed")
    assert run.apply(run.user("go")).execution.state == "work"

    with pytest.raises(ExpressionSyntaxError, match=r"unknown name 'foo'") as info:
        compile_expression("   foo > 1")
    assert info.value.col == 4
    with pytest.raises(ExpressionSyntaxError, match=r"'\(' was never closed") as info:
        compile_expression("  (1")
    assert info.value.col == 3
    data = _base()
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": "   foo > 1"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: guard '   foo > 1' at column 4: "
                             r"unknown name 'foo'"):
        load_definition(data)


# -- 6. hostile YAML -----------------------------------------------------------------------------


_FINAL = "states:\n  s: {initial: true, type: final, outcome: success}\n"


def _laughs(levels: int) -> str:
    """Gives YAML whose alias chain expands to 10**levels scalars ("billion laughs")."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_alias_bombs_are_unreadable_but_reuse_loads() -> None:
    """A recursive alias or a billion laughs is unreadable input; a reused anchor loads."""
    recursive = "name: wf\ncontext: &a {x: *a}\n" + _FINAL
    with pytest.raises(DefinitionSyntaxError, match=r"a YAML alias refers to itself") as info:
        load_definition(recursive)
    assert [f.code for f in info.value.findings] == ["unreadable"]
    assert info.value.findings[0].line == 2

    started = time.perf_counter()
    with pytest.raises(DefinitionSyntaxError,
                       match=r"expands to more than 100000 nodes through aliases") as info:
        load_definition("name: wf\ncontext:\n" + textwrap.indent(_laughs(9), "  ") + _FINAL)
    assert [f.code for f in info.value.findings] == ["unreadable"]
    assert time.perf_counter() - started < 10

    reuse = textwrap.dedent("""
        name: wf
        tools:
          t.a: {idempotency_keys: true}
        states:
          one:
            initial: true
            step:
              tool: t.a
              retry: &policy {attempts_max: 5, delay_initial: 2s, delay_max: 30s}
            on: {step.succeeded: two, step.failed: failed}
          two:
            step:
              tool: t.a
              retry: *policy
            on: {step.succeeded: done, step.failed: failed}
          done: {type: final, outcome: success}
          failed: {type: final, outcome: failure}
    """)
    definition = load_definition(reuse)
    policies = [(s.attempts_max, s.delay_initial_ms, s.delay_max_ms)
                for s in (definition.states["one"].step, definition.states["two"].step)
                if s is not None]
    assert policies == [(5, 2000, 30_000), (5, 2000, 30_000)]


# -- 7. compensation retries after a timeout -----------------------------------------------------


def _saga(undo_tool: dict[str, Any]) -> Run:
    """Gives a run compensating `first` (undo tool `undo_tool`) after `second` failed."""
    data = {
        "name": "saga",
        "tools": {"t.do": {"idempotency_keys": True}, "t.undo": undo_tool},
        "compensation_failed": "stuck",
        "states": {
            "first": {"initial": True,
                      "step": {"tool": "t.do", "compensation": {"tool": "t.undo",
                                                                "attempts_max": 3}},
                      "on": {"step.succeeded": "second", "step.failed": "failed"}},
            "second": {"step": {"tool": "t.do",
                                "retry": {"attempts_max": 1, "on_exhausted": "compensate"}},
                       "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "stuck": {"type": "wait", "after": {"delay": "1h", "target": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    run = Run(load_definition(data))
    run.start()
    run.apply(run.result())
    run.apply(run.failure("permanent"))
    assert run.ex.status == Status.COMPENSATING
    return run


def test_undo_is_not_retried_blindly_after_a_timeout() -> None:
    """A keyless undo's timeout goes to compensation_failed; transient, or a safe tool, retries."""
    run = _saga({"idempotency_keys": False})
    decision = run.apply(run.compensation("timeout"))
    assert decision.transition == Transition("second", COMPENSATION_FAILED, "stuck",
                                             "compensation_failed")
    assert run.ex.state == "stuck" and run.ex.status == Status.WAITING

    for tool, category in (({"idempotency_keys": False}, "transient"),
                           ({"idempotency_keys": True}, "timeout"),
                           ({"repeatable": True}, "timeout")):
        run = _saga(tool)
        decision = run.apply(run.compensation(category))
        assert decision.transition is None, (tool, category)
        assert run.ex.status == Status.COMPENSATING
        assert [type(c) for c in decision.commands] == [ScheduleTimer]
        retried = run.fire(TimerPurpose.RETRY)
        (command,) = retried.commands
        assert isinstance(command, RunCompensation)
        assert (command.tool, command.attempt) == ("t.undo", 2)


# -- 8. action hash is the same in every process -------------------------------------------------


_HASH_SCRIPT = """
import json, reference_machine as rm
d = rm.load_definition({"name": "wf", "tools": {"t": {"idempotency_keys": True}},
    "states": {"s": {"initial": True,
                     "step": {"tool": "t", "input": {"tags": "=context.tags", "m": "=context.m"}},
                     "on": {"step.succeeded": "done", "step.failed": "done"}},
               "done": {"type": "final", "outcome": "success"}}})
tags = {f"tag-{i}" for i in range(16)}
print(json.dumps({
    "hash": rm.action_hash(d, "s", {"tags": tags, "m": {"k": 1}}),
    "mixed": rm.action_hash(d, "s", {"tags": frozenset({1, "x"}), "m": {1: "a", "b": 2}}),
    "order": list(tags),
}))
"""


def test_action_hash_is_the_same_under_every_hash_seed() -> None:
    """The hash of an input holding a set is seed-independent; mixed key types do not raise."""
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _HASH_SCRIPT], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert len({tuple(o["order"]) for o in outputs}) > 1  # the seeds do reorder the set
    assert len({o["hash"] for o in outputs}) == 1
    assert len({o["mixed"] for o in outputs}) == 1
    assert all(re.fullmatch(r"[0-9a-f]{64}", o["mixed"]) for o in outputs)

    data = _base()
    _step(data)["input"] = {"m": "=context.m"}
    definition = load_definition(data)
    mixed = action_hash(definition, "work", {"m": {1: "a", "b": 2, None: 3}})
    assert mixed != action_hash(definition, "work", {"m": {"b": 2}})
    with pytest.raises(ValueError, match=r"state 'start' of 'wf' runs no step"):
        action_hash(definition, "start", {})


# -- 9. backoff ----------------------------------------------------------------------------------


def test_backoff_never_overflows_and_clamps_nan_entropy() -> None:
    """multiplier 1e10 over 99 retries stays capped at delay_max; NaN entropy gives a delay."""
    data = _base()
    del data["states"]["start"]
    data["states"]["work"]["initial"] = True
    _step(data)["retry"] = {"attempts_max": 100, "multiplier": 1e10, "delay_initial": "1s",
                            "delay_max": "1h", "jitter": 0.5}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    delays = []
    for _ in range(99):
        decision = run.apply(run.failure("transient"), entropy=0.5)
        (command,) = [c for c in decision.commands if isinstance(c, ScheduleTimer)]
        delays.append(command.fire_at - run.now)
        run.fire(TimerPurpose.RETRY)
    assert run.ex.attempt == 100
    assert delays[0] == 1000 and set(delays[1:]) == {HOUR}
    assert all(isinstance(d, int) for d in delays)
    exhausted = run.apply(run.failure("transient"))
    assert exhausted.transition == Transition("work", STEP_FAILED, "failed", "")

    for attempts, expected in ((1, 500), (60, HOUR // 2)):  # NaN draws the low end
        run = Run(definition)
        run.start()
        for _ in range(attempts - 1):
            run.apply(run.failure("transient"))
            run.fire(TimerPurpose.RETRY)
        decision = run.apply(run.failure("transient"), entropy=float("nan"))
        (command,) = [c for c in decision.commands if isinstance(c, ScheduleTimer)]
        assert command.fire_at - run.now == expected


# -- 10. cycle detection -------------------------------------------------------------------------


def test_cycle_counts_the_same_error_in_a_row() -> None:
    """Other errors in between reset the count; three of the same in a row force 'cycle'."""
    run = Run(load_variant("budget_loop", cycle_threshold=3), execution_id="b1")
    run.start()
    for category in ("transient", "transient", "permanent", "rate_limited", "transient",
                     "transient"):
        decision = run.apply(run.failure(category))
        assert decision.transition is not None and decision.transition.forced == ""
        assert run.ex.state == "work"
    assert dict(run.ex.failures) == {"work|step.failed|transient": 2}
    decision = run.apply(run.failure("transient"))
    assert decision.transition == Transition("work", STEP_FAILED, "paused", "cycle")
    assert dict(run.ex.failures) == {"work|step.failed|transient": 3}


# -- 11. lint ------------------------------------------------------------------------------------


def test_lint_final_child_inheriting_and_loops_with_only_cost_max() -> None:
    """A final child inheriting transitions is an error; only transitions_max ends a loop."""
    data: dict[str, Any] = {
        "name": "wf", "events": {"go": {}},
        "states": {
            "group": {"initial": True, "on": {"go": "failed"}},
            "inner": {"parent": "group", "initial": True, "type": "wait",
                      "after": {"delay": 5, "target": "done"}},
            "done": {"parent": "group", "type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    findings = lint(data)
    assert [(f.severity, f.code, f.location, f.ids) for f in findings] == [
        (Severity.ERROR, "final-exit", "states.done.parent", ("done", "go"))]
    assert "would inherit transitions (go)" in findings[0].message
    del data["states"]["done"]["parent"]
    assert lint(data) == []

    loop: dict[str, Any] = {
        "name": "loop", "events": {"go": {}, "back": {}},
        "states": {
            "start": {"initial": True, "type": "wait", "after": {"delay": 5, "target": "other"},
                      "on": {"go": "other"}},
            "other": {"type": "wait", "after": {"delay": 5, "target": "start"},
                      "on": {"back": "start"}},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    for budgets in ({"cost_max": 10, "on_exceeded": "failed"},
                    {"cycle_threshold": 3, "on_cycle": "failed"}):
        loop["budgets"] = budgets
        codes = {(f.severity, f.code) for f in lint(loop)}
        assert codes & {(Severity.ERROR, "no-final"), (Severity.ERROR, "no-way-to-final")}, budgets
    loop["budgets"] = {"cost_max": 10, "on_exceeded": "failed"}
    with pytest.raises(DefinitionError, match=r"no final state can be reached from state"):
        load_definition(loop)
    loop["budgets"] = {"transitions_max": 50, "on_exceeded": "failed"}
    assert lint(loop) == []


# -- 12. CLI -------------------------------------------------------------------------------------


_GUARDED = textwrap.dedent("""
    name: wf
    events:
      go: {}
    states:
      start:
        initial: true
        type: wait
        after: {delay: 1h, target: done}
        on:
          go:
            target: done
            guard: {function: review_fix_ok}
      done: {type: final, outcome: success}
""")
_GUARD_MODULE = textwrap.dedent("""
    from reference_machine import register_function


    @register_function("review_fix_ok")
    def review_fix_ok(context, event):
        return True
""")


def test_cli_prints_paths_literally(tmp_path: Path) -> None:
    """A file name holding rich markup ([red], [bold]) is printed as written."""
    good = tmp_path / "wf[red].yaml"
    good.write_text(_GUARDED.replace("guard: {function: review_fix_ok}", "guard: 'True'"),
                    encoding="utf-8")
    bad = tmp_path / "bad[bold].yaml"
    bad.write_text(_GUARDED, encoding="utf-8")  # unknown function: a FAIL line
    done = _cli("lint", good.name, bad.name, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "FAIL  bad[bold].yaml" in lines
    assert "ok    wf[red].yaml" in lines
    assert "Traceback" not in done.stderr


def test_cli_schema_to_a_missing_folder_exits_2(tmp_path: Path) -> None:
    """schema -o into a missing folder is one stderr line and exit 2; a real folder works."""
    done = _cli("schema", "-o", "/nonexistent/dir/x.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "fsmharness: error: --output /nonexistent/dir/x.json: folder '/nonexistent/dir' does not "
            "exist"]
    assert done.stdout == ""
    done = _cli("schema", "-o", "schema.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "schema.json").read_text(encoding="utf-8"))["title"] == (
        "fsmharness workflow definition")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schema.json"]  # no temporary left


def test_cli_lint_import_registers_functions(tmp_path: Path) -> None:
    """lint --import MODULE makes `function:` guards known; without it they are unknown."""
    (tmp_path / "wf.yaml").write_text(_GUARDED, encoding="utf-8")
    (tmp_path / "review_guards.py").write_text(_GUARD_MODULE, encoding="utf-8")
    without = _cli("lint", "wf.yaml", cwd=tmp_path)
    assert without.returncode == 1
    assert "function 'review_fix_ok' is not registered" in without.stdout
    assert "[unknown-function]" in without.stdout
    with_import = _cli("lint", "--import", "review_guards", "wf.yaml", cwd=tmp_path)
    assert with_import.returncode == 0, with_import.stdout + with_import.stderr
    assert with_import.stdout.splitlines() == ["ok    wf.yaml",
                                               "1 file(s): 0 error(s), 0 warning(s)"]
    missing = _cli("lint", "--import", "nosuchmodule", "wf.yaml", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "fsmharness: error: --import nosuchmodule: ModuleNotFoundError: No module named "
        "'nosuchmodule'"]


# -- defects the fixes left behind ---------------------------------------------------------------


def test_ref_to_a_missing_anchor_is_refused_at_load() -> None:
    """A $ref to an anchor that no subschema declares cannot resolve, so it is bad-schema."""
    data = _base()
    data["events"]["go"]["payload"] = {"type": "object",
                                       "properties": {"amount": {"$ref": "#nope"}}}
    with pytest.raises(DefinitionError, match=r"events\.go\.payload: .*\[bad-schema\]"):
        load_definition(data)


def test_alias_bomb_in_a_mapping_key_is_bounded() -> None:
    """A list or mapping used as a key (where an alias bomb could hide) is refused at once."""
    levels = 6  # 10**6 nodes: ten times the limit, about a second to expand today
    anchors = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    text = f"name: wf\n? [{', '.join(anchors)}]\n: 1\n" + _FINAL
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line 2: a key must be plain text, not a list or mapping"):
        load_definition(text)


def test_cli_import_of_a_broken_user_module_exits_2(tmp_path: Path) -> None:
    """A user module that fails to import is the user's problem: one line, exit 2."""
    (tmp_path / "wf.yaml").write_text(_GUARDED, encoding="utf-8")
    (tmp_path / "broken_guards.py").write_text("def f(:\n", encoding="utf-8")
    done = _cli("lint", "--import", "broken_guards", "wf.yaml", cwd=tmp_path)
    assert (done.returncode, "Traceback" in done.stderr) == (2, False), done.stderr


def test_distinct_inputs_with_mixed_keys_hash_differently() -> None:
    """Inputs that differ only in a key's type are different actions, with different hashes."""
    data = _base()
    _step(data)["input"] = {"m": "=context.m"}
    definition = load_definition(data)
    assert action_hash(definition, "work", {"m": {1: "a", "1": "b"}}) != action_hash(
        definition, "work", {"m": {"1": "b"}})


def test_guard_column_counts_characters_not_bytes() -> None:
    """In `'é' == foo` the unknown name starts at column 8 of the text as written."""
    with pytest.raises(ExpressionSyntaxError, match=r"unknown name 'foo'") as info:
        compile_expression("'é' == foo")
    assert info.value.col == 8
