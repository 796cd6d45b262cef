"""Replay files: a counterexample written down, small enough to commit, exact enough to rerun.

A replay file is JSON: the definition (name, version, digest and where it was loaded from), the
machine (an importable `module:name`), the seed, the run's options with its fault plan, the rule
that broke and how, and the schedule (every choice the run drew, up to the violation, that was
not the default; each step's action, and the type of each event the sender sent). `replay(path)`
loads the definition again (from where the file says, else found from the file's own folder),
refuses it when its digest changed, runs the schedule and tells whether the same rule breaks.
`replay(path, definition=edited, edited=True)` runs the schedule on an edited definition
instead: the steps that no longer apply are skipped, and told.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fault_injection import FaultKind, FaultPlanError
from harness.checks.invariants import INVARIANTS, Violation, invariants
from harness.engines import isolation
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError, short_repr, words_of
from harness.files import write_output
from harness.report.redact import redact, secret_values
from harness.report.trace import describe_steps
from harness.sim.choices import (
    BRANCH,
    FAULT,
    Choice,
    ScriptedChoices,
    default,
    labels_of,
)
from harness.sim.history import Delivered, FaultInjected, HistoryRecord
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory, Observation
from harness.sim.simulator import SEED_LIMIT, SimOptions, SimulationResult, Simulator
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    WorkflowDefinition,
    load_definition,
    registered_functions,
)
from reference_machine.documents import document_problem, read_document

__all__ = ["REPLAY_FORMAT", "ReplayError", "ReplayOutcome", "checksum_of", "replay",
           "replay_file_name", "write_replay"]

REPLAY_FORMAT = 1
_KIND = "fsmharness.replay"
#: A replay file's schedule is a few entries a step: 16 MB holds runs of hundreds of thousands.
REPLAY_BYTES_MAX = 16_000_000


class ReplayError(HarnessError):
    """A replay file cannot be replayed: unreadable, of another format, or its definition or
    machine is not the one it was written for."""

    def __init__(self, path: str, message: str) -> None:
        self.path, self.message = path, message
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """What replaying a file gave: whether the same rule broke again, its violation, the run.

    On an edited definition (`edited`), `skipped` says each recorded step that no longer
    applied (and each recorded fault that no longer struck), and `unscheduled` counts the
    steps the edited run took that the schedule did not have (where it offered none of the
    recorded actions)."""

    path: str
    rule: str
    expected: str
    reproduced: bool
    violation: Violation | None
    result: SimulationResult | None  # None: the machine ended the replay's process
    edited: bool = False
    skipped: tuple[str, ...] = ()
    unscheduled: int = 0
    secrets: frozenset[str] = frozenset()  # the run's secret values, kept out of what it says
    #: the file carries a checksum over its evidence (an older fsmharness wrote none: its
    #: rule, seed and schedule could have been edited unseen)
    sealed: bool = True

    def trace(self) -> list[str]:
        """Gives the replayed run as readable steps, up to the violation (all when none), every
        secret value redacted."""
        if self.result is None:
            return []
        last = self.violation.step if self.violation is not None else None
        return redact(describe_steps(self.result.history, last=last), self.secrets)

    def told(self) -> Violation | None:
        """Gives the violation as it may be printed or written, every secret value redacted;
        None when the rule held."""
        if self.violation is None:
            return None
        return replace(self.violation, message=redact(self.violation.message, self.secrets))


def replay_file_name(counterexample: Counterexample, content: str = "") -> str:
    """Gives the file name a counterexample is saved under: the definition, the rule, the seed,
    and a digest of what the file holds, so two different failures never share a name (two
    definitions of one name, two machines, two targets from the same seed)."""
    held = content.encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(held).hexdigest()[:10] if content else ""
    return (f"{counterexample.definition.name}-{counterexample.violation.rule}-seed"
            f"{counterexample.seed}{'-' + digest if digest else ''}.json")


def imports_needed(definition: WorkflowDefinition, rule: str) -> list[str]:
    """Gives the modules a replay imports before it loads anything: the one that registers
    a user's invariant `rule`, and those that register the functions the definition names
    (`function:` guards and actions), so that `fsmharness replay FILE` runs as printed. A
    script run as `__main__` cannot be imported again, and is left out."""
    modules = set()
    registered = INVARIANTS.get(rule)
    if registered is not None and not registered.builtin:
        modules.add(registered.module)
    functions = registered_functions()
    for name in _function_names(definition.spec.model_dump(mode="python")):
        if name in functions:
            modules.add(getattr(functions[name], "__module__", "") or "")
    return sorted(module for module in modules if module and module != "__main__")


def _function_names(data: Any) -> set[str]:
    """Gives the names a spec's `{function: name}` references hold, anywhere in it."""
    names: set[str] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("function"), str) and len(node) == 1:
                names.add(node["function"])
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return names


