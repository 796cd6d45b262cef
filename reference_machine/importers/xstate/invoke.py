"""XState's `invoke` as the state's native step: its actor a declared tool, its input, and its
onDone and onError as the step's results, with the states XState's silences become."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.common import STRINGIFIED, item_location, shown_code
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode
from reference_machine.importers.xstate.source import inline_reference, native_object

__all__ = ["InvokeReader"]

_INVOKE_KEYS = frozenset({"src", "id", "systemId", "input", "onDone", "onError"})


class InvokeReader(Part):
    """Writes a state's invoke as its step, and the states its results lead to."""

    def invoke(self, node: StateNode, out: dict[str, Any], on: dict[str, list[Any]]) -> None:
        loc = node.at("invoke")
        invoke = node.config["invoke"]
        if isinstance(invoke, list):
            for index in range(1, len(invoke)):
                self.sink.warning("left-out", f"{loc}[{index}]", "a native state runs one step; "
                                  "this further invoke is left out")
            if not invoke:
                return
            invoke, loc = invoke[0], f"{loc}[0]"
        if not isinstance(invoke, Mapping):
            self.sink.error("bad-invoke", loc, "an invoke is a JSON object {src, input, onDone, "
                            "onError}")
            return
        for key in invoke:
            if key not in _INVOKE_KEYS:
                self.sink.warning("unknown-key", f"{loc}.{key}", f"{key!r} of an invoke is not "
                                  "imported")
        src = invoke.get("src")
        if inline_reference(src) is not None:
            src = self.functions.inline(src, f"{loc}.src", "invoked actor's logic")
        elif isinstance(src, Mapping) and isinstance(src.get("type"), str):
            src = src["type"]
        if not isinstance(src, str):
            hint = STRINGIFIED if src is None or src == {} else ""
            self.sink.error("inline-actor", f"{loc}.src", "the invoked actor must be named (its "
                            "logic is JavaScript); an inline actor in a JSON config cannot be "
                            f"imported{hint}")
            return
        tool = self.functions.named(src, f"{loc}.src", "actor")
        if tool is None:
            return
        # each time the state is entered its actor is started anew: one logical action per
        # call (its idempotency key), as a Step Functions task is, so that a state entered
        # again (a retry, a poll) is no duplicate effect, and a call applied twice still is
        self.ctx.tools.setdefault(tool, {"description": f"XState actor {src!r}", "action": "call"})
        step: dict[str, Any] = {"tool": tool, "retry": {"attempts_max": 1}}
        given = invoke.get("input")
        translated = native_object(str(given.get("code", ""))) if (
            isinstance(given, Mapping) and inline_reference(given) is not None) else None
        if translated is not None and not any("event" in text for text in translated.values()):
            step["input"] = {key: f"={text}" for key, text in translated.items()}
            self.sink.warning("inline-translated", f"{loc}.input", "the input is inline JavaScript "
                              f"({shown_code(given)}); it is translated into native expressions of "
                              f"the context, key by key ({', '.join(sorted(translated))})")
        elif inline_reference(given) is not None:
            self.sink.warning("left-out", f"{loc}.input", "the input is computed by inline "
                              f"JavaScript ({shown_code(given)}); the step is sent no input")
        elif isinstance(given, Mapping):
            step["input"] = self._step_input(given, f"{loc}.input")
        elif given is not None:
            self.sink.warning("left-out", f"{loc}.input", "only a JSON object of literal values is "
                              "imported as the step's input")
        out["step"] = step
        for key, event in (("onDone", "step.succeeded"), ("onError", "step.failed")):
            written = invoke.get(key)
            if written is None:
                continue
            transitions = self.transitions.read(node, written, f"{loc}.{key}")
            for index, transition in enumerate(transitions):
                if "target" not in transition:
                    self.sink.error("stays-after-step",
                                    item_location(f"{loc}.{key}", index, written),
                                    f"an {key} with no target stays in the state once its actor is "
                                    "done; the native step's result must leave it: give a target")
            on[event] = transitions
            if transitions and all("guard" in t for t in transitions):
                # no guard holding, XState takes nothing: on an error it stops with it, on
                # done it stays; natively the step's result must still leave the state
                if key == "onError":
                    failed = self._error_final(node)
                    transitions.append({"target": failed})
                    self.sink.warning("on-error-guarded", f"{loc}.{key}", "every onError "
                                      "transition is guarded: when none holds XState stops with "
                                      "the error; imported as a last move to final state "
                                      f"{failed!r} (outcome failure)")
                else:
                    rest = self.rest(node, out, on, "done")
                    transitions.append({"target": rest})
                    self.sink.warning("on-done-guarded", f"{loc}.{key}", "every onDone transition "
                                      "is guarded: when none holds XState stays in the state; "
                                      f"imported as a last move to {rest!r}, which takes the same "
                                      "events")
        if invoke.get("onError") is None:
            failed = self._error_final(node)
            on["step.failed"] = [{"target": failed}]
            self.sink.warning("no-on-error", loc, "no onError: an XState machine stops with an "
                              "error when its actor fails; imported as a move to final state "
                              f"{failed!r} (outcome failure)")
        if invoke.get("onDone") is None:
            rest = self.rest(node, out, on, "done")
            on["step.succeeded"] = [{"target": rest}]
            self.sink.warning("no-on-done", loc, "no onDone: XState stays in the state once its "
                              f"actor is done; imported as a move to {rest!r}, which takes the "
                              "same events")

    def _error_final(self, node: StateNode) -> str:
        """Gives the failure final state an actor's unhandled error ends `node`'s machine
        (or region) in, made on first use."""
        region = node.region()
        scope = region.native if region is not None else None
        failed = self.ctx.error_finals.get(scope)
        if failed is None:
            failed = self.ctx.fresh("xstate_error" if scope is None else f"{scope}.error")
            self.ctx.error_finals[scope] = failed
            spec: dict[str, Any] = {"type": "final", "outcome": "failure",
                                    "description": "the XState machine's error: an actor "
                                                   "failed and nothing took its error"}
            if scope is not None:
                spec["parent"] = scope
            self.ctx.states[failed] = spec
        return failed

    def _step_input(self, given: Mapping[str, Any], loc: str) -> dict[str, Any]:
        """Gives a step's literal input; a value computed by inline JavaScript is left out."""
        out: dict[str, Any] = {}
        for key, value in given.items():
            if inline_reference(value) is not None:
                self.sink.warning("left-out", f"{loc}.{key}", f"input {key!r} is computed by "
                                  f"inline JavaScript ({shown_code(value)}); it is left out")
            else:
                out[str(key)] = _input_value(value)
        return out

    def rest(self, node: StateNode, out: dict[str, Any], taken: Mapping[str, list[Any]],
             suffix: str) -> str:
        """Gives a new sibling of `node` that rests, taking `node`'s events (a step's result
        or a join must leave the state it ends)."""
        name = self.ctx.fresh(f"{node.native}.{suffix}")
        spec: dict[str, Any] = {"description": f"XState state {'.'.join(node.path)}, {suffix}"}
        if "parent" in out:
            spec["parent"] = out["parent"]
        on = {e: list(t) for e, t in taken.items() if not e.startswith("step.")}
        if on:
            spec["on"] = on
            if self.ctx.reactive:
                spec["type"] = "wait"
        self.ctx.states[name] = spec
        return name


def _input_value(value: Any) -> Any:
    """Gives a literal step input value: a string starting with `=` would be read as an
    expression, so it is written as an expression giving the string."""
    if isinstance(value, str) and value.startswith("="):
        return f"={value!r}"
    if isinstance(value, Mapping):
        return {str(k): _input_value(v) for k, v in value.items()}
    return value
