"""The states that hold no others: Task (a step; a callback's wait for `.waitForTaskToken`),
Pass, Wait, Succeed and Fail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers.asl.conversion import Part, Scope, duration, safe_id
from reference_machine.importers.asl.data_paths import Expr, Record
from reference_machine.importers.asl.paths import parse_path, render
from reference_machine.importers.asl.schemas import SCALAR_FIELD
from reference_machine.importers.asl.tools import READ_ONLY, tool_name

__all__ = ["LeafStates"]

_CALLBACK_TIMEOUT_DEFAULT_S = 365 * 86400
_WAIT_DEFAULT_S = 60


class LeafStates(Part):
    """Converts Task, Pass, Wait, Succeed and Fail states."""

    def convert_succeed(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                        native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Succeed state: a success final state."""
        native.update(type="final", outcome="success")

    def convert_fail(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                     native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Fail state: a failure final state (in a branch, its outcome names
        the error, for the Parallel's catchers)."""
        error = state.get("Error")
        outcome = "failure"
        if scope.parent is not None and isinstance(error, str) and safe_id(error):
            # a failed branch tells its error by its outcome, so the Parallel's Catch can
            outcome = f"failure.{safe_id(error)}"
        native.update(type="final", outcome=outcome)
        for key in ("Error", "Cause", "ErrorPath", "CausePath"):
            if key in state:
                native["description"] += f" [{key}: {state[key]}]"

    def convert_wait(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                     native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Wait state: an `after:` move (a length read at run time is
        approximated)."""
        target = self.conv.next_target(state, scope, location)
        seconds = state.get("Seconds")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
            delay: float = seconds
        else:
            delay = _WAIT_DEFAULT_S
            used = next((k for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath")
                         if k in state), "Seconds")
            self.sink.warning("asl-wait-dynamic", f"{location}.{used}",
                              f"the wait's length ({used}: {state.get(used)!r}) is not known when "
                              f"the definition is read: approximated as {delay} s")
        native.update(type="wait", after={"delay": duration(delay), "target": target})

    def convert_pass(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                     native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Pass state: an eventless move writing its Result or Parameters."""
        target = self.conv.next_target(state, scope, location)
        move: dict[str, Any] = {"target": target}
        value: Expr | Record | None = None
        if jsonata and "Output" in state:
            value = self.conv.data_paths.value(state["Output"], f"{location}.Output", "context",
                                               jsonata=True)
            self.conv.data_paths.write(move, value, "$", f"{location}.Output")
        else:
            if "Result" in state:
                value = self.conv.data_paths.const(state["Result"], f"{location}.Result")
            elif "Parameters" in state:
                value = self.conv.data_paths.value(state["Parameters"], f"{location}.Parameters",
                                                   "context",
                                                   base=self._input_base(state, location))
            if value is not None:
                self.conv.data_paths.write(move, value, state.get("ResultPath", "$"),
                                           f"{location}.ResultPath")
            self._output_path(state, location)
        native["always"] = [move]
        self.conv.success_moves = [move]

    def _output_path(self, state: Mapping[str, Any], location: str) -> None:
        if state.get("OutputPath") not in (None, "$"):
            self.sink.warning("asl-data-path", f"{location}.OutputPath",
                              "OutputPath narrows the data passed on; natively the whole context "
                              "goes on: left out")

    def _input_base(self, state: Mapping[str, Any], location: str) -> tuple[str | int, ...]:
        path = state.get("InputPath")
        if path is None or path == "$":
            return ()
        if not isinstance(path, str):
            return ()
        parsed = parse_path(path)
        if parsed is None or parsed[0] != "$":
            self.sink.warning("asl-data-path", f"{location}.InputPath",
                              f"InputPath {path!r} is not a plain path: left out")
            return ()
        return tuple(parsed[1])

    def convert_task(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                     native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Task state: a step of the tool its Resource names; for
        `.waitForTaskToken`, the step, then a wait for the callback."""
        resource = state.get("Resource")
        if not isinstance(resource, str) or not resource:
            raise self.sink.fatal("asl-invalid", f"{location}.Resource",
                                  "a Task needs a Resource (what it calls)")
        params_key = "Arguments" if jsonata else "Parameters"
        params = state.get(params_key)
        tool = tool_name(resource, params)
        if tool not in self.conv.tools:
            # each Task state's call is its own action (a loop polling with the same input,
            # two states calling one function): only a call applied twice is a duplicate
            self.conv.tools[tool] = {"description": f"ASL resource {resource}", "action": "call"}
            if READ_ONLY.match(tool.split(".")[-1]) and not tool.startswith("lambda."):
                self.conv.tools[tool]["repeatable"] = True
            if f"tool:{tool}" in self.conv.inferred:
                self.conv.tools[tool]["output"] = self.conv.inferred[f"tool:{tool}"]
                self.conv.inferred_for.append(tool)
            self.conv.tools[tool].update(self.conv.tools_file.get(tool, {}))
            self.conv.tool_where[tool] = f"{location}.Resource"
        callback = resource.endswith(".waitForTaskToken")
        base = self._input_base(state, location)
        if params is None:
            step_input: dict[str, Any] = {"input": "=" + render(base) if base else "=context"}
        else:
            translated = self.conv.data_paths.template(params, f"{location}.{params_key}", base,
                                                       jsonata)
            step_input = translated if isinstance(translated, dict) else {"input": translated}
        step: dict[str, Any] = {"tool": tool, "input": step_input}
        timeout = state.get("TimeoutSeconds")
        if "TimeoutSecondsPath" in state or "HeartbeatSecondsPath" in state:
            key = "TimeoutSecondsPath" if "TimeoutSecondsPath" in state else "HeartbeatSecondsPath"
            self.sink.warning("asl-timeout-dynamic", f"{location}.{key}",
                              f"{key} is read at run time: the step has no timeout natively")
        if isinstance(timeout, int | float) and timeout > 0 and not callback:
            step["timeout"] = duration(timeout)
        if "HeartbeatSeconds" in state and not callback:
            self.sink.warning("asl-heartbeat", f"{location}.HeartbeatSeconds",
                              "a heartbeat of a task that sends none back is left out (the "
                              "TimeoutSeconds stays)")
        step["retry"] = self.conv.retries.retry(state.get("Retry"), f"{location}.Retry", tool)
        catches = self.conv.retries.catches(state.get("Catch"), scope, f"{location}.Catch")
        succeeded_target = self.conv.next_target(state, scope, location)
        success: dict[str, Any] = {"target": succeeded_target}
        result = self._task_result(state, location, jsonata)
        target = f"event:{sid}.task_success" if callback else f"tool:{tool}"
        if (target in self.conv.scalars and isinstance(result, Expr)
                and result.text == "event.payload"
                and "output" not in self.conv.tools_file.get(tool, {})):
            result = Expr(f"at(event.payload, {SCALAR_FIELD!r})")
            self.sink.warning("asl-result-scalar", f"{location}.ResultPath",
                              "a Choice compares this task's whole result (a text or number) or "
                              "reads it as a list; a "
                              f"native output is a mapping, so the result is drawn as its field "
                              f"{SCALAR_FIELD!r} (declare the tool's output in the side file to "
                              "say otherwise)")
        if not jsonata:
            self._note_write(f"event:{sid}.task_success" if callback else f"tool:{tool}",
                             state)
        if callback:
            wait_id = self.conv.unique(f"{sid}__callback")
            ok, failed = f"{sid}.task_success", f"{sid}.task_failure"
            # one answer a token, and a new token each visit (a Choice looping back to the
            # task waits for a new callback): no `sends_max`, which counts an execution's
            # sends; the sender sends while the wait takes the event
            self.conv.events[ok] = {"description": f"SendTaskSuccess for {sid}'s task token",
                                    "sources": ["system"]}
            if f"event:{ok}" in self.conv.inferred:
                self.conv.events[ok]["payload"] = self.conv.inferred[f"event:{ok}"]
                self.conv.inferred_for.append(ok)
            self.conv.events[failed] = {"description": f"SendTaskFailure for {sid}'s task token",
                                        "sources": ["system"]}
            self.conv.data_paths.write(success, result, state.get("ResultPath", "$"),
                                       f"{location}.ResultPath")
            delay = timeout if isinstance(timeout, int | float) and timeout > 0 else None
            if delay is None and isinstance(state.get("HeartbeatSeconds"), int | float):
                delay = state["HeartbeatSeconds"]
            elif delay is not None and "HeartbeatSeconds" in state:
                self.sink.warning("asl-heartbeat", f"{location}.HeartbeatSeconds",
                                  "heartbeats are not modelled: the callback waits for "
                                  "TimeoutSeconds")
            if delay is None:
                delay = _CALLBACK_TIMEOUT_DEFAULT_S
                # a time read at run time bounds it there (`asl-timeout-dynamic` says so)
                bounded = any(key in state for key in ("TimeoutSecondsPath",
                                                       "HeartbeatSecondsPath"))
            else:
                bounded = True
            if not bounded:
                self.sink.warning("asl-callback-unbounded", location,
                                  "a callback task with no TimeoutSeconds and no "
                                  "HeartbeatSeconds: a callback that is lost holds the execution "
                                  "until the execution times out (a year in Step Functions; the "
                                  "native wait ends after 365 days)")
            timeout_catch = next((c for c in catches if c["categories"] is None
                                  or "timeout" in c["categories"]), None)
            timeout_target = timeout_catch["target"] if timeout_catch else self.conv.final(
                scope, "failure", "an uncaught error")
            if timeout_catch and timeout_catch["actions"]:
                self.sink.warning("asl-catch-output", f"{location}.TimeoutSeconds",
                                  "a callback that times out takes its catcher without the "
                                  "catcher's ResultPath (a native timeout carries no actions)")
            failure_moves = [self.conv.retries.catch_move(c, "callback") for c in catches
                             if c["categories"] is None or set(c["categories"]) - {"timeout"}]
            failure_moves.append({"target": self.conv.final(scope, "failure", "an uncaught error")})
            wait_state = {
                "type": "wait",
                "description": f"{native['description']} (waiting for the task token's "
                               "callback)",
                "after": {"delay": duration(delay), "target": timeout_target},
                "on": {ok: success, failed: failure_moves},
            }
            self.conv.states[wait_id] = self.conv.with_parent(wait_state, scope)
            success_move: dict[str, Any] = {"target": wait_id}
        else:
            self.conv.data_paths.write(success, result, state.get("ResultPath", "$"),
                                       f"{location}.ResultPath")
            success_move = success
        self.conv.success_moves = [success]
        failed_moves = [self.conv.retries.catch_move(c, "step") for c in catches]
        # every step failure the catchers do not take (an output the file cannot read, which
        # no catcher matches) ends the run in failure
        failed_moves.append({"target": self.conv.final(scope, "failure", "an uncaught error")})
        native["step"] = step
        native["on"] = {"step.succeeded": success_move, "step.failed": failed_moves}

    def _task_result(self, state: Mapping[str, Any], location: str, jsonata: bool
                     ) -> Expr | Record | None:
        if jsonata:
            if "Output" in state:
                return self.conv.data_paths.value(state["Output"], f"{location}.Output",
                                                  "event.payload", jsonata=True)
            return Expr("event.payload")
        value: Expr | Record | None = Expr("event.payload")
        if "ResultSelector" in state:
            value = self.conv.data_paths.value(state["ResultSelector"],
                                               f"{location}.ResultSelector", "event.payload")
        output = state.get("OutputPath")
        if output not in (None, "$"):
            parsed = parse_path(output) if isinstance(output, str) else None
            result_path = state.get("ResultPath", "$")
            if result_path == "$" and parsed is not None and parsed[0] == "$" and isinstance(
                    value, Expr):
                value = Expr(render(tuple(parsed[1]), value.text,
                                    nullable=value.text != "event.payload"))
            else:
                self.sink.warning("asl-data-path", f"{location}.OutputPath",
                                  "OutputPath narrows the data passed on; natively the whole "
                                  "context goes on: left out")
        return value

    def _note_write(self, target: str, state: Mapping[str, Any]) -> None:
        """Notes where a Task's result lands, for the output schemas guessed from reads."""
        result_path = state.get("ResultPath", "$")
        parsed = parse_path(result_path) if isinstance(result_path, str) else None
        if parsed is None or parsed[0] != "$" or any(isinstance(s, int) for s in parsed[1]):
            return
        landing = tuple(str(s) for s in parsed[1])
        prefix: tuple[str | int, ...] = ()
        output = state.get("OutputPath")
        if not landing and isinstance(output, str):
            out = parse_path(output)
            if out is not None and out[0] == "$":
                prefix = tuple(out[1])
        selector = None
        if isinstance(state.get("ResultSelector"), Mapping):
            selector = {}
            for key, value in state["ResultSelector"].items():
                chosen = parse_path(value) if str(key).endswith(".$") and isinstance(
                    value, str) else None
                if chosen is not None and chosen[0] == "$":
                    selector[str(key)[:-2]] = tuple(chosen[1])
        self.conv.result_writes.append((target, landing, prefix, selector))