def write_replay(counterexample: Counterexample, folder: str | os.PathLike[str]) -> Path:
    """Writes the counterexample's replay file into `folder` (made if missing), all or nothing;
    gives its path."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HarnessError(f"{folder}: cannot make the replay folder: {exc.strerror}") from exc
    definition = counterexample.definition
    secrets = secret_values(definition, counterexample.result.history)
    recorded: dict[str, Any] = {"name": definition.name, "version": definition.version,
                                "digest": definition_digest(definition),
                                "source": definition.source}
    near = _path_from(definition.source, folder)
    if near is not None:  # found again when the file is replayed from another folder
        recorded["source_from_replay"] = near
    data: dict[str, Any] = {
        "kind": _KIND,
        "format": REPLAY_FORMAT,
        "definition": recorded,
        "machine": machine_path(counterexample.machine),
        "imports": imports_needed(definition, counterexample.violation.rule),
        "seed": counterexample.seed,
        "options": counterexample.options.to_dict(),
        "rule": counterexample.violation.rule,
        "violation": redact(counterexample.violation.message, secrets),
        "execution": counterexample.violation.execution,
        "step": counterexample.violation.step,
        "choices": [[c.step, c.tag, c.n, c.u] for c in counterexample.choices
                    if c.u != default(c.tag)],
        "actions": {str(step): label for step, label in sorted(
            counterexample.actions.items())},
        "events": {str(step): name for step, name in sorted(
            _events_sent(counterexample.result.history, counterexample.actions).items())},
        "trace": redact(counterexample.trace(), secrets),
    }
    path = folder / replay_file_name(
        counterexample, json.dumps(data, sort_keys=True, ensure_ascii=False, default=str))
    data["replay"] = f"fsmharness replay {path}"
    data["checksum"] = checksum_of(data)
    text = json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    write_output(path, text, "replay file")
    return path



#: What a replay file's checksum covers: the evidence (the run, the rule, what broke). Not
#: where to find the definition and machine, which a user may point elsewhere (guarded by
#: the definition's digest and by the rule for imports), nor the printed trace.
SEALED = ("format", "seed", "options", "rule", "violation", "execution", "step", "choices",
          "actions", "events")


def checksum_of(data: Mapping[str, Any]) -> str:
    """Gives the checksum of a replay file's evidence (`SEALED`, and the definition's digest):
    an edit to the rule, the seed or the schedule would otherwise be replayed, and judged."""
    definition = data.get("definition")
    held = {key: data.get(key) for key in SEALED}
    held["digest"] = definition.get("digest") if isinstance(definition, Mapping) else None
    # as the file holds it (a context's whole-number keys are text there, and sort so)
    held = json.loads(json.dumps(held, ensure_ascii=False, default=str))
    text = json.dumps(held, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _path_from(source: str, folder: Path) -> str | None:
    """Gives the definition file's path from the replay file's folder (None when the source
    is no file: a Python definition)."""
    if not source or not Path(source).is_file():
        return None
    try:
        return Path(os.path.relpath(os.path.abspath(source), os.path.abspath(folder))
                    ).as_posix()
    except ValueError:  # another drive: no relative path
        return None


#: The faults under which an event the sender sent is told by its id, not delivered at once.
_HELD_BACK = frozenset({FaultKind.DROPPED_EVENT, FaultKind.REORDERED_EVENTS,
                        FaultKind.WRONG_CORRELATION})


def _events_sent(history: Iterable[HistoryRecord], actions: Mapping[int, str]
                ) -> dict[int, str]:
    """Gives, for each step whose action sent an external event (`event x1`), the event's
    type: delivered at once, or held back by a fault and delivered later under its id."""
    records = list(history)
    sending = {step for step, label in actions.items() if label.startswith("event ")}
    types = {r.event_id: r.type for r in records if type(r) is Delivered}
    sent: dict[int, str] = {}
    for record in records:
        step = record.step
        if step not in sending or step in sent:
            continue
        if type(record) is Delivered and record.via == "external":
            sent[step] = record.type
        elif type(record) is FaultInjected and record.fault in _HELD_BACK:
            found = types.get(record.detail.partition(" ")[0])
            if found is not None:
                sent[step] = found
    return sent


def replay(path: str | os.PathLike[str], *, definition: WorkflowDefinition | None = None,
           machine: MachineFactory | None = None, trusted: Iterable[str] = (),
           say: Callable[[str], object] | None = None, edited: bool = False,
           given_as: str = "definition=", isolate: bool = True) -> ReplayOutcome:
    """Runs a replay file's schedule again and tells whether its rule breaks again.

    The definition is loaded from where the file says (or given), and must have the digest the
    file records; where the recorded path is no file from here, it is looked for from the
    replay file's folder. With `edited`, the given definition may differ from the recorded
    one: the schedule runs on it, each recorded step that no longer applies is skipped, and
    the outcome tells them (`skipped`). The machine is imported from the file's `module:name`
    (or given). A module the file names is imported only when it is the user's own (see
    `user_module`) or named in `trusted`; `say` is told of each before it is imported, and of
    a definition found elsewhere than recorded. `given_as` is how the caller names a
    definition, for the messages (`--definition PATH` at the command line). The run is in a
    child process where the platform can fork (`isolate`), so that a machine that ends or hangs
    its process is its verdict (`machine_ok`, with `result` None). Raises `ReplayError` when the
    file cannot be replayed."""
    name = str(path)
    data = _read(name)
    trusted = frozenset(trusted)
    told: list[str] = []  # said once the file is found fit to replay
    _import_all(name, data.get("imports", []), trusted, told)
    recorded = data["definition"]
    if machine is None:
        machine = _import_machine(name, data.get("machine", ""), trusted, told)
    named = getattr(machine, "definition", None)
    if definition is None and isinstance(named, WorkflowDefinition) and (
            named.name == recorded.get("name")):
        definition = named  # a machine that carries its definition (an adapter's target)
    if definition is None:
        definition = _find_definition(name, recorded, told, given_as)
    digest = definition_digest(definition)
    changed = digest != recorded.get("digest")
    if changed and edited and definition.name != recorded.get("name"):
        raise ReplayError(name, f"this file records definition {recorded.get('name')!r}; "
                                f"{given_as} gives {definition.name!r}, another workflow (an "
                                "edited definition keeps its name)")
    if changed and not edited:
        raise ReplayError(name, f"definition {definition.name!r} changed since this file was "
                                f"written (digest {str(recorded.get('digest'))[:12]}, now "
                                f"{digest[:12]}); the schedule no longer means what it did: "
                                f"replay it on the edited definition with {given_as}, or run "
                                "the fuzzer again")
    try:
        options = SimOptions.from_dict(data["options"])
    except HarnessError as exc:
        raise ReplayError(name, str(exc)) from exc
    notes: list[str] = []
    if changed:
        options, notes = _fitted(options, definition)
    script = [Choice(*entry) for entry in data["choices"]]
    actions = {int(step): label for step, label in data.get("actions", {}).items()}
    events = {int(step): kind for step, kind in data.get("events", {}).items()}
    try:
        simulator = Simulator(definition, options, machine)
    except (FaultPlanError, HarnessError) as exc:
        raise ReplayError(name, f"the recorded options do not fit "
                                f"{'the edited' if changed else 'the'} definition: "
                                f"{words_of(exc)}") from exc
    choices = (_EditedChoices(script, actions, events, simulator.offered) if changed
               else ScriptedChoices(script, actions))

    def work() -> tuple[SimulationResult, list[str], tuple[str, ...], int]:
        ran = simulator.run(data["seed"], choices=choices)
        if isinstance(choices, _EditedChoices):
            return ran, choices.departures(), tuple(choices.skipped_steps()), choices.unscheduled
        return ran, choices.departures(), (), 0

    try:  # apart: a machine that ends or hangs its process ends only the child's
        result, departures, skipped_steps, unscheduled = (
            isolation.call(work) if isolate and isolation.available() else work())
    except isolation.Died as died:
        if say is not None:
            for line in told:
                say(line)
        ended = Violation("machine_ok", f"the machine ended its process ({died.how})")
        return ReplayOutcome(name, data["rule"], data["violation"],
                             data["rule"] == "machine_ok", ended, None, changed,
                             sealed="checksum" in data)
    if departures and not changed:  # a schedule not carried out is no evidence either way
        more = f" (and {len(departures) - 1} more)" if len(departures) > 1 else ""
        raise ReplayError(name, f"the schedule cannot be carried out as recorded: "
                                f"{departures[0]}{more}; the file was edited, or the machine "
                                "no longer takes these steps: run the fuzzer again")
    if say is not None:
        for line in told:
            say(line)
    (rule,) = invariants([data["rule"]])
    found = rule.run(definition, result.history)
    violation = min(found, key=lambda v: v.step) if found else None
    skipped = (*notes, *skipped_steps) if changed else ()
    return ReplayOutcome(name, data["rule"], data["violation"], violation is not None,
                         violation, result, changed, skipped, unscheduled,
                         secret_values(definition, result.history), "checksum" in data)


def _find_definition(name: str, recorded: Mapping[str, Any], told: list[str],
                     given_as: str) -> WorkflowDefinition:
    """Gives the definition a replay file names: from its recorded path when that is a file
    from here (changed or not: the file the user works on); else from the replay file's
    folder: its recorded path from there, or the recorded path from that folder or one above
    it (the folder the campaign ran in), the first found with the recorded digest, else the
    first found (which the caller refuses as changed)."""
    source = recorded.get("source", "")
    label = recorded.get("name")
    if not isinstance(source, str) or not source:
        raise ReplayError(name, f"the file does not say where the definition {label!r} was "
                                f"loaded from; pass it with {given_as}")
    if Path(source).is_file():
        candidates = [Path(source)]
    else:
        here = Path(name).resolve().parent
        near = recorded.get("source_from_replay")
        candidates = [here / near] if isinstance(near, str) and near else []
        if not Path(source).is_absolute():
            candidates += [folder / source for folder in (here, *here.parents)]
    found: list[tuple[Path, WorkflowDefinition]] = []
    problem: DefinitionError | None = None
    seen: set[Path] = set()
    for candidate in candidates:
        where = candidate.resolve()
        if where in seen or not where.is_file():
            continue
        seen.add(where)
        try:
            definition = load_definition(candidate)
        except DefinitionError as exc:
            problem = problem or exc
            continue
        if definition_digest(definition) == recorded.get("digest"):
            found.insert(0, (where, definition))
            break
        found.append((where, definition))
    if not found:
        if problem is not None:
            raise ReplayError(name, f"the definition cannot be loaded: "
                                    f"{_definition_problem(problem)}") from problem
        raise ReplayError(name, f"the definition {label!r} was loaded from {source!r}, which "
                                f"is not a file here; pass it with {given_as} (it was looked "
                                "for from the replay file's folder too)")
    where, definition = found[0]
    if candidates[0] != Path(source):
        told.append(f"the definition {label!r} was loaded from {source!r} where the file was "
                    f"written; replaying it from {where}")
    return definition


def _definition_problem(error: DefinitionError) -> str:
    """Gives a definition's errors in one line: the first, and how many more there are."""
    if not error.findings:
        return str(error).splitlines()[0]
    more = len(error.findings) - 1
    return (f"{error.source}: {error.findings[0].render()}"
            + (f" (and {more} more: fsmharness lint {error.source})" if more else ""))


