"""Measures the fuzzer's power at its defaults (issue 35), side by side in one run: per planted
bug (the test suite's planted machines, the hand-rolled runtime's, the naive scenarios, and a
dict-store refund bot whose recovery forgets its refund), the median runs to the first failure
over twenty base seeds of the default strategy (`swarm`), `guided`, and a crude random driver
(`crude`: every fault kind at 10% of its every chance, in every run, on the same simulator),
and in how many of the twenty campaigns each finds it within the default run count.

Run from the project's root: `python tools/measure_power.py` (`--seeds=5` for a
quick look). It prints the Markdown table the fuzzing page shows. With `--bridge`, it measures
the Hypothesis bridge instead: in how many of ten Hypothesis runs (`--seeds` halved) of 200
examples of 40 steps each bug was found.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from planted import PLANTED, WORKFLOW
from refund_bots import DEFINITION as REFUND_BOT
from refund_bots import ForgetfulRefund

from harness.bench.hunt import Bug, bugs, hunt
from harness.engines.fuzz import RUNS_DEFAULT

RUNS_MAX = 3_000
STRATEGIES = ("swarm", "guided", "crude")


def main() -> None:
    chosen = [Bug(name, WORKFLOW, machine, rule) for name, (machine, rule) in PLANTED.items()]
    chosen += bugs()
    chosen.append(Bug("dict-store bot: recovery forgets its refund", REFUND_BOT,
                      ForgetfulRefund, "no_duplicate_effect"))
    seeds = 20
    for argument in sys.argv[1:]:
        if argument.startswith("--seeds="):
            seeds = int(argument.partition("=")[2])
    if "--bridge" in sys.argv[1:]:
        bridge(chosen, trials=seeds // 2)
        return
    found = hunt(chosen, STRATEGIES, seeds=seeds, runs_max=RUNS_MAX,
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    by = {(h.bug, h.strategy): h for h in found}
    head = ["bug", *(f"{s}: median runs" for s in STRATEGIES),
            *(f"{s}: found in {RUNS_DEFAULT} runs" for s in STRATEGIES)]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for bug in dict.fromkeys(h.bug for h in found):
        medians = [f"{by[(bug, s)].median_runs:g}" for s in STRATEGIES]
        within = [f"{sum(1 for runs in by[(bug, s)].runs if runs <= RUNS_DEFAULT)}/{seeds}"
                  for s in STRATEGIES]
        print("| " + " | ".join([bug, *medians, *within]) + " |")


def bridge(chosen: list[Bug], trials: int, examples: int = 200, steps: int = 40) -> None:
    """Prints, per bug, in how many of `trials` Hypothesis runs of the bridge (`examples`
    examples of `steps` steps, random seeds, no example database) it was found."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness.stateful import InvariantViolated, workflow_machine

    chosen_settings = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                               database=None, phases=[Phase.generate],
                               suppress_health_check=list(HealthCheck))
    print(f"| bug | found in {trials} runs of {examples} examples of {steps} steps |")
    print("| --- | --- |")
    for bug in chosen:
        machine = workflow_machine(bug.definition, machine=bug.machine)
        found = 0
        for _ in range(trials):
            try:
                run_state_machine_as_test(machine, settings=chosen_settings)
            except InvariantViolated:
                found += 1
        print(f"| {bug.name} | {found}/{trials} |", flush=True)


if __name__ == "__main__":
    main()
