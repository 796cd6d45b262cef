"""The exceptions of `reference_machine`: one root, branches by whose fault it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reference_machine.findings import Finding

__all__ = [
    "DefinitionError",
    "DefinitionSyntaxError",
    "GuardError",
    "ReferenceMachineError",
]


class ReferenceMachineError(Exception):
    """Root of every error raised by `reference_machine`."""


class DefinitionError(ReferenceMachineError, ValueError):
    """A workflow definition is malformed or inconsistent (the user's definition is at fault).

    `findings` holds every error found, each with its location (`states.x.after`) and the ids at
    fault; `source` names the file or object it was loaded from.
    """

    def __init__(self, findings: Sequence[Finding], source: str = "<definition>") -> None:
        self.findings = tuple(findings)
        self.source = source
        count = len(self.findings)
        lines = [f"{source}: {count} error{'s' if count != 1 else ''} in workflow definition"]
        lines.extend(f"  {finding.render()}" for finding in self.findings)
        super().__init__("\n".join(lines))

    @property
    def location(self) -> str:
        """Location of the first error (`states.awaiting_approval.after`)."""
        return self.findings[0].location if self.findings else ""


class DefinitionSyntaxError(DefinitionError):
    """A definition could not be read at all: missing file, bad encoding, or YAML/JSON syntax."""


class GuardError(ReferenceMachineError):
    """A guard or action expression failed while evaluated (missing key, wrong type)."""
