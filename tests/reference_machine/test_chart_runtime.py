"""Statecharts under the durable runtime (issue 17), against every store: a parallel state's
regions and a map's items are one execution, one version, one transaction per event; recovery
after a crash finishes every region's call that was committed but not answered (sent again
under its key, or reported ambiguous for a tool that honours none); two workers racing two
regions' results end in one consistent execution; the log replays to the stored record.

Each test runs against a `MemoryStore` and an `SQLiteStore`; `reopen` gives the store a new
process would see (the same object in memory, a new connection to the same file in SQLite).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reference_machine import (
    APPROVAL_GRANTED,
    Accepted,
    ConflictError,
    Decision,
    Event,
    EventStore,
    Execution,
    MemoryStore,
    ReplayMismatchError,
    RequestApproval,
    RunEffect,
    SQLiteStore,
    Status,
    TimerPurpose,
    WorkflowDefinition,
    load_definition,
    pending_approval,
    pending_effect,
)
from reference_machine._codec import (
    decode_execution,
    encode_event,
    encode_execution,
    encode_transition,
)
from reference_machine._runtime import CRASH_POINTS, Failure, Runtime, Success, ToolOutcome

XID = "x1"
HOUR = 3_600_000
NOW = 5  # every delivery happens long before any timer of these runs is due
DOCS = [{"url": "u0"}, {"url": "u1"}, {"url": "u2"}]

#: A wait, then a choice (an eventless move: `via`), a parallel state of two regions, each
#: with one call (the ledger honours idempotency keys, the mailer does not), then a map over
#: three documents. The ledger's region nests its step in a compound with history (so the
#: region keeps a history of its own), the wait sits in one at the top (the parent's).
FANOUT = load_definition({
    "name": "fanout",
    "context": {"docs": DOCS},
    "events": {"go": {}, "mail.confirmed": {"sources": ["human"]}},
    "tools": {"ledger.post": {"idempotency_keys": True}, "mail.send": {},
              "extract": {"idempotency_keys": True}},
    "states": {
        "intro": {"initial": True, "history": "shallow"},
        "intro_wait": {"parent": "intro", "initial": True, "type": "wait",
                       "on": {"go": "route"}, "after": {"delay": "1h", "target": "route"}},
        "route": {"type": "choice", "always": [{"target": "fan", "guard": "context.docs"},
                                               "failed"]},
        "fan": {"type": "parallel", "on_region_failure": "wait",
                "done": [{"target": "each", "guard": "not event.payload.failed"}, "failed"]},
        "post": {"parent": "fan"},
        "post_work": {"parent": "post", "initial": True, "history": "shallow"},
        "post_call": {"parent": "post_work", "initial": True,
                      "step": {"tool": "ledger.post", "input": {"amount": 5}, "timeout": "1h"},
                      "on": {"step.succeeded": {"target": "post_done", "actions": [
                          {"assign": {"posted": "event.payload.id"}}]},
                          "step.failed": "post_failed"}},
        "post_done": {"parent": "post", "type": "final", "outcome": "success"},
        "post_failed": {"parent": "post", "type": "final", "outcome": "failure"},
        "mail": {"parent": "fan"},
        # an ambiguous failure of the mailer (no keys: never sent again) asks a person
        "mail_call": {"parent": "mail", "initial": True,
                      "step": {"tool": "mail.send", "input": {"to": "a@example.com"},
                               "escalate_to": "mail_check"},
                      "on": {"step.succeeded": "mail_done", "step.failed": "mail_failed"}},
        "mail_check": {"parent": "mail", "type": "wait", "on": {"mail.confirmed": "mail_done"},
                       "after": {"delay": "1d", "target": "mail_failed"}},
        "mail_done": {"parent": "mail", "type": "final", "outcome": "success"},
        "mail_failed": {"parent": "mail", "type": "final", "outcome": "failure"},
        "each": {"type": "map", "items": "context.docs",
                 "done": [{"target": "done", "guard": "not event.payload.failing"}, "failed"]},
        "extract": {"parent": "each", "initial": True,
                    "step": {"tool": "extract", "input": {"url": "=context.url"}},
                    "on": {"step.succeeded": {"target": "extracted", "actions": [
                        {"assign": {"text": "event.payload.text"}}]},
                        "step.failed": "unreadable"}},
        "extracted": {"parent": "each", "type": "final", "outcome": "success"},
        "unreadable": {"parent": "each", "type": "final", "outcome": "failure"},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})
POST = f"{XID}/fan/1/post/post_call/1#1"
MAIL = f"{XID}/fan/1/mail/mail_call/1#1"
ITEMS = [f"{XID}/each/1/{index}/extract/1#1" for index in range(3)]


def approving(region: str) -> dict[str, Any]:
    """Gives the states of a region that asks a supervisor, then pays."""
    return {
        region: {"parent": "both"},
        f"{region}_ask": {"parent": region, "initial": True, "type": "wait", "approval": {
            "for_state": f"{region}_pay", "summary": f"pay {region}", "roles": ["supervisor"],
            "expires_after": "1d"},
            "on": {"approval.granted": f"{region}_pay", "approval.denied": f"{region}_no"}},
        f"{region}_pay": {"parent": region, "step": {
            "tool": "ledger.post", "input": {"region": region}, "needs_approval": True},
            "on": {"step.succeeded": f"{region}_done", "step.failed": f"{region}_no"}},
        f"{region}_done": {"parent": region, "type": "final", "outcome": "success"},
        f"{region}_no": {"parent": region, "type": "final", "outcome": "failure"},
    }


COOL_MS = 30_000  # the 30s wait of the cooling region

#: Three regions: two that each ask for an approval before a call, and one that waits out a
#: timer (a region's timer, which the store must keep and fire like any other).
GATED = load_definition({
    "name": "gated",
    "tools": {"ledger.post": {"idempotency_keys": True}},
    "states": {
        "both": {"initial": True, "type": "parallel", "on_region_failure": "wait",
                 "done": [{"target": "done", "guard": "not event.payload.failed"}, "failed"]},
        **approving("left"),
        **approving("right"),
        "cool": {"parent": "both"},
        "cool_wait": {"parent": "cool", "initial": True, "type": "wait",
                      "after": {"delay": "30s", "target": "cool_done"}},
        "cool_done": {"parent": "cool", "type": "final", "outcome": "success"},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})
COOL_TIMER = f"{XID}/both/1/cool/cool_wait/1/after"


class Crash(Exception):
    """The simulated death of the process at a crash point."""


class World:
    """Fake tools with a ledger of what happened: every invocation by (tool, key), and every
    effect applied. A tool that honours idempotency keys applies a key once and answers a
    repeat with its first answer; one that does not applies every call."""

    def __init__(self, definition: WorkflowDefinition) -> None:
        self.definition = definition
        self.invoked: Counter[tuple[str, str]] = Counter()
        self.applied: Counter[tuple[str, str]] = Counter()
        self.on_call: Callable[[str, str], None] = lambda tool, key: None

    def tools(self) -> dict[str, Callable[[Mapping[str, Any], str], ToolOutcome]]:
        return {name: self._tool(name) for name in self.definition.tools}

    def _tool(self, name: str) -> Callable[[Mapping[str, Any], str], ToolOutcome]:
        honours_keys = self.definition.tools[name].idempotency_keys

        def call(payload: Mapping[str, Any], key: str) -> ToolOutcome:
            self.on_call(name, key)
            self.invoked[(name, key)] += 1
            if not honours_keys or not self.applied[(name, key)]:
                self.applied[(name, key)] += 1
            return Success({"id": f"{name}:{key}", "text": f"text of {payload.get('url')}"})

        return call

    def calls(self, tool: str) -> dict[str, int]:
        """Gives the invocations of `tool` by idempotency key."""
        return {key: n for (name, key), n in self.invoked.items() if name == tool}


def crash_at(point: str, hit: int) -> Callable[[str], None]:
    """Gives a hook that crashes the `hit`-th time `point` is passed."""
    count = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            count["n"] += 1
            if count["n"] == hit:
                raise Crash(f"{point} #{hit}")

    return hook


@pytest.fixture(params=["memory", "sqlite"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], EventStore]]:
    """Gives a function that opens the store as a new process would find it."""
    memory = MemoryStore()
    opened: list[EventStore] = []

    def open_store() -> EventStore:
        if request.param == "memory":
            return memory
        store = SQLiteStore(tmp_path / "chart.db")
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def runtime(store: EventStore, world: World, *, defer: bool = True, **options: Any
            ) -> Runtime:
    """Gives a runtime over `store` whose calls wait in flight until `complete` (or, not
    `defer`red, are called as soon as they are committed)."""
    return Runtime(store, [world.definition], world.tools(), defer_effects=defer, **options)


def execution(store: EventStore) -> Execution:
    return store.load(XID).execution


def stored_text(store: EventStore) -> str:
    """Gives the execution's record as the store keeps it: SQLite's own bytes, or the
    encoding of what the memory store holds."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as db:
            (text,) = db.execute("SELECT record FROM executions WHERE id = ?", (XID,)).fetchone()
        return str(text)
    return encode_execution(execution(store))


