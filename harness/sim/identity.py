"""How a run names what it ran, the same in every process: a digest of the definition (what its
spec says) and the `module:name` a machine factory is imported back by. Replay files and
reports both carry them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from types import FunctionType

from harness.sim.machine import ReferenceMachine
from reference_machine import WorkflowDefinition

__all__ = ["definition_digest", "machine_path"]


def definition_digest(definition: WorkflowDefinition) -> str:
    """Gives a digest of what a definition says (its spec), the same in every process."""
    data = definition.spec.model_dump(mode="python")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=_named)
    return hashlib.sha256(text.encode()).hexdigest()


def _named(value: object) -> str:
    """Names a Python object a spec may hold (a guard function, a payload model)."""
    module = getattr(value, "__module__", "")
    return f"{module}:{getattr(value, '__qualname__', type(value).__qualname__)}"


def machine_path(factory: object) -> str:
    """Gives `module:name` for a machine factory ("" when it cannot be imported back: a
    function defined inside another, a lambda, an instance)."""
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if factory is ReferenceMachine:
        return "harness:ReferenceMachine"
    if module and not isinstance(factory, type | FunctionType):
        # an instance (an adapter's target): the module-level name it is bound to, in its
        # module, else in the first loaded module that binds it (made by a helper elsewhere)
        for where in (module, *sorted(sys.modules)):
            if where in ("__main__", "__mp_main__"):  # not importable back by that name
                continue
            bound = getattr(sys.modules.get(where), "__dict__", None) or {}
            names = [name for name, value in list(bound.items()) if value is factory]
            if names:
                return f"{where}:{names[0]}"
        return ""
    if not module or not qualname or "<" in qualname:
        return ""
    return f"{module}:{qualname}"
