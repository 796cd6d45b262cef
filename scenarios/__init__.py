"""Bundled workflow definitions from practice; `bundled()` lists their files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["bundled"]

_HERE = Path(__file__).parent


def bundled() -> list[Path]:
    """Gives the paths of the bundled definition files, sorted by name."""
    return sorted(p for p in _HERE.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
