"""Golden histories: the bytes of fixed seeds' histories over every bundled scenario, taken before
the speed work of issue 21, must not change. A faster simulator that draws, records or orders
anything differently changes what a user's seed means (a replay file, a failing seed in a CI
log), so a change here is either a bug or a deliberate break this file's history says why.

`python tests/harness/sim/test_golden_histories.py --write` writes the digests again (only for a
deliberate change: say why here and in the commit).

Deliberate changes:

- 2026-12-03, the guided campaign's summary: guided runs aim faults at the sites where faults
  struck least (issue 20), so a guided campaign draws other mutants. No seed's history changed.
- 2026-12-05, every history (issue 34): the default plan runs hot in swarm mode (a kind that is
  on strikes at its `HOT_RATES` rate in half its runs: one more draw per kind kept), says so in
  the plan each run logs (`"hot": true`), and leaves forged approvals out of a definition with
  no approval; and a service that honours keys lands a slow call under a key when a retry of
  it arrives (the retry is answered its result), so a run with such a retry moves the clock to
  no landing, and refuses again a key it refused (a refusal lost on the way back is a fault
  injected, recorded). Replay files written before still replay: a
  plan that does not say `hot` draws as plans did.
- 2026-12-05, every history (issue 35): each run draws how readily it moves the clock
  (`PATIENCE`, a branch of step 0 after the plan's draws), and a run that holds the clock back
  draws, at a step that could move it, whether it does (a branch before the action's); a hot
  swarm plan keeps every kind in half its runs (one more draw). Replay files written before
  still replay (no released plan said `hot`): a schedule without the step-0 branch draws the
  first patience, uniform, which draws nothing more.
- 2026-12-05, histories with a rejected commit (issue 37): a `committed` line of a rejected
  event carries the machine's reason (`"reason":"action_error: ..."`). Nothing else changed:
  with the reason left out, every digest is the one before.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from harness import FuzzOptions, SimOptions, Simulator, fuzz  # noqa: E402
from harness.bench.planted import WORKFLOW, HandRolled  # noqa: E402
from harness.sim.history import dump_line  # noqa: E402
from harness.sim.simulator import plan_for  # noqa: E402
from reference_machine import load_definition  # noqa: E402
from scenarios import bundled  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden_histories.json"
SEEDS = (0, 1, 2, 3, 4)
MODES = ("default", "swarm")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def _history_digest(result: object) -> str:
    history = result.history  # type: ignore[attr-defined]
    return _digest("".join(f"{dump_line(record)}\n" for record in history).encode("utf-8"))


def cases() -> Iterator[tuple[str, str]]:
    """Gives (name, digest) for every golden run: each bundled and naive scenario under each
    mode and seed, the hand-rolled runtime, and a guided campaign's summary."""
    paths = [*bundled(), *sorted((ROOT / "scenarios" / "naive").glob("*.yaml"))]
    for path in paths:
        definition = load_definition(path)
        for mode in MODES:
            options = SimOptions(plan=plan_for(definition, swarm=mode == "swarm"))
            simulator = Simulator(definition, options)
            for seed in SEEDS:
                name = f"{path.parent.name}/{path.stem} {mode} {seed}"
                yield name, _history_digest(simulator.run(seed))
    simulator = Simulator(WORKFLOW, SimOptions(plan=plan_for(WORKFLOW, swarm=True)), HandRolled)
    for seed in SEEDS:
        yield f"hand-rolled swarm {seed}", _history_digest(simulator.run(seed))
    refund = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
    for strategy in ("swarm", "guided"):
        report = fuzz(refund, FuzzOptions(runs=48, seed=3, strategy=strategy, isolate=False,
                                          replay_dir=None, shrink=False))
        summary = {"runs": report.runs, "steps": report.steps,
                   "faults": dict(sorted(report.faults.items())),
                   "coverage": report.coverage.report(refund),
                   "growth": report.growth,
                   "failures": [(f.seed, f.rule) for f in report.failures]}
        yield f"fuzz refund_escalation {strategy} 48 runs", _digest(
            json.dumps(summary, sort_keys=True, default=str).encode("utf-8"))


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_golden_histories_unchanged(golden: dict[str, str]) -> None:
    """Every golden run gives the bytes it gave before the speed work."""
    now = dict(cases())
    assert sorted(now) == sorted(golden), "the golden runs changed: write them again, and say why"
    changed = [name for name in golden if now[name] != golden[name]]
    assert not changed, f"{len(changed)} golden histories changed, first: {changed[:5]}"


def test_golden_digest_sees_a_change() -> None:
    """A history that differs in one byte gives another digest (the test can fail)."""
    definition = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
    simulator = Simulator(definition, SimOptions(plan=plan_for(definition, swarm=True)))
    assert _history_digest(simulator.run(0)) != _history_digest(simulator.run(1))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_golden_histories.py --write")
    GOLDEN.write_text(json.dumps(dict(cases()), indent=1, sort_keys=True) + "\n",
                      encoding="utf-8")
    print(f"wrote {GOLDEN.relative_to(ROOT)}")