def in_a_check(ex: Execution) -> bool:
    """Tells whether the mail region waits for a person to confirm an ambiguous send."""
    return any(region.state == "mail_check" for region in ex.regions)


def finish(rt: Runtime, order: Callable[[list[str]], str] = lambda calls: calls[0],
           rounds: int = 20) -> list[Decision]:
    """Plays everyone until the fan-out run is final: the client's `go`, the person who
    confirms an ambiguous mail, and the tools (`order` picks the call in flight to land
    next). Gives the decisions of the events it delivered."""
    decisions: list[Decision] = []
    for _ in range(rounds):
        ex = execution(rt.store)
        if ex.status == Status.FINAL:
            return decisions
        if ex.state == "intro_wait":
            decisions.append(rt.deliver(XID, Event("go-1", "go"), NOW))
        elif in_a_check(ex):
            decisions.append(rt.deliver(XID, Event("confirm-1", "mail.confirmed", "human"),
                                        NOW))
        else:
            calls = rt.in_flight(XID)
            assert calls, f"nothing in flight and the run is not final: {ex}"
            decision = rt.complete(XID, order(calls), NOW)
            assert decision is not None
            decisions.append(decision)
    pytest.fail(f"the run did not finish in {rounds} rounds: {execution(rt.store)}")


# -- 1. one execution, one version, one transaction per event --------------------------------


