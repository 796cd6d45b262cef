"""Writing what the harness outputs without damaging what is there.

A regular file (or a name not yet taken) is written whole or not at all: a temporary file
beside it, renamed into place. Anything else is never replaced: a symbolic link is written
through to where it points; a device, a FIFO, or a name under `/dev` or `/proc` (`/dev/stdout`,
`/dev/null`) is written as a stream, in place; a folder, a socket or a block device is refused.
Every failure is one `HarnessError` line naming the path and why (a full disk says so).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from harness.errors import HarnessError

__all__ = ["check_output", "write_output", "writing"]

_STREAMED = ("/dev/", "/proc/")


def _resolved(path: Path) -> Path:
    """Gives where a write to `path` lands: through its links, one at a time, to the final
    name; a name under /dev or /proc is where it stops (`/dev/stdout` leads on to a pipe's
    name that cannot be opened)."""
    for _ in range(40):  # as the system's own bound on a chain of links
        if str(path.absolute()).startswith(_STREAMED) or not path.is_symlink():
            return path
        path = path.parent / os.readlink(path)
    raise HarnessError(f"{path}: too many levels of symbolic links")


def _is_stream(path: Path) -> bool:
    """True when `path` is a device or a FIFO, or a name under /dev or /proc."""
    if str(path.absolute()).startswith(_STREAMED):
        return not path.is_dir()
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def check_output(path: str | os.PathLike[str], what: str) -> Path:
    """Checks, before any work, that `path` can take an output; gives where it will land.

    Raises `HarnessError` for an empty name, a folder, a socket or block device, or a missing
    parent folder."""
    given = os.fspath(path)
    target = Path(given)
    if not given.strip() or target.name in ("", ".", ".."):
        raise HarnessError(f"{what} {given!r}: expected a file path")
    try:
        final = _resolved(target)
        if _is_stream(final):
            return final
        mode = final.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:  # a name too long, a path through a file
        raise _failure(what, given, exc) from exc
    if mode is not None and stat.S_ISDIR(mode):
        raise HarnessError(f"{what} {given!r}: expected a file path, not a folder")
    if mode is not None and not stat.S_ISREG(mode):
        raise HarnessError(f"{what} {given}: not a regular file, a device or a FIFO; "
                           "nothing written")
    if not final.parent.is_dir():
        raise HarnessError(f"{what} {given}: folder {str(final.parent)!r} does not exist")
    if len(os.fsencode(_partial(final).name)) > _NAME_MAX:
        raise HarnessError(f"{what} {given}: cannot write: File name too long (at most "
                           f"{_NAME_MAX - 30} bytes)")
    return final


#: The longest name of a file in a folder on the file systems fsmharness writes to.
_NAME_MAX = 255


def _partial(final: Path) -> Path:
    """Gives the temporary name an output is written under before it is renamed into place."""
    return final.with_name(f".{final.name}.{os.getpid()}.partial")


def _failure(what: str, given: str, exc: OSError) -> HarnessError:
    return HarnessError(f"{what} {given}: cannot write: {exc.strerror or exc}")


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], what: str) -> Iterator[IO[str]]:
    """Gives a text stream to write an output to `path`: to a regular file, whole or not at
    all (a failure leaves what was there); to a device or FIFO, as a stream in place.

    Raises `HarnessError` (`what` and the path, and why) when it cannot be written."""
    given = os.fspath(path)
    final = check_output(path, what)
    if _is_stream(final):
        try:
            with _stream(final) as stream:
                yield stream
        except OSError as exc:
            raise _failure(what, given, exc) from exc
        return
    partial = _partial(final)
    try:
        try:
            with _open(partial, "x") as handle:
                yield handle
            os.replace(partial, final)
        except OSError as exc:
            raise _failure(what, given, exc) from exc
    finally:
        with contextlib.suppress(OSError):  # a read-only folder cannot even take the unlink
            os.unlink(partial)


def _stream(final: Path) -> IO[str]:
    """Opens a device, a FIFO or a name under /dev or /proc to write to. The harness's own
    stdout or stderr (`/dev/stdout` when it is a file) is written through that very
    descriptor, after what was printed so far, at its offset: a second opening would start
    at the file's beginning and write over what the shell put there."""
    try:
        target = os.stat(final)
    except OSError:
        target = None
    for number, stream in ((1, sys.stdout), (2, sys.stderr)):
        try:
            mine = os.fstat(number)
        except OSError:
            continue
        if target is not None and (mine.st_dev, mine.st_ino) == (target.st_dev, target.st_ino):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
            return _open(os.dup(number), "w")
    if target is not None and stat.S_ISFIFO(target.st_mode):  # opened blocking, it would wait
        try:  # for a reader forever
            number = os.open(final, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise OSError(exc.errno, "a FIFO with nothing reading it") from exc
            raise
        os.set_blocking(number, True)
        return _open(number, "w")
    return _open(final, "a")  # a device: no truncation


def _open(target: Path | int, mode: str) -> IO[str]:
    """Opens an output as UTF-8 text; a lone surrogate a machine's words held is written
    escaped."""
    return open(target, mode, encoding="utf-8", errors="backslashreplace", newline="\n")


def write_output(path: str | os.PathLike[str], text: str, what: str) -> None:
    """Writes `text` to `path` by `writing`'s rules."""
    with writing(path, what) as out:
        out.write(text)
