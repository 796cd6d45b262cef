"""The files a chart's `src=` attributes name, read without leaving the chart's directory."""

from __future__ import annotations

import os
import re
import stat

from reference_machine.documents import DEFINITION_BYTES_MAX

__all__ = ["SRC_BYTES_MAX", "SRC_FILES_MAX", "SrcFiles", "SrcMissing", "SrcRefused"]

#: The most bytes one file a `src=` names may hold, and the most files one import reads by
#: `src=` (a chart that invokes itself by `src` would be read without end)
SRC_BYTES_MAX = DEFINITION_BYTES_MAX
SRC_FILES_MAX = 32

_SYMLINKS_MAX = 8  # symbolic links followed on the way to one file
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")

#: Whether `os.open` takes a directory to open a name in (`dir_fd`: POSIX), which reading a
#: file a `src=` names needs
_OPENS_IN_DIRECTORY = os.open in os.supports_dir_fd


class SrcRefused(Exception):
    """A `src=` the import does not read; the message says why, in SCXML's terms."""


class SrcMissing(SrcRefused):
    """A `src=` that names no file in the chart's directory."""


class SrcFiles:
    """Reads what a chart's `src=` attributes name: a relative path (`file:` in front or not)
    to a regular file in the directory of the chart imported, or below it, at most
    `SRC_BYTES_MAX` bytes, at most `SRC_FILES_MAX` files per import. The path is walked one
    name at a time from that directory, a symbolic link read as a name, so no `..`, absolute
    path or link leads out and nothing outside the directory is ever opened or looked at."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        #: None: the chart was given as text, with no directory to read from
        self.root = None if directory is None else os.path.abspath(directory)
        self.count = 0

    def read(self, src: str, here: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """Gives the text of the file `src` names (relative to `here`, the directory of the
        document naming it, as names from the root) and its names from the root; raises
        `SrcRefused` (`SrcMissing` when there is no such file)."""
        if self.root is None:
            raise SrcRefused("the chart was given to the importer as text, without its "
                             "directory, so there is none to read it from, and importing "
                             "reads no other file")
        names = self.walk(self.root, self._names(src, here))
        self.count += 1
        if self.count > SRC_FILES_MAX:
            raise SrcRefused(f"the import would read more than {SRC_FILES_MAX} files by src= "
                             "(a chart that invokes itself by src= is read without end)")
        try:
            handle = self._open(self.root, names)
        except OSError as exc:  # a link swapped in since the walk (ELOOP), a file gone
            raise SrcRefused(f"it cannot be read ({exc.strerror})") from exc
        try:  # what was opened is judged, not what the path names now
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise SrcRefused("it is not a regular file")
            if info.st_size > SRC_BYTES_MAX:
                raise SrcRefused(f"it is over the {SRC_BYTES_MAX // 1000} kB a file src= "
                                 "names may be")
            with os.fdopen(handle, "rb", closefd=False) as stream:
                raw = stream.read(SRC_BYTES_MAX + 1)
        except OSError as exc:
            raise SrcRefused(f"it cannot be read ({exc.strerror})") from exc
        finally:
            os.close(handle)
        if len(raw) > SRC_BYTES_MAX:
            raise SrcRefused(f"it is over the {SRC_BYTES_MAX // 1000} kB a file src= names "
                             "may be")
        try:
            return raw.decode("utf-8"), names
        except UnicodeDecodeError as exc:
            raise SrcRefused(f"it is not UTF-8 text (at byte {exc.start})") from exc

    @staticmethod
    def _names(src: str, here: tuple[str, ...]) -> tuple[str, ...]:
        """Gives the names of the path `src` says, from the root; refuses what is no relative
        path below the document's own directory."""
        text = src.strip()
        if text.startswith("file:"):
            text = text.removeprefix("file:")
            if text.startswith("/"):
                raise SrcRefused("a file: URL with an absolute path names a file anywhere; "
                                 "only a path relative to the chart's directory is read")
        elif _SCHEME.match(text):
            raise SrcRefused("it is a URL or another address; only a file in the chart's "
                             "directory (or below it) is read, never fetched")
        if text.startswith("/"):
            raise SrcRefused("it is an absolute path; only a path relative to the chart's "
                             "directory is read")
        if "\\" in text or "\0" in text or _SCHEME.match(text):
            raise SrcRefused("it holds a backslash, a NUL or a drive: only a relative path "
                             "with / between its names is read")
        parts = text.split("/")
        if ".." in parts:
            raise SrcRefused("it climbs out with '..'; only a file in the chart's directory "
                             "(or below it) is read")
        names = tuple(part for part in parts if part not in ("", "."))
        if not names:
            raise SrcRefused("it names no file")
        return (*here, *names)

    @staticmethod
    def _open(root: str, names: tuple[str, ...]) -> int:
        """Opens the file `names` (walked, no symbolic link among them) gives from `root`,
        one directory at a time and following no link: one swapped in since the walk makes
        the open fail rather than lead out."""
        if not _OPENS_IN_DIRECTORY:
            raise SrcRefused("this platform cannot open a file one directory at a time, "
                             "which reading it safely needs")
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        folder = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            for name in names[:-1]:
                inner = os.open(name, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow,
                                dir_fd=folder)
                os.close(folder)
                folder = inner
            return os.open(names[-1], os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0),
                           dir_fd=folder)
        finally:
            os.close(folder)

    @staticmethod
    def walk(root: str, names: tuple[str, ...]) -> tuple[str, ...]:
        """Gives the names of the file `names` leads to from `root`, each symbolic link on
        the way replaced by what it names; refuses a link that leads out."""
        done: list[str] = []
        pending = list(names)
        links = 0
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not done:
                    raise SrcRefused("a symbolic link on its way leads out of the chart's "
                                     "directory")
                done.pop()
                continue
            path = os.path.join(root, *done, name)
            try:
                info = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError) as exc:
                raise SrcMissing("there is no such file in the chart's directory") from exc
            except OSError as exc:
                raise SrcRefused(f"it cannot be read ({exc.strerror})") from exc
            if stat.S_ISLNK(info.st_mode):
                links += 1
                try:
                    link = os.readlink(path)
                except OSError as exc:  # changed since it was looked at
                    raise SrcRefused(f"it cannot be read ({exc.strerror})") from exc
                if links > _SYMLINKS_MAX or os.path.isabs(link) or "\\" in link:
                    raise SrcRefused("a symbolic link on its way leads out of the chart's "
                                     "directory (or through too many links)")
                pending = [*link.split("/"), *pending]
                continue
            if pending and not stat.S_ISDIR(info.st_mode):
                raise SrcMissing("there is no such file in the chart's directory")
            done.append(name)
        if not done:
            raise SrcRefused("it names the chart's directory, not a file")
        return tuple(done)
