"""Tests of imported SCXML charts under the simulator (`fsmharness run` and `fuzz`): the
events a chart raises and sends to itself (its context outbox) are delivered, raised ones
before anything else happens and sends when due on the virtual clock, cancels honoured,
nothing delivered twice; a `fail` final ends the run as a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fault_injection import no_faults
from harness.sim.history import Delivered
from harness.sim.simulator import simulate
from reference_machine import load_definition
from reference_machine.importers import scxml

ROOT = Path(__file__).resolve().parents[3]
TALKS_TO_ITSELF = ROOT / "tests" / "data" / "scxml" / "raises_to_itself.scxml"
#: A cond true only for an event the chart sent itself (a sender's has no SCXML origin type)
SELF_SENT = "_event.origintype !== null"
HEAD = ('<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" '
        'datamodel="ecmascript" initial="s0">')


def run_chart(text: str, seed: int = 0, **options: Any) -> Any:
    definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
    return simulate(definition, seed, executions=1, **options)


def delivered(result: Any, via: str) -> list[tuple[str, int]]:
    """Gives the (event, time) of each delivery of the run made by way of `via`."""
    return [(r.type, r.at) for r in result.history if isinstance(r, Delivered) and r.via == via]


class TestRunCommand:
    def test_a_chart_reaches_its_target_on_what_it_raises_and_sends(self, tmp_path: Path
                                                                   ) -> None:
        """`fsmharness run` delivers the raised `ready` at once and the `later` the chart
        sends itself 2 s on; only those (their SCXML type and origin tell them from a
        sender's) take it to `pass`."""
        history = tmp_path / "history.jsonl"
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(TALKS_TO_ITSELF),
                               "--no-faults", "--executions", "1", "--history", str(history)],
                              cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "x1: pass [final] (success)" in done.stdout
        records = [json.loads(line) for line in history.read_text().splitlines()]
        ours = [(r["type"], r["via"], r["at"]) for r in records
                if r["kind"] == "delivered" and r["via"] in ("raised", "sent")]
        assert ours == [("ready", "raised", 0), ("later", "sent", 2000)]

    def test_a_fail_final_is_a_failure_outcome(self, tmp_path: Path) -> None:
        """A chart that ends in its top-level `fail` final is reported as failed."""
        chart = tmp_path / "fails.scxml"
        chart.write_text(f'{HEAD}<state id="s0"><onentry><raise event="go"/></onentry>'
                         '<transition event="go" target="fail"/></state><final id="fail"/>'
                         '</scxml>', encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(chart),
                               "--no-faults", "--executions", "1"],
                              cwd=ROOT, capture_output=True, text=True, check=False)
        assert "x1: fail [final] (failure)" in done.stdout, done.stdout + done.stderr


class TestDelivery:
    def test_raised_events_come_first_in_order(self) -> None:
        """Raised events are delivered in the order raised, each before any other action,
        under faults and across seeds."""
        text = (f'{HEAD}<state id="s0"><onentry><raise event="a"/><raise event="b"/>'
                '</onentry><transition event="a" target="s1"/></state>'
                '<state id="s1"><transition event="b" cond="_event.type === \'internal\'" '
                'target="pass"/></state><final id="pass"/></scxml>')
        for seed in range(5):
            result = run_chart(text, seed)
            assert delivered(result, "raised")[:2] == [("a", 0), ("b", 0)]
            steps = [r.step for r in result.history if isinstance(r, Delivered)
                     and r.via == "raised"]
            assert steps[:2] == [2, 3]  # the two steps right after the start

    def test_a_cancelled_send_is_not_delivered(self) -> None:
        """`<cancel>` takes back a delayed send not yet delivered: the run waits in `s1`
        for a `timeout` that never comes (and comes at 5 s without the cancel)."""
        cancel = '<cancel sendid="t"/>'
        text = (f'{HEAD}<state id="s0"><onentry><send id="t" event="timeout" delay="5s"/>'
                '<send event="stop" delay="1s"/></onentry>'
                f'<transition event="stop" cond="{SELF_SENT}" target="s1">{cancel}'
                f'</transition></state><state id="s1"><transition event="timeout" '
                f'cond="{SELF_SENT}" target="pass"/></state><final id="pass"/></scxml>')
        cancelled = run_chart(text, 0, plan=no_faults(), steps_max=400, liveness_steps=0)
        assert delivered(cancelled, "sent") == [("stop", 1000)]
        assert cancelled.final["x1"].state == "s1"
        kept = run_chart(text.replace(cancel, ""), 0, plan=no_faults(), steps_max=400,
                         liveness_steps=0)
        assert delivered(kept, "sent") == [("stop", 1000), ("timeout", 5000)]
        assert kept.final["x1"].state == "pass"

    def test_regions_deliver_each_raised_event_once(self) -> None:
        """A parallel state's regions each hold a copy of the outbox: what the parallel
        state raised on entry, and what each region raised, is delivered once."""
        text = (f'{HEAD}<state id="s0"><transition event="go" target="p"/>'
                '<onentry><raise event="go"/></onentry></state>'
                '<parallel id="p"><onentry><raise event="pe"/></onentry>'
                '<state id="r1"><onentry><raise event="r1e"/></onentry>'
                '<state id="r1a"><transition event="pe" target="r1b"/></state>'
                '<final id="r1b"/></state>'
                '<state id="r2"><onentry><raise event="r2e"/></onentry>'
                '<state id="r2a"><transition event="r2e" target="r2b"/></state>'
                '<final id="r2b"/></state>'
                '<transition event="done.state.p" target="pass"/></parallel>'
                '<final id="pass"/></scxml>')
        result = run_chart(text, 0, plan=None)
        assert result.final["x1"].state == "pass"
        names = [event for event, _ in delivered(result, "raised")]
        assert sorted(names) == sorted(set(names)), names
        assert {"go", "pe", "r1e", "r2e"} <= set(names)
