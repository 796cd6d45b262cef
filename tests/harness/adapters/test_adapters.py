"""The adapters: machines written with `transitions` and python-statemachine, fuzzed as they are.

The machines are the order workflow of `tests/support/peers.py`, in both libraries."""

from __future__ import annotations

import asyncio
import enum
import sys
from pathlib import Path
from typing import Any

import peers
import pytest
from running import cli, one_error_line
from statemachine import State, StateChart, StateMachine
from statemachine.states import States
from transitions import Machine
from transitions.extensions import HierarchicalMachine
from transitions.extensions.asyncio import AsyncMachine

from fault_injection import no_faults
from harness import Decided, FuzzOptions, SimOptions, Simulator, fuzz, replay
from harness.adapters import AdapterError, ToolBox, statemachine_target, transitions_target
from harness.adapters import peers as peers_module
from harness.adapters.peers import safe_ids

ROOT = Path(__file__).resolve().parents[3]
TARGETS = [peers.orders, peers.chart_orders]
NAIVE = [peers.naive_orders, peers.naive_chart_orders]


def ids(target: Any) -> str:
    return str(target.name)


@pytest.mark.parametrize("target", TARGETS, ids=ids)
def test_the_definition_is_read_off_the_machine(target: Any) -> None:
    definition = target.definition
    assert definition.initial == "new"
    assert sorted(definition.states) == ["cancelled", "new", "paid", "shipped"]
    assert sorted(definition.events) == ["cancel", "pay", "ship"]  # no to_<state> shortcuts
    assert {name: s.outcome for name, s in definition.states.items() if s.final} == {
        "shipped": "success", "cancelled": "failure"}
    moves = {(name, event, t.target) for name, s in definition.states.items()
             for event, ts in s.on.items() for t in ts}
    assert moves == {("new", "pay", "paid"), ("paid", "ship", "shipped"),
                     ("new", "cancel", "cancelled"), ("paid", "cancel", "cancelled")}
    assert definition.spec.events["pay"].sources == ["human"]
    assert definition.spec.tools["pay.charge"].idempotency_keys is True


@pytest.mark.parametrize("target", TARGETS, ids=ids)
def test_a_correct_peer_machine_holds_under_every_fault(target: Any) -> None:
    report = fuzz(target.definition, FuzzOptions(runs=150, replay_dir=None), machine=target)
    assert report.held, report.failures[0].violations[0].message
    covered = report.coverage.report(target.definition)["transitions"]
    assert (covered["reached"], covered["of"]) == (4, 4)  # every declared move was made
    assert sum(report.faults.values()) > 0


@pytest.mark.parametrize("target", NAIVE, ids=ids)
def test_a_peer_machine_charging_a_keyless_service_is_caught_and_replays(
        target: Any, tmp_path: Path) -> None:
    report = fuzz(target.definition, FuzzOptions(runs=300, replay_dir=tmp_path),
                  machine=target)
    (failure,) = report.failures
    assert failure.rule == "no_duplicate_effect"
    assert "pay.charge took effect twice" in failure.violations[0].message
    assert failure.replay_file is not None
    outcome = replay(failure.replay_file)  # the machine and its definition by name alone
    assert outcome.reproduced


def test_a_late_event_that_resurrects_a_finished_order_is_caught() -> None:
    """`cancel` from '*' includes the final states: a late cancel reopens a shipped order."""
    target = peers.resurrecting_orders
    assert "cancel" not in target.definition.states["shipped"].on  # finals are declared final
    report = fuzz(target.definition, FuzzOptions(runs=300, replay_dir=None), machine=target)
    assert [f.rule for f in report.failures] == ["terminal_stays_terminal"]


def test_a_run_is_the_same_from_its_seed() -> None:
    def history(seed: int) -> list[str]:
        result = Simulator(peers.orders.definition, SimOptions(), machine=peers.orders).run(seed)
        return [repr(record) for record in result.history]

    assert history(11) == history(11)
    assert history(11) != history(12)


class Counter:
    """A `transitions` model that counts its pings in memory."""

    def __init__(self, box: ToolBox) -> None:
        self.pings = 0
        self.machine = Machine(model=self, states=["on", {"name": "off", "final": True}],
                               transitions=[{"trigger": "ping", "source": "on", "dest": "on",
                                             "after": "count"}, ["stop", "on", "off"]],
                               initial="on")

    def count(self) -> None:
        self.pings += 1


