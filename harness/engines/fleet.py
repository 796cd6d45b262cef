"""One example database for a fleet of CI workers: what one worker found, all replay first.

`example_database(spec)` opens the database a spec names: `redis://host:port/db` (Hypothesis's
`RedisExampleDatabase`, the `redis` extra), a folder (Hypothesis's directory database, for a
folder the fleet shares), or `module:attribute` naming any `hypothesis.database.ExampleDatabase`.
The pytest plugin gives it to Hypothesis (its stateful tests save and replay their failing
examples there) and to native campaigns: `FailingSeeds` keeps, under one key per definition and
machine, the seeds whose runs broke an invariant; a campaign runs those first, saves the new
ones, and drops those that hold now.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

__all__ = ["FailingSeeds", "example_database"]

_PREFIX = b"fsmharness:failing-seeds:"


def example_database(spec: str) -> Any:
    """Gives the example database `spec` names; raises `HarnessError` saying what was expected
    (a Redis server that does not answer, a missing extra, an attribute that is not one)."""
    from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

    text = spec.strip()
    if not text:
        raise HarnessError("example database: expected redis://host:port/db, a folder or "
                           "module:attribute, got nothing")
    if text.startswith(("redis://", "rediss://", "unix://")):
        return _redis(text)
    if ":" in text and not Path(text).exists() and "/" not in text.split(":", 1)[0]:
        module_name, _, attribute = text.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError, ValueError) as exc:  # ValueError: ":db"
            raise HarnessError(f"example database {text!r}: cannot import it ({exc}); "
                               "expected module:attribute naming an ExampleDatabase") from None
        if not isinstance(found, ExampleDatabase):
            raise HarnessError(f"example database {text!r}: expected a "
                               f"hypothesis.database.ExampleDatabase, got "
                               f"{type(found).__name__}")
        return found
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise HarnessError(f"example database {text!r}: a file, expected a folder, "
                           "redis://... or module:attribute")
    return DirectoryBasedExampleDatabase(str(folder))


def _redis(url: str) -> Any:
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as exc:
        raise HarnessError(f"example database {url}: needs the redis package "
                           f"(pip install 'fsmharness[redis]'): {exc}") from None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
        client.ping()
    except (redis.RedisError, ValueError) as exc:
        raise HarnessError(f"example database {url}: cannot reach Redis: {exc}") from None
    return RedisExampleDatabase(client)


class FailingSeeds:
    """The failing seeds of one definition on one machine, kept in an example database."""

    def __init__(self, database: Any, digest: str, machine: str) -> None:
        self.database = database
        self.key = _PREFIX + f"{digest}:{machine}".encode()

    def load(self) -> list[int]:
        """Gives the saved seeds, in order (values that are not seeds are left alone); raises
        `HarnessError` when the database does not answer."""
        seeds = set()
        try:
            for value in self.database.fetch(self.key):
                text = value.decode(errors="replace")
                if text.isdigit():
                    seeds.add(int(text))
        except Exception as exc:  # the database's own errors (Redis down, a folder gone)
            raise HarnessError(f"example database: cannot read the saved seeds: "
                               f"{type(exc).__name__}: {exc}") from None
        return sorted(seeds)

    def update(self, failing: Iterable[int], held: Iterable[int]) -> None:
        """Saves the seeds that failed; drops the saved ones that ran and held; raises
        `HarnessError` when the database does not answer."""
        try:
            for seed in failing:
                self.database.save(self.key, str(seed).encode())
            for seed in held:
                self.database.delete(self.key, str(seed).encode())
        except Exception as exc:
            raise HarnessError(f"example database: cannot save the failing seeds: "
                               f"{type(exc).__name__}: {exc}") from None
