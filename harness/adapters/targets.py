"""What the CLI and the pytest plugin run on: definition files, folders of them, and
`module:attribute` for Python definitions and user-written machines under test.

A `module:attribute` names a `WorkflowDefinition` (or a spec mapping), or a machine factory. A
machine factory names its definition in its `definition` attribute (a definition, or a path
relative to its module's file), or takes the definition files it is given with `--machine`.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.sim.machine import MachineFactory, ReferenceMachine
from reference_machine import WorkflowDefinition, WorkflowSpec, load_definition

__all__ = ["DEFINITION_SUFFIXES", "Target", "TargetError", "definition_files", "import_object",
           "resolve_machine", "resolve_targets"]

DEFINITION_SUFFIXES = (".yaml", ".yml", ".json", ".scxml")
_OBJECT = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class TargetError(HarnessError):
    """A target that does not exist, does not import, or is not a definition or machine."""


@dataclass(frozen=True, slots=True)
class Target:
    """One thing to run: a definition, the machine to run it on, and the name the user gave."""

    name: str
    definition: WorkflowDefinition
    machine: MachineFactory = ReferenceMachine

    @property
    def machine_name(self) -> str:
        """Gives the machine as the user knows it (`module:name`, or the reference)."""
        if self.machine is ReferenceMachine:
            return "reference"
        return f"{getattr(self.machine, '__module__', '?')}:" \
               f"{getattr(self.machine, '__qualname__', type(self.machine).__name__)}"


def definition_files(paths: Iterable[str | Path]) -> list[Path]:
    """Gives the definition files named by `paths`; a folder gives the definition files
    directly in it, sorted (not its subfolders: `scenarios/naive/` is a target of its own)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in DEFINITION_SUFFIXES
                           and p.is_file())
            if not found:
                raise TargetError(f"{raw}: folder holds no {', '.join(DEFINITION_SUFFIXES)} "
                                  f"files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise TargetError(f"{raw}: no such file or folder")
    return files


def import_object(name: str) -> Any:
    """Imports `module:attribute` (dots in either part), with the current folder on the path
    as `python -m` has it; raises `TargetError` saying what failed."""
    if not _OBJECT.fullmatch(name):
        raise TargetError(f"{name}: expected module:attribute (e.g. myflows:refund)")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    module_name, _, attribute = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import, whatever it raised
        raise TargetError(f"{name}: cannot import {module_name}: {type(exc).__name__}: "
                          f"{exc}") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise TargetError(f"{name}: module {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target


def resolve_machine(name: str | None) -> MachineFactory:
    """Gives the machine factory `--machine module:attribute` names (None: the reference)."""
    if name is None or name in ("reference", "harness:ReferenceMachine"):
        return ReferenceMachine
    found = import_object(name)
    if isinstance(found, WorkflowDefinition | WorkflowSpec | Mapping) or not callable(found):
        raise TargetError(f"{name}: expected a machine factory (a class or function taking "
                          f"definition, tools, probe), got {type(found).__name__}")
    return found


def resolve_targets(names: Sequence[str], machine: str | None = None,
                    input_format: str | None = None) -> list[Target]:
    """Gives a target for each definition file (folders expanded) and each
    `module:attribute`, in the order given; `machine` runs the definitions on a machine other
    than the reference. A file is read as its name tells (`*.asl.json`, `*.scxml`, ...: by
    its importer), or as `input_format` says (`native`, `asl`, `xstate`, `scxml`)."""
    factory = resolve_machine(machine)
    targets: list[Target] = []
    for name in names:
        if not Path(name).exists() and _OBJECT.fullmatch(name):
            found = _imported(name, factory if machine is not None else None)
            if machine is not None and found.machine is not factory:
                raise TargetError(f"{name}: a machine target runs on itself; --machine "
                                  f"{machine} applies to definitions only")
            targets.append(found)
            continue
        for path in definition_files([name]):
            targets.append(Target(str(path), load_definition(path, format=input_format),
                                  factory))
    return targets


def _imported(name: str, machine: MachineFactory | None) -> Target:
    found = import_object(name)
    if isinstance(found, WorkflowDefinition | WorkflowSpec | Mapping):
        return Target(name, load_definition(found), machine or ReferenceMachine)
    if not callable(found):
        raise TargetError(f"{name}: expected a WorkflowDefinition, a definition mapping or a "
                          f"machine factory, got {type(found).__name__}")
    named = getattr(found, "definition", None)
    if named is None:
        raise TargetError(f"{name}: a machine factory needs a `definition` attribute (a "
                          f"definition or a file path) to be a target; or give definition "
                          f"files with --machine {name}")
    if not isinstance(named, WorkflowDefinition | WorkflowSpec | Mapping | str | Path):
        raise TargetError(f"{name}.definition: expected a definition, a mapping or a file "
                          f"path, got {type(named).__name__}")
    if isinstance(named, str | Path) and not Path(named).is_absolute():
        module = sys.modules.get(getattr(found, "__module__", ""))
        base = Path(getattr(module, "__file__", None) or ".").parent
        named = base / named
    return Target(name, load_definition(named), found)