def pinged(target: Any, crash_between: bool) -> int:
    """Pings an execution twice with a crash between; gives the model's count after."""
    from reference_machine import Event

    machine = target(target.definition, {}, lambda point: None)
    machine.start("x", {}, 0)
    machine.deliver("x", Event("e1", "ping"), 1)
    if crash_between:
        machine.crash()
        machine.recover(2)
    machine.deliver("x", Event("e2", "ping"), 3)
    assert machine.observe("x").version == 3  # the start and two accepted pings
    return int(machine._live["x"][1].models[0].pings)


def test_what_is_not_persisted_is_lost_in_a_crash_and_persist_keeps_it() -> None:
    plain = transitions_target(Counter)
    kept = transitions_target(Counter, persist=(lambda model: model.pings,
                                                lambda model, pings: setattr(model, "pings",
                                                                             pings)))
    assert pinged(plain, crash_between=False) == 2
    assert pinged(plain, crash_between=True) == 1  # memory went with the process
    assert pinged(kept, crash_between=True) == 2


def test_dedupe_drops_a_redelivered_event_and_can_be_turned_off() -> None:
    from reference_machine import Event

    for dedupe, said in ((True, "ignored:duplicate"), (False, "accepted")):
        target = transitions_target(Counter, dedupe=dedupe)
        machine = target(target.definition, {}, lambda point: None)
        machine.start("x", {}, 0)
        assert machine.deliver("x", Event("e1", "ping"), 1) == "accepted"
        assert machine.deliver("x", Event("e1", "ping"), 2) == said


def test_a_second_worker_picks_up_what_the_first_one_moved() -> None:
    from reference_machine import Event

    first = peers.orders(peers.orders.definition, {"pay.charge": lambda i, k: None},
                         lambda point: None)
    first.start("x", {}, 0)  # the start leaves the first worker a live machine, in `new`
    second = first.worker()
    assert second.deliver("x", Event("e1", "pay"), 1) == "accepted"
    assert first.observe("x").state == "paid"
    # the first worker's live machine is still in `new`: it must rebuild, not pay again
    assert first.deliver("x", Event("e2", "pay"), 2).startswith("rejected:")
    assert first.deliver("x", Event("e3", "ship"), 3) == "accepted"
    assert second.observe("x")[:4] == ("shipped", "final", 3, "success")


def test_a_save_is_a_compare_and_set_between_workers() -> None:
    """Two workers take the same event at once: both callbacks ran (the tool saw two calls
    under one key), only one save lands, and the other is told it lost."""
    from reference_machine import Event

    keys: list[str] = []
    armed = [True]

    def probe(point: str) -> None:
        if point == "before_save" and armed[0] and keys:
            armed[0] = False
            said.append(second.deliver("x", event, 1))

    said: list[str | None] = []
    first = peers.orders(peers.orders.definition,
                         {"pay.charge": lambda i, key: keys.append(key)}, probe)
    second = first.worker()
    first.start("x", {}, 0)
    event = Event("e1", "pay", "human")
    said.append(first.deliver("x", event, 1))
    assert said == ["accepted", "ignored:conflict"]  # the second worker saved first
    assert keys == ["x/new/1", "x/new/1"]
    assert first.observe("x")[:3] == ("paid", "waiting", 2)


def test_a_move_refused_after_a_callback_moved_it_leaves_no_stale_machine() -> None:
    """A callback that triggers an event its new state lacks raises, as `transitions` does;
    the event is refused and the live machine, already moved, is dropped for the disk's."""
    from reference_machine import Event

    class Hasty:
        def __init__(self, box: ToolBox) -> None:
            self.box = box
            self.machine = Machine(model=self, initial="a", auto_transitions=False,
                                   states=["a", "b", {"name": "d", "final": True}],
                                   transitions=[["go", "a", "b"], ["end", "b", "d"]])

        def on_enter_b(self) -> None:
            self.go()  # not allowed from b: MachineError after the state changed

    target = transitions_target(Hasty)
    machine = target(target.definition, {}, lambda point: None)
    machine.start("x", {}, 0)
    assert machine.deliver("x", Event("e1", "go"), 1).startswith("rejected:")
    assert machine.observe("x").state == "a"
    assert machine.deliver("x", Event("e2", "end"), 2).startswith("rejected:")  # not from a


