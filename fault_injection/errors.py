"""The exceptions of `fault_injection`: one root, branches by whose fault it is."""

from __future__ import annotations

__all__ = ["FaultInjectionError", "FaultPlanError"]


class FaultInjectionError(Exception):
    """Root of every error raised by `fault_injection`."""


class FaultPlanError(FaultInjectionError, ValueError):
    """A fault plan is unreadable or wrong (the user's plan is at fault).

    `location` is the key path at fault (`faults.crash.points[1]`), `message` says what is wrong,
    `source` names the file (or `"<plan>"`), and `line` is the line in that file when known.
    The details are the exception's args, so it pickles and callers never parse the message.
    """

    def __init__(
        self, location: str, message: str, source: str = "<plan>", line: int | None = None
    ) -> None:
        super().__init__(location, message, source, line)
        self.location = location
        self.message = message
        self.source = source
        self.line = line

    def __str__(self) -> str:
        """Gives the one-line form `plan.yaml:4: faults.crash.points[1]: message`."""
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        location = f"{self.location}: " if self.location else ""
        return f"{where}: {location}{self.message}"
