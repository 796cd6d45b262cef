"""The simulator's edge cases: a machine clock going back under timer skew, copies of
deliveries that never landed, late copies under new ids, options taken unchecked, recoveries that
never end, faults while a machine is built, schemas the generator cannot serve, a second worker
that never met a machine without crash points, guessed ledger attribution, SystemExit escaping,
payloads shared with the machine, timers that are not times; and results the history tells of
being the ones the store kept (now given by the store itself)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pytest
import yaml

from fault_injection import FaultKind, StoreWriteError, load_plan
from harness import (
    Decided,
    Delivered,
    FaultInjected,
    Finished,
    HarnessError,
    HistoryRecord,
    MachineFailed,
    Observation,
    Probe,
    ReferenceMachine,
    ResultRecorded,
    RunStarted,
    SimOptions,
    SimulationResult,
    Simulator,
    Started,
    TimerFired,
)
from reference_machine import (
    Event,
    SQLiteStore,
    Tool,
    ToolOutcome,
    WorkflowDefinition,
    load_definition,
)

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
REFUND = load_definition(SCENARIOS / "refund_escalation.yaml")
TRIAGE = load_definition(SCENARIOS / "support_triage.yaml")
#: Duplicates and late copies make plenty of deliveries, and neither crashes the machine.
BUSY = {"duplicate_event": 0.5, "late_event": 0.5}
#: Vias a failed delivery keeps when it is sent again; every other becomes `retry`.
KEEP_VIA = frozenset({"forged", "late", "duplicate", "agent"})
COPIES = frozenset({FaultKind.DUPLICATE_EVENT, FaultKind.LATE_EVENT})
#: How many rounds a runaway loop makes before giving up: a bound that misses the loop shows
#: as a run that did not end as expected, not as a test that never ends.
RUNAWAY = 10_000

R = TypeVar("R", bound=HistoryRecord)


class Run(NamedTuple):
    """One simulated run and the machine it was made with (to read its store)."""

    result: SimulationResult
    machine: ReferenceMachine


def simulate(definition: WorkflowDefinition, faults: Mapping[str, Any], seed: int, *,
             sqlite: bool = False, **options: Any) -> Run:
    """Runs `definition` on the reference machine (over SQLite in memory, if told) with the
    plan `{faults: faults}`, three executions unless told, keeping the machine built."""
    made: list[ReferenceMachine] = []

    def factory(definition: WorkflowDefinition, tools: Mapping[str, Tool],
                probe: Any) -> ReferenceMachine:
        store = SQLiteStore(":memory:", synchronous="OFF") if sqlite else None
        made.append(ReferenceMachine(definition, tools, probe, store=store))
        return made[-1]

    options.setdefault("executions", 3)
    result = Simulator(definition, SimOptions(seed=seed, plan=load_plan({"faults": faults}),
                                              **options), machine=factory).run()
    return Run(result, made[0])


def run_machine(machine: Any, faults: Mapping[str, Any], *,
                definition: WorkflowDefinition = TRIAGE, seed: int = 1,
                **options: Any) -> SimulationResult:
    """Runs `definition` on `machine` (a factory), eight executions unless told."""
    options.setdefault("executions", 8)
    return Simulator(definition, SimOptions(seed=seed, plan=load_plan({"faults": faults}),
                                            **options), machine=machine).run()


def of(result: SimulationResult, kind: type[R]) -> list[R]:
    """Gives the records of one kind, in order."""
    return [record for record in result.history if isinstance(record, kind)]


def label(result: SimulationResult) -> str:
    return f"{result.history[0].definition} seed {result.seed}"  # type: ignore[union-attr]


def deliveries(result: SimulationResult) -> list[tuple[Delivered, str | None]]:
    """Gives each delivery with the decision it got (None: the machine gave no answer). A
    delivery's Decided follows it before any other delivery."""
    pairs: list[tuple[Delivered, str | None]] = []
    for record in result.history:
        if isinstance(record, Delivered):
            pairs.append((record, None))
        elif isinstance(record, Decided):
            delivered, said = pairs[-1]
            assert said is None and delivered.event_id == record.event_id, record
            pairs[-1] = (delivered, record.decision)
    return pairs