def _fitted(options: SimOptions, definition: WorkflowDefinition
            ) -> tuple[SimOptions, list[str]]:
    """Gives the recorded options fitted to an edited definition, and what was left out: the
    tools it no longer has, in the tools that honour keys."""
    gone = sorted(tool for tool in options.honour_keys if tool not in definition.tools)
    if not gone:
        return options, []
    kept = {tool: on for tool, on in options.honour_keys.items() if tool not in gone}
    return replace(options, honour_keys=kept), [
        f"options: honour_keys names {tool}, which the edited definition has no longer: left "
        "out" for tool in gone]


class _EditedChoices(ScriptedChoices):
    """Replays a schedule on an edited definition. As `ScriptedChoices`, each step performs
    the next scheduled action that is enabled, and a scheduled `event` step sends the type it
    sent when recorded (not whichever the recorded draw picks among the edited state's
    events), or is passed over when the edited state takes that type no longer. Where none of
    the scheduled actions is enabled (a step the edit added: a new tool call, a new wait), the
    step performs the first enabled action unscheduled and the schedule waits, instead of
    being given up."""

    def __init__(self, script: Sequence[Choice], actions: Mapping[int, str],
                 events: Mapping[int, str],
                 offered: Callable[[Observation], tuple[str, ...]]) -> None:
        super().__init__(script, actions)
        self.events = dict(events)
        self.offered = offered
        self.sending: tuple[str, tuple[str, ...]] | None = None  # the type, what was offered
        self.refused: dict[int, str] = {}  # scheduled step -> why its event was not sent
        self.unscheduled = 0  # steps taken between scheduled ones, none of those enabled
        self.waiting = 0  # such steps since the last scheduled one

    def action(self, actions: Sequence[Any], label: Callable[[Any], str]) -> int:
        self.sending = None
        if not self.planned:
            return super().action(actions, label)
        labels = labels_of(actions, label)
        found = self._next_planned(actions, labels)
        if found is not None:
            position, index = found
            step, self.wanted = self.planned[position]
            self.skipped += self.planned[self.cursor:position]
            self.cursor, self.source = position + 1, step
            self.used.add((step, BRANCH, self._counts.get(BRANCH, 0)))
            self.unscheduled += self.waiting
            self.waiting = 0
        else:  # counted once a scheduled step comes after it: else the schedule had ended
            index, self.source, self.wanted = 0, None, ""
            self.waiting += self.cursor < len(self.planned)
        self._record(BRANCH, (index + 0.5) / len(labels))
        self.actions[self.step] = labels[index]
        return index

    def _fits(self, step: int, action: Sequence[Any]) -> bool:
        """Tells whether the scheduled `step` may be performed as `action`: yes, unless it
        sent an event whose type the execution's state, as edited, takes no longer."""
        wanted = self.events.get(step)
        obs = action[2] if wanted is not None and len(action) > 2 else None
        if not isinstance(obs, Observation):
            return True
        names = self.offered(obs)
        if wanted not in names:
            self.refused[step] = (f"{action[1]} in {obs.state} takes {wanted} no longer"
                                  + (f" (it takes {', '.join(names)})" if names else ""))
            return False
        self.sending = (wanted, names)
        return True

    def branch(self, n: int) -> int:
        sending, self.sending = self.sending, None
        index = super().branch(n)
        if sending is not None:  # the draw that picks the event to send: the recorded type
            wanted, names = sending
            if len(names) == n:  # else a bound on sends left some out: the draw as recorded
                index = names.index(wanted)
                last = self.recorded[-1]
                self.recorded[-1] = Choice(last.step, last.tag, last.n, (index + 0.5) / n)
        return index

    def skipped_steps(self) -> list[str]:
        """Gives a line for each recorded step that was not performed (scheduled but never
        possible, or never reached; numbered as the replay file's trace numbers it, not as
        the edited run's), and for each performed one whose recorded faults were
        not drawn; in the order of the recorded steps."""
        gone = dict(self.skipped)
        gone.update(self.planned[self.cursor:])
        lines: dict[int, str] = {}
        for step, label in sorted(gone.items()):
            lines[step] = (f"recorded step {step}: {self._what(step, label)}: "
                           f"{self.refused.get(step) or _why(label)}")
        undrawn: dict[int, list[str]] = {}
        for step, tag, _ in sorted(set(self.script) - self.used):
            if step not in gone:
                undrawn.setdefault(step, []).append(tag)
        for step, tags in undrawn.items():
            faults = [_fault_name(tag) for tag in tags if tag[0] == FAULT]
            others = len(tags) - len(faults)
            said = faults + ([f"{others} recorded draw{'s' if others > 1 else ''} "
                              "(values, choices)"] if others else [])
            lines[step] = (f"recorded step {step}: {', '.join(said)} not drawn: the edited "
                           "run did not come where the recorded one drew "
                           f"{'it' if len(tags) == 1 else 'them'}")
        return [lines[step] for step in sorted(lines)]

    def _what(self, step: int, label: str) -> str:
        """Names what a scheduled step did: its action, with the type of the event it sent."""
        head, _, detail = label.partition(" | ")
        if head.startswith("event ") and step in self.events:
            return f"send {self.events[step]} to {head.removeprefix('event ')}"
        if head == "advance":
            return f"move the clock to {detail}" if detail else "move the clock"
        return head


