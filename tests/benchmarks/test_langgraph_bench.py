"""Node runs of a LangGraph graph: invoked bare beside the same graph under the adapter and
under the simulator, over the same `SqliteSaver` (issue 18).

Each group is one of `harness.bench.langgraph_group` (SQLite `synchronous` FULL and OFF on the
saver's connection), its contenders the bare `graph.invoke` (the floor), the same with
LangGraph's background saves run inline as the adapter runs them, the adapter's machine
driven without the simulator, and fault-free seeded simulator runs. Every call does the same
seeded runs (four, three threads each), so the ratio of two means in a group is the ratio of
their costs per node run; `extra_info["node_runs"]` holds the count. Nothing here asserts a
time: each test checks that its contender ran the nodes the runs make.
Run: `python -m pytest -n 0 tests/benchmarks/test_langgraph_bench.py --benchmark-only
--benchmark-group-by=group --benchmark-columns=min,median,rounds`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from harness.bench import langgraph_group, suite
from harness.cli.bench import bench_markdown
from harness.errors import HarnessError

pytest.importorskip("langgraph.graph", reason="the langgraph extra is not installed")
pytest.importorskip("langgraph.checkpoint.sqlite",
                    reason="langgraph-checkpoint-sqlite is not installed")

SEEDS = range(langgraph_group.RUNS)
CONTENDERS = ("bare invoke (floor)", "bare invoke, saves inline",
              "adapter machine, no simulator", "simulator, no faults")


@pytest.fixture(scope="module")
def groups() -> dict[str, langgraph_group.LangGraphGroup]:
    return {synchronous: langgraph_group.langgraph_group(SEEDS, synchronous)
            for synchronous in langgraph_group.SYNCHRONOUS}


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as opened:
        yield opened


@pytest.mark.parametrize("contender", CONTENDERS)
@pytest.mark.parametrize("synchronous", langgraph_group.SYNCHRONOUS)
def test_node_runs(benchmark: Any, groups: dict[str, langgraph_group.LangGraphGroup],
                   synchronous: str, contender: str, stack: contextlib.ExitStack) -> None:
    """One call of a contender: the seeded runs' threads, each node as often as they make."""
    made = groups[synchronous]
    benchmark.group = made.group.name
    (found,) = [each for each in made.group.contenders if each.name == contender]
    runs = benchmark.pedantic(found.make(stack), rounds=1, iterations=1)
    benchmark.extra_info["node_runs"] = runs
    assert made.ran[contender] == made.expected()
    assert runs == made.expected().total()


def test_the_runs_take_both_branches(groups: dict[str, langgraph_group.LangGraphGroup]
                                     ) -> None:
    """The seeded runs approve some refunds and deny others, so the tool is called and the
    denial's route is taken; each of the three threads of a run is started once."""
    made = groups["OFF"]
    decisions = [call.decision for script in made.scripts for call in script if call.decision]
    assert {"approve", "deny"} <= set(decisions)
    assert [sum(1 for call in script if not call.decision) for script in made.scripts] == [
        3] * len(SEEDS)
    assert made.expected()["look_up"] == made.expected()["notify"] == 3 * len(SEEDS)


def test_the_group_is_listed_and_named_by_its_unit() -> None:
    """`fsmharness bench --only langgraph` builds one group per `synchronous`, four contenders
    each, the bare invoke the floor, every figure per node run."""
    ((title, build),) = suite.suite(quick=True, only=["langgraph"])
    assert title == "langgraph"
    built = build()
    assert [group.name.split(" (")[0] for group in built] == [
        f"{langgraph_group.TITLE}, SqliteSaver synchronous {synchronous}"
        for synchronous in langgraph_group.SYNCHRONOUS]
    for group in built:
        assert tuple(contender.name for contender in group.contenders) == CONTENDERS
        assert {contender.unit for contender in group.contenders} == {"node run"}


def test_contenders_that_run_other_nodes_are_refused(
        groups: dict[str, langgraph_group.LangGraphGroup]) -> None:
    """The check behind each group: a contender whose count differs from what the runs make
    (here, one call of the floor fewer than the others) measures other work."""
    made = groups["OFF"]
    short = langgraph_group.LangGraphGroup(made.group, made.ran, made.scripts[:-1])
    with pytest.raises(HarnessError, match=r"bare invoke \(floor\) ran .* the runs make"):
        langgraph_group.agreed(short)


def test_without_langgraph_the_group_is_skipped_with_a_note(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No langgraph: one group with no contenders, whose note says what to install; the
    bench document lists it as skipped, and the Markdown tables say so."""
    real = importlib.import_module

    def absent(name: str, package: str | None = None) -> Any:
        if name.startswith("langgraph"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(langgraph_group.importlib, "import_module", absent)
    (group,) = langgraph_group.langgraph_groups(quick=True)
    assert group.contenders == ()
    assert group.note == ("skipped: langgraph is not installed: pip install "
                          "'fsmharness[langgraph]'")
    doc = suite.document([], seconds=0.5, quick=True, skipped=[group])
    assert doc["skipped"] == [{"group": langgraph_group.TITLE, "note": group.note}]
    assert f"{langgraph_group.TITLE}: {group.note}" in bench_markdown(doc).splitlines()