def assert_failed(result: SimulationResult, problem: str) -> MachineFailed:
    """Checks the run ended as the machine's failure of kind `problem`, and gives it."""
    assert result.status == "machine_failed", result.summary()
    failure = result.failure
    assert failure is not None and failure.problem == problem, failure
    assert isinstance(result.history[0], RunStarted)
    assert result.history[-1] == failure, "the failure is the last record"
    assert not of(result, Finished)
    return failure


# -- 1. timer skew -----------------------------------------------------------------------------


def test_timer_skew_never_turns_the_machine_clock_back() -> None:
    """Skew never turns log times back or durations negative; timers fire early and late."""
    early = late = 0
    for seed in range(20):
        result, machine = simulate(REFUND, {"timer_skew": 1.0}, seed)
        store = machine.store
        for eid in store.execution_ids():
            times = [entry.at for entry in store.log(eid)]
            assert times == sorted(times), f"{label(result)} {eid}: log times {times}"
            for record in store.transitions(eid):
                assert record.duration_ms >= 0, f"{label(result)}: {record}"
        for fired in of(result, TimerFired):
            early += fired.at < fired.due
            late += fired.at > fired.due
    assert early, "no timer fired before its due time"
    assert late, "no timer fired after its due time"


# -- 2. copies only of deliveries that landed --------------------------------------------------


@pytest.mark.parametrize(("definition", "faults"), [
    (TRIAGE, {"duplicate_event": 1.0, "store_write_failure": 0.2}),
    (REFUND, {"late_event": {"rate": 1, "delay": "1s"}, "store_write_failure": 0.3}),
], ids=["duplicate", "late"])
def test_copies_are_drawn_only_after_the_delivery_was_answered(
        definition: WorkflowDefinition, faults: Mapping[str, Any]) -> None:
    """Copies follow answered deliveries only; a failed one is re-sent as retry or as it was."""
    failed = copies = 0
    for seed in range(40):
        result = simulate(definition, faults, seed).result
        assert result.ok, f"{label(result)}: {result.failure}"
        originals = {d.event_id for d, _ in deliveries(result)
                     if d.via not in ("duplicate", "late")}
        answered: set[str] = set()
        owed: dict[str, Counter[str]] = {}
        for delivered, said in deliveries(result):
            eid, via = delivered.event_id, delivered.via
            copies += via in ("duplicate", "late")
            owing = owed.setdefault(eid, Counter())
            if owing[via]:
                owing[via] -= 1
            else:
                assert via != "retry", f"{label(result)}: a retry nothing failed: {delivered}"
            if said is None:
                failed += 1
                owing[via if via in KEEP_VIA else "retry"] += 1
            elif eid not in answered:
                answered.add(eid)
                if eid in originals:
                    assert via not in ("duplicate", "late"), (
                        f"{label(result)}: the copy answered before the original: {delivered}")
        if result.status == "final":
            assert not any(+owing for owing in owed.values()), f"{label(result)}: {owed}"
        last: Delivered | Decided | None = None
        for record in result.history:
            if isinstance(record, Delivered | Decided):
                last = record
            elif isinstance(record, FaultInjected) and record.fault in COPIES:
                copied = record.detail.split()[-1]  # `{id}` or `{new id} copies {id}`
                assert isinstance(last, Decided) and last.event_id == copied, (
                    f"{label(result)}: {record} drawn after {last}")
    assert failed, "no delivery failed"
    assert copies, "no copy was delivered"


# -- 3. late copies' ids -----------------------------------------------------------------------


def test_late_copy_keeps_its_id_unless_it_is_an_answer() -> None:
    """A late copy keeps its id (ignored as duplicate) unless it is an answer (a new id)."""
    same = new = 0
    for seed in range(20):
        result = simulate(REFUND, {"late_event": {"rate": 1, "delay": "1s"}}, seed).result
        seen: set[str] = set()
        for delivered, said in deliveries(result):
            if delivered.via == "late":
                if delivered.answers:
                    assert delivered.event_id not in seen, f"{label(result)}: {delivered}"
                    new += 1
                else:
                    assert delivered.event_id in seen, f"{label(result)}: {delivered}"
                    assert said == "ignored:duplicate", f"{label(result)}: {delivered} {said}"
                    same += 1
            seen.add(delivered.event_id)
    assert same, "no late copy of an event answering nothing"
    assert new, "no late copy of an approval"


# -- 4. results recorded are the ones kept -----------------------------------------------------


