"""What the harness writes to is never damaged: a device, a FIFO or `/dev/stdout` is written as
a stream, a link through to where it points, a full disk is one line, and a path that is not a
regular file is never replaced by one."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest
from hostile import ROOT, Case

from harness.errors import HarnessError
from harness.files import write_output

REFUND = str(ROOT / "scenarios" / "refund_escalation.yaml")
RUN = ("run", REFUND, "--seed", "3")


def _reader(fifo: Path, into: list[bytes]) -> threading.Thread:
    """Reads a FIFO to its end in the background, as `cat fifo` would."""
    def read() -> None:
        with open(fifo, "rb") as stream:
            into.append(stream.read())
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("args", [
    (*RUN, "--history", "/dev/full"),
    ("schema", "-o", "/dev/full"),
    ("diagram", REFUND, "-o", "/dev/full"),
], ids=["run --history", "schema -o", "diagram -o"])
def test_a_full_device_is_one_line_and_stays_a_device(args: tuple[str, ...], hostile) -> None:
    hostile(Case("full", args, 2, "/dev/full: cannot write: No space left on device"))
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("args", [
    (*RUN, "--history", "{tmp}/out"),
    ("schema", "-o", "{tmp}/out"),
    ("diagram", REFUND, "-o", "{tmp}/out"),
], ids=["run --history", "schema -o", "diagram -o"])
def test_a_fifo_is_written_as_a_stream_and_stays_a_fifo(args: tuple[str, ...], hostile,
                                                        tmp_path: Path) -> None:
    fifo = tmp_path / "out"
    got: list[bytes] = []
    threads: list[threading.Thread] = []

    def make(folder: Path) -> None:
        os.mkfifo(folder / "out")
        threads.append(_reader(folder / "out", got))

    result = hostile(Case("fifo", args, 0, setup=make))
    threads[0].join(timeout=60)
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced"
    assert got and got[0].strip(), result.stdout


@pytest.mark.parametrize("args", [
    (*RUN, "--history", "{tmp}/link"),
    ("schema", "-o", "{tmp}/link"),
    ("diagram", REFUND, "-o", "{tmp}/link"),
], ids=["run --history", "schema -o", "diagram -o"])
def test_a_link_is_written_through_and_stays_a_link(args: tuple[str, ...], hostile,
                                                   tmp_path: Path) -> None:
    def make(folder: Path) -> None:
        (folder / "real").write_text("old\n")
        (folder / "link").symlink_to("real")

    hostile(Case("link", args, 0, setup=make, writes=("real",)))
    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == "real"
    assert (tmp_path / "real").read_text() not in ("", "old\n")


def test_dev_stdout_is_a_stream(hostile) -> None:
    result = hostile(Case("stdout", (*RUN, "--history", "/dev/stdout", "--json"), 0))
    assert '"kind":"started"' in result.stdout


@pytest.mark.parametrize(("args", "line"), [
    ((*RUN, "--history", "{tmp}"), "--history"),
    (("schema", "-o", "{tmp}/missing/out.json"), "does not exist"),
    (("schema", "-o", "{tmp}/sock"), "not a regular file, a device or a FIFO"),
    (("schema", "-o", ""), "expected a file path"),
], ids=["a folder", "a missing folder", "a socket", "an empty name"])
def test_what_cannot_be_written_is_refused_before_any_work(
        args: tuple[str, ...], line: str, hostile) -> None:
    def make(folder: Path) -> None:
        import socket
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(folder / "sock"))
        sock.close()

    hostile(Case("refused", args, 2, line, setup=make))


def test_a_read_only_folder_is_one_error_and_nothing_left(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """On a read-only file system the rename fails and so does the cleanup's unlink; the
    unlink's failure used to escape from the `except` as a traceback."""
    def read_only(*_: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "replace", read_only)
    monkeypatch.setattr(os, "unlink", read_only)
    with pytest.raises(HarnessError, match=r"out\.json: cannot write: Read-only file system"):
        write_output(tmp_path / "out.json", "{}\n", "--output")
    monkeypatch.undo()
    assert not (tmp_path / "out.json").exists()


def test_dev_stdout_redirected_to_a_file_is_written_at_its_place(tmp_path: Path) -> None:
    """`--history /dev/stdout > file` truncated the file and wrote at offset 0, over what was
    printed; `>> log` erased the log's earlier lines."""
    import subprocess
    import sys

    log = tmp_path / "log.txt"
    log.write_text("earlier line\n")
    with open(log, "a") as out:
        subprocess.run([sys.executable, "-m", "harness.cli", *RUN, "--history", "/dev/stdout"],
                       stdout=out, check=True)
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier line" and lines[1].startswith('{"at":0,')
    assert lines[-1] == "  every invariant held"


def test_a_link_to_dev_stdout_is_a_stream(hostile) -> None:
    def make(folder: Path) -> None:
        (folder / "out").symlink_to("/dev/stdout")

    result = hostile(Case("link to stdout", (*RUN, "--history", "{tmp}/out"), 0, setup=make))
    assert '"kind":"started"' in result.stdout
