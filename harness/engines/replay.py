"""Replay files: a counterexample written down, small enough to commit, exact enough to rerun.

A replay file is JSON: the definition (name, version, digest and where it was loaded from), the
machine (an importable `module:name`), the seed, the run's options with its fault plan, the rule
that broke and how, and the schedule (every choice the run drew, up to the violation, that was
not the default). `replay(path)` loads the definition again, refuses it when its digest changed,
runs the schedule and tells whether the same rule breaks.
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks.checkers import INVARIANTS, Violation, invariants
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError, words_of
from harness.files import write_output
from harness.report.redact import redact, secret_values
from harness.report.trace import describe_steps
from harness.sim.choices import Choice, ScriptedChoices, default
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions, SimulationResult, Simulator
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    WorkflowDefinition,
    load_definition,
    registered_functions,
)
from reference_machine._load import document_problem, read_document

__all__ = ["REPLAY_FORMAT", "ReplayError", "ReplayOutcome", "replay", "replay_file_name",
           "write_replay"]

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
    """What replaying a file gave: whether the same rule broke again, its violation, the run."""

    path: str
    rule: str
    expected: str
    reproduced: bool
    violation: Violation | None
    result: SimulationResult

    def trace(self) -> list[str]:
        """Gives the replayed run as readable steps, up to the violation (all when none)."""
        last = self.violation.step if self.violation is not None else None
        return describe_steps(self.result.history, last=last)


def replay_file_name(counterexample: Counterexample, content: str = "") -> str:
    """Gives the file name a counterexample is saved under: the definition, the rule, the seed,
    and a digest of what the file holds, so two different failures never share a name (two
    definitions of one name, two machines, two targets from the same seed)."""
    digest = hashlib.sha256(content.encode()).hexdigest()[:10] if content else ""
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
    data: dict[str, Any] = {
        "kind": _KIND,
        "format": REPLAY_FORMAT,
        "definition": {"name": definition.name, "version": definition.version,
                       "digest": definition_digest(definition), "source": definition.source},
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
        "trace": redact(counterexample.trace(), secrets),
    }
    path = folder / replay_file_name(
        counterexample, json.dumps(data, sort_keys=True, ensure_ascii=False, default=str))
    data["replay"] = f"fsmharness replay {path}"
    text = json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    write_output(path, text, "replay file")
    return path



def replay(path: str | os.PathLike[str], *, definition: WorkflowDefinition | None = None,
           machine: MachineFactory | None = None, trusted: Iterable[str] = (),
           say: Callable[[str], object] | None = None) -> ReplayOutcome:
    """Runs a replay file's schedule again and tells whether its rule breaks again.

    The definition is loaded from where the file says (or given), and must have the digest the
    file records; the machine is imported from the file's `module:name` (or given). A module
    the file names is imported only when it is the user's own (see `user_module`) or named in
    `trusted`; `say` is told of each before it is imported. Raises `ReplayError` when the file
    cannot be replayed as recorded."""
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
        source = recorded.get("source", "")
        if not isinstance(source, str) or not Path(source).is_file():
            raise ReplayError(name, f"the definition {recorded.get('name')!r} was loaded from "
                                    f"{source!r}, which is not a file here; pass it with "
                                    "definition=")
        try:
            definition = load_definition(source)
        except DefinitionError as exc:
            raise ReplayError(name, f"the definition cannot be loaded: {exc}") from exc
    digest = definition_digest(definition)
    if digest != recorded.get("digest"):
        raise ReplayError(name, f"definition {definition.name!r} changed since this file was "
                                f"written (digest {str(recorded.get('digest'))[:12]}, now "
                                f"{digest[:12]}); the schedule no longer means what it did: "
                                "run the fuzzer again")
    try:
        options = SimOptions.from_dict(data["options"])
    except HarnessError as exc:
        raise ReplayError(name, str(exc)) from exc
    script = [Choice(*entry) for entry in data["choices"]]
    actions = {int(step): label for step, label in data.get("actions", {}).items()}
    choices = ScriptedChoices(script, actions)
    result = Simulator(definition, options, machine).run(data["seed"], choices=choices)
    departures = choices.departures()
    if departures:  # a schedule not carried out is no evidence either way
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
    return ReplayOutcome(name, data["rule"], data["violation"], violation is not None,
                         violation, result)


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
    actions = data.get("actions", {})
    if not isinstance(actions, Mapping) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in actions.items()):
        raise ReplayError(name, "'actions' must map step numbers to action labels")
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
