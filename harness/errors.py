"""The exceptions of `harness`."""

from __future__ import annotations

__all__ = ["HarnessError"]


class HarnessError(Exception):
    """Root of every error raised by `harness`: bad options, a plan that cannot run."""