def test_a_rebuilt_machine_does_not_enter_its_initial_state_again() -> None:
    """python-statemachine enters the initial state when built: that runs once, at the start;
    a rebuild after a crash restores the state and makes no tool call."""
    from reference_machine import Event

    class Greeter(StateMachine):
        new = State(initial=True)
        done = State(final=True)
        finish = new.to(done)

        def __init__(self, box: ToolBox) -> None:
            self.box = box
            super().__init__()

        def on_enter_new(self) -> None:
            self.box.call("mail.send", {"to": self.box.execution_id})

    keys: list[str] = []
    target = statemachine_target(Greeter, tools={"mail.send": {}})  # built muted to read it
    machine = target(target.definition, {"mail.send": lambda i, key: keys.append(key)},
                     lambda point: None)
    machine.start("x", {}, 0)
    assert keys == ["x/new/1"]
    machine.crash()
    assert machine.deliver("x", Event("e1", "finish"), 1) == "accepted"
    assert keys == ["x/new/1"]


def test_a_statechart_that_takes_an_event_without_a_move_is_not_said_to_accept_it() -> None:
    from reference_machine import Event

    class Chart(StateChart):
        a = State(initial=True)
        b = State(final=True)
        go = a.to(b, cond="ready")

        def __init__(self, box: ToolBox) -> None:
            self.box, self.ready = box, False
            super().__init__()

    target = statemachine_target(Chart)
    machine = target(target.definition, {}, lambda point: None)
    machine.start("x", {}, 0)
    assert machine.deliver("x", Event("e1", "go"), 1) == "rejected:no transition taken"
    assert machine.observe("x")[:3] == ("a", "waiting", 1)


def test_a_target_made_in_one_module_from_another_module_s_class_replays_by_name(
        tmp_path: Path) -> None:
    (tmp_path / "my_targets.py").write_text(
        "import peers\n"
        "from harness.adapters import transitions_target\n"
        "target = transitions_target(peers.Order, name='o2', tools=peers.KEYLESS, "
        "events=peers.EVENTS, outcomes=peers.OUTCOMES)\n")
    support = f"{ROOT / 'tests' / 'support'}:{tmp_path}"
    failed = cli("fuzz", "my_targets:target", "--runs", "300", "--report", "r", path=support,
                 cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    (replay_file,) = (tmp_path / "r" / "replays").iterdir()
    assert '"machine": "my_targets:target"' in replay_file.read_text()
    again = cli("replay", str(replay_file), path=support, cwd=tmp_path)
    assert again.returncode == 1 and "reproduced no_duplicate_effect" in again.stdout


# -- refused, with the reason -------------------------------------------------------------------


def test_nested_states_are_refused() -> None:
    def nested(box: ToolBox) -> Any:
        return HierarchicalMachine(states=["a", {"name": "b", "children": ["c", "d"]}],
                                   initial="a")

    with pytest.raises(AdapterError, match="state 'b' has nested states"):
        transitions_target(nested)


def test_build_must_give_a_machine_of_its_library() -> None:
    with pytest.raises(AdapterError, match="build gave dict, not a transitions Machine"):
        transitions_target(lambda box: {})
    with pytest.raises(AdapterError, match="build gave Order, not a python-statemachine"):
        statemachine_target(peers.Order)


def test_names_the_machine_lacks_are_refused() -> None:
    with pytest.raises(AdapterError, match="outcomes names states the machine lacks: done"):
        transitions_target(peers.Order, outcomes={"done": "success"})
    with pytest.raises(AdapterError, match="events names events the machine lacks: refund"):
        statemachine_target(peers.OrderChart, events={"refund": {}})


def test_an_undeclared_tool_stops_the_campaign_as_the_users_mistake() -> None:
    """A wrapping the adapter refuses as the machine runs is the user's input (exit 2 at the
    command line), not a failure of the machine."""
    target = transitions_target(peers.Order, events=peers.EVENTS)  # no tools= given
    with pytest.raises(AdapterError, match=r"tool 'pay\.charge' is not declared"):
        fuzz(target.definition, FuzzOptions(runs=20, replay_dir=None), machine=target)


def test_a_missing_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "statemachine", None)  # import statemachine now fails
    with pytest.raises(AdapterError, match=r"pip install 'fsmharness\[statemachine\]'"):
        statemachine_target(peers.OrderChart)


# -- from the CLI -------------------------------------------------------------------------------