def _why(label: str) -> str:
    """Says why a scheduled action was never possible on the edited definition."""
    words = label.partition(" | ")[0].split()
    verb, execution = words[0], words[1] if len(words) > 1 else ""
    return {
        "start": f"{execution} was not there to start",
        "complete": f"{execution} had no call of {words[-1]} in flight",
        "approve": f"{execution} waited on no approval",
        "event": f"{execution} took no event then",
        "deliver": "no such event was on its way",
        "advance": "nothing was due then",
    }.get(verb, "it was never possible")


def _fault_name(tag: str) -> str:
    """Names a fault draw's tag: `f:crash` a crash, `f:tool:pay.charge` a tool fault."""
    kind = tag.removeprefix("f:")
    return f"a tool fault of {kind.removeprefix('tool:')}" if kind.startswith("tool:") else (
        f"fault {kind}")


def _read(name: str) -> dict[str, Any]:
    try:
        data, _ = read_document(name, what="a replay file", bytes_max=REPLAY_BYTES_MAX,
                                yaml_ok=False)
    except FileNotFoundError as exc:
        raise ReplayError(name, "no such file") from exc
    except OSError as exc:
        raise ReplayError(name, f"cannot read: {exc.strerror}") from exc
    except DefinitionSyntaxError as exc:
        raise ReplayError(name, document_problem(exc, "not JSON")) from exc
    if not isinstance(data, Mapping) or data.get("kind") != _KIND:
        raise ReplayError(name, f"not an fsmharness replay file (expected \"kind\": "
                                f"\"{_KIND}\")")
    if data.get("format") != REPLAY_FORMAT:
        raise ReplayError(name, f"replay format {data.get('format')!r}; this fsmharness reads "
                                f"format {REPLAY_FORMAT}")
    problems = []
    for key, kind in (("definition", Mapping), ("seed", int), ("options", Mapping),
                      ("rule", str), ("violation", str), ("choices", list)):
        if not isinstance(data.get(key), kind):
            problems.append(f"{key!r} missing or not a {kind.__name__.lower()}")
    if problems:
        raise ReplayError(name, "; ".join(problems))
    if "checksum" in data and data["checksum"] != checksum_of(data):  # older files have none
        raise ReplayError(name, "the file was edited since fsmharness wrote it (its checksum "
                                "does not match what it holds): a replay file is evidence only "
                                "as written; run the fuzzer again for a new one")
    seed = data["seed"]
    if isinstance(seed, bool) or not 0 <= seed < SEED_LIMIT:
        raise ReplayError(name, f"'seed': expected a whole number from 0 below 2**64, got "
                                f"{short_repr(seed)}")
    actions = data.get("actions", {})
    if not isinstance(actions, Mapping) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in actions.items()):
        raise ReplayError(name, "'actions' must map step numbers to action labels")
    events = data.get("events", {})
    if not isinstance(events, Mapping) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in events.items()):
        raise ReplayError(name, "'events' must map step numbers to event types")
    for index, entry in enumerate(data["choices"]):
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], int)
                and isinstance(entry[1], str) and (entry[1] in ("b", "v") or
                                                   entry[1].startswith("f:"))
                and isinstance(entry[2], int) and entry[0] >= 0 and entry[2] >= 0
                and isinstance(entry[3], int | float) and not isinstance(entry[3], bool)
                and 0 <= entry[3] <= 1):
            raise ReplayError(name, f"choices[{index}]: expected [step, tag, n, u] with tag "
                                    f"b, v or f:<kind>, whole numbers step and n, and u from "
                                    f"0 to 1, got {json.dumps(entry)[:60]}")
    return dict(data)