@pytest.mark.parametrize(("regions", "items"), [
    ((POST, MAIL), (0, 1, 2)),
    ((MAIL, POST), (2, 0, 1)),
    ((MAIL, POST), (1, 2, 0)),
])
def test_regions_and_items_are_one_execution_with_one_version_per_event(
        reopen: Callable[[], EventStore], regions: tuple[str, str],
        items: tuple[int, ...]) -> None:
    """Both regions' calls are in the outbox at once, then the map's three; landing them in
    any order reaches the join; each event is one commit: one log entry, one new version,
    the decided execution stored byte for byte, one transition record keeping `via` and
    `inner`."""
    world = World(FANOUT)
    store = reopen()
    rt = runtime(store, world)
    decisions: list[Decision] = [rt.start(FANOUT, XID, now=0)]

    def deliver(decision: Decision | None) -> None:
        assert isinstance(decision, Accepted), decision
        decisions.append(decision)
        stored = store.load(XID)
        assert stored.version == len(decisions) == decision.execution.sequence
        assert len(store.log(XID)) == len(decisions)
        assert stored.execution == decision.execution
        assert stored_text(store) == encode_execution(decision.execution)
        assert encode_execution(decode_execution(stored_text(store))) == stored_text(store)
        # the store's timers are the execution's, its regions' included (the parent mirrors)
        held = sorted(decision.execution.timers, key=lambda t: (t.fire_at, t.id))
        assert store.due_timers(10**15) == [(XID, timer) for timer in held]

    deliver(rt.deliver(XID, Event("go-1", "go"), 1))
    ex = execution(store)
    assert ex.state == "fan" and ex.history == {"intro": "intro_wait"}
    assert [(r.definition, r.state) for r in ex.regions] == [("post", "post_call"),
                                                              ("mail", "mail_call")]
    assert rt.in_flight(XID) == [POST, MAIL]
    assert [(e.command.key, e.command.idempotent) for e in store.pending(XID)
            if isinstance(e.command, RunEffect)] == [(POST[:-2], True), (MAIL[:-2], False)]
    assert world.invoked == {}  # in flight, not called

    first, second = regions
    deliver(rt.complete(XID, first, 2))
    ex = execution(store)
    assert ex.state == "fan" and rt.in_flight(XID) == [second]
    if first == POST:  # the region left its compound: its own history, stored nested
        assert ex.regions[0].state == "post_done"
        assert ex.regions[0].history == {"post_work": "post_call"}
    deliver(rt.complete(XID, second, 3))
    ex = execution(store)
    assert ex.state == "each" and ex.context["posted"] == f"ledger.post:{POST[:-2]}"
    assert rt.in_flight(XID) == ITEMS

    for n, index in enumerate(items):
        deliver(rt.complete(XID, ITEMS[index], 4 + n))
    ex = execution(store)
    assert ex.state == "done" and ex.outcome == "success" and ex.regions == ()
    assert [r["text"] for r in ex.context["results"]] == [f"text of u{i}" for i in range(3)]
    assert world.invoked == {("ledger.post", POST[:-2]): 1, ("mail.send", MAIL[:-2]): 1,
                             **{("extract", item[:-2]): 1 for item in ITEMS}}

    records = [r.transition for r in store.transitions(XID)]
    assert records == [d.transition for d in decisions if isinstance(d, Accepted)]
    into_fan = records[1]
    assert (into_fan.source, into_fan.target, into_fan.via) == ("intro_wait", "fan", ("route",))
    assert [(t.source, t.target) for t in into_fan.inner] == [("", "post_call"),
                                                              ("", "mail_call")]
    join = records[3]
    assert (join.source, join.event, join.target) == ("fan", "done", "each")
    landed = "post_call" if second == POST else "mail_call"
    assert (landed, "step.succeeded") in [(t.source, t.event) for t in join.inner]
    assert rt.replay(XID) == ex
    # a new process reads the same records back
    again = reopen()
    assert [r.transition for r in again.transitions(XID)] == records
    assert encode_execution(execution(again)) == encode_execution(ex)


def test_a_run_stopped_in_its_regions_reads_back_equal_in_a_new_process(
        reopen: Callable[[], EventStore]) -> None:
    """Mid-fan-out, with one region done (its history kept) and one call in flight, a new
    process loads the same execution, byte for byte, and replays it from the log."""
    world = World(FANOUT)
    rt = runtime(reopen(), world)
    rt.start(FANOUT, XID)
    rt.deliver(XID, Event("go-1", "go"), 1)
    rt.complete(XID, POST, 2)
    before = execution(rt.store)
    assert before.regions[0].history and before.history
    store = reopen()
    assert encode_execution(execution(store)) == encode_execution(before)
    assert execution(store) == before
    assert runtime(store, world).replay(XID) == before


WIDE = 1002  # items of a map that fans out past a thousand calls in one commit

#: A map whose items each make two calls, one after the other.
TWO_STEPS = load_definition({
    "name": "two_steps",
    "context": {"docs": [{"url": f"u{i}"} for i in range(WIDE)]},
    "tools": {"extract": {"idempotency_keys": True}, "file": {"idempotency_keys": True}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.docs", "done": "done"},
        "extract": {"parent": "each", "initial": True, "step": {"tool": "extract"},
                    "on": {"step.succeeded": "file", "step.failed": "bad"}},
        "file": {"parent": "each", "step": {"tool": "file"},
                 "on": {"step.succeeded": "ok", "step.failed": "bad"}},
        "ok": {"parent": "each", "type": "final", "outcome": "success"},
        "bad": {"parent": "each", "type": "final", "outcome": "failure"},
        "done": {"type": "final", "outcome": "success"},
    },
})


