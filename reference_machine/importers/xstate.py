"""XState v5 machine configs (the JSON a `createMachine({...})` call takes) as native definitions.

`convert(data, lines, name)` reads a machine config that holds no inline JavaScript (what a
`*.xstate.json` file, or Stately's export, holds), or the TypeScript or JavaScript source
that creates the machine (`xstate_source` reads `createMachine`'s object literal, each inline
function kept as a reference), and gives the native definition data, with a warning, located
in XState's terms (`states.idle.on.FETCH[0].guard`, and the source's line), for every feature
it approximated or left out. What it cannot import at all (a target that does not exist, code
where a name belongs, a function JSON.stringify dropped) raises `DefinitionError` with located
findings.

How XState maps onto the native format:

- **States** become native states, flat with `parent:`. A state's id is its XState key where
  that key is unique in the machine and a valid native name, else its dotted path
  (`upload.idle`), made safe; `description` keeps the XState path (and its own description).
- **Targets** resolve as XState resolves them: `.child` below the state, `#id` (or
  `#id.child`) anywhere, and a bare `sibling` (or `sibling.child`) next to it; a bare target on
  the root is an error, as in XState (write `.child`).
- **Events** named in `on` are declared under `events:` with `sources: [human, system]` (an
  XState event may come from a user or from another part of the system; neither a tool nor a
  timer sends it). A name the native format does not allow (or one under a reserved prefix
  such as `step.`) is renamed with a warning; the wildcard `*` (and `prefix.*`) expands to the
  declared events the state does not handle itself.
- **Guards** and **actions** named in the config are registered Python functions (native
  `guard: {function: name}`, `function: name` actions): register them with
  `@register_function` or pass `functions=`; the native checks report a missing one where it
  is named. A name the native format does not allow (`'save dir'`) is made safe (warned).
  `assign` actions whose values are literals become native `assign`. An inline guard or
  assigned value that is one expression of context and the event in what both languages say
  alike is translated into the native expression (`xstate_source.native_expression`,
  warned; the payload fields it reads are declared, optional); any other inline function is
  a registered function named where it is written (`inline.<file>.L<line>`, warned with its
  code; an assigned value's returns that key); `not`/`and`/`or` of named guards is one
  function (`not.isValid`).
- **`invoke`** is the state's step: its `src` a declared tool (no retries: XState retries
  nothing; one logical action per call, `action: call`, since each entry starts the actor
  anew), `onDone` its `step.succeeded`, `onError` its `step.failed`; where no onError
  transition is selected XState stops with the error (a failure final), where no onDone one
  is it stays (a resting state).
- **`after`** is the native `after:`; a delayed transition with a guard or actions goes
  through a choice state; several delays keep the shortest (a warning). A named delay takes
  the number the machine's implementations give it (read from source); with none given
  XState fires at once (0 ms, warned); in a JSON config an ISO 8601 name (`PT15M`) is read as
  its duration (warned), any other name refused. A root `after` times every state.
- **`always`** on an atomic state is its eventless transitions; on a compound state they are
  given to each state below it, after the state's own (as XState tries them).
- **Parallel states** are native parallel states: a region is left only through its final
  states and the join is the parallel state's `onDone` (the native `done:`). A parallel state
  whose regions never end (toggles, as in a word processor) is imported, with a warning, as
  one compound state whose children are the combinations of its regions' states, when each
  region is a flat set of states taking events and no event is taken by two regions (at most
  256 combinations); otherwise it is refused.
- **History** pseudo-states become the native `history:` attribute of their parent.
- A final state nested in a compound state with `onDone` becomes a choice state taking that
  `onDone` at once (XState's `done.state` event); `output` is kept in `context.output`.
- A machine whose root has no final state runs until stopped: `reactive: true`. One with no
  `states` (a counter taking events at its root) is one state; a state whose only moves are
  targetless, and that has nothing to run again on entry, has them as transitions to itself,
  the same run, so the native checks see no trap.
- **JSON.stringify's losses** are refused where they show: an action `null` (a function in
  a list), an invoke `src` of `{}` (actor logic); an empty transition `{}` is warned. A
  transition whose guard was dropped cannot be told from one written without.

Nothing is evaluated: a string that looks like JavaScript where a name belongs is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity, did_you_mean, line_of
from reference_machine.importers._common import Imported
from reference_machine.importers._common import literal as _literal
from reference_machine.importers.xstate_source import (
    INLINE_PREFIX,
    SOURCE_SUFFIXES,
    Machine,
    inline_reference,
    machines,
    native_expression,
    native_object,
)

__all__ = ["EVENT_SOURCES", "convert", "convert_machine", "inline_name"]

#: Who may send an imported event: a user or another part of the system.
EVENT_SOURCES = ("human", "system")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_CODE = re.compile(r"=>|[(){};`\[\]]|\bfunction\b|\breturn\b|&&|\|\||[<>!]=?|===?")
_RESERVED_PREFIXES = ("execution.", "step.", "approval.", "timer.", "compensation.")
_XSTATE_EVENT_PREFIXES = ("xstate.", "done.", "error.")
_ASSIGN_TYPES = ("assign", "xstate.assign")
#: The most states a parallel state whose regions never end is imported as (their product).
_PRODUCT_MAX = 256

_ROOT_KEYS = frozenset({"id", "initial", "states", "context", "type", "on", "always", "after",
                        "entry", "exit", "invoke", "description", "version", "output", "types",
                        "meta", "tags", "schema", "tsTypes", "predictableActionArguments",
                        "preserveActionOrder"})
_STATE_KEYS = frozenset({"id", "type", "initial", "states", "on", "always", "after", "entry",
                         "exit", "invoke", "history", "target", "output", "description", "meta",
                         "tags", "onDone"})
_TRANSITION_KEYS = frozenset({"target", "guard", "cond", "actions", "reenter", "internal",
                              "description", "meta"})
_INVOKE_KEYS = frozenset({"src", "id", "systemId", "input", "onDone", "onError"})
#: An ISO 8601 duration as XState reads a delay: weeks, days, hours, minutes, seconds.
_ISO_DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?"
                           r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?"
                           r"(?:(\d+(?:\.\d+)?)S)?)?")
#: The longest native expression an inline function is translated into (a native guard's
#: limit is 1,000 characters).
_TRANSLATED_MAX = 900
#: XState's guard combinators over named guards, each imported as one registered function.
_COMBINATORS = ("xstate.not", "xstate.and", "xstate.or")
#: What a value JSON.stringify made from a config with functions looks like, and the way out.
_STRINGIFIED = (": JSON.stringify writes a function in a list as null and leaves a function "
                "property out, so a config stringified from JavaScript has lost its inline "
                "functions; import the TypeScript or JavaScript source instead (`--format "
                "xstate`), which keeps each as a named reference")
#: Keys that only type or tune the JavaScript, with no effect on how the machine moves.
_TYPING_KEYS = frozenset({"types", "schema", "tsTypes", "predictableActionArguments",
                          "preserveActionOrder"})


@dataclass(eq=False)
class _Node:
    """One XState state node, as read."""

    key: str
    path: tuple[str, ...]
    loc: str                     # `states.a.states.b`; "" for the root
    config: Mapping[str, Any]
    parent: _Node | None
    kind: str                    # atomic, compound, parallel, final, history
    children: list[_Node] = field(default_factory=list)
    native: str = ""             # the native state's name ("" for the root and history nodes)
    initial_read: bool = False   # its `initial` was read (and any finding about it made)

    def at(self, key: str) -> str:
        """Gives the location of `key` of this node."""
        return f"{self.loc}.{key}" if self.loc else key

    def ancestors(self) -> list[_Node]:
        chain, current = [], self.parent
        while current is not None:
            chain.append(current)
            current = current.parent
        return chain

    def region(self) -> _Node | None:
        """Gives the region (a parallel state's child) this node is in or is, if any."""
        current: _Node | None = self
        while current is not None and current.parent is not None:
            if current.parent.kind == "parallel":
                return current
            current = current.parent
        return None

    def within(self, other: _Node) -> bool:
        return self is other or other in self.ancestors()


def inline_name(reference: str) -> str:
    """Gives the registered function's name an inline reference (`inline:<file>:<line>`)
    is imported as: `inline.<file>.L<line>`."""
    _, _, rest = reference.partition(INLINE_PREFIX)
    stem, _, line = rest.rpartition(":")
    return f"inline.{_safe(stem, 'source')}.L{_UNSAFE.sub('_', line)}"


class _Fatal(Exception):
    """Stops the conversion where going on would only report the same fault again."""


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
                f"{lines_of} (import one with xstate_source.machines and convert_machine)",
                line=machine.line))
        return convert_machine(machine, name, extra)
    return _convert(data, lines, name, None, [])


