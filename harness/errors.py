"""The exceptions of `harness`."""

from __future__ import annotations

import traceback

__all__ = ["HarnessError", "Unsupported", "clip", "short_repr", "trace_of", "words_of"]


class HarnessError(Exception):
    """Root of every error raised by `harness`: bad options, a plan that cannot run."""


class Unsupported(HarnessError):
    """The machine under test is built of something its adapter cannot model, or was wrapped
    wrongly, found while it runs: the user's input (exit 2 at the command line), never the
    machine's failure (a campaign stops on it instead of blaming the machine)."""


WORDS_MAX = 2_000
"""The most characters of an exception's message the harness keeps (a machine's exception
may carry megabytes, and its words are copied into every report and replay file)."""


def clip(text: str, limit: int = WORDS_MAX) -> str:
    """Gives `text`, cut to `limit` characters with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters cut)"


def short_repr(value: object, limit: int = 60) -> str:
    """Gives `value` as a message quotes it: its repr cut to `limit` characters, a whole number
    too long to print (Python refuses past 4,300 digits) by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"a number of {value.bit_length():,} bits"
    return clip(repr(value), limit)


def words_of(exc: BaseException, limit: int = WORDS_MAX) -> str:
    """Gives what `exc` says, in at most about `limit` characters; an exception whose
    `__str__` raises is named by its type."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() raised>"
    if not text.isascii():  # a lone surrogate would stop whatever writes the words as UTF-8
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return clip(text, limit)


def trace_of(exc: BaseException, limit: int = 20_000) -> str:
    """Gives `exc`'s traceback as text, in at most about `limit` characters."""
    try:
        text = "".join(traceback.format_exception(exc))
    except Exception:
        return f"<the traceback of a {type(exc).__name__} could not be formatted>"
    return clip(text, limit)
