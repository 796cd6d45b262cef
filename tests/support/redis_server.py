"""A real Redis server for the tests: Debian's `redis-server`, started for the test session.

`FSMHARNESS_REDIS_URL` names a server to use instead. Otherwise `redis-server` runs on a free
port of 127.0.0.1 with no persistence, and is stopped at the end of the session. Without it
the tests that need a server are skipped, unless `FSMHARNESS_REQUIRE_REDIS` is set (`.ci/run`
sets it): then they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def server() -> Iterator[str]:
    """Gives the URL of a running Redis server; skips, or fails when required, without one."""
    given = os.environ.get("FSMHARNESS_REDIS_URL")
    if given:
        yield given
        return
    binary = shutil.which("redis-server")
    if binary is None:
        message = ("no redis-server here (Debian's redis-server package: .ci/run installs it "
                   "and sets FSMHARNESS_REQUIRE_REDIS)")
        if os.environ.get("FSMHARNESS_REQUIRE_REDIS"):
            pytest.fail(f"FSMHARNESS_REQUIRE_REDIS is set but {message}")
        pytest.skip(message)
    import redis

    port = _free_port()
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(200):  # up to about 10 s for the server to answer
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            if process.poll() is not None:
                pytest.fail(f"redis-server exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer within 10 s")
        client.close()
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
