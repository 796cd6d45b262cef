"""The XState importer's entry points (`convert`, `convert_machine`), and the converter that
assembles one part per construct and reads a whole machine with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reference_machine.errors import DefinitionError
from reference_machine.findings import Fatal, Finding, Severity, did_you_mean
from reference_machine.importers._common import Imported
from reference_machine.importers.xstate.actions import ActionReader
from reference_machine.importers.xstate.common import json_type, safe, shown_code
from reference_machine.importers.xstate.conversion import Conversion, Part
from reference_machine.importers.xstate.events import EventCatalog
from reference_machine.importers.xstate.functions import FunctionReader
from reference_machine.importers.xstate.hierarchy import Hierarchy
from reference_machine.importers.xstate.invoke import InvokeReader
from reference_machine.importers.xstate.parallel import ParallelReader
from reference_machine.importers.xstate.source import (
    SOURCE_SUFFIXES,
    Machine,
    inline_reference,
    machines,
)
from reference_machine.importers.xstate.states import StateTree
from reference_machine.importers.xstate.timers import TimerReader
from reference_machine.importers.xstate.transitions import TransitionReader

__all__ = ["MachineConverter", "convert", "convert_machine"]

_ROOT_KEYS = frozenset({"id", "initial", "states", "context", "type", "on", "always", "after",
                        "entry", "exit", "invoke", "description", "version", "output", "types",
                        "meta", "tags", "schema", "tsTypes", "predictableActionArguments",
                        "preserveActionOrder"})
#: Keys that only type or tune the JavaScript, with no effect on how the machine moves.
_TYPING_KEYS = frozenset({"types", "schema", "tsTypes", "predictableActionArguments",
                          "preserveActionOrder"})


def convert(data: Any, lines: Mapping[str, int], name: str) -> Imported:
    """Gives the native definition data of an XState v5 machine config (or of the last
    machine a TypeScript or JavaScript source text creates), with a warning for each feature
    approximated or left out. Raises `DefinitionError` with located findings when the config
    cannot be imported."""
    if isinstance(data, str) and name.lower().endswith(SOURCE_SUFFIXES):
        found = machines(data, name)
        machine = found[-1]
        extra: list[Finding] = []
        if len(found) > 1:
            lines_of = ", ".join(str(m.line) for m in found[:-1])
            extra.append(Finding(
                Severity.WARNING, "several-machines", "", f"the file creates {len(found)} "
                f"machines; the last (line {machine.line}) is imported, not those of line(s) "
                f"{lines_of} (import one with xstate.source.machines and convert_machine)",
                line=machine.line))
        return convert_machine(machine, name, extra)
    return _convert(data, lines, name, None, [])


def convert_machine(machine: Machine, name: str, findings: Sequence[Finding] = ()
                    ) -> Imported:
    """Gives the native definition data of a machine read from source (see
    `source`); its named delays are those its implementations write as numbers."""
    return _convert(machine.config, machine.lines, name, machine.delays,
                    [*findings, *machine.findings])


def _convert(data: Any, lines: Mapping[str, int], name: str, delays: Mapping[str, int] | None,
             findings: list[Finding]) -> Imported:
    converter = MachineConverter(lines, name, delays)
    converter.sink.extend(findings)
    try:
        native = converter.run(data)
    except Fatal:
        native = None
    errors = converter.sink.errors
    if errors or native is None:
        raise DefinitionError(errors, name)
    return Imported(format="xstate", data=native, findings=tuple(converter.sink.findings),
                    source=name, functions={})


class MachineConverter(Part):
    """Reads one machine config with a part per construct (`run`): the tree of its state
    nodes, then each state written with its transitions, then the passes over the whole."""

    def __init__(self, lines: Mapping[str, int], source: str,
                 delays: Mapping[str, int] | None = None) -> None:
        super().__init__(Conversion(lines, source, delays))
        self.tree = StateTree(self.ctx)
        self.catalog = EventCatalog(self.ctx)
        self.transitions = TransitionReader(self.ctx)
        self.functions = FunctionReader(self.ctx)
        self.actions = ActionReader(self.ctx)
        self.invocations = InvokeReader(self.ctx)
        self.timers = TimerReader(self.ctx)
        self.parallel = ParallelReader(self.ctx)
        self.hierarchy = Hierarchy(self.ctx)
        for part in (self.tree, self.catalog, self.transitions, self.functions, self.actions,
                     self.invocations, self.timers, self.parallel, self.hierarchy):
            part.link(self)

    def run(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            raise self.sink.fatal("not-a-machine", "", "an XState machine config is a JSON object "
                                  f"(the argument of createMachine), got {type(data).__name__}")
        for key in data:
            if key in _TYPING_KEYS:
                self.sink.warning("ignored-key", str(key), f"{key!r} only types or tunes the "
                                  "JavaScript; it is left out")
            elif key not in _ROOT_KEYS:
                self.sink.warning("unknown-key", str(key), f"{key!r} is not a key of an XState "
                                  f"machine config{did_you_mean(str(key), _ROOT_KEYS)}; it is left "
                                  "out")
        machine_id = data.get("id")
        if machine_id is not None and not isinstance(machine_id, str):
            raise self.sink.fatal("bad-id", "id", "the machine's id is a string, got "
                                  f"{machine_id!r}")
        stem = Path(self.ctx.source).name.split(".")[0] if self.ctx.source else ""
        workflow = safe(machine_id or stem or "machine", "machine")
        states = data.get("states")
        if states is not None and not isinstance(states, Mapping):
            raise self.sink.fatal("not-a-state", "states", "`states` is a JSON object of state "
                                  f"nodes, got {json_type(states)}")
        if not states and not any(data.get(k) for k in ("on", "after", "always", "invoke")):
            raise self.sink.fatal("no-states", "states", "the machine has no `states` and takes "
                                  "nothing (no on, after, always or invoke); a definition needs at "
                                  "least one state")
        root = self.tree.read(data, "", (), "", None, machine_id or "(machine)")
        self.tree.name_all(root)
        self.catalog.collect()
        self.ctx.root = root
        # the root is a native state of its own where it does what a state does: a machine
        # with no `states` (it only takes events), a root timer, a root eventless transition
        wrapped = root.kind in ("parallel", "atomic") or any(
            data.get(k) for k in ("entry", "exit", "after", "always"))
        if wrapped:
            root.native = self.ctx.fresh(workflow)
        reactive = self.parallel.flat(root) if root.kind == "parallel" else not any(
            c.kind == "final" or self.tree.dead_end(c) for c in root.children)
        self.ctx.reactive = reactive
        for key in ("always", "after", "invoke"):
            if data.get(key) and not wrapped:  # a wrapped root is a state: read as one
                self.sink.warning("left-out", key, f"`{key}` on the machine's root is not "
                                  "imported; move it to a state")
        if data.get("output") is not None:
            self.sink.warning("left-out", "output", "the machine's `output` is not imported; a "
                              "native run ends with its final state's outcome and context")
        self.tree.emit(root, wrapped)
        self.hierarchy.push_down(root, wrapped)
        self.hierarchy.check_history()
        self.hierarchy.give_always()
        if reactive:
            self.tree.stay_by_self_target()
        self.catalog.declare_payloads()
        native: dict[str, Any] = {"name": workflow}
        if data.get("version") is not None:
            native["version"] = str(data["version"])
        if isinstance(data.get("description"), str):
            native["description"] = data["description"]
        context = data.get("context")
        if inline_reference(context) is not None:
            self.sink.warning("left-out", "context", "the initial context is computed by inline "
                              "JavaScript (a function of the input); the run starts with an empty "
                              "one")
        elif context is not None:
            if isinstance(context, Mapping):
                native["context"] = self._context(context)
            else:
                self.sink.error("bad-context", "context", "the initial context is a JSON object, "
                                f"got {type(context).__name__} (a function of the input is "
                                "JavaScript)")
        if "output" in self.ctx.used_context:
            native.setdefault("context", {}).setdefault("output", None)
        if reactive:
            native["reactive"] = True
        if self.ctx.tools:
            native["tools"] = self.ctx.tools
        if self.ctx.events:
            native["events"] = self.ctx.events
        native["states"] = self.ctx.states
        return native

    def _context(self, context: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in context.items():
            if inline_reference(value) is not None:
                self.sink.warning("left-out", f"context.{key}", f"context {key!r} starts as the "
                                  f"value of inline JavaScript ({shown_code(value)}); it starts as "
                                  "null")
                out[str(key)] = None
            else:
                out[str(key)] = value
        return out