_OWN = frozenset({"harness", "reference_machine", "fault_injection", "scenarios"})


def _library_folders() -> list[Path]:
    """Gives where the interpreter keeps what is not the user's: the standard library and
    installed packages."""
    folders = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib",
                                                      "platlib")}
    with contextlib.suppress(AttributeError):  # a virtualenv's site module may lack these
        folders.update(site.getsitepackages())
        folders.add(site.getusersitepackages())
    return [Path(folder).resolve() for folder in folders if folder]


def user_module(module: str) -> bool:
    """Tells whether `module` is one a user could have run a campaign with: fsmharness's own
    (its bundled scenarios included), or one whose file lies outside the standard library
    and the installed packages (the user's own folders, wherever `sys.path` finds them);
    found without running the module (a parent package's `__init__` aside)."""
    top = module.partition(".")[0]
    if top in _OWN:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return True  # not importable at all: the import says so, with its own words
    places = list(spec.submodule_search_locations or ()) or [spec.origin or ""]
    libraries = _library_folders()
    for place in places:
        if place in ("", "built-in", "frozen"):
            return False
        where = Path(place).resolve()
        if any(where.is_relative_to(folder) for folder in libraries):
            return False
    return True


def _imported(name: str, module: str, trusted: frozenset[str], told: list[str],
              failed: str) -> Any:
    """Imports a module the replay file names, once it is the user's own (or trusted), and
    adds to `told` the news of one that was not imported yet; `failed` begins the error when
    the import fails."""
    if module not in trusted and not user_module(module):
        raise ReplayError(name, f"it names the module {module!r}, which is the standard "
                                "library's or an installed package's; a replay file imports "
                                f"only your own modules: name it with --import {module} if "
                                "you mean it")
    new = module not in sys.modules
    try:
        found = importlib.import_module(module)
    except Exception as exc:  # the user's module failed to import, not the harness
        raise ReplayError(name, f"{failed}: {type(exc).__name__}: {words_of(exc)}") from exc
    if new:
        told.append(f"imported {module}, which the replay file names")
    return found


