"""The target: `temporal_target(Workflow, activities=[...])` and `TemporalTarget`, the machine
factory that holds the user's workflow class, its activities and the definition read off
them."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.adapters.peers import AdapterError, safe_ids
from harness.adapters.replay_units import load_read
from harness.adapters.temporal.machine import (
    COMPLETED,
    CRASH_POINTS,
    FAILED,
    RUNNING,
    TemporalMachine,
    current_box,
)
from harness.sim.machine import Probe
from reference_machine import Event, Tool, WorkflowDefinition

__all__ = ["TemporalTarget", "temporal_target"]


class TemporalTarget:
    """A machine factory over a Temporal workflow class: `target(definition, tools, probe)`
    gives a `TemporalMachine`, and `target.definition` is what was read off the workflow."""

    crash_points: Sequence[str] = CRASH_POINTS
    #: The simulator freezes the wall clock for each run, which the machine moves to the
    #: time each piece of the user's code runs at (`tasks.pinned`)
    freeze_clock = True

    def __init__(self, workflow: type, activities: Any, *, tools: Mapping[str, Mapping[str,
                 Any]] | None, signals: Mapping[str, Mapping[str, Any]] | Sequence[str] | None,
                 arguments: Any, name: str | None, task_queue: str, sandboxed: bool | None,
                 replay_with: Sequence[type], module: str | None) -> None:
        temporal = _require_temporalio()
        defn = temporal.workflow._Definition.from_class(workflow)
        if defn is None:
            raise AdapterError(f"{getattr(workflow, '__name__', workflow)!r} is not a Temporal "
                               f"workflow: give a class decorated with @workflow.defn")
        if defn.name is None:
            raise AdapterError(f"{workflow.__name__} is a dynamic workflow: give one with a "
                               f"name (@workflow.defn, or @workflow.defn(name=...))")
        self.workflow, self.workflow_name, self.task_queue = workflow, defn.name, task_queue
        self.run_parameters = len(defn.arg_types or ()) if defn.arg_types is not None else (
            len(inspect.signature(defn.run_fn).parameters) - 1)
        self._arguments = arguments
        if arguments is None and self.run_parameters:
            raise AdapterError(f"{self.workflow_name}'s run method takes "
                               f"{self.run_parameters} argument(s): give arguments=[...] (or a "
                               f"function of the execution's context giving them)")
        if arguments is not None and not callable(arguments) and (
                isinstance(arguments, str | bytes | Mapping)
                or len(list(arguments)) != self.run_parameters):
            raise AdapterError(f"arguments={arguments!r}: {self.workflow_name}'s run method "
                               f"takes {self.run_parameters} argument(s); give a list of that "
                               f"many")
        self.converter = temporal.converter.DataConverter.default.payload_converter
        self._failures = temporal.converter.DataConverter.default.failure_converter
        self.activities, self._activity_types = _activities(temporal, activities)
        named = dict(defn.signals)
        named.pop(None, None)  # a dynamic signal handler: no name to send
        if signals is None:
            chosen: dict[Any, Any] = {each: {} for each in named}
        elif isinstance(signals, Mapping):
            chosen = dict(signals)
        elif isinstance(signals, str) or not all(isinstance(each, str) for each in signals):
            raise AdapterError(f"signals={signals!r}: give the signals' names (a list), or "
                               f"each name with its event's options (a mapping)")
        else:
            chosen = {each: {} for each in signals}
        unknown = sorted(set(chosen) - set(named))
        if unknown:
            known = ", ".join(sorted(named)) or "none"
            raise AdapterError(f"signals {', '.join(unknown)}: {self.workflow_name} has no such "
                               f"signal handler (its signals: {known})")
        self._signal_defs = {each: named[each] for each in chosen}
        for each, handler in self._signal_defs.items():
            if _parameters(handler) > 1:
                raise AdapterError(f"signal {each!r} takes {_parameters(handler)} arguments: "
                                   f"the simulator sends one (the event's payload) or none")
        updates = sorted(name for name in defn.updates if name)
        if updates or None in defn.updates:
            raise AdapterError(f"{self.workflow_name} has update handlers "
                               f"({', '.join(updates) or 'a dynamic one'}), which the history "
                               f"mode does not model yet: test it without them, or wait for "
                               f"the integration mode")
        ids = safe_ids(chosen, reserved=("workflow.",))
        self.signals = {ids[each]: each for each in chosen}  # the event type -> the signal
        self.runner = _runner(temporal, defn, sandboxed)
        self.later_versions = tuple((later, _runner(temporal, _later(temporal, later, defn),
                                                    sandboxed)) for later in replay_with)
        self.name = name or self.workflow_name
        self.__qualname__ = f"temporal:{self.name}"
        self.__module__ = module or __name__
        # a signal is sent once unless said (a human approves once; the simulator's
        # duplicate, late and reordered copies come on top)
        events = {ids[each]: {"sends_max": 1, **spec} for each, spec in chosen.items()}
        self.definition = self._definition(tools or {}, events)

    def _definition(self, tools: Mapping[str, Mapping[str, Any]],
                    events: dict[str, dict[str, Any]]) -> WorkflowDefinition:
        running: dict[str, Any] = {"initial": True,
                                   "always": [{"target": COMPLETED}, {"target": FAILED}]}
        if events:
            running["on"] = {event: [{"target": RUNNING}] for event in events}
        states = {RUNNING: running, COMPLETED: {"type": "final", "outcome": "success"},
                  FAILED: {"type": "final", "outcome": "failure"}}
        spec = {"name": self.name, "version": 1,
                "tools": {tool: dict(each) for tool, each in tools.items()},
                "events": events, "states": states}
        return load_read(spec, "workflow")

    # what the machine asks of the target
    def arguments(self, context: Mapping[str, Any]) -> list[Any]:
        """Gives the payloads a run of the workflow starts with."""
        given = self._arguments(dict(context)) if callable(self._arguments) else (
            self._arguments or [])
        return list(self.converter.to_payloads(list(given))) if given else []

    def signal_arguments(self, event: Event) -> list[Any]:
        """Gives the payloads of a signal: the event's payload, for a handler that takes an
        argument."""
        handler = self._signal_defs[self.signals[event.type]]
        if not _parameters(handler):
            return []
        payload = event.payload
        return list(self.converter.to_payloads(
            [dict(payload) if isinstance(payload, Mapping) else payload]))

    def activity_arguments(self, activity: str, payloads: Sequence[Any]) -> list[Any]:
        """Gives an activity's arguments, decoded as its parameters' types say."""
        return list(self.converter.from_payloads(list(payloads),
                                                 self._activity_types.get(activity)))

    def failure(self, error: BaseException) -> Any:
        """Gives the failure Temporal records for an activity's exception."""
        from temporalio.api.failure.v1 import Failure
        failure = Failure()
        self._failures.to_failure(error, self.converter, failure)
        return failure

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> TemporalMachine:
        return TemporalMachine(self, tools, probe)

    def __repr__(self) -> str:
        return f"<Temporal target {self.name} (history mode)>"