# The store now gives the result it keeps (memory and SQLite alike); the history must still tell
# only of kept results. This held before the review too (fixed in 43a5c45): a guard, not a repro.
@pytest.mark.parametrize("sqlite", [False, True], ids=["memory", "sqlite"])
def test_result_recorded_agrees_with_the_outbox(sqlite: bool) -> None:
    """With two workers racing, each call's ResultRecorded types are what its outbox keeps."""
    recorded = 0
    for seed in range(30):
        result, machine = simulate(REFUND, {"second_worker": 0.4, "tool_transient": 0.4}, seed,
                                   sqlite=sqlite)
        assert result.ok, result.failure
        store = machine.store
        types: dict[tuple[str, str], set[str]] = {}
        for record in of(result, ResultRecorded):
            types.setdefault((record.execution, record.call), set()).add(record.type)
        kept = {(eid, entry.command_id): {entry.result.type}
                for eid in store.execution_ids() for entry in store.outbox(eid)
                if entry.result is not None}
        assert types == kept, label(result)
        recorded += len(types)
    assert recorded


# -- 5. options checked ------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "name"), [
    ({"seed": None}, "options.seed"),
    ({"seed": -5}, "options.seed"),
    ({"seed": True}, "options.seed"),
    ({"executions": 2.5}, "options.executions"),
    ({"executions": "3"}, "options.executions"),
    ({"steps_max": None}, "options.steps_max"),
    ({"invalid_rate": "x"}, "options.invalid_rate"),
    ({"context": {"x": object()}}, "options.context"),
    ({"context": {"x": float("nan")}}, "options.context"),
], ids=["seed None", "seed negative", "seed bool", "executions float", "executions str",
        "steps_max None", "invalid_rate str", "context object", "context nan"])
def test_option_of_the_wrong_type_is_refused(options: dict[str, Any], name: str) -> None:
    """An option of the wrong type or out of range is refused, naming the option."""
    with pytest.raises(HarnessError, match=rf"^{name}:"):
        SimOptions(**options)


def test_honour_keys_for_an_unknown_tool_is_refused() -> None:
    """honour_keys naming a tool the definition lacks is refused, naming the tool."""
    with pytest.raises(HarnessError, match=r"options\.honour_keys.*no\.such\.tool"):
        Simulator(REFUND, SimOptions(honour_keys={"no.such.tool": False}))


# -- 6. a recovery that never succeeds ---------------------------------------------------------


class NeverRecovers(ReferenceMachine):
    """Its recovery always fails to write (and gives up, raising, after RUNAWAY tries)."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, tools, probe)
        self.recoveries = 0

    def recover(self, now: int) -> None:
        self.recoveries += 1
        if self.recoveries > RUNAWAY:
            raise RuntimeError("recovered far too many times: an endless loop")
        raise StoreWriteError("recovery")


def test_recovery_that_never_succeeds_is_reported_hung() -> None:
    """A recovery that always fails ends the run as hung (recovery never succeeds)."""
    result = run_machine(NeverRecovers, {"crash": 0.5}, recoveries_max=3)
    failure = assert_failed(result, "hung")
    assert "recovery" in failure.message, failure


# -- 7. no fault while a machine is built ------------------------------------------------------


class ProbesWhileBuilt(ReferenceMachine):
    """Passes a crash point and a store write while it is built (opening its database)."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, tools, probe)
        probe("before_commit")
        probe("store_write")


class WorkerProbesWhileBuilt(ReferenceMachine):
    """Its second worker passes a crash point and a store write while it is built."""

    def worker(self) -> ReferenceMachine:
        self._probe("before_commit")
        self._probe("store_write")
        return super().worker()


def test_no_fault_is_injected_while_the_machine_is_built() -> None:
    """Crashes and store failures at rate 1 are not injected while the machine is built."""
    result = run_machine(ProbesWhileBuilt, {"crash": 1.0, "store_write_failure": 1.0},
                         executions=2, steps_max=30, recoveries_max=2)
    failed = of(result, MachineFailed)
    assert not any(f.step == 0 and "building" in f.message for f in failed), failed
    assert of(result, Started), "the run went past building the machine"