def convert_machine(machine: Machine, name: str, findings: Sequence[Finding] = ()
                    ) -> Imported:
    """Gives the native definition data of a machine read from source (see
    `xstate_source`); its named delays are those its implementations write as numbers."""
    return _convert(machine.config, machine.lines, name, machine.delays,
                    [*findings, *machine.findings])


def _convert(data: Any, lines: Mapping[str, int], name: str, delays: Mapping[str, int] | None,
             findings: list[Finding]) -> Imported:
    converter = _Converter(lines, name, delays)
    converter.findings.extend(findings)
    try:
        native = converter.run(data)
    except _Fatal:
        native = None
    errors = [f for f in converter.findings if f.severity is Severity.ERROR]
    if errors or native is None:
        raise DefinitionError(errors, name)
    return Imported(format="xstate", data=native, findings=tuple(converter.findings),
                    source=name, functions={})


class _Converter:
    def __init__(self, lines: Mapping[str, int], source: str,
                 delays: Mapping[str, int] | None = None) -> None:
        self.lines = lines
        self.source = source
        #: the named delays of the machine's implementations; None where they are unknown
        #: (a JSON config: they are given in JavaScript, with `.provide()` or `setup()`)
        self.delays = None if delays is None else dict(delays)
        self.findings: list[Finding] = []
        self.ids: dict[str, _Node] = {}
        self.nodes: list[_Node] = []
        self.used: set[str] = set()
        self.states: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.event_names: dict[str, str] = {}   # XState event -> native event
        self.tools: dict[str, dict[str, Any]] = {}
        self.history_via: set[int] = set()      # ids of compounds entered through a history node
        self.direct_to: dict[int, str] = {}     # compound with history -> a location targeting it
        self.error_finals: dict[str | None, str] = {}
        self.compound_after: dict[str, dict[str, Any]] = {}
        self.compound_always: dict[str, list[Any]] = {}
        self.root_on: dict[str, list[Any]] = {}
        self.used_context: set[str] = set()
        self.reactive = False
        self.root: _Node | None = None
        self.flat: dict[int, bool] = {}
        #: while a region's transitions are read into a product: the region and its parallel
        self.product_source: tuple[_Node, _Node] | None = None

    # -- findings --------------------------------------------------------------------------------

    def _line(self, location: str) -> int | None:
        return line_of(self.lines, location)

    def warn(self, code: str, location: str, message: str) -> None:
        self.findings.append(Finding(Severity.WARNING, code, location, message,
                                     line=self._line(location)))

    def error(self, code: str, location: str, message: str) -> None:
        self.findings.append(Finding(Severity.ERROR, code, location, message,
                                     line=self._line(location)))

    def fatal(self, code: str, location: str, message: str) -> _Fatal:
        self.error(code, location, message)
        return _Fatal()

    # -- the whole machine -------------------------------------------------------------------

    def run(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            raise self.fatal("not-a-machine", "", "an XState machine config is a JSON object "
                             f"(the argument of createMachine), got {type(data).__name__}")
        for key in data:
            if key in _TYPING_KEYS:
                self.warn("ignored-key", str(key), f"{key!r} only types or tunes the "
                          "JavaScript; it is left out")
            elif key not in _ROOT_KEYS:
                self.warn("unknown-key", str(key), f"{key!r} is not a key of an XState machine "
                          f"config{did_you_mean(str(key), _ROOT_KEYS)}; it is left out")
        machine_id = data.get("id")
        if machine_id is not None and not isinstance(machine_id, str):
            raise self.fatal("bad-id", "id", f"the machine's id is a string, got {machine_id!r}")
        stem = Path(self.source).name.split(".")[0] if self.source else ""
        workflow = _safe(machine_id or stem or "machine", "machine")
        states = data.get("states")
        if states is not None and not isinstance(states, Mapping):
            raise self.fatal("not-a-state", "states", "`states` is a JSON object of state "
                             f"nodes, got {_json_type(states)}")
        if not states and not any(data.get(k) for k in ("on", "after", "always", "invoke")):
            raise self.fatal("no-states", "states", "the machine has no `states` and takes "
                             "nothing (no on, after, always or invoke); a definition needs at "
                             "least one state")
        root = self._read(data, "", (), "", None, machine_id or "(machine)")
        self._name_all(root)
        self._collect_events()
        self.root = root
        # the root is a native state of its own where it does what a state does: a machine
        # with no `states` (it only takes events), a root timer, a root eventless transition
        wrapped = root.kind in ("parallel", "atomic") or any(
            data.get(k) for k in ("entry", "exit", "after", "always"))
        if wrapped:
            root.native = self._fresh(workflow)
        reactive = self._flat(root) if root.kind == "parallel" else not any(
            c.kind == "final" or self._dead_end(c) for c in root.children)
        self.reactive = reactive
        for key in ("always", "after", "invoke"):
            if data.get(key) and not wrapped:  # a wrapped root is a state: read as one
                self.warn("left-out", key, f"`{key}` on the machine's root is not imported; "
                          "move it to a state")
        if data.get("output") is not None:
            self.warn("left-out", "output", "the machine's `output` is not imported; a native "
                      "run ends with its final state's outcome and context")
        self._emit(root, wrapped)
        self._push_down(root, wrapped)
        self._check_history()
        self._give_always()
        if reactive:
            self._stay_by_self_target()
        self._declare_payloads()
        native: dict[str, Any] = {"name": workflow}
        if data.get("version") is not None:
            native["version"] = str(data["version"])
        if isinstance(data.get("description"), str):
            native["description"] = data["description"]
        context = data.get("context")
        if inline_reference(context) is not None:
            self.warn("left-out", "context", "the initial context is computed by inline "
                      "JavaScript (a function of the input); the run starts with an empty one")
        elif context is not None:
            if isinstance(context, Mapping):
                native["context"] = self._context(context)
            else:
                self.error("bad-context", "context", "the initial context is a JSON object, got "
                           f"{type(context).__name__} (a function of the input is JavaScript)")
        if "output" in self.used_context:
            native.setdefault("context", {}).setdefault("output", None)
        if reactive:
            native["reactive"] = True
        if self.tools:
            native["tools"] = self.tools
        if self.events:
            native["events"] = self.events
        native["states"] = self.states
        return native

    def _context(self, context: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in context.items():
            if inline_reference(value) is not None:
                self.warn("left-out", f"context.{key}", f"context {key!r} starts as the value "
                          f"of inline JavaScript ({_code(value)}); it "
                          "starts as null")
                out[str(key)] = None
            else:
                out[str(key)] = value
        return out

    # -- reading the tree -------------------------------------------------------------------

    def _read(self, config: Any, key: str, path: tuple[str, ...], loc: str,
              parent: _Node | None, machine_id: str) -> _Node:
        if not isinstance(config, Mapping):
            raise self.fatal("not-a-state", loc, f"state {key!r} is a JSON object, got "
                             f"{type(config).__name__}")
        if parent is not None:
            for k in config:
                if k not in _STATE_KEYS:
                    self.warn("unknown-key", f"{loc}.{k}", f"{k!r} is not a key of an XState "
                              f"state{did_you_mean(str(k), _STATE_KEYS)}; it is left out")
        written = config.get("type")
        states = config.get("states")
        if states is not None and not isinstance(states, Mapping):
            raise self.fatal("not-a-state", f"{loc}.states" if loc else "states",
                             "`states` is a JSON object of state nodes")
        if written not in (None, "atomic", "compound", "parallel", "final", "history"):
            raise self.fatal("bad-type", f"{loc}.type" if loc else "type",
                             f"state type {written!r}: expected atomic, compound, parallel, "
                             "final or history")
        kind = str(written) if written in ("parallel", "final", "history") else (
            "compound" if states else "atomic")
        node = _Node(key, path, loc, config, parent, kind)
        self.nodes.append(node)
        default_id = ".".join((machine_id, *path))
        self.ids.setdefault(default_id, node)
        own = config.get("id")
        if isinstance(own, str) and parent is not None:
            if own in self.ids and self.ids[own] is not node:
                self.error("duplicate-id", f"{loc}.id", f"state id {own!r} is used twice")
            self.ids[own] = node
        for tag in ("meta", "tags"):
            if config.get(tag):
                self.warn("left-out", node.at(tag), f"`{tag}` has no native counterpart; it "
                          "is left out")
        for child_key, child in (states or {}).items():
            child_loc = f"{loc}.states.{child_key}" if loc else f"states.{child_key}"
            node.children.append(self._read(child, str(child_key), (*path, str(child_key)),
                                            child_loc, node, machine_id))
        return node

    def _name_all(self, root: _Node) -> None:
        nodes = [n for n in self.nodes if n is not root and n.kind != "history"]
        counts: dict[str, int] = {}
        for node in nodes:
            counts[_safe(node.key)] = counts.get(_safe(node.key), 0) + 1
        for node in nodes:
            candidate = _safe(node.key)
            if counts[candidate] > 1:
                candidate = ".".join(_safe(part) for part in node.path)
            node.native = self._fresh(candidate)

    def _fresh(self, name: str) -> str:
        candidate, count = name, 1
        while candidate in self.used:
            count += 1
            candidate = f"{name}_{count}"
        self.used.add(candidate)
        return candidate

    # -- events ------------------------------------------------------------------------------

    def _collect_events(self) -> None:
        for node in self.nodes:
            on = node.config.get("on")
            if not isinstance(on, Mapping):
                continue
            for event in on:
                event = str(event)
                if _wildcard(event) or event.startswith(_XSTATE_EVENT_PREFIXES):
                    continue
                self._event(event, f"{node.at('on')}.{event}")

    def _event(self, event: str, loc: str) -> str:
        known = self.event_names.get(event)
        if known is not None:
            return known
        native = _safe(event, "event")
        if native.startswith(_RESERVED_PREFIXES):
            native = f"x.{native}"
        base, count = native, 1
        while native in self.events:
            count += 1
            native = f"{base}_{count}"
        spec: dict[str, Any] = {"sources": list(EVENT_SOURCES)}
        if native != event:
            spec["description"] = f"XState event {event!r}"
            self.warn("renamed-event", loc, f"event {event!r} is not a native event name (or "
                      f"uses a reserved prefix); it is imported as {native!r}")
        self.event_names[event] = native
        self.events[native] = spec
        return native

    # -- emitting the states ---------------------------------------------------------------

    def _emit(self, root: _Node, wrapped: bool) -> None:
        self.root = root
        if wrapped:
            self._emit_node(root)
        else:
            if root.config.get("on"):
                # the root's transitions apply everywhere: pushed down to the top-level states
                self.root_on = self._on(root)
            for child in root.children:
                self._emit_node(child)

    def _emit_node(self, node: _Node) -> None:
        config = node.config
        if node.kind == "history":
            self._history_node(node)
            return
        out: dict[str, Any] = {}
        self.states[node.native] = out
        parent = node.parent
        if parent is not None and parent.native:
            out["parent"] = parent.native
        if parent is not None and parent.kind != "parallel" and self._initial(parent) is node:
            out["initial"] = True
        if node is self.root:
            out["initial"] = True
        where = ".".join(node.path) or "(root)"
        description = config.get("description")
        out["description"] = f"XState state {where}" + (
            f": {description}" if isinstance(description, str) and description else "")
        if node.kind == "final":
            self._final(node, out)
        elif self._dead_end(node):
            self.warn("dead-end", node.loc, "nothing leaves this state: XState rests in it "
                      "for good; imported as a final state (outcome success)")
            self._final(node, out)
        else:
            self._moving(node, out)
        if not self._flat(node):
            for child in node.children:
                self._emit_node(child)

    def _dead_end(self, node: _Node) -> bool:
        """Tells whether `node` is a top-level atomic state nothing leaves."""
        if node.kind != "atomic" or node.parent is not self.root or self.root is None or (
                self.root.native):
            return False
        leaves = ("on", "after", "always", "invoke")
        return not any(node.config.get(k) for k in leaves) and not self.root.config.get("on")

    def _initial(self, node: _Node) -> _Node | None:
        initial = node.config.get("initial")
        members = [c for c in node.children if c.kind != "history"]
        if not members:
            return None
        loc = node.at("initial")
        first = not node.initial_read
        node.initial_read = True
        if initial is None:
            if first:
                where = ".".join(node.path) or "(root)"
                self.warn("initial-missing", loc, f"compound state {where} names no "
                          f"`initial`; its first child {members[0].key!r} is taken")
            return members[0]
        if isinstance(initial, Mapping):
            initial = initial.get("target")
        if isinstance(initial, str):
            for child in members:
                if child.key == initial.lstrip("."):
                    return child
        if first:
            keys = [c.key for c in members]
            self.error("unknown-target", loc, f"initial state {initial!r} is not a child "
                       f"({', '.join(keys)}){did_you_mean(str(initial), keys)}")
        return None

    def _final(self, node: _Node, out: dict[str, Any]) -> None:
        config = node.config
        parent = node.parent
        for key in ("on", "after", "always", "invoke"):
            if config.get(key):
                self.warn("left-out", node.at(key), f"a final state takes nothing: its `{key}` "
                          "is left out")
        entry = self._actions(config.get("entry"), node.at("entry"))
        exits = self._actions(config.get("exit"), node.at("exit"))
        nested = parent is not None and parent is not self.root and node.region() is not parent
        if nested and parent is not None and parent.config.get("onDone") is not None:
            # XState raises done.state.<parent> at once: a choice taking the parent's onDone
            out["type"] = "choice"
            always = self._transitions(parent, parent.config["onDone"], parent.at("onDone"))
            out["always"] = always
            if always and all("guard" in t for t in always):
                self.warn("done-guarded", parent.at("onDone"), "every onDone transition is "
                          "guarded: when none holds XState rests in the final state, the "
                          "native choice rejects the event that led there")
            if config.get("output") is not None:
                self.warn("left-out", node.at("output"), "the output of a nested final state "
                          "is not imported")
        else:
            out["type"] = "final"
            out["outcome"] = "success"
            if nested:
                self.warn("nested-final", node.loc, "this final state's parent has no onDone: "
                          "XState rests in it, the native run (or region) ends there")
            output = config.get("output")
            if output is not None:
                literal = _literal(output)
                if literal is None:
                    self.warn("left-out", node.at("output"), "the output is not a literal "
                              "JSON value the native assign can write; it is left out")
                else:
                    entry.append({"assign": {"output": literal}})
                    self.used_context.add("output")
                    self.warn("output-in-context", node.at("output"), "the final state's "
                              "output is stored in context.output as the state is entered")
        if entry:
            out["entry"] = entry
        if exits:
            out["exit"] = exits

    def _moving(self, node: _Node, out: dict[str, Any]) -> None:
        config = node.config
        kind = node.kind
        on = self._on(node)
        if kind == "parallel" and self._flat(node):
            self._product(node, out)
        elif kind == "parallel":
            out["type"] = "parallel"
            self._parallel(node, out, on)
        if config.get("onDone") is not None and kind == "compound":
            if not any(c.kind == "final" for c in node.children):
                self.warn("done-never", node.at("onDone"), "this compound state has no final "
                          "child, so its onDone is never taken; it is left out")
            elif node.region() is node:
                self.warn("left-out", node.at("onDone"), "a region's onDone is not imported: "
                          "a region ends in its final state and the parallel state's onDone "
                          "joins them")
        elif config.get("onDone") is not None and kind == "atomic":
            self.warn("left-out", node.at("onDone"), "an atomic state is never done; its "
                      "onDone is left out")
        if kind == "atomic" and config.get("invoke") is not None:
            self._invoke(node, out, on)
        elif config.get("invoke") is not None:
            self.error("invoke-compound", node.at("invoke"), "an invoke on a compound or "
                       "parallel state has no native counterpart (a step runs in a leaf "
                       "state); move it to a child state")
        if on:
            out["on"] = on
        entry = self._actions(config.get("entry"), node.at("entry"))
        exits = self._actions(config.get("exit"), node.at("exit"))
        if entry:
            out["entry"] = entry
        if exits:
            out["exit"] = exits
        always = config.get("always")
        if always is not None:
            if kind == "parallel" or self._flat(node):
                self.error("always-compound", node.at("always"), "`always` on a parallel "
                           "state has no native counterpart; put it on its regions' states")
            elif kind == "compound":
                transitions = self._always(node, always)
                self.compound_always[node.native] = transitions
                self.warn("always-compound", node.at("always"), "a compound state's eventless "
                          "transitions are tried, as XState tries them, after those of the "
                          "active child: natively they are given to each of its states that "
                          "is not final, after the state's own")
            else:
                transitions = self._always(node, always)
                out["always"] = transitions
                if not on and not config.get("after") and config.get("invoke") is None and any(
                        "guard" not in t for t in transitions):
                    out["type"] = "choice"
        if config.get("after") is not None:
            self._after(node, out)
        if (self.reactive and kind == "atomic" and "type" not in out and "step" not in out
                and "after" not in out and on):
            out["type"] = "wait"  # a reactive machine's state waits for events, no timeout

    def _on(self, node: _Node) -> dict[str, list[Any]]:
        written = node.config.get("on")
        loc = node.at("on")
        if written is None:
            return {}
        if not isinstance(written, Mapping):
            self.error("bad-on", loc, "`on` is a JSON object of event names")
            return {}
        on: dict[str, list[Any]] = {}
        wildcards: list[tuple[str, Any]] = []
        for event, transitions in written.items():
            event = str(event)
            where = f"{loc}.{event}"
            if _wildcard(event):
                wildcards.append((event, transitions))
                continue
            if event.startswith(_XSTATE_EVENT_PREFIXES):
                self.warn("left-out", where, f"{event!r} is an event XState raises itself; "
                          "the native machine never sends it, so this transition is left out "
                          "(use onDone / onError)")
                continue
            on[self._event(event, where)] = self._transitions(node, transitions, where)
        explicit = set(on)
        for event, transitions in wildcards:
            where = f"{loc}.{event}"
            prefix = event[:-1]
            matched = [native for xs, native in self.event_names.items()
                       if xs.startswith(prefix) and native not in explicit]
            if not matched:
                self.warn("wildcard-empty", where, f"no declared event matches {event!r} "
                          "that this state does not handle itself; it is left out")
                continue
            converted = self._transitions(node, transitions, where)
            for native in matched:
                on[native] = converted
            self.warn("wildcard", where, f"{event!r} is imported as one transition for each "
                      f"event it matches ({', '.join(sorted(matched))}); an event no state names "
                      "is not declared, so it is never sent")
        return on

    # -- transitions ---------------------------------------------------------------------------

    def _always(self, node: _Node, always: Any) -> list[Any]:
        """Gives a state's eventless transitions, refusing one without a target."""
        transitions = self._transitions(node, always, node.at("always"))
        for index, transition in enumerate(transitions):
            if "target" not in transition:
                self.error("always-internal", _item(node.at("always"), index, always),
                           "an eventless transition without a target runs its actions again "
                           "on every change; the native format refuses it")
        return transitions

    def _transitions(self, node: _Node, written: Any, loc: str) -> list[Any]:
        items = written if isinstance(written, list) else [written]
        out: list[Any] = []
        for index, item in enumerate(items):
            where = _item(loc, index, written)
            one = self._transition(node, item, where)
            if one is not None:
                out.append(one)
        return out

    def _transition(self, node: _Node, item: Any, loc: str) -> dict[str, Any] | None:
        if item is None:
            return {}  # a forbidden transition: the event is taken and nothing happens
        if isinstance(item, str):
            found = self._resolve(node, item, loc)
            if found is None:
                return None
            if self._stays(node, found, False, loc):
                return {}
            target = self._target(node, found, loc)
            return None if target is None else {"target": target}
        if not isinstance(item, Mapping):
            self.error("bad-transition", loc, "a transition is a target name, an object "
                       f"{{target, guard, actions}} or a list of them, got {item!r}")
            return None
        if not item:
            self.warn("empty-transition", loc, "an empty transition object takes the event "
                      "and does nothing; if it was written with a guard or actions, they were "
                      f"lost{_STRINGIFIED}")
        for key in item:
            if key not in _TRANSITION_KEYS:
                self.warn("unknown-key", f"{loc}.{key}", f"{key!r} is not a key of an XState "
                          f"transition{did_you_mean(str(key), _TRANSITION_KEYS)}; it is left out")
        out: dict[str, Any] = {}
        reenter = item.get("reenter") is True
        target = item.get("target")
        if isinstance(target, list):
            if len(target) != 1:
                self.error("multiple-targets", f"{loc}.target", "a transition to several "
                           "targets at once has no native counterpart")
                return None
            target = target[0]
        if target is not None:
            if not isinstance(target, str):
                self.error("bad-target", f"{loc}.target", f"a target is a string, got {target!r}")
                return None
            found = self._resolve(node, target, f"{loc}.target")
            if found is None:
                return None
            if not self._stays(node, found, reenter, f"{loc}.target"):
                resolved = self._target(node, found, f"{loc}.target")
                if resolved is None:
                    return None
                out["target"] = resolved
        guard_key = "guard" if "guard" in item else "cond" if "cond" in item else None
        if guard_key == "cond":
            self.warn("v4-key", f"{loc}.cond", "`cond` is XState v4's name for `guard`; read "
                      "as the guard")
        if guard_key is not None and item[guard_key] is not None:
            guard = self._guard(item[guard_key], f"{loc}.{guard_key}")
            if guard is not None:
                out["guard"] = guard
        actions = self._actions(item.get("actions"), f"{loc}.actions")
        if actions:
            out["actions"] = actions
        if "internal" in item:
            self.warn("reenter", f"{loc}.internal", "`internal` is XState v4's; the native "
                      "machine chooses what is left and entered as SCXML does (a transition to "
                      "its own compound state leaves and enters it again); it is not imported")
        if isinstance(item.get("description"), str):
            out["description"] = item["description"]
        return out

    def _stays(self, node: _Node, found: _Node, reenter: bool, loc: str) -> bool:
        """Tells whether a transition from `node` to `found` stays in `node`, as XState v5's
        default `reenter: false` has it: to the atomic state itself, it is natively internal
        (no target: actions run, the state is neither left nor entered, its step and timer
        kept). To a compound or parallel state itself or a state below, XState leaves and
        enters only the states below the source, which no native transition says: imported
        as today, warned."""
        if reenter:
            return False
        if found is node and node.kind == "atomic":
            return True
        if found.within(node) and (node is not self.root or self.root.native):
            self.warn("reenters", loc, f"XState v5 (no `reenter: true`) does not leave "
                      f"{'.'.join(node.path) or 'the root'} for this target, so its entry and "
                      "exit do not run again nor its invoke restart; natively the transition "
                      "leaves and enters it, so its entry and exit actions re-run")
        return False

    def _target(self, node: _Node, found: _Node, loc: str) -> Any:
        if self.product_source is not None:
            region, parallel = self.product_source
            if found.parent is region:
                return ("region", found.key)
            if found.within(parallel):
                self.error("product-target", loc, "in a parallel state imported as the product "
                           "of its regions, a transition moves within its own region or leaves "
                           "the parallel state")
                return None
            self._check_scope(parallel, found, loc)
            return found.native
        if found is self.root and not self.root.native:
            self.error("root-target", loc, "the machine's root is not a state of the native "
                       "definition; target its initial state instead")
            return None
        if found.kind == "history":
            compound = found.parent
            if compound is None or compound.kind != "compound":
                self.error("history-shape", loc, "a history state belongs in a compound state")
                return None
            self.history_via.add(id(compound))
            found = compound
        elif found.config.get("states") and any(
                c.kind == "history" for c in found.children) and not loc.startswith(
                    node.at("after")):  # a native timer enters a compound's initial state
            self.direct_to.setdefault(id(found), loc)
        self._check_scope(node, found, loc)
        return found.native

    def _resolve(self, node: _Node, text: str, loc: str) -> _Node | None:
        body = text[1:] if text.startswith(("#", ".")) else text
        if "" in body.split("."):
            self.error("bad-target", loc, f"target {text!r} has an empty name in its path: "
                       "XState writes a child '.child', a sibling 'name', any state "
                       "'#id.path'; '.' and '..' name no state")
            return None
        if text.startswith("#"):
            reference = text[1:]
            head, rest = reference, ""
            while head not in self.ids and "." in head:
                head, _, tail = head.rpartition(".")
                rest = f"{tail}.{rest}" if rest else tail
            base = self.ids.get(head)
            if base is None:
                self.error("unknown-target", loc, f"no state has the id {reference!r}"
                           f"{did_you_mean(reference, self.ids)}")
                return None
            return self._descend(base, rest, text, loc)
        if text.startswith("."):
            return self._descend(node, text[1:], text, loc)
        if node.parent is None:
            self.error("unknown-target", loc, f"target {text!r} on the machine's root: XState "
                       f"resolves a bare target next to the state, and the root has no "
                       f"siblings; did you mean '.{text}'?")
            return None
        return self._descend(node.parent, text, text, loc)

    def _descend(self, base: _Node, path: str, text: str, loc: str) -> _Node | None:
        current = base
        for part in [p for p in path.split(".") if p] if path else []:
            match = next((c for c in current.children if c.key == part), None)
            if match is None:
                keys = [c.key for c in current.children]
                where = ".".join(current.path) or "the machine's root"
                self.error("unknown-target", loc, f"target {text!r} does not exist: {where} "
                           f"has no child {part!r}{did_you_mean(part, keys)}")
                return None
            current = match
        return current

    def _check_scope(self, source: _Node, target: _Node, loc: str) -> None:
        region = source.region()
        there = target.region()
        if region is there and target is not region:
            return
        if region is None and there is None:
            return
        if region is not None and target is not region and target.within(region):
            return
        self.error("leaves-region", loc, "the native machine leaves a parallel state's region "
                   "only through the region's final states (joined by the parallel state's "
                   "onDone), and enters a region only through its initial state; this "
                   "transition crosses a region's boundary")

    def _guard(self, guard: Any, loc: str) -> str | dict[str, str] | None:
        if inline_reference(guard) is not None:
            translated = self._translated(guard, loc, "guard")
            if translated is not None:
                return translated
            return {"function": self._inline(guard, loc, "guard")}
        if isinstance(guard, Mapping):
            kind = guard.get("type")
            if kind in _COMBINATORS:
                name = self._combined_guard(guard, loc)
                return None if name is None else {"function": name}
            if isinstance(kind, str) and kind.startswith("xstate."):
                self.error("guard-combinator", loc, f"the built-in guard {kind!r} (stateIn) "
                           "has no native counterpart: register one function that decides "
                           "it and name it")
                return None
            if not isinstance(kind, str):
                keys = ", ".join(sorted(str(k) for k in guard)) or "none"
                self.error("bad-guard", loc, "a guard object names its guard in a string "
                           f"`type` ({{type: 'isValid', params}}); this one has no `type` "
                           f"(keys: {keys}){_STRINGIFIED}")
                return None
            if guard.get("params") is not None:
                self.warn("params-left-out", f"{loc}.params", "a registered guard is called "
                          "with (context, event); its params are left out")
            guard = kind
        if not isinstance(guard, str):
            self.error("bad-guard", loc, "a guard is a name (a string) or an object {type, "
                       f"params}}, got the {_json_type(guard)} {guard!r}")
            return None
        named = self._named(guard, loc, "guard")
        return None if named is None else {"function": named}

    def _named(self, text: str, loc: str, what: str) -> str | None:
        """Gives the native name of a guard, action or actor XState names `text` (made safe
        where XState's name is any text, `'save dir'`), or None for code."""
        if _NAME.match(text):
            return text
        if _CODE.search(text) or not text.strip():
            self.error("javascript", loc, f"{what} {text[:60]!r} looks like JavaScript; a "
                       f"config holds the {what}'s name, and its code is registered in Python "
                       "(nothing is evaluated)")
            return None
        native = _safe(text.strip(), what)
        self.warn("renamed", loc, f"{what} name {text!r} is not a native name (letters, "
                  f"digits, _ . -, not starting with a digit); it is imported as {native!r}")
        return native

    def _actions(self, written: Any, loc: str) -> list[dict[str, Any]]:
        if written is None:
            return []
        items = written if isinstance(written, list) else [written]
        out = []
        for index, item in enumerate(items):
            out.extend(self._action(item, _item(loc, index, written)))
        return out

    def _action(self, action: Any, loc: str) -> list[dict[str, Any]]:
        """Gives the native actions of one XState action (an assign may give two: its
        literal values, then a registered function per computed one)."""
        params = None
        if inline_reference(action) is not None:
            return [{"function": self._inline(action, loc, "action")}]
        if action is None:
            self.error("dropped-function", loc, f"an action is null{_STRINGIFIED}")
            return []
        if isinstance(action, Mapping):
            kind = action.get("type")
            if kind in _ASSIGN_TYPES:
                return self._assign(action, loc)
            params = action.get("params")
            action = kind
        if not isinstance(action, str):
            self.error("bad-action", loc, "an action is a name (a string) or an object "
                       f"{{type, params}}, got the {_json_type(action)} {action!r}")
            return []
        if action.startswith("xstate."):
            self.warn("left-out", loc, f"the built-in action {action!r} (raise, sendTo, log, "
                      "cancel, stop, emit, ...) has no native counterpart; it is left out")
            return []
        named = self._named(action, loc, "action")
        if named is None:
            return []
        if params is not None:
            self.warn("params-left-out", f"{loc}.params", "a registered action is called with "
                      "(context, event); its params are left out")
        return [{"function": named}]

    def _inline(self, reference: Any, loc: str, what: str, gives: str = "") -> str:
        """Gives the registered function's name an inline function is imported as, and warns
        where it is written."""
        name = inline_name(str(reference["type"]))
        code = str(reference.get("code", ""))
        shown = code if len(code) <= 80 else f"{code[:77]}..."
        self.warn("inline-function", loc, f"the {what} is inline JavaScript ({shown}); it is "
                  f"imported as the registered function {name!r}{gives}: write what it does "
                  "in Python (@register_function or functions=)")
        return name

    def _translated(self, reference: Any, loc: str, what: str) -> str | None:
        """Gives the native expression of an inline function that is one expression the
        native language says the same way (`({ context }) => context.n > 0`), warned with
        both texts; None for any other."""
        code = str(reference.get("code", ""))
        native = native_expression(code)
        if native is None or len(native) > _TRANSLATED_MAX:
            return None
        self.warn("inline-translated", loc, f"the {what} is inline JavaScript ({_code(reference)}"
                  f"); it is translated into the native expression {native!r} (XState's "
                  "`event.x` is `event.payload.x`; `!`, `&&`, `||` test truth as Python does, "
                  "an empty list or object is false)")
        return native

    def _combined_guard(self, guard: Mapping[str, Any], loc: str) -> str | None:
        """Gives the name of the registered function an XState guard combinator (`not`,
        `and`, `or` of named guards) is imported as: `not.isValid`, `or.hitWall.hitTail`."""
        kind = str(guard["type"]).removeprefix("xstate.")
        guards = guard.get("guards")
        if not guards:
            self.error("guard-combinator", loc, f"{kind}(...) names no guards (`guards`: a "
                       "list of named guards)")
            return None
        names: list[str] = []
        for index, inner in enumerate(guards if isinstance(guards, list) else [guards]):
            where = f"{loc}.guards[{index}]"
            if isinstance(inner, Mapping) and isinstance(inner.get("type"), str) and (
                    inline_reference(inner) is None):
                inner = inner["type"]
            if not isinstance(inner, str):
                self.error("guard-combinator", where, f"{kind}(...) is imported as one "
                           "registered function when it combines named guards; this one is "
                           f"the {_json_type(inner)} {inner!r}")
                return None
            named = self._named(inner, where, "guard")
            if named is None:
                return None
            names.append(named)
        name = ".".join((kind, *names))
        self.warn("guard-combinator", loc, f"{kind}({', '.join(map(repr, names))}) has no "
                  f"native counterpart; it is imported as the registered function {name!r}, "
                  f"which decides it from those guards")
        return name

    def _assign(self, action: Mapping[str, Any], loc: str) -> list[dict[str, Any]]:
        key = "assignment" if "assignment" in action else "params"
        assignment = action.get(key)
        if inline_reference(assignment) is not None:
            return [{"function": self._inline(assignment, loc, "assign")}]
        if not isinstance(assignment, Mapping):
            self.warn("left-out", loc, "an assign whose value is not a JSON object of literal "
                      "values (a function) is left out")
            return []
        out: dict[str, str] = {}
        computed: list[dict[str, Any]] = []
        for name, value in assignment.items():
            where = f"{loc}.{key}.{name}"
            literal = _literal(value)
            translated = self._translated(value, where, f"value assigned to {name!r}") if (
                inline_reference(value) is not None and _NAME.match(str(name))) else None
            if translated is not None:
                out[str(name)] = translated
            elif inline_reference(value) is not None:
                function = self._inline(value, where, f"value assigned to {name!r}",
                                        f", which returns {{{name!r}: <the new value>}}")
                computed.append({"function": function})
            elif not _NAME.match(str(name)):
                self.warn("left-out", where, f"context key {name!r} is not a native name; "
                          "this assignment is left out")
            elif literal is None:
                self.warn("left-out", where, "only literal values (numbers, strings, booleans, "
                          "null, lists of them) are imported; this assignment is left out")
            else:
                out[str(name)] = literal
        return ([{"assign": out}] if out else []) + computed

    # -- invoke, after, parallel, history ----------------------------------------------------

    def _invoke(self, node: _Node, out: dict[str, Any], on: dict[str, list[Any]]) -> None:
        loc = node.at("invoke")
        invoke = node.config["invoke"]
        if isinstance(invoke, list):
            for index in range(1, len(invoke)):
                self.warn("left-out", f"{loc}[{index}]", "a native state runs one step; this "
                          "further invoke is left out")
            if not invoke:
                return
            invoke, loc = invoke[0], f"{loc}[0]"
        if not isinstance(invoke, Mapping):
            self.error("bad-invoke", loc, "an invoke is a JSON object {src, input, onDone, "
                       "onError}")
            return
        for key in invoke:
            if key not in _INVOKE_KEYS:
                self.warn("unknown-key", f"{loc}.{key}", f"{key!r} of an invoke is not "
                          "imported")
        src = invoke.get("src")
        if inline_reference(src) is not None:
            src = self._inline(src, f"{loc}.src", "invoked actor's logic")
        elif isinstance(src, Mapping) and isinstance(src.get("type"), str):
            src = src["type"]
        if not isinstance(src, str):
            hint = _STRINGIFIED if src is None or src == {} else ""
            self.error("inline-actor", f"{loc}.src", "the invoked actor must be named (its "
                       "logic is JavaScript); an inline actor in a JSON config cannot be "
                       f"imported{hint}")
            return
        tool = self._named(src, f"{loc}.src", "actor")
        if tool is None:
            return
        # each time the state is entered its actor is started anew: one logical action per
        # call (its idempotency key), as a Step Functions task is, so that a state entered
        # again (a retry, a poll) is no duplicate effect, and a call applied twice still is
        self.tools.setdefault(tool, {"description": f"XState actor {src!r}", "action": "call"})
        step: dict[str, Any] = {"tool": tool, "retry": {"attempts_max": 1}}
        given = invoke.get("input")
        translated = native_object(str(given.get("code", ""))) if (
            isinstance(given, Mapping) and inline_reference(given) is not None) else None
        if translated is not None and not any("event" in text for text in translated.values()):
            step["input"] = {key: f"={text}" for key, text in translated.items()}
            self.warn("inline-translated", f"{loc}.input", f"the input is inline JavaScript "
                      f"({_code(given)}); it is translated into native expressions of the "
                      f"context, key by key ({', '.join(sorted(translated))})")
        elif inline_reference(given) is not None:
            self.warn("left-out", f"{loc}.input", "the input is computed by inline JavaScript "
                      f"({_code(given)}); the step is sent no input")
        elif isinstance(given, Mapping):
            step["input"] = self._step_input(given, f"{loc}.input")
        elif given is not None:
            self.warn("left-out", f"{loc}.input", "only a JSON object of literal values is "
                      "imported as the step's input")
        out["step"] = step
        for key, event in (("onDone", "step.succeeded"), ("onError", "step.failed")):
            written = invoke.get(key)
            if written is None:
                continue
            transitions = self._transitions(node, written, f"{loc}.{key}")
            for index, transition in enumerate(transitions):
                if "target" not in transition:
                    self.error("stays-after-step", _item(f"{loc}.{key}", index, written),
                               f"an {key} with no target stays in the state once its actor is "
                               "done; the native step's result must leave it: give a target")
            on[event] = transitions
            if transitions and all("guard" in t for t in transitions):
                # no guard holding, XState takes nothing: on an error it stops with it, on
                # done it stays; natively the step's result must still leave the state
                if key == "onError":
                    failed = self._error_final(node)
                    transitions.append({"target": failed})
                    self.warn("on-error-guarded", f"{loc}.{key}", "every onError transition "
                              "is guarded: when none holds XState stops with the error; "
                              f"imported as a last move to final state {failed!r} (outcome "
                              "failure)")
                else:
                    rest = self._rest(node, out, on, "done")
                    transitions.append({"target": rest})
                    self.warn("on-done-guarded", f"{loc}.{key}", "every onDone transition is "
                              "guarded: when none holds XState stays in the state; imported as "
                              f"a last move to {rest!r}, which takes the same events")
        if invoke.get("onError") is None:
            failed = self._error_final(node)
            on["step.failed"] = [{"target": failed}]
            self.warn("no-on-error", loc, f"no onError: an XState machine stops with an error "
                      f"when its actor fails; imported as a move to final state {failed!r} "
                      "(outcome failure)")
        if invoke.get("onDone") is None:
            rest = self._rest(node, out, on, "done")
            on["step.succeeded"] = [{"target": rest}]
            self.warn("no-on-done", loc, f"no onDone: XState stays in the state once its actor "
                      f"is done; imported as a move to {rest!r}, which takes the same events")

    def _error_final(self, node: _Node) -> str:
        """Gives the failure final state an actor's unhandled error ends `node`'s machine
        (or region) in, made on first use."""
        region = node.region()
        scope = region.native if region is not None else None
        failed = self.error_finals.get(scope)
        if failed is None:
            failed = self._fresh("xstate_error" if scope is None else f"{scope}.error")
            self.error_finals[scope] = failed
            spec: dict[str, Any] = {"type": "final", "outcome": "failure",
                                    "description": "the XState machine's error: an actor "
                                                   "failed and nothing took its error"}
            if scope is not None:
                spec["parent"] = scope
            self.states[failed] = spec
        return failed

    def _step_input(self, given: Mapping[str, Any], loc: str) -> dict[str, Any]:
        """Gives a step's literal input; a value computed by inline JavaScript is left out."""
        out: dict[str, Any] = {}
        for key, value in given.items():
            if inline_reference(value) is not None:
                self.warn("left-out", f"{loc}.{key}", f"input {key!r} is computed by inline "
                          f"JavaScript ({_code(value)}); it is left out")
            else:
                out[str(key)] = _input_value(value)
        return out

    def _rest(self, node: _Node, out: dict[str, Any], taken: Mapping[str, list[Any]],
              suffix: str) -> str:
        """Gives a new sibling of `node` that rests, taking `node`'s events (a step's result
        or a join must leave the state it ends)."""
        name = self._fresh(f"{node.native}.{suffix}")
        spec: dict[str, Any] = {"description": f"XState state {'.'.join(node.path)}, {suffix}"}
        if "parent" in out:
            spec["parent"] = out["parent"]
        on = {e: list(t) for e, t in taken.items() if not e.startswith("step.")}
        if on:
            spec["on"] = on
            if self.reactive:
                spec["type"] = "wait"
        self.states[name] = spec
        return name

    def _after(self, node: _Node, out: dict[str, Any]) -> None:
        loc = node.at("after")
        written = node.config["after"]
        if not isinstance(written, Mapping) or not written:
            self.error("bad-after", loc, "`after` is a JSON object of delays in ms")
            return
        delays: list[tuple[int, str, Any]] = []
        for key, transitions in written.items():
            where = f"{loc}.{key}"
            ms = self._delay(str(key), where)
            if ms is None:
                continue
            if ms < 0:
                self.error("bad-after", where, f"a delay is zero or more ms, got {ms}")
                continue
            delays.append((ms, where, transitions))
        if not delays:
            return
        delays.sort(key=lambda d: d[0])
        ms, where, transitions = delays[0]
        for other, other_where, _ in delays[1:]:
            self.warn("after-several", other_where, f"a native state has one timer: the "
                      f"shortest delay ({ms} ms) is kept and this one ({other} ms) is left out")
        converted = self._transitions(node, transitions, where)
        if not converted:
            return
        if len(converted) == 1 and set(converted[0]) <= {"target"} and "target" in converted[0]:
            target = converted[0]["target"]
        else:
            target = self._fresh(f"{node.native}.after_{ms}")
            for index, transition in enumerate(converted):
                if "target" not in transition:
                    self.error("after-internal", _item(where, index, transitions), "a delayed "
                               "transition without a target has no native counterpart (a "
                               "native timer leaves its state)")
            choice: dict[str, Any] = {"type": "choice", "always": converted,
                                      "description": f"XState state {'.'.join(node.path)}, "
                                                     f"after {ms} ms"}
            if "parent" in out:
                choice["parent"] = out["parent"]
            self.states[target] = choice
            if all("guard" in t for t in converted):
                self.warn("after-guarded", where, "every delayed transition is guarded: when "
                          "none holds, the native timer's event is rejected (XState ignores it)")
        after = {"delay": f"{ms}ms", "target": target}
        if node.kind == "compound" or self._flat(node):
            self.warn("after-compound", loc, "a compound state's timer runs while any child is "
                      "active; the native format times leaves, so it is given to each child "
                      "without a timer of its own, and restarts as the child changes")
            self.compound_after[node.native] = after
        else:
            out["after"] = after

    def _delay(self, key: str, loc: str) -> int | None:
        """Gives a delay in ms as XState runs it: a number; a name the machine's
        implementations give as a number (`delays: {PT15M: 900000}`); a name they do not
        give, read from source, 0 (XState raises the timer's event at once); in a JSON config,
        whose implementations are unknown, an ISO 8601 duration as its name says (`PT15M`,
        `P1DT2H`), warned, and any other name refused."""
        if re.fullmatch(r"-?\d+", key):
            return int(key)
        if self.delays is not None and key in self.delays:
            return self.delays[key]
        if self.delays is not None:
            self.warn("delay-undefined", loc, f"delay {key!r} is named, and the machine's "
                      "implementations (setup or createMachine's second argument) give it no "
                      "number: XState then raises the timer's event at once, so it is "
                      "imported as 0 ms (give it in `delays` if it is provided elsewhere)")
            return 0
        iso = _ISO_DURATION.fullmatch(key)
        if iso is not None and any(iso.groups()):
            weeks, days, hours, minutes, seconds = (float(g) if g else 0.0
                                                    for g in iso.groups())
            total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
            ms = round(total * 1000)
            self.warn("iso-delay", loc, f"delay {key!r} is read as the ISO 8601 duration its "
                      f"name says ({ms} ms); XState itself reads no durations: it looks the "
                      "name up in the machine's `delays` and, finding none, fires at once")
            return ms
        if key.startswith("P"):
            self.error("named-delay", loc, f"delay {key!r} is not an ISO 8601 duration "
                       "XState reads (P[nW][nD][T[nH][nM][nS]], no years or months)")
        else:
            self.error("named-delay", loc, f"delay {key!r} is named and its value is not "
                       "written as a number where the machine is set up (`delays: "
                       f"{{{key}: 5000}}` in setup or createMachine's second argument: a "
                       "function there is JavaScript); write it in ms")
        return None

    def _flat(self, node: _Node) -> bool:
        """Tells whether parallel state `node` is imported as the product of its regions:
        no region ever ends, and each is a flat set of states that only take events."""
        if node.kind != "parallel":
            return False
        known = self.flat.get(id(node))
        if known is not None:
            return known
        regions = [r for r in node.children if r.kind != "history"]
        flat = bool(regions) and all(
            r.kind == "compound" and not _has_final(r)
            and set(r.config) <= {"initial", "states", "description"}
            and all(c.kind == "atomic" and set(c.config) <= {"on", "description"}
                    for c in r.children)
            for r in regions)
        size = 1
        for region in regions:
            size *= max(len(region.children), 1)
        flat = flat and size <= _PRODUCT_MAX
        self.flat[id(node)] = flat
        return flat

    def _product(self, node: _Node, out: dict[str, Any]) -> None:
        """Writes parallel state `node`, whose regions never end, as one compound state whose
        children are the combinations of its regions' states: an event moves the one region
        that takes it, the others keep their state."""
        regions = [r for r in node.children if r.kind != "history"]
        for history in (c for c in node.children if c.kind == "history"):
            self.warn("left-out", history.loc, "history of a parallel state is not imported")
        takes: dict[str, _Node] = {}
        moves: list[dict[str, dict[str, list[Any]]]] = []   # per region: state -> on
        for region in regions:
            per_state: dict[str, dict[str, list[Any]]] = {}
            for state in region.children:
                on: dict[str, list[Any]] = {}
                converted = self._region_on(state, region, node)
                for event, transitions in converted.items():
                    other = takes.setdefault(event, region)
                    if other is not region:
                        self.error("product-conflict", f"{state.at('on')}.{event}",
                                   f"regions {other.key!r} and {region.key!r} both take "
                                   f"{event!r}: a parallel state whose regions never end is "
                                   "imported as the product of its regions, which needs each "
                                   "event taken by one region")
                    on[event] = transitions
                per_state[state.key] = on
            moves.append(per_state)
        combos: list[tuple[str, ...]] = [()]
        for region in regions:
            combos = [(*combo, c.key) for combo in combos for c in region.children]
        initial = tuple((self._initial(r) or r.children[0]).key for r in regions)
        keys = [r.key for r in regions]

        def name(combo: tuple[str, ...]) -> str:
            return f"{node.native}." + ".".join(
                f"{_safe(r)}_{_safe(c)}" for r, c in zip(keys, combo, strict=True))

        names = {combo: self._fresh(name(combo)) for combo in combos}
        for combo in combos:
            spec: dict[str, Any] = {"parent": node.native, "description": "XState states " + (
                ", ".join(".".join((*r.path, c)) for r, c in zip(regions, combo, strict=True)))}
            if combo == initial:
                spec["initial"] = True
            on_out: dict[str, list[Any]] = {}
            for index, (key, per_state) in enumerate(zip(combo, moves, strict=True)):
                for event, transitions in per_state[key].items():
                    on_out[event] = [self._combined(t, combo, index, names)
                                     for t in transitions]
            if on_out:
                spec["on"] = on_out
                if self.reactive:
                    spec["type"] = "wait"
            self.states[names[combo]] = spec
        self.warn("parallel-product", node.loc, f"no region of this parallel state ever ends, "
                  "and a native parallel state joins its regions by their final states: it is "
                  f"imported as one compound state whose {len(combos)} children are the "
                  "combinations of its regions' states (an event moves the region that takes "
                  "it)")
        if node.config.get("onDone") is not None:
            self.warn("done-never", node.at("onDone"), "no region ever ends, so this onDone is "
                      "never taken; it is left out")

    def _region_on(self, state: _Node, region: _Node, parallel: _Node
                   ) -> dict[str, list[Any]]:
        """Gives the transitions of a state of a region taken into a product, each target
        as ("region", key) within the region or the native name of a state outside."""
        written = state.config.get("on")
        if not isinstance(written, Mapping):
            return {}
        saved, self.product_source = self.product_source, (region, parallel)
        try:
            return self._on(state)
        finally:
            self.product_source = saved

    def _combined(self, transition: dict[str, Any], combo: tuple[str, ...], index: int,
                  names: Mapping[tuple[str, ...], str]) -> dict[str, Any]:
        target = transition.get("target")
        if isinstance(target, tuple):
            moved = (*combo[:index], target[1], *combo[index + 1:])
            return {**transition, "target": names[moved]}
        return dict(transition)

    def _parallel(self, node: _Node, out: dict[str, Any], on: dict[str, list[Any]]) -> None:
        for region in node.children:
            if region.kind == "history":
                continue
            if region.kind != "compound":
                self.error("region-shape", region.loc, "a region of a parallel state is, "
                           "natively, a compound state with child states; this one is "
                           f"{region.kind}")
            elif not _has_final(region):
                self.error("region-never-final", region.loc, "this region has no final "
                           "state: a native parallel state joins its regions when each has "
                           "reached a final state, so a region that never ends cannot be "
                           "imported (give it a final state, or make the regions one "
                           "compound state)")
        done = node.config.get("onDone")
        if done is not None:
            out["done"] = self._transitions(node, done, node.at("onDone"))
        elif node is self.root:
            final = self._fresh("done")
            self.states[final] = {"type": "final", "outcome": "success",
                                  "description": "the XState machine is done: every region "
                                                 "is final"}
            out["done"] = final
        else:
            rest = self._rest(node, out, on, "done")
            out["done"] = rest
            self.warn("no-on-done", node.loc, f"no onDone: once every region is final XState "
                      f"rests in the parallel state; imported as a move to {rest!r}, which "
                      "takes the same events")

    def _history_node(self, node: _Node) -> None:
        parent = node.parent
        kind = node.config.get("history", "shallow")
        if kind not in ("shallow", "deep"):
            self.error("bad-history", node.at("history"), f"history is shallow or deep, got "
                       f"{kind!r}")
            return
        if parent is None or parent.kind != "compound" or (
                parent is self.root and not parent.native):
            self.error("history-shape", node.loc, "a history state belongs in a compound state")
            return
        spec = self.states.get(parent.native)
        if spec is None:
            return
        if spec.get("history") not in (None, kind):
            self.warn("history-several", node.loc, "the native history is one attribute of the "
                      "compound state: the deep one is kept")
            kind = "deep"
        spec["history"] = kind
        target = node.config.get("target")
        if target is not None:
            resolved = self._resolve(parent, f".{str(target).lstrip('.')}"
                                     if not str(target).startswith("#") else str(target),
                                     node.at("target"))
            if resolved is not None and resolved is not self._initial(parent):
                self.warn("history-default", node.at("target"), "a native history with "
                          "nothing recorded enters the compound state's initial state; this "
                          "default target is left out")

    def _check_history(self) -> None:
        for node in self.nodes:
            if id(node) in self.direct_to and id(node) in self.history_via:
                self.warn("history-everywhere", self.direct_to[id(node)], "natively every "
                          "transition to a compound state with history resumes it; this one, "
                          "which XState takes to its initial state, resumes it too")

    # -- parents' transitions ----------------------------------------------------------------

    def _push_down(self, root: _Node, wrapped: bool) -> None:
        """Moves a compound state's transitions onto its children where the native format
        asks (a final state may not inherit any; the root is no native state), after each
        child's own: the same transitions, tried in the same order."""
        children: dict[str | None, list[str]] = {}
        for name, spec in self.states.items():
            children.setdefault(spec.get("parent"), []).append(name)
        compound_after = self.compound_after

        def finals_below(name: str) -> bool:
            return any(self.states[c].get("type") == "final" or finals_below(c)
                       for c in children.get(name, []))

        def give(name: str, on: Mapping[str, list[Any]], after: dict[str, Any] | None) -> None:
            spec = self.states[name]
            if spec.get("type") in ("final", "choice"):
                return
            if on:
                merged = dict(spec.get("on", {}))
                for event, transitions in on.items():
                    merged[event] = [*merged.get(event, []), *transitions]
                spec["on"] = merged
            if after is not None and not children.get(name) and "after" not in spec:
                spec["after"] = dict(after)
            elif after is not None and children.get(name) and spec.get("type") != "parallel":
                for child in children[name]:
                    give(child, {}, after)
            elif after is not None and spec.get("type") == "parallel" and "after" not in spec:
                spec["after"] = dict(after)

        root_on = self.root_on
        if root_on:
            for name in children.get(None, []):
                give(name, root_on, None)
        for name in list(self.states):
            spec = self.states[name]
            after = compound_after.get(name)
            if after is not None:
                for child in children.get(name, []):
                    give(child, {}, after)
            if spec.get("on") and children.get(name) and spec.get("type") not in (
                    "parallel",) and not self._is_region(name) and finals_below(name):
                on = spec.pop("on")
                for child in children[name]:
                    give(child, on, None)

    def _give_always(self) -> None:
        """Gives each compound state's eventless transitions to the states below it (leaves
        and choices, not finals), after their own, innermost compound first."""
        if not self.compound_always:
            return
        children: dict[str | None, list[str]] = {}
        for name, spec in self.states.items():
            children.setdefault(spec.get("parent"), []).append(name)

        def below(name: str) -> list[str]:
            found = []
            for child in children.get(name, []):
                found.extend(below(child) if children.get(child) else [child])
            return found

        def depth(name: str) -> int:
            parent = self.states[name].get("parent")
            return 0 if parent is None else 1 + depth(parent)

        for name in sorted(self.compound_always, key=depth, reverse=True):
            for leaf in below(name):
                spec = self.states[leaf]
                if spec.get("type") == "final":
                    continue
                spec["always"] = [*spec.get("always", []), *self.compound_always[name]]
                if spec.get("type") == "wait":
                    del spec["type"]

    def _stay_by_self_target(self) -> None:
        """In a machine that runs until stopped, writes a state's targetless transitions
        as transitions to itself where the state takes events only that way and has
        nothing its re-entry would run again (no entry, exit, step, timer or eventless
        move): the same run, and the native checks see it is no trap."""
        for name, spec in self.states.items():
            on = spec.get("on")
            if not on or spec.get("type") in ("final", "choice", "parallel") or any(
                    key in spec for key in ("entry", "exit", "step", "after", "always")) or any(
                    other.get("parent") == name for other in self.states.values()):
                continue
            if any("target" in t for ts in on.values() for t in ts):
                continue
            for transitions in on.values():
                for transition in transitions:
                    transition["target"] = name
            self.warn("reactive-self", self._where(name), f"state {name!r} only takes events "
                      "without leaving (targetless transitions) in a machine that runs until "
                      "stopped; they are imported as transitions to the state itself, which "
                      "has no entry, exit, step or timer to run again, so nothing changes but "
                      "that the native checks see it is no trap")

    def _declare_payloads(self) -> None:
        """Declares the fields a translated expression reads of an event's payload
        (`event.temperature`) as the event's payload schema, each of any value and optional
        (XState declares no shape, and takes an event without them), so that the
        simulator's events carry them."""
        reads: dict[str, set[str]] = {}
        for spec in self.states.values():
            for event, transitions in (spec.get("on") or {}).items():
                if event in self.events:
                    for transition in transitions:
                        reads.setdefault(event, set()).update(_payload_reads(transition))
        for event, fields in reads.items():
            if fields and "payload" not in self.events[event]:
                self.events[event]["payload"] = {
                    "type": "object", "properties": {f: {} for f in sorted(fields)}}

    def _where(self, native: str) -> str:
        node = next((n for n in self.nodes if n.native == native), None)
        return "" if node is None else node.loc

    def _is_region(self, name: str) -> bool:
        parent = self.states[name].get("parent")
        return parent is not None and self.states[parent].get("type") == "parallel"


_PAYLOAD_READ = re.compile(r"event\.payload\['([^'\\]+)'\]")


def _payload_reads(transition: Mapping[str, Any]) -> set[str]:
    """Gives the payload fields a transition's translated guard and assignments read."""
    texts = [transition.get("guard")]
    for action in transition.get("actions", []):
        texts.extend((action.get("assign") or {}).values())
    return {m.group(1) for text in texts if isinstance(text, str)
            for m in _PAYLOAD_READ.finditer(text)}


def _code(reference: Any) -> str:
    """Gives the start of an inline reference's code, to show in a finding."""
    code = str(reference.get("code", "")) if isinstance(reference, Mapping) else ""
    return code if len(code) <= 60 else f"{code[:57]}..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "string"


def _has_final(node: _Node) -> bool:
    return any(c.kind == "final" or _has_final(c) for c in node.children)


def _wildcard(event: str) -> bool:
    return event == "*" or event.endswith(".*")


def _item(loc: str, index: int, items: Any) -> str:
    return f"{loc}[{index}]" if isinstance(items, list) else loc


def _safe(key: str, fallback: str = "state") -> str:
    """Gives `key` as a native name: unsafe characters as `_`, never starting with a digit."""
    text = _UNSAFE.sub("_", str(key))
    if not text:
        return fallback
    if not re.match(r"[A-Za-z_]", text):
        text = f"_{text}"
    return text



def _input_value(value: Any) -> Any:
    """Gives a literal step input value: a string starting with `=` would be read as an
    expression, so it is written as an expression giving the string."""
    if isinstance(value, str) and value.startswith("="):
        return f"={value!r}"
    if isinstance(value, Mapping):
        return {str(k): _input_value(v) for k, v in value.items()}
    return value