def _import_all(name: str, modules: object, trusted: frozenset[str], told: list[str]) -> None:
    """Imports the modules a replay file names (what registers its invariant and functions)."""
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ReplayError(name, "'imports' must be a list of module names")
    for module in modules:
        _imported(name, module, trusted, told, f"cannot import {module!r}, which the failure "
                                               "needs (it registers its invariant or functions)")


def _import_machine(name: str, path: object, trusted: frozenset[str],
                    told: list[str]) -> MachineFactory:
    if not isinstance(path, str) or ":" not in path:
        raise ReplayError(name, "the machine under test was not importable when the file was "
                                "written (a local function?); pass it with machine=")
    module_name, _, attribute = path.partition(":")
    target = _imported(name, module_name, trusted, told, f"cannot import the machine {path!r}")
    try:
        for part in attribute.split("."):
            target = getattr(target, part)
            # the path may not walk into a library's module or name what one defines
            # (`mine:os.system`, `mine:run` for `from subprocess import run`)
            home = target.__name__ if isinstance(target, types.ModuleType) else getattr(
                target, "__module__", None)
            if isinstance(home, str) and home not in trusted and not user_module(home):
                raise ReplayError(name, f"the machine {path!r} is {home}'s, the standard "
                                        "library's or an installed package's; a replay file "
                                        "names only your own machines")
    except AttributeError as exc:
        raise ReplayError(name, f"cannot import the machine {path!r}: {exc}") from exc
    if not callable(target):
        raise ReplayError(name, f"the machine {path!r} is not a machine factory (a class or "
                                f"function that builds one), but a {type(target).__name__}")
    return target