def test_no_fault_is_injected_while_the_second_worker_is_built() -> None:
    """A second worker probing while it is built is built undisturbed; the run ends final."""
    result = run_machine(WorkerProbesWhileBuilt, {"second_worker": 1.0}, executions=3)
    assert result.ok and result.status == "final", result.summary()
    assert any(f.fault == FaultKind.SECOND_WORKER for f in of(result, FaultInjected))


class LoopsWhileBuilt(ReferenceMachine):
    """A machine whose constructor never stops passing a probe point."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> None:
        super().__init__(definition, tools, probe)
        while True:
            probe("before_commit")


def test_a_machine_that_hangs_while_built_is_reported_hung() -> None:
    """The per-step bound holds while the machine is built: the run ends hung at step 0."""
    result = Simulator(REFUND, SimOptions(ops_max=50), machine=LoopsWhileBuilt).run()
    assert result.status == "machine_failed"
    assert result.failure is not None and result.failure.problem == "hung"
    assert result.failure.step == 0 and "building the machine" in result.failure.message


# -- 8. schemas the generator cannot serve -----------------------------------------------------


#: A tool whose output schema uses multipleOf, which the value generator does not serve.
MULTIPLE_OF: Mapping[str, Any] = {
    "name": "cents", "version": 1,
    "tools": {"till.count": {"idempotency_keys": True, "output": {
        "type": "object", "properties": {"cents": {"type": "integer", "multipleOf": 5}}}}},
    "states": {
        "counting": {"initial": True, "step": {"tool": "till.count", "input": {}},
                     "on": {"step.succeeded": "done", "step.failed": "done"}},
        "done": {"type": "final", "outcome": "success"},
    },
}


def test_output_schema_the_generator_cannot_serve_is_refused() -> None:
    """A tool output schema using multipleOf is refused, naming `tools.<tool>.output`."""
    with pytest.raises(HarnessError, match=r"^tools\.till\.count\.output:"):
        Simulator(load_definition(MULTIPLE_OF))


def test_cli_run_refuses_an_output_schema_it_cannot_serve(tmp_path: Path) -> None:
    """`fsmharness run` on such a file exits 2 with one line on stderr, no traceback."""
    path = tmp_path / "cents.yaml"
    path.write_text(yaml.safe_dump(MULTIPLE_OF), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "tools.till.count.output" in lines[0], lines[0]


# -- 9. a machine without crash points meets a second worker -----------------------------------


DOORBELL = load_definition({
    "name": "doorbell", "version": 1,
    "events": {"ring": {"sources": ["human"]}},
    "states": {
        "waiting": {"type": "wait", "initial": True, "on": {"ring": "answered"},
                    "after": {"delay": "1h", "target": "gave_up"}},
        "answered": {"type": "final", "outcome": "success"},
        "gave_up": {"type": "final", "outcome": "failure"},
    },
})
OUTCOMES = {"answered": "success", "gave_up": "failure"}


class Doorbell:
    """The README's hand-written machine: `disk` survives a crash, nothing else is kept."""

    crash_points = ()  # no named points: the simulator crashes it between steps

    def __init__(self, definition: Any, tools: Any, probe: Any, disk: Any = None) -> None:
        self.disk = {} if disk is None else disk  # id -> [state, version, seen ids, deadline]

    def start(self, execution_id: str, context: Any, now: int) -> str:
        self.disk.setdefault(execution_id, ["waiting", 1, set(), now + 3_600_000])
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str:
        record = self.disk[execution_id]
        if event.id in record[2]:
            return "ignored:duplicate"
        record[2].add(event.id)
        if record[0] != "waiting" or event.type != "ring":
            return "rejected"
        record[0], record[1] = "answered", record[1] + 1
        return "accepted"

    def advance(self, now: int) -> None:
        for record in self.disk.values():
            if record[0] == "waiting" and now >= record[3]:
                record[0], record[1] = "gave_up", record[1] + 1

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # no tools, so no calls in flight

    def crash(self) -> None:
        pass  # nothing volatile to lose

    def recover(self, now: int) -> None:
        pass

    def worker(self) -> Doorbell:
        return Doorbell(None, None, None, disk=self.disk)

    def observe(self, execution_id: str) -> Observation:
        state, version, _, deadline = self.disk[execution_id]
        waiting = state == "waiting"
        return Observation(state, "waiting" if waiting else "final", version,
                           OUTCOMES.get(state), (("deadline", deadline),) if waiting else ())


