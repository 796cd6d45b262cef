"""Bad statecharts get a clear, located finding at load time: an eventless cycle, a region with
no final state, a join that can never happen, a map over a non-list, a move out of a region,
and each construct used where it does not belong."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from charts import END, WAIT, chart

from reference_machine import DefinitionError, check_spec, load_definition
from reference_machine._spec import WorkflowSpec


def findings(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    spec = WorkflowSpec.model_validate(data)
    return [(f.severity.value, f.code, f.location) for f in check_spec(spec)]


def test_the_correct_chart_loads_with_no_finding() -> None:
    assert findings(chart()) == []
    load_definition(chart())


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    node = data
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


_DELETE = object()

CASES = [
    # (what, edits, the finding expected)
    ("an eventless cycle with no guard",
     [("states/route/always", ["loop_a"]), ("states/loop_a", {"always": ["route"]})],
     ("error", "eventless-cycle", "states.route.always")),
    ("a region with no final state",
     [("states/l2", {"parent": "left", **WAIT, "after": {"delay": 1, "target": "l1"}})],
     ("error", "join-never", "states.left")),
    ("a region that is a leaf",
     [("states/loose", {"parent": "both", **END})],
     ("error", "parallel-shape", "states.loose")),
    ("a parallel state with no done",
     [("states/both/done", _DELETE)], ("error", "join-missing", "states.both.done")),
    ("a map whose flow has no initial state",
     [("states/work/initial", False)], ("error", "initial-count", "states.each")),
    ("a map with no items", [("states/each/items", _DELETE)],
     ("error", "map-items", "states.each.items")),
    ("a map over a non-list", [("context/items", {"a": 1})],
     ("error", "map-not-list", "states.each.items")),
    ("a bad items expression", [("states/each/items", "context.items +")],
     ("error", "bad-guard", "states.each.items")),
    ("a region moving out of its parallel state",
     [("states/r1/on/step.failed", "end")],
     ("error", "leaves-scope", "states.r1.on.step.failed.target")),
    ("a map item moving out of its map",
     [("states/work/on/step.failed", "route")],
     ("error", "leaves-scope", "states.work.on.step.failed.target")),
    ("a move into a region from outside",
     [("states/r_b/on", {"go": "r2"})],
     ("error", "leaves-scope", "states.r_b.on.go.target")),
    ("compensating inside a region",
     [("states/r1/step", {"tool": "t", "retry": {"on_exhausted": "compensate"}})],
     ("error", "compensate-in-scope", "states.r1.step.retry.on_exhausted")),
    ("a choice with an on:", [("states/route/on", {"go": "end"})],
     ("error", "choice-shape", "states.route")),
    ("a choice with no always", [("states/route/always", [])],
     ("error", "choice-shape", "states.route.always")),
    ("a choice where every branch is guarded",
     [("states/route/always", [{"target": "end", "guard": "context.amount > 1"}])],
     ("warning", "choice-no-default", "states.route.always")),
    ("done on a plain state", [("states/end/done", "end")],
     ("error", "done-not-parallel", "states.end.done")),
    ("history on a leaf", [("states/r_b/history", "deep")],
     ("error", "history-shape", "states.r_b.history")),
    ("always on a state with a step", [("states/work/always", ["worked"])],
     ("error", "always-with-step", "states.work.always")),
    ("an internal transition on step.succeeded",
     [("states/r1/on/step.succeeded", {"actions": []})],
     ("error", "internal-builtin", "states.r1.on.step.succeeded.target")),
    ("an eventless transition with no target",
     [("states/route/always", [{"guard": "True"}, "end"])],
     ("error", "internal-eventless", "states.route.always[0].target")),
    ("a correlation on a field the payload lacks",
     [("events/go/correlate", {"ticket": "context.amount"})],
     ("error", "correlate-field", "events.go.correlate.ticket")),
    ("a bad approval condition",
     [("states/work/step", {"tool": "t", "needs_approval": "context.amount >"})],
     ("error", "bad-guard", "states.work.step.needs_approval")),
]


@pytest.mark.parametrize(("what", "edits", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_chart_names_its_fault_and_where(what: str, edits: list[tuple[str, Any]],
                                               expected: tuple[str, str, str]) -> None:
    data = copy.deepcopy(chart())
    if what == "an eventless cycle with no guard":
        data["states"]["route"]["type"] = "normal"
    for path, value in edits:
        _set(data, path, value)
    assert expected in findings(data), findings(data)


def test_a_cli_lint_of_a_bad_chart_fails_with_the_line(tmp_path: Path) -> None:
    """`lint` exits 1 on errors in a definition (2 is kept for a usage mistake)."""
    path = tmp_path / "chart.yaml"
    path.write_text(
        "name: cyc\n"
        "events: {go: {}}\n"
        "states:\n"
        "  idle: {initial: true, type: wait, on: {go: a}, after: {delay: 1, target: end}}\n"
        "  a:\n"
        "    always: [b]\n"
        "  b:\n"
        "    always: [a]\n"
        "  end: {type: final, outcome: success}\n")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "lint", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "Traceback" not in out
    assert "eventless transitions with no guard go round forever: a -> b -> a" in out
    assert "chart.yaml:6: error: states.a.always: eventless" in out, out
    with pytest.raises(DefinitionError, match="eventless-cycle"):
        load_definition(path)