def test_the_cli_fuzzes_a_peer_target_and_replays_its_failure(tmp_path: Path) -> None:
    support = str(ROOT / "tests" / "support")
    held = cli("fuzz", "peers:chart_orders", "--runs", "50", "--report", str(tmp_path / "ok"),
               path=support, cwd=tmp_path)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "held  peers:chart_orders: 50 runs" in held.stdout
    failed = cli("fuzz", "peers:naive_orders", "--runs", "300", "--report",
                 str(tmp_path / "bad"), path=support, cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    command = next(line.split("replay: ", 1)[1] for line in failed.stdout.splitlines()
                   if "replay: " in line)
    again = cli(*command.split()[1:], path=support, cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reproduced no_duplicate_effect" in again.stdout


def test_the_cli_tells_a_wrapping_error_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(
        "from transitions import Machine\n"
        "from harness.adapters import transitions_target\n"
        "target = transitions_target(lambda box: {})\n")
    one_error_line(cli("fuzz", "broken:target", path=str(tmp_path), cwd=tmp_path),
                   "broken:target", "not a transitions Machine")


# -- issue 15, items 3 and 11: names the format refuses, Enum states, event arguments ----------

class Status(enum.Enum):
    DRAFT = 1
    LIVE = 2
    DONE = 3


class CampaignChart(StateMachine):
    """python-statemachine states from an Enum: a state's value is the Enum member."""

    _ = States.from_enum(Status, initial=Status.DRAFT, final=Status.DONE)
    launch = _.DRAFT.to(_.LIVE)
    finish = _.LIVE.to(_.DONE)

    def __init__(self, box: ToolBox) -> None:
        super().__init__()


class SpacedOrder:
    """A `transitions` machine whose states and events have spaces in their names."""

    def __init__(self, box: ToolBox) -> None:
        self.machine = Machine(
            model=self, initial="new order",
            states=["new order", "in progress", {"name": "all done", "final": True}],
            transitions=[["start work", "new order", "in progress"],
                         ["finish", "in progress", "all done"]])


class Tipping:
    """A `transitions` machine whose condition reads the event's argument."""

    def __init__(self, box: ToolBox) -> None:
        self.machine = Machine(
            model=self, initial="open", states=["open", {"name": "tipped", "final": True}],
            transitions=[{"trigger": "pay", "source": "open", "dest": "tipped",
                          "conditions": "generous"}])

    def generous(self, amount: int) -> bool:
        return amount > 10


AMOUNT = {"type": "object", "required": ["amount"],
          "properties": {"amount": {"type": "integer", "minimum": 0, "maximum": 20}}}


class TestNamesAndArguments:
    def test_enum_states_are_read_by_their_id_not_their_value(self) -> None:
        """The state a psm machine is in is its id (`LIVE`), never the Enum's text
        (`Status.LIVE`, which no definition holds: once a false `machine_ok`)."""
        target = statemachine_target(CampaignChart, name="campaign")
        assert sorted(target.definition.states) == ["DONE", "DRAFT", "LIVE"]
        report = fuzz(target.definition, FuzzOptions(runs=10, replay_dir=None), machine=target)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []

    def test_names_the_format_refuses_become_ids_with_their_labels(self) -> None:
        """`new order` is `new_order` in the definition, labelled with its name; the machine
        still gets its own names, and every move is covered."""
        target = transitions_target(SpacedOrder, name="spaced",
                                    outcomes={"all done": "success"})
        definition = target.definition
        assert sorted(definition.states) == ["all_done", "in_progress", "new_order"]
        assert definition.spec.states["new_order"].description == "new order"
        assert sorted(definition.events) == ["finish", "start_work"]
        report = fuzz(definition, FuzzOptions(runs=10, replay_dir=None), machine=target)
        assert report.verdict == "held"
        assert report.summary()["coverage"]["transitions"]["missing"] == []

    def test_ids_stay_apart(self) -> None:
        assert safe_ids(["a b", "a_b", "1st", "ok"]) == {"a_b": "a_b", "ok": "ok",
                                                         "a b": "a_b_2", "1st": "_1st"}

    def test_an_event_payload_declared_with_events_is_passed_as_arguments(self) -> None:
        """`pay(amount=...)`: the condition reads it; both outcomes happen."""
        target = transitions_target(Tipping, name="tipping",
                                    events={"pay": {"sources": ["human"], "payload": AMOUNT}})
        simulator = Simulator(target.definition, SimOptions(plan=no_faults()), target)
        said = {r.decision for seed in range(20) for r in simulator.run(seed).history
                if type(r) is Decided}
        assert {"accepted", "rejected:condition"} <= said

    def test_without_a_declared_payload_no_argument_is_passed(self) -> None:
        """A condition that needs the argument, with no payload declared: the machine's own
        failure (it is called without it), told as such."""
        target = transitions_target(Tipping, name="tipping_bare",
                                    events={"pay": {"sources": ["human"]}})
        report = fuzz(target.definition, FuzzOptions(runs=3, replay_dir=None), machine=target)
        assert report.failures and report.failures[0].rule == "machine_ok"
        assert "amount" in report.failures[0].violations[0].message


class AsyncChart(StateMachine):
    """python-statemachine with an async callback: its engine is async."""

    new = State(initial=True)
    paid = State()
    shipped = State(final=True)
    pay = new.to(paid)
    ship = paid.to(shipped)

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        super().__init__()

    async def on_enter_paid(self) -> None:
        await asyncio.sleep(0)
        self.box.call("pay.charge", {"order": self.box.execution_id})


class AsyncOrder:
    """A `transitions` AsyncMachine: its triggers are coroutines."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = AsyncMachine(
            model=self, initial="new", states=["new", "paid", {"name": "shipped", "final": True}],
            transitions=[["pay", "new", "paid"], ["ship", "paid", "shipped"]])

    async def on_enter_paid(self) -> None:
        await asyncio.sleep(0)
        self.box.call("pay.charge", {"order": self.box.execution_id})


ASYNC_EVENTS = {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]}}


class TestAsyncMachines:
    @pytest.mark.parametrize("make", [
        lambda tools: statemachine_target(AsyncChart, name="async_chart", tools=tools,
                                          events=ASYNC_EVENTS),
        lambda tools: transitions_target(AsyncOrder, name="async_orders", tools=tools,
                                         events=ASYNC_EVENTS)], ids=["psm", "transitions"])
    def test_an_async_machine_is_driven_to_the_end_of_each_call(self, make: Any) -> None:
        """Every coroutine is run to its end on the adapter's loop: the correct machine holds
        under every fault (a restore after a crash is not reset by the next event, and a
        second worker mid-callback runs beside it), every move taken; its keyless twin's
        second charge is caught."""
        correct = make(peers.TOOLS)
        report = fuzz(correct.definition, FuzzOptions(runs=300, replay_dir=None),
                      machine=correct)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []
        assert report.faults.get("second_worker") and report.faults.get("crash")
        naive = make(peers.KEYLESS)
        caught = fuzz(naive.definition, FuzzOptions(runs=300, replay_dir=None), machine=naive)
        assert caught.failures and caught.failures[0].rule == "no_duplicate_effect"


class FailingChart(StateChart):
    """A StateChart whose callback raises, with no move for `error.execution`: the library
    would swallow the exception and move on as if the charge were made."""

    new = State(initial=True)
    paid = State()
    shipped = State(final=True)
    pay = new.to(paid)
    ship = paid.to(shipped)

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        super().__init__()

    def on_enter_paid(self) -> None:
        raise ValueError("card service down")


class TestSwallowedExceptions:
    def test_an_exception_the_library_would_swallow_is_the_machine_failing(self) -> None:
        target = statemachine_target(FailingChart, name="failing_chart", events=ASYNC_EVENTS)
        report = fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None), machine=target)
        assert report.failures and report.failures[0].rule == "machine_ok"
        assert report.failures[0].violations[0].message == (
            "the machine raised (ValueError): while external: card service down")


class TestTheLibrariesOwnExamples:
    @pytest.mark.parametrize("name", ["traffic_light", "matter"])
    def test_the_first_example_of_each_library_is_fuzzed_as_it_is(self, name: str) -> None:
        """No final state (a cycle) makes a reactive definition; a state no move leaves ends
        a run; a state the initial one cannot reach is left out and said so. Each holds, with
        every move taken (both were refused as definitions with errors before)."""
        import library_examples

        target = getattr(library_examples, name)
        report = fuzz(target.definition, FuzzOptions(runs=50, replay_dir=None),
                      machine=target)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []
        expected = {"traffic_light": ((), True), "matter": (("solid",), False)}[name]
        assert (target.left_out, target.definition.spec.reactive) == expected


# -- found in review: each a false verdict or a crash on the way ------------------------------

class Lights:
    """green <-> red, and a `broken` state nothing reaches."""

    def __init__(self, box: ToolBox) -> None:
        self.machine = Machine(model=self, initial="green", states=["green", "red", "broken"],
                               transitions=[["turn", "green", "red"], ["turn", "red", "green"],
                                            ["fail", "broken", "green"]])


class Raising:
    """Its callback raises with an object's default repr in the message."""

    def __init__(self, box: ToolBox) -> None:
        self.machine = Machine(model=self, initial="new", states=["new", {"name": "done",
                                                                          "final": True}],
                               transitions=[["go", "new", "done"]])

    def on_enter_done(self) -> None:
        raise ValueError(f"cannot finish {object()}")


class Stepping:
    """An event whose name the definition reserves for its own (`step.next`)."""

    def __init__(self, box: ToolBox) -> None:
        self.machine = Machine(model=self, initial="a", states=["a", {"name": "b",
                                                                      "final": True}],
                               transitions=[["step.next", "a", "b"]])


class TestReviewFindings:
    def test_an_invalid_payload_is_refused_at_the_boundary_not_fired(self) -> None:
        """The simulator sends schema-invalid payloads too; the correct machine is not blamed
        for a callback that cannot take them: the adapter refuses them, as the reference does."""
        target = transitions_target(Tipping, name="tipping_checked",
                                    events={"pay": {"sources": ["human"], "payload": AMOUNT}})
        report = fuzz(target.definition, FuzzOptions(runs=60, replay_dir=None,
                                                     sim=SimOptions(invalid_rate=0.5)),
                      machine=target)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        simulator = Simulator(target.definition, SimOptions(invalid_rate=0.5, plan=no_faults()),
                              target)
        said = {r.decision for seed in range(10) for r in simulator.run(seed).history
                if type(r) is Decided}
        assert any(d.startswith("rejected:invalid_payload") for d in said)

    def test_an_unrelated_error_named_event_does_not_hide_an_exception(self) -> None:
        class Reporting(FailingChart):
            error_reported = FailingChart.paid.to(FailingChart.paid)

        target = statemachine_target(Reporting, name="reporting", events=ASYNC_EVENTS)
        report = fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None), machine=target)
        assert report.failures and report.failures[0].rule == "machine_ok"

    def test_an_unreachable_state_leaves_a_cycle_reactive(self) -> None:
        target = transitions_target(Lights, name="lights")
        assert target.left_out == ("broken",) and target.definition.spec.reactive
        report = fuzz(target.definition, FuzzOptions(runs=10, replay_dir=None), machine=target)
        assert report.verdict == "held"

    def test_an_address_in_an_error_is_no_nondeterminism(self) -> None:
        """Two runs of one seed quote two addresses: the machine failed, deterministically."""
        target = transitions_target(Raising, name="raising")
        report = fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None), machine=target)
        assert report.verdict == "violated" and report.failures[0].rule == "machine_ok"

    def test_a_reserved_event_name_becomes_an_id(self) -> None:
        target = transitions_target(Stepping, name="stepping")
        assert list(target.definition.events) == ["_step.next"]
        assert fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None),
                    machine=target).verdict == "held"

    def test_inside_a_running_event_loop_no_thread_is_started_for_a_sync_machine(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A notebook's loop runs around the campaign: a synchronous machine's calls stay on
        this thread; an async one's coroutines run on the run's own loop, on this thread too,
        and it still holds."""
        started: list[int] = []
        helper = peers_module._on_helper_thread
        monkeypatch.setattr(peers_module, "_on_helper_thread",
                            lambda call: started.append(1) or helper(call))
        chart = statemachine_target(AsyncChart, name="async_in_loop", tools=peers.TOOLS,
                                    events=ASYNC_EVENTS)

        async def campaigns() -> tuple[str, int, str]:
            # in this process (not in forked children), where the notebook's loop runs
            sync = fuzz(peers.orders.definition, FuzzOptions(runs=20, replay_dir=None,
                                                             isolate=False),
                        machine=peers.orders).verdict
            threads = len(started)
            return sync, threads, fuzz(chart.definition, FuzzOptions(
                runs=20, replay_dir=None, isolate=False), machine=chart).verdict

        assert asyncio.run(campaigns()) == ("held", 0, "held")
        assert started == []
