"""Errors: a Task's `Retry` as the step's retry policy, `Catch` as guarded moves on a failure,
and the ASL error names read as native failure categories."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.asl.conversion import Part, Scope, duration
from reference_machine.importers.asl.data_paths import Expr, Record

__all__ = ["RetriesAndCatchers", "synthetic_retry"]

#: What an ASL retrier or catcher can match. Not `invalid_output`: Step Functions checks no
#: task output, so an output the file cannot read fails the run later (States.Runtime, which
#: States.ALL matches neither to retry nor to catch); natively it is a step failure the run
#: takes to its failure end, never retried (a retry would apply the call again)
_ALL = ("transient", "rate_limited", "timeout", "permanent")
_RETRYABLE = ("transient", "rate_limited", "timeout")
_RETRIER_FIELDS = frozenset(("ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate",
                             "MaxDelaySeconds", "JitterStrategy", "Comment"))
_CATCHER_FIELDS = frozenset(("ErrorEquals", "Next", "ResultPath", "Comment"))
#: The longest span ASL gives in seconds (a year and a day, as MaxDelaySeconds allows).
_SECONDS_MAX = 31_622_400

#: What a catcher's ResultPath gets, `{Error, Cause}`, from a native step failure.
_CATCH_OUTPUT = Record({
    "Error": Expr("'States.Timeout' if event.payload.category == 'timeout' else "
                  "'States.TaskFailed'"),
    "Cause": Expr("event.payload.error")})


class RetriesAndCatchers(Part):
    """Converts the retriers and catchers of Task, Parallel and Map states."""

    def retry(self, spec: Any, location: str, tool: str) -> dict[str, Any]:
        """Gives the step's retry policy of a `Retry`: the errors of all its retriers, the
        attempts and delays of the first."""
        if spec is None:
            return {"attempts_max": 1}
        if not isinstance(spec, list):
            raise self.sink.fatal("asl-invalid", location, "Retry is a list of retriers")
        if not spec:
            return {"attempts_max": 1}
        categories: list[str] = []
        for index, retrier in enumerate(spec):
            where = f"{location}[{index}]"
            errors = self._error_names(retrier, _RETRIER_FIELDS, where, "a retrier")
            for err_index, error in enumerate(errors):
                found = self._categories(error, f"{where}.ErrorEquals[{err_index}]")
                for category in found:
                    if category in _RETRYABLE and category not in categories:
                        categories.append(category)
                if "permanent" in found:
                    self.sink.warning("asl-retry-permanent", f"{where}.ErrorEquals[{err_index}]",
                                      f"error {error!r} is a permanent failure natively, which is "
                                      "never retried")
        first = spec[0]
        if len(spec) > 1:
            self.sink.warning("asl-retry-merged", f"{location}[1]",
                              f"{len(spec)} retriers merged into one policy: the errors of all, "
                              "the attempts and delays of the first")
        attempts = first.get("MaxAttempts", 3)
        if not _whole(attempts) or attempts < 0:
            raise self.sink.fatal("asl-invalid", f"{location}[0].MaxAttempts",
                                  "MaxAttempts is a whole number >= 0")
        for name, low, high in (("IntervalSeconds", 1, _SECONDS_MAX),
                                ("MaxDelaySeconds", 1, _SECONDS_MAX)):
            given = first.get(name)
            if given is not None and (not _whole(given) or not low <= given <= high):
                raise self.sink.fatal("asl-invalid", f"{location}[0].{name}",
                                      f"{name} is a whole number of seconds from {low} to "
                                      f"{high:,}")
        rate = first.get("BackoffRate")
        if rate is not None and (not _number(rate) or not 1.0 <= rate <= 1_000.0):
            raise self.sink.fatal("asl-invalid", f"{location}[0].BackoffRate",
                                  "BackoffRate is a number from 1.0 to 1,000")
        if attempts + 1 > 100:
            self.sink.warning("asl-retry-bounds", f"{location}[0].MaxAttempts",
                              f"MaxAttempts {attempts} capped at 99 retries (the native bound)")
            attempts = 99
        interval = first.get("IntervalSeconds", 1)
        backoff = first.get("BackoffRate", 2.0)
        policy: dict[str, Any] = {
            "attempts_max": attempts + 1,
            "delay_initial": duration(interval if isinstance(interval, int | float) else 1),
            "multiplier": max(float(backoff), 1.0) if isinstance(backoff, int | float) else 2.0,
        }
        if isinstance(backoff, int | float) and backoff < 1:
            self.sink.warning("asl-retry-bounds", f"{location}[0].BackoffRate",
                              f"BackoffRate {backoff} below 1 read as 1")
        max_delay = first.get("MaxDelaySeconds")
        initial_s = interval if isinstance(interval, int | float) else 1
        if isinstance(max_delay, int | float):
            policy["delay_max"] = duration(max(max_delay, initial_s))
        else:
            policy["delay_max"] = duration(max(60, initial_s) if attempts < 2 else min(max(
                initial_s * policy["multiplier"] ** min(attempts - 1, 64), 60), _SECONDS_MAX))
        jitter = first.get("JitterStrategy")
        if jitter == "FULL":
            policy["jitter"] = 1.0
        elif jitter not in (None, "NONE"):
            self.sink.warning("asl-retry-jitter", f"{location}[0].JitterStrategy",
                              f"JitterStrategy {jitter!r} is not FULL or NONE: no jitter")
        declared = self.conv.tools.get(tool, {})
        if "timeout" in categories and not (declared.get("idempotency_keys")
                                            or declared.get("repeatable")):
            categories.remove("timeout")
            self.sink.warning("asl-retry-timeout", f"{location}[0].ErrorEquals",
                              f"a timeout of tool {tool!r} is not retried: it is not known to "
                              "honour idempotency keys, so the call may have applied (an "
                              "ambiguous failure takes the Catch); declare it in the tools side "
                              "file")
        if not categories:
            self.sink.warning("asl-retry-unmapped", f"{location}[0].ErrorEquals",
                              "no retried error maps to a native category that may be retried: "
                              "the step is not retried")
            return {"attempts_max": 1}
        policy["retry_on"] = categories
        return policy

    def _error_names(self, entry: Any, fields: frozenset[str], where: str, what: str
                     ) -> list[str]:
        """Gives a retrier's or catcher's ErrorEquals, refusing an entry that is not a mapping
        or lacks a non-empty list of error names (its other fields left out are warned)."""
        if not isinstance(entry, Mapping):
            raise self.sink.fatal("asl-invalid", where,
                                  f"{what} is a mapping with ErrorEquals")
        self.conv.left_out(entry, fields, where, what)
        errors = entry.get("ErrorEquals")
        if not isinstance(errors, list) or not errors or not all(
                isinstance(e, str) for e in errors):
            raise self.sink.fatal("asl-invalid", f"{where}.ErrorEquals",
                                  f"{what} needs ErrorEquals, a non-empty list of error names")
        return errors

    def _categories(self, error: str, location: str) -> tuple[str, ...]:
        """Gives the native failure categories an ASL error name stands for."""
        if error == "States.ALL":
            return _ALL
        if error in ("States.Timeout", "States.HeartbeatTimeout"):
            return ("timeout",)
        if error == "States.TaskFailed":
            return ("transient", "rate_limited", "permanent")
        lowered = error.lower()
        if any(w in lowered for w in ("throttl", "toomanyrequests", "rateexceeded",
                                      "limitexceeded", "throughputexceeded", "slowdown")):
            return ("rate_limited",)
        if "timeout" in lowered or "timedout" in lowered:
            return ("timeout",)
        if any(w in lowered for w in ("serviceexception", "sdkclientexception",
                                      "awslambdaexception", "unavailable", "internalserver",
                                      "internalfailure", "internalerror", "serviceerror",
                                      "connection", "econnreset", "transient", "unknown")):
            return ("transient",)
        self.sink.warning("asl-error-name", location,
                          f"error {error!r} has no native category: read as a permanent failure")
        return ("permanent",)

    def catches(self, spec: Any, scope: Scope, location: str) -> list[dict[str, Any]]:
        """Gives the catchers of a `Catch`: each one's failure categories (None: all of
        them), its target and its actions (what its ResultPath writes)."""
        if spec is None:
            return []
        if not isinstance(spec, list):
            raise self.sink.fatal("asl-invalid", location, "Catch is a list of catchers")
        out: list[dict[str, Any]] = []
        for index, catcher in enumerate(spec):
            where = f"{location}[{index}]"
            errors = self._error_names(catcher, _CATCHER_FIELDS, where, "a catcher")
            if "Next" not in catcher:
                raise self.sink.fatal("asl-invalid", f"{where}.Next",
                                      "a catcher needs Next (a state name)")
            found: list[str] = []
            for err_index, error in enumerate(errors):
                for category in self._categories(error, f"{where}.ErrorEquals[{err_index}]"):
                    if category not in found:
                        found.append(category)
            target = self.conv.target(catcher["Next"], scope, f"{where}.Next")
            actions: list[dict[str, Any]] = []
            result_path = catcher.get("ResultPath", "$")
            if result_path is not None:
                move: dict[str, Any] = {}
                self.conv.data_paths.write(move, _CATCH_OUTPUT, result_path, f"{where}.ResultPath")
                actions = move.get("actions", [])
                self.sink.warning("asl-catch-output", f"{where}.ResultPath",
                                  "the error output's Error is States.Timeout for a timeout and "
                                  "States.TaskFailed for any other failure (a task's own error "
                                  "names are not known), its Cause the failure's message")
            out.append({"categories": None if set(found) >= set(_ALL) else found,
                        "target": target, "actions": actions})
        return out

    @staticmethod
    def catch_move(catch: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """Gives a catcher's move on a failed step (guarded by its categories) or on a
        failed callback."""
        move: dict[str, Any] = {"target": catch["target"]}
        if kind == "step":  # a catch-all (None) catches what ASL can: not an unread output
            move["guard"] = f"event.payload.category in {list(catch['categories'] or _ALL)!r}"
        if catch["actions"]:
            move["actions"] = catch["actions"]
        return move


def synthetic_retry() -> dict[str, Any]:
    """The retry policy of a synthetic step (an input or items drawn): its tool honours
    idempotency keys, so every retryable failure is retried."""
    return {"attempts_max": 3, "delay_initial": "1s", "delay_max": "4s",
            "retry_on": [*_RETRYABLE, "invalid_output"]}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))