def test_machine_without_crash_points_meets_a_second_worker() -> None:
    """The Doorbell (no crash points) meets a second worker between steps; runs end final."""
    workers = 0
    for seed in range(10):
        result = run_machine(Doorbell, {"second_worker": 1.0, "crash": 0.3},
                             definition=DOORBELL, seed=seed, executions=3)
        assert result.ok and result.status == "final", result.summary()
        workers += sum(f.fault == FaultKind.SECOND_WORKER for f in of(result, FaultInjected))
    assert workers, "no second worker was injected"


# -- 10. ledger attribution --------------------------------------------------------------------


def unprefixed(tool: Tool) -> Tool:
    """Wraps a tool so its idempotency key loses the `{execution}/` prefix convention."""
    def call(input: Mapping[str, Any], idempotency_key: str) -> ToolOutcome:
        return tool(input, "k:" + idempotency_key.replace("/", ":"))
    return call


class UnprefixedKeys(ReferenceMachine):
    """Calls its tools under keys that do not start with the execution id."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, {name: unprefixed(tool) for name, tool in tools.items()},
                         probe)


def test_ledger_never_guesses_the_execution_of_an_unprefixed_key() -> None:
    """Effects under unprefixed keys are of execution "", never a guess; else the prefix's."""
    faults = {"crash": 0.2, "second_worker": 0.1}
    unknown = known = 0
    for seed in range(10):
        result = run_machine(UnprefixedKeys, faults, definition=REFUND, seed=seed,
                             executions=3)
        assert result.ok, result.failure
        for entry in result.ledger:
            assert entry.key.startswith("k:") and entry.execution == "", entry
            unknown += 1
        result = run_machine(ReferenceMachine, faults, definition=REFUND, seed=seed,
                             executions=3)
        for entry in result.ledger:
            assert entry.execution == entry.key.split("/", 1)[0] != "", entry
            known += 1
    assert unknown and known


# -- 11. SystemExit --------------------------------------------------------------------------


class ExitsOnDelivery(ReferenceMachine):
    """Calls sys.exit(0) when an event is delivered."""

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        raise SystemExit(0)


def test_machine_that_exits_is_reported_raised() -> None:
    """A machine raising SystemExit ends its run as raised; run() itself returns."""
    try:
        result = run_machine(ExitsOnDelivery, BUSY)
    except SystemExit:
        pytest.fail("SystemExit escaped Simulator.run")
    failure = assert_failed(result, "raised")
    assert failure.error == "SystemExit", failure


# -- 12. the machine's own copies --------------------------------------------------------------


class Mutates(ReferenceMachine):
    """Writes into the context and the payloads it is given."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, tools, probe)
        self.mutated = Counter[str]()

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        said = super().start(execution_id, context, now)
        if isinstance(context, dict):
            context["mutated"] = True
            self.mutated["context"] += 1
        return said

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        said = super().deliver(execution_id, event, now)
        if isinstance(event.payload, dict):
            event.payload["mutated"] = True
            self.mutated["payload"] += 1
        return said


def test_history_keeps_its_own_payloads_and_context() -> None:
    """A machine writing into its payloads and context does not change the history's copy."""
    made: list[Mutates] = []

    def factory(definition: Any, tools: Any, probe: Any) -> Mutates:
        made.append(Mutates(definition, tools, probe))
        return made[-1]

    result = run_machine(factory, BUSY, context={"ticket_id": "T-1"})
    assert result.ok, result.failure
    assert made[0].mutated["context"] and made[0].mutated["payload"], made[0].mutated
    for started in of(result, Started):
        assert started.context == {"ticket_id": "T-1"}, started
    for delivered in of(result, Delivered):
        assert not (isinstance(delivered.payload, dict) and "mutated" in delivered.payload), (
            delivered)


# -- 13. timers that are not times -------------------------------------------------------------


class TimerAtNoTime(ReferenceMachine):
    """Reports a timer whose time is a word."""

    def observe(self, execution_id: str) -> Observation:
        return super().observe(execution_id)._replace(timers=(("t", "soon"),))


def test_timer_that_is_not_a_time_is_nonsense() -> None:
    """An observation with a timer at a non-integer time ends the run as nonsense."""
    failure = assert_failed(run_machine(TimerAtNoTime, BUSY), "nonsense")
    assert "timers" in failure.message, failure
