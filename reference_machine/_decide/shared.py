"""What the parts of `decide` share: the enum members they compare with, read once; the
sentinel of an argument not given; the rejection of a user expression that failed."""

from __future__ import annotations

from typing import Any

from reference_machine._records import Rejected, RejectReason, Status, TimerPurpose

__all__ = [
    "APPROVAL_EXPIRY",
    "COMPENSATING",
    "CREATED",
    "DEADLINE",
    "FINAL",
    "RETRY",
    "RUNNING",
    "STEP_TIMEOUT",
    "UNSET",
    "WAITING",
    "WAIT_TIMEOUT",
    "input_failed",
]

UNSET: Any = object()  # `move`'s domain, when it is to be worked out

# Enum members read once: attribute access on an Enum class costs ~200 ns on CPython 3.11.
CREATED = Status.CREATED
RUNNING = Status.RUNNING
WAITING = Status.WAITING
COMPENSATING = Status.COMPENSATING
FINAL = Status.FINAL
WAIT_TIMEOUT = TimerPurpose.WAIT_TIMEOUT
APPROVAL_EXPIRY = TimerPurpose.APPROVAL_EXPIRY
RETRY = TimerPurpose.RETRY
STEP_TIMEOUT = TimerPurpose.STEP_TIMEOUT
DEADLINE = TimerPurpose.DEADLINE


def input_failed(state: str, what: str, exc: Exception) -> Rejected:
    return Rejected(RejectReason.ACTION_ERROR,
                    f"{what} of state {state!r} failed: {type(exc).__name__}: {exc}")
