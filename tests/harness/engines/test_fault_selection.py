"""Reading a fault selection (`--faults`, `--fsm-faults`, the marker's `faults=`): all, none,
a list, or all less some kinds, the way a deployment states what cannot happen to it."""

from __future__ import annotations

import pytest

from fault_injection import FaultKind
from harness.engines.campaign import parse_faults
from harness.errors import HarnessError

EVERY = tuple(FaultKind)


@pytest.mark.parametrize(("text", "expected"), [
    ("all", None),
    ("none", ()),
    ("crash, duplicate_event,crash", (FaultKind.CRASH, FaultKind.DUPLICATE_EVENT)),
    ("all,-second_worker", tuple(k for k in EVERY if k is not FaultKind.SECOND_WORKER)),
    ("-second_worker", tuple(k for k in EVERY if k is not FaultKind.SECOND_WORKER)),
    (" all , -second_worker , -crash ",
     tuple(k for k in EVERY if k not in (FaultKind.SECOND_WORKER, FaultKind.CRASH))),
])
def test_a_selection_reads_as_the_kinds_in_catalogue_order(
        text: str, expected: tuple[FaultKind, ...] | None) -> None:
    assert parse_faults(text) == expected


def test_taking_every_kind_away_leaves_none() -> None:
    assert parse_faults(",".join(f"-{kind.value}" for kind in EVERY)) == ()


@pytest.mark.parametrize(("text", "fragment"), [
    ("all,-gremlins", "unknown fault kind 'gremlins'"),
    ("crash,-second_worker", "kinds are taken away from all only (all,-second_worker)"),
    ("none,-crash", "kinds are taken away from all only"),
    ("all,crash", "unknown fault kind 'all'"),
    ("crash,,late_event", "unknown fault kind ''"),
])
def test_a_selection_it_cannot_read_is_refused_naming_why(text: str, fragment: str) -> None:
    with pytest.raises(HarnessError) as raised:
        parse_faults(text)
    assert fragment in str(raised.value)
