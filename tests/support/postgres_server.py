"""A real PostgreSQL server for the tests: Debian's `postgresql` package, a throwaway cluster.

`FSMHARNESS_POSTGRES_DSN` names a server to use instead (one you run). Otherwise the cluster is
made with `initdb` in a temporary folder and started with `pg_ctl`, listening on a Unix socket
in that folder and on a free port of 127.0.0.1, and stopped and removed at the end of the
session. PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user
the package creates. Without the binaries the tests that need a server are skipped, unless
`FSMHARNESS_REQUIRE_POSTGRES` is set (`.ci/run` sets it): then they fail.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRED = bool(os.environ.get("FSMHARNESS_REQUIRE_POSTGRES"))


def _binaries() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda path: int(Path(path).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_owner(command: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *command] if owner else command


@contextlib.contextmanager
def server() -> Iterator[str]:
    """Gives the connection string of a running server (made for the session, else the one
    `FSMHARNESS_POSTGRES_DSN` names); skips, or fails when required, without one."""
    given = os.environ.get("FSMHARNESS_POSTGRES_DSN")
    if given:
        yield given
        return
    bin_dir = _binaries()
    if bin_dir is None:
        message = ("no PostgreSQL here (Debian's postgresql package: .ci/run installs it and "
                   "sets FSMHARNESS_REQUIRE_POSTGRES)")
        if REQUIRED:
            pytest.fail(f"FSMHARNESS_REQUIRE_POSTGRES is set but {message}")
        pytest.skip(message)
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        pwd.getpwnam(owner)  # the package made it; a KeyError here says it did not
    folder = Path(tempfile.mkdtemp(prefix="fsmharness-pg-"))
    data, port = folder / "data", _free_port()
    if owner:
        record = pwd.getpwnam(owner)
        os.chown(folder, record.pw_uid, record.pw_gid)
    try:
        subprocess.run(_as_owner([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                                  "--auth=trust", "--encoding=UTF8", "--no-sync"], owner),
                       check=True, capture_output=True)
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} "
                   f"-c unix_socket_directories={folder} -c fsync=off "
                   f"-c max_connections=60")
        subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options,
                                  "-l", str(folder / "log"), "-w", "start"], owner),
                       check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        log = folder / "log"
        details = (exc.stderr or b"").decode(errors="replace")
        if log.exists():
            details += log.read_text(errors="replace")
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"could not start a PostgreSQL server: {details}")
    try:
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                  "stop"], owner), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