def test_the_outbox_keeps_commit_order_past_a_thousand_calls_in_one_commit(
        reopen: Callable[[], EventStore]) -> None:
    """A map that starts 1,002 items at once commits 1,002 calls in one event; the next
    event's call comes after all of them, oldest first (SQLite numbered a commit's
    commands in steps of 1,000, so the newer call sorted among the older ones)."""
    world = World(TWO_STEPS)
    rt = runtime(reopen(), world)
    rt.start(TWO_STEPS, XID)
    first = [f"{XID}/each/1/{index}/extract/1#1" for index in range(WIDE)]
    assert rt.in_flight(XID) == first
    rt.complete(XID, first[0], 1)
    store = reopen()
    assert [e.command_id for e in store.outbox(XID)] == [*first, f"{XID}/each/1/0/file/1#1"]
    assert [e.command_id for e in store.pending(XID)] == [*first[1:],
                                                         f"{XID}/each/1/0/file/1#1"]


#: A region that is issued a token (a secret: kept as a vault reference) and then calls a
#: service that knows the token and quotes it in its error.
TOKEN = "tok-5b1e0c9d"
ISSUED = load_definition({
    "name": "issued",
    "secrets": ["token"],
    "context": {"token": None},
    "tools": {"issue": {"idempotency_keys": True}, "check": {"idempotency_keys": True}},
    "states": {
        "both": {"initial": True, "type": "parallel", "done": "end"},
        "grant": {"parent": "both"},
        "grant_issue": {"parent": "grant", "initial": True, "step": {"tool": "issue"},
                        "on": {"step.succeeded": {"target": "grant_check", "actions": [
                            {"assign": {"token": "event.payload.token"}}]},
                            "step.failed": "grant_bad"}},
        "grant_check": {"parent": "grant", "step": {"tool": "check"},
                        "on": {"step.succeeded": "grant_ok", "step.failed": "grant_bad"}},
        "grant_ok": {"parent": "grant", "type": "final", "outcome": "success"},
        "grant_bad": {"parent": "grant", "type": "final", "outcome": "failure"},
        "end": {"type": "final", "outcome": "success"},
    },
})