def _parameters(handler: Any) -> int:
    """Gives how many arguments a signal handler takes (its `self` aside)."""
    return len(inspect.signature(handler.fn).parameters) - (1 if handler.is_method else 0)


def _activities(temporal: Any, given: Any) -> tuple[dict[str, Callable[..., Any]],
                                                     dict[str, Any]]:
    """Gives the activities by name and their parameter types: `given` is a sequence of
    `@activity.defn` callables, or a function of the `ActivityBox` giving them."""
    if callable(given) and temporal.activity._Definition.from_callable(given) is None:
        given = given(current_box())
    found: dict[str, Callable[..., Any]] = {}
    types: dict[str, Any] = {}
    for each in given or ():
        defn = temporal.activity._Definition.from_callable(each)
        if defn is None:
            raise AdapterError(f"{each!r} is not a Temporal activity: decorate it with "
                               f"@activity.defn")
        if defn.name is None:
            raise AdapterError(f"{each!r} is a dynamic activity: give activities a name")
        if defn.name in found:
            raise AdapterError(f"two activities are named {defn.name!r}")
        found[defn.name], types[defn.name] = defn.fn, defn.arg_types
    return found, types


def _later(temporal: Any, later: type, defn: Any) -> Any:
    """Gives the definition of a later version of the workflow, which must bear its name."""
    found = temporal.workflow._Definition.from_class(later)
    if found is None:
        raise AdapterError(f"replay_with: {getattr(later, '__name__', later)!r} is not a "
                           f"Temporal workflow: give a class decorated with @workflow.defn")
    if found.name != defn.name:
        raise AdapterError(f"replay_with: {later.__name__} is named {found.name!r}, not "
                           f"{defn.name!r}: a later version keeps the workflow's name "
                           f"(@workflow.defn(name={defn.name!r}))")
    return found


def _runner(temporal: Any, defn: Any, sandboxed: bool | None) -> Any:
    """Gives the workflow runner a worker uses for the workflow: Temporal's sandbox unless
    the workflow (`@workflow.defn(sandboxed=False)`) or `sandboxed=False` says not."""
    from temporalio.worker import UnsandboxedWorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
    use = defn.sandboxed if sandboxed is None else sandboxed
    if not use:
        return UnsandboxedWorkflowRunner()
    # under pytest, its import hook runs inside the sandbox's imports and would have the
    # sandbox import pytest anew for every workflow task (ten times slower): it is passed
    # through, as the harness itself is
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*_PASSED)
    return SandboxedWorkflowRunner(restrictions=restrictions)


#: Modules Temporal's sandbox takes from outside rather than importing anew for each run
_PASSED = ("_pytest", "pytest", "pluggy", "harness", "reference_machine", "fault_injection")


def _require_temporalio() -> Any:
    try:
        importlib.import_module("temporalio.worker")
        importlib.import_module("temporalio.testing")
        return importlib.import_module("temporalio")
    except ImportError as error:
        raise AdapterError("temporalio is not installed: pip install 'fsmharness[temporal]'"
                           ) from error


def temporal_target(workflow: type, activities: Any = (), *,
                    tools: Mapping[str, Mapping[str, Any]] | None = None,
                    signals: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
                    arguments: Sequence[Any] | Callable[[dict[str, Any]], Sequence[Any]]
                    | None = None, name: str | None = None,
                    task_queue: str = "fsmharness", sandboxed: bool | None = None,
                    replay_with: Sequence[type] = ()) -> TemporalTarget:
    """Wraps a Temporal workflow class (see the package). `activities` are the
    `@activity.defn` callables its worker registers, or a function of the `ActivityBox`
    giving them (activities that are methods of a class holding their clients);
    `tools` the simulated tools they call, as in a definition file; `signals` the signals
    the simulator sends, each with its event's options (`payload`: a JSON Schema of the
    one argument a handler takes, `sends_max`: 1 unless said), all the workflow's by
    default; `arguments`
    what a run starts with (a list, or a function of the execution's context);
    `sandboxed` overrides the workflow's own choice of Temporal's sandbox; `replay_with`
    names later versions of the workflow (the same name, edited code) each history must
    replay under too, as a deployment of them replays the histories in flight."""
    return TemporalTarget(workflow, activities, tools=tools, signals=signals,
                          arguments=arguments, name=name, task_queue=task_queue,
                          sandboxed=sandboxed, replay_with=replay_with,
                          module=sys._getframe(1).f_globals.get("__name__"))

