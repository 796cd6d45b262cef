"""Transitions per second on each machine shape, every contender in the same session.

Each group is one shape of `harness.bench.shapes` (the 8-state cycle, the 200-state ring, the refund
scenario; for scaling, rings of 8 and 2,000 states) walked by every contender: the hand-written
dict FSM (the floor), the reference `decide`, the runtime over a `MemoryStore` and over a
`SQLiteStore` (NORMAL and FULL, one commit per event), `transitions` and python-statemachine.
Every call walks one round of the shape (`extra_info["transitions"]` of them), so the ratio of
two means in a group is the ratio of their costs per transition. Nothing here asserts a time:
`fsmharness bench` prints the ratios and checks them against the aims.
Run: `python -m pytest -n 0 tests/benchmarks/test_shapes_bench.py --benchmark-only
--benchmark-group-by=group --benchmark-columns=min,median,rounds`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from harness.bench import shapes, timing
from harness.errors import HarnessError

SHAPES = {
    "8-state cycle": shapes.cycle8(),
    "200-state ring": shapes.ring(200),
    "refund scenario": shapes.scenario(),
}
SCALING = {"ring of 8": shapes.ring(8), "ring of 2000": shapes.ring(2000)}


def rounds_for(contender: timing.Contender, shape: shapes.Shape) -> int:
    """Fewer rounds for the slow contenders, so a plain `pytest` stays quick."""
    slow = "SQLite" in contender.name or contender.name == "python-statemachine"
    return max(2, (40 if slow else 400) // max(1, shape.transitions // 8))


def cases(titled: dict[str, shapes.Shape], durable: bool) -> list[Any]:
    return [pytest.param(shape, contender, id=f"{title}: {contender.name}",
                         marks=pytest.mark.benchmark(group=f"shape: {title}"))
            for title, shape in titled.items()
            for contender in shapes.contenders_of(shape, durable=durable)]


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as opened:
        yield opened


@pytest.mark.parametrize(("shape", "contender"), cases(SHAPES, durable=True))
def test_shape(benchmark: Any, shape: shapes.Shape, contender: timing.Contender,
               stack: contextlib.ExitStack) -> None:
    """One round of the shape by one contender; it must end where the walk says."""
    call = contender.make(stack)
    benchmark.extra_info["transitions"] = shape.transitions
    ended = benchmark.pedantic(call, rounds=rounds_for(contender, shape), warmup_rounds=1)
    assert ended == shape.walk[-1][1]


@pytest.mark.parametrize(("shape", "contender"), cases(SCALING, durable=False))
def test_scaling_with_states(benchmark: Any, shape: shapes.Shape,
                             contender: timing.Contender, stack: contextlib.ExitStack) -> None:
    """The same on rings of 8 and 2,000 states: the time per transition of a contender whose
    cost does not grow with the machine stays put."""
    call = contender.make(stack)
    benchmark.extra_info["transitions"] = shape.transitions
    ended = benchmark.pedantic(call, rounds=rounds_for(contender, shape), warmup_rounds=1)
    assert ended == shape.walk[-1][1]


@pytest.mark.parametrize("shape", [*SHAPES.values(), *SCALING.values()],
                         ids=[*SHAPES, *SCALING])
def test_every_contender_walks_the_same_path(shape: shapes.Shape) -> None:
    """A contender that ended elsewhere would have measured other work."""
    ended = shapes.agree(shape)
    assert set(ended) >= {"dict FSM (floor)", "reference decide", "transitions",
                          "python-statemachine"}
    assert set(ended.values()) == {shape.walk[-1][1]}


def test_a_shape_whose_contenders_disagree_is_refused() -> None:
    """The check behind every group: a floor and peers whose table leaves the definition's
    path (the edge out of `h` goes to `b`, not `a`) end elsewhere than `decide`."""
    shape = shapes.cycle8()
    table = {**shape.table, ("h", "next"): (("b", None, None),)}
    wrong = shapes.Shape(shape.name, shape.definition, table, shape.walk, shape.events,
                         shape.start, shape.context)
    with pytest.raises(HarnessError, match="the contenders end in different states"):
        shapes.shape_group(wrong, "shape: broken")


def test_a_contender_that_never_moves_is_refused_though_a_round_ends_where_it_began(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor's table keeps it in `a` (the peers would refuse such a graph, so only the
    floor and `decide` walk): a whole round of the cycle ends in `a` for both; half a round
    does not."""
    shape = shapes.cycle8()
    table = {key: (("a", None, None),) for key in shape.table}
    lazy = shapes.Shape(shape.name, shape.definition, table, shape.walk, shape.events,
                         shape.start, shape.context)
    ours = shapes.contenders_of
    monkeypatch.setattr(shapes, "contenders_of",
                        lambda shape, **options: ours(shape, durable=False, peers=False))
    assert set(shapes.agree(lazy).values()) == {"a"}  # the whole round cannot tell
    with pytest.raises(HarnessError, match="the walk ends in 'f'"):
        shapes.shape_group(lazy, "shape: lazy")