def test_a_secret_a_region_was_given_stays_out_of_a_tools_error_text(
        reopen: Callable[[], EventStore]) -> None:
    """A token a region's tool returned is in that region's context alone (until the join);
    a later tool's error quoting it is stored redacted, as it is outside regions (the check
    read only the parent's context, so the token went into the log in clear)."""
    def check(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        return Failure("permanent", f"token {TOKEN} expired")

    store = reopen()
    rt = Runtime(store, [ISSUED], {"issue": lambda payload, key: Success({"token": TOKEN}),
                                   "check": check})
    rt.start(ISSUED, XID, context={"token": "tok-of-the-caller"})
    assert execution(store).state == "end"
    failure = store.log(XID)[-1].event
    assert failure.payload["error"] == "token [redacted] expired"
    kept = [encode_event(e.event) for e in store.log(XID)] + [
        encode_event(e.result) for e in store.outbox(XID) if e.result is not None]
    assert not [text for text in kept if TOKEN in text]


# -- 2. crashes while regions have calls in flight; regions' approvals and timers ---------


def land_mail_first(calls: list[str]) -> str:
    return next((call for call in calls if "/mail/" in call), calls[-1])


ORDERS = {"post_first": lambda calls: calls[0], "mail_first": land_mail_first}
#: Deferred calls land in either order; called at once, they go in the outbox's order.
MODES = [pytest.param(True, "post_first", id="deferred-post_first"),
         pytest.param(True, "mail_first", id="deferred-mail_first"),
         pytest.param(False, "post_first", id="at_once")]


#: Where a crash finds regions (or map items) with calls in flight: the commit points are
#: passed first by the start and the `go`, the call points only once calls land.
CRASHES = [*((point, hit) for point in CRASH_POINTS[2:] for hit in range(1, 6)),
           *(("before_commit", hit) for hit in range(3, 8)),
           *(("after_commit_before_dispatch", hit) for hit in range(2, 7))]


@pytest.mark.parametrize(("defer", "order"), MODES)
@pytest.mark.parametrize(("point", "hit"), CRASHES)
def test_recovery_finishes_every_regions_call_once(reopen: Callable[[], EventStore],
                                                   point: str, hit: int, defer: bool,
                                                   order: str) -> None:
    """A crash at `point` (its `hit`-th pass) while regions or items have calls in flight;
    a new process recovers: every call committed and unanswered is sent again under its key
    (the ledger, the extractor) or reported ambiguous (the mailer, which honours no key: a
    person confirms it instead), a result recorded before the crash is delivered without a
    call, no effect is applied twice, the run reaches the join and ends, and its log replays
    to the stored record."""
    world = World(FANOUT)
    crashed = runtime(reopen(), world, defer=defer, crash=crash_at(point, hit))
    with pytest.raises(Crash):
        crashed.start(FANOUT, XID, now=0)
        finish(crashed, ORDERS[order])
    store = reopen()  # only what was committed survives
    at_crash = execution(store)
    assert any(region.effect is not None for region in at_crash.regions), at_crash
    waiting = {entry.command_id: entry for entry in store.pending(XID)
               if isinstance(entry.command, RunEffect)
               and pending_effect(at_crash, entry.command_id) is not None}
    assert waiting
    invoked = Counter(world.invoked)

    recovered = runtime(store, world, defer=defer)
    recovered.recover(now=NOW)
    outbox = {entry.command_id: entry for entry in store.outbox(XID)}
    for call_id, entry in waiting.items():
        command = entry.command
        assert isinstance(command, RunEffect)
        result = outbox[call_id].result
        assert result is not None, f"{call_id} was not finished by recovery"
        sent = world.invoked[(command.tool, command.key)] - invoked[(command.tool, command.key)]
        if entry.result is not None:
            assert sent == 0 and result == entry.result, f"{call_id}: recorded, not delivered"
        elif command.idempotent:
            assert sent == 1, f"{call_id} was not sent again"
        else:
            assert sent == 0, f"{call_id} (no idempotency keys) was sent again blindly"
            assert result.payload["category"] == "timeout"
        assert call_id not in [e.command_id for e in store.pending(XID)]
    recovered.start(FANOUT, XID)  # the client retries a start it saw no answer to
    finish(recovered, ORDERS[order])

    ex = execution(store)
    assert ex.outcome == "success" and ex.state == "done"
    mailed = world.calls("mail.send")
    assert set(mailed.values()) <= {1}, f"the mail went out twice: {mailed}"
    assert set(world.applied.values()) == {1}, f"an effect was applied twice: {world.applied}"
    assert set(world.applied) == {("ledger.post", POST[:-2]),
                                  *(("extract", item[:-2]) for item in ITEMS),
                                  *(("mail.send", key) for key in mailed)}
    joins = [r.transition for r in store.transitions(XID) if r.transition.event == "done"]
    assert [(t.source, t.target) for t in joins] == [("fan", "each"), ("each", "done")]
    log = store.log(XID)
    assert [entry.sequence for entry in log] == list(range(1, len(log) + 1))
    assert store.load(XID).version == ex.sequence
    assert recovered.replay(XID) == ex


class Notices:
    """A `notify` hook that keeps the approval requests it was given."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def __call__(self, execution_id: str, request: RequestApproval) -> None:
        self.requests.append(request.request_id)


def grant(rt: Runtime, region: str) -> Decision:
    """Delivers a supervisor's grant of the approval `region` asks for."""
    request = next(r.approval for r in execution(rt.store).regions
                   if r.definition == region and r.approval is not None)
    return rt.deliver(XID, Event(f"grant-{region}", APPROVAL_GRANTED, "human",
                                 {"role": "supervisor", "action_hash": request.action_hash},
                                 request.request_id), NOW)


def requests_of(ex: Execution) -> list[str]:
    """Gives the approval requests the regions have pending, in region order."""
    return [r.approval.request_id for r in ex.regions if r.approval is not None]


def test_recovery_notifies_every_regions_pending_approval(
        reopen: Callable[[], EventStore]) -> None:
    """Crashed after the start committed both regions' approval requests, before anyone was
    told: recovery notifies both, the second region's too (the parent mirrors only the
    first's); once the first is granted, a later recovery notifies only the second's."""
    world = World(GATED)
    told = Notices()
    crashed = runtime(reopen(), world, notify=told,
                      crash=crash_at("after_commit_before_dispatch", 1))
    with pytest.raises(Crash):
        crashed.start(GATED, XID)
    assert told.requests == []
    store = reopen()
    ex = execution(store)
    left, right = requests_of(ex)
    assert ex.approval is not None and ex.approval.request_id == left  # the mirror
    assert pending_approval(ex, right) is not None

    told = Notices()
    recovered = runtime(store, world, notify=told)
    recovered.recover(now=NOW)
    assert told.requests == [left, right]

    assert isinstance(grant(recovered, "left"), Accepted)
    assert requests_of(execution(store)) == [right]
    told = Notices()
    runtime(reopen(), world, notify=told).recover(now=NOW)
    assert told.requests == [right]


def test_a_regions_timers_are_durable_and_fire_into_the_region(
        reopen: Callable[[], EventStore]) -> None:
    """The store keeps every region's timers (the waiting region's, the approvals' expiry);
    a new process's tick fires the region's timer, which moves that region alone; the run
    then joins once the approved calls land."""
    world = World(GATED)
    rt = runtime(reopen(), world)
    rt.start(GATED, XID)
    store = reopen()
    ex = execution(store)
    held = sorted(ex.timers, key=lambda t: (t.fire_at, t.id))
    assert store.due_timers(10**15) == [(XID, t) for t in held]
    assert {t.id for r in ex.regions for t in r.timers} == {t.id for t in held}
    assert store.due_timers(COOL_MS) == [(XID, next(t for t in held if t.id == COOL_TIMER))]
    assert next(t for t in held if t.id == COOL_TIMER).purpose == TimerPurpose.WAIT_TIMEOUT

    later = runtime(store, world)
    assert later.tick(COOL_MS - 1) == []
    (fired,) = later.tick(COOL_MS)
    assert isinstance(fired, Accepted)
    assert [(t.source, t.target) for t in fired.transition.inner] == [("cool_wait",
                                                                      "cool_done")]
    ex = execution(reopen())
    assert [r.state for r in ex.regions] == ["left_ask", "right_ask", "cool_done"]
    assert COOL_TIMER not in [t.id for _, t in store.due_timers(10**15)]
    assert COOL_TIMER not in [t.id for t in ex.timers]

    grant(later, "right")
    grant(later, "left")
    for call in later.in_flight(XID):
        later.complete(XID, call, COOL_MS + 1)
    ex = execution(store)
    assert ex.state == "done" and ex.outcome == "success"
    assert store.due_timers(10**15) == []  # the expiries were cancelled with their regions
    assert world.calls("ledger.post") == {f"{XID}/both/1/left/left_pay/1": 1,
                                          f"{XID}/both/1/right/right_pay/1": 1}
    assert later.replay(XID) == ex


#: A region whose timer leads into a choice with no default: when no branch holds, decide
#: rejects the timer's firing.
DEAD_END = load_definition({
    "name": "dead_end",
    "context": {"ready": False},
    "events": {"go": {}},
    "states": {
        "both": {"initial": True, "type": "parallel", "done": "end"},
        "one": {"parent": "both"},
        "one_wait": {"parent": "one", "initial": True, "type": "wait",
                     "on": {"go": "one_done"}, "after": {"delay": "30s", "target": "one_route"}},
        "one_route": {"parent": "one", "type": "choice", "always": [
            {"target": "one_done", "guard": "context.ready"}]},
        "one_done": {"parent": "one", "type": "final", "outcome": "success"},
        "end": {"type": "final", "outcome": "success"},
    },
})


def test_a_regions_timer_whose_firing_is_rejected_is_gone_from_every_store(
        reopen: Callable[[], EventStore]) -> None:
    """A committed firing takes its timer off due_timers whatever decide made of it, a
    rejection too (SQLite kept it, and fired it again at every tick, each time refused as a
    duplicate, while the memory store dropped it); the run still moves on other events."""
    world = World(DEAD_END)
    rt = runtime(reopen(), world)
    rt.start(DEAD_END, XID)
    (fired,) = rt.tick(COOL_MS)
    assert fired.kind == "rejected" and "no branch of choice 'one_route'" in str(fired)
    store = reopen()
    assert store.due_timers(10**15) == []
    assert runtime(store, world).tick(2 * COOL_MS) == []
    assert store.log(XID)[-1].decision == "rejected"
    assert isinstance(rt.deliver(XID, Event("go-1", "go"), COOL_MS + 1), Accepted)
    assert execution(store).state == "end"
    assert rt.replay(XID) == execution(store)


def test_a_regions_step_timeout_and_retry_fire_from_the_store_into_the_region(
        reopen: Callable[[], EventStore]) -> None:
    """The ledger region's call outlasts its timeout: a new process's tick fires the
    region's step timeout, then its retry timer, and the second attempt goes out under the
    same key beside the first; the first lands late and is ignored, the second moves the
    region, and the other region's call was never disturbed."""
    world = World(FANOUT)
    rt = runtime(reopen(), world)
    rt.start(FANOUT, XID)
    rt.deliver(XID, Event("go-1", "go"), 0)
    timeout = f"{POST}/timeout"
    assert [t.id for _, t in reopen().due_timers(HOUR)] == [timeout]

    later = runtime(reopen(), world)
    (fired,) = later.tick(HOUR)
    assert isinstance(fired, Accepted)
    ex = execution(later.store)
    (retry,) = [t for t in ex.regions[0].timers if t.purpose == TimerPurpose.RETRY]
    assert [t.id for _, t in later.store.due_timers(10**15)] == [retry.id]
    (fired,) = later.tick(retry.fire_at)
    assert isinstance(fired, Accepted)
    second = f"{POST[:-2]}#2"
    assert later.in_flight(XID) == [POST, MAIL, second]
    late = later.complete(XID, POST, retry.fire_at + 1)
    assert late is not None and late.kind == "ignored"
    assert execution(later.store).regions[0].state == "post_call"
    later.complete(XID, second, retry.fire_at + 2)
    later.complete(XID, MAIL, retry.fire_at + 3)
    ex = execution(later.store)
    assert ex.state == "each"
    assert world.invoked[("ledger.post", POST[:-2])] == 2
    assert world.applied[("ledger.post", POST[:-2])] == 1
    assert later.replay(XID) == ex


def cancelling() -> WorkflowDefinition:
    """Gives the fan-out whose regions are cancelled when one fails, the ledger's call
    undone by a void."""
    spec = FANOUT.spec.model_dump(mode="json", exclude_unset=True)
    spec["name"] = "fanout_cancel"
    spec["tools"]["ledger.void"] = {"idempotency_keys": True}
    spec["compensation_failed"] = "failed"
    spec["states"]["fan"]["on_region_failure"] = "cancel"
    spec["states"]["post_call"]["step"]["compensation"] = {"tool": "ledger.void"}
    return load_definition(spec)


@pytest.mark.parametrize(("point", "hit"), [("after_commit_before_dispatch", 3),
                                            ("after_apply_before_record", 1),
                                            ("before_commit", 4)])
def test_recovery_sends_no_abandoned_regions_call_only_its_undo(
        reopen: Callable[[], EventStore], point: str, hit: int) -> None:
    """The mail region fails for good, so the ledger region is abandoned with its call in
    flight, and the call's undo is committed (it may land all the same); a crash before the
    undo is answered: recovery finishes the undo, and never sends the abandoned call."""
    definition = cancelling()
    world = World(definition)
    crashed = Runtime(reopen(), [definition], world.tools(), defer_effects=True,
                      crash=crash_at(point, hit))
    crashed.start(definition, XID)
    crashed.deliver(XID, Event("go-1", "go"), 1)
    undo = f"{POST[:-2]}/undo#1"
    with pytest.raises(Crash):
        crashed.deliver(XID, Event("mail-lost", "step.failed", "tool",
                                   {"category": "permanent"}, MAIL), 2)
        crashed.complete(XID, undo, 3)
    store = reopen()
    ex = execution(store)
    assert ex.status == Status.COMPENSATING and ex.regions == ()
    assert pending_effect(ex, POST) is None and pending_effect(ex, undo) is not None
    Runtime(store, [definition], world.tools(), defer_effects=True).recover(now=4)
    ex = execution(store)
    assert (ex.state, ex.outcome) == ("failed", "failure")
    assert world.applied == {("ledger.void", undo[:-2]): 1}  # sent again after a lost answer
    assert ("ledger.post", POST[:-2]) not in world.invoked


def test_an_abandoned_regions_call_is_never_sent_after_the_fact(
        reopen: Callable[[], EventStore]) -> None:
    """The ledger region is abandoned with its call still in the outbox: completing that call
    later sends nothing (the tool honours keys, but no step of the run holds the key any
    more: its effect would land after its undo), and the run ends undone."""
    definition = cancelling()
    world = World(definition)
    rt = runtime(reopen(), world)
    rt.start(definition, XID)
    rt.deliver(XID, Event("go-1", "go"), 1)
    rt.deliver(XID, Event("mail-lost", "step.failed", "tool", {"category": "permanent"}, MAIL),
               2)
    assert POST in rt.in_flight(XID)
    rt.complete(XID, POST, 3)  # the abandoned call: recorded as not sent
    rt.complete(XID, f"{POST[:-2]}/undo#1", 4)
    assert (execution(rt.store).state, execution(rt.store).outcome) == ("failed", "failure")
    assert ("ledger.post", POST[:-2]) not in world.invoked


# -- 3. two workers racing two regions' results ----------------------------------------------


class Conflicts:
    """Counts the version conflicts a store's commits raise (the store still raises them)."""

    def __init__(self, store: EventStore) -> None:
        self.seen: list[ConflictError] = []
        commit = store.commit

        def counted(*args: Any, **kwargs: Any) -> int:
            try:
                return commit(*args, **kwargs)
            except ConflictError as exc:
                self.seen.append(exc)
                raise

        store.commit = counted  # type: ignore[method-assign]


def meanwhile(point: str, action: Callable[[], object]) -> tuple[Callable[[str], None],
                                                                 Callable[[], None]]:
    """Gives a crash hook that runs `action` (another worker's move) the first time `point`
    is passed once armed, and the function that arms it."""
    state = {"armed": False}

    def hook(name: str) -> None:
        if name == point and state["armed"]:
            state["armed"] = False
            action()

    def arm() -> None:
        state["armed"] = True

    return hook, arm


def started_fan_out(reopen: Callable[[], EventStore], world: World,
                    hook: Callable[[str], None]) -> tuple[Runtime, Runtime]:
    """Gives two workers over one store, the run in its regions with both calls in flight;
    the first worker passes its crash points to `hook`."""
    first = runtime(reopen(), world, crash=hook)
    first.start(FANOUT, XID)
    first.deliver(XID, Event("go-1", "go"), 1)
    return first, runtime(reopen(), world)


def test_two_workers_landing_two_regions_results_make_one_execution(
        reopen: Callable[[], EventStore]) -> None:
    """The second worker lands the mail region's result between the first worker's decision
    on the ledger region's result and its commit: the first worker's commit meets a version
    conflict, it reloads and decides again on the execution that holds the other region's
    move, and the run joins with both results, one version per event."""
    world = World(FANOUT)
    others: list[Decision | None] = []
    hook, arm = meanwhile("before_commit", lambda: others.append(second.complete(XID, MAIL, 2)))
    first, second = started_fan_out(reopen, world, hook)
    conflicts = Conflicts(first.store)
    arm()
    decision = first.complete(XID, POST, 3)
    (other,) = others
    assert isinstance(other, Accepted) and isinstance(decision, Accepted)
    assert [(c.expected, c.actual) for c in conflicts.seen] == [(2, 3)]
    store = reopen()
    ex = execution(store)
    assert ex.state == "each" and ex.sequence == store.load(XID).version == 4
    assert [e.event.answers for e in store.log(XID)][2:] == [MAIL, POST]
    assert [e.decision for e in store.log(XID)] == ["accepted"] * 4
    assert ex.context["posted"] == f"ledger.post:{POST[:-2]}"
    # the join happened once: each item's call is in the outbox once
    assert [e.command_id for e in store.outbox(XID)] == [POST, MAIL, *ITEMS]
    assert world.invoked == {("ledger.post", POST[:-2]): 1, ("mail.send", MAIL[:-2]): 1}
    assert first.replay(XID) == ex and second.replay(XID) == ex


def test_two_workers_landing_two_items_around_the_join_make_one_execution(
        reopen: Callable[[], EventStore]) -> None:
    """The same race for the map: the second worker lands the last item but one while the
    first decides on the last, so the first's join is decided again on the fresh record;
    the run ends once, with every item's result in order."""
    world = World(FANOUT)
    others: list[Decision | None] = []
    hook, arm = meanwhile("before_commit",
                          lambda: others.append(second.complete(XID, ITEMS[1], 6)))
    first, second = started_fan_out(reopen, world, hook)
    first.complete(XID, POST, 2)
    second.complete(XID, MAIL, 3)  # the first worker's cached record is stale now
    first.complete(XID, ITEMS[0], 4)
    conflicts = Conflicts(first.store)
    arm()
    decision = first.complete(XID, ITEMS[2], 5)
    assert isinstance(decision, Accepted) and decision.transition is not None
    assert (decision.transition.source, decision.transition.target) == ("each", "done")
    # the first worker's commit at version 5 met the second's (in memory, where both share
    # one store, the second's own stale commit is counted too)
    assert (5, 6) in [(c.expected, c.actual) for c in conflicts.seen] and len(others) == 1
    store = reopen()
    ex = execution(store)
    assert ex.state == "done" and ex.sequence == store.load(XID).version == 7
    assert [r["text"] for r in ex.context["results"]] == [f"text of u{i}" for i in range(3)]
    assert set(world.invoked.values()) == {1}
    assert first.replay(XID) == ex


def test_two_workers_landing_one_regions_call_deliver_it_once(
        reopen: Callable[[], EventStore]) -> None:
    """Both workers land the ledger region's call: the second's result is recorded first and
    wins; the first worker records nothing new and its delivery is a duplicate; the key was
    applied once, and the other region's call is still in flight."""
    world = World(FANOUT)
    others: list[Decision | None] = []
    hook, arm = meanwhile("after_apply_before_record",
                          lambda: others.append(second.complete(XID, POST, 2)))
    first, second = started_fan_out(reopen, world, hook)
    arm()
    decision = first.complete(XID, POST, 3)
    assert decision is not None and decision.kind == "ignored"
    assert isinstance(others[0], Accepted)
    store = reopen()
    ex = execution(store)
    assert world.invoked[("ledger.post", POST[:-2])] == 2
    assert world.applied[("ledger.post", POST[:-2])] == 1
    assert [r.state for r in ex.regions] == ["post_done", "mail_call"]
    # the store refused the second delivery of the result's id: logged once
    assert [e.event.answers for e in store.log(XID)] == ["", "", POST]
    assert store.load(XID).version == 3 and first.in_flight(XID) == [MAIL]
    assert first.replay(XID) == ex


# -- 4. replay ---------------------------------------------------------------------------------


def overwrite(store: EventStore, *, record: Execution | None = None,
              inner: tuple[Any, ...] | None = None) -> None:
    """Changes what the store holds behind its back: the execution's record, or the inner
    moves of its newest transition record (a store that lost or garbled them)."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as db:
            if record is not None:
                db.execute("UPDATE executions SET record = ? WHERE id = ?",
                           (encode_execution(record), XID))
            if inner is not None:
                last = store.transitions(XID)[-1]
                db.execute("UPDATE transitions SET record = ? WHERE execution_id = ? AND "
                           "sequence = ?", (encode_transition(last.transition._replace(
                               inner=inner)), XID, last.sequence))
        return
    assert isinstance(store, MemoryStore)
    run = store._runs[XID]
    if record is not None:
        run.execution = record
    if inner is not None:
        last = run.transitions[-1]
        run.transitions[-1] = dataclasses.replace(
            last, transition=last.transition._replace(inner=inner))


def test_replay_rebuilds_a_parallel_run_and_names_a_region_that_differs(
        reopen: Callable[[], EventStore]) -> None:
    """Replay from the log alone gives the stored execution, regions and their history
    included, at every step; a stored region that differs, or a transition record whose
    region moves differ, is a ReplayMismatchError."""
    world = World(FANOUT)
    rt = runtime(reopen(), world)
    rt.start(FANOUT, XID)
    assert rt.replay(XID) == execution(rt.store)
    rt.deliver(XID, Event("go-1", "go"), 1)
    assert rt.replay(XID) == execution(rt.store)
    rt.complete(XID, POST, 2)
    ex = execution(rt.store)
    assert rt.replay(XID) == ex and ex.regions[0].history == {"post_work": "post_call"}

    store = reopen()
    fresh = runtime(store, world)
    post, mail = ex.regions
    overwrite(store, record=ex._replace(regions=(post._replace(history={}), mail)))
    with pytest.raises(ReplayMismatchError, match=r"differs from the stored record"):
        fresh.replay(XID)
    overwrite(store, record=ex)
    assert fresh.replay(XID) == ex
    overwrite(store, inner=())
    with pytest.raises(ReplayMismatchError, match=r"diverges at sequence 3: recorded "
                                                  r"transition"):
        fresh.replay(XID)
