"""The tools a Task calls: the native tool name of a `Resource`, the action names read as
repeatable, and the `<file>.tools.yaml` side file declaring what ASL does not say."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity

__all__ = ["ODD_CHARACTERS", "READ_ONLY", "read_tools_file", "tool_name"]

ODD_CHARACTERS = re.compile(r"[^A-Za-z0-9_\-]+")
READ_ONLY = re.compile(r"^(get|describe|list|query|scan|head|batchGet|search|lookup|"
                       r"select|read|poll|check|fetch)([A-Z_]|$)")


def tool_name(resource: str, parameters: Any = None) -> str:
    """Gives the native tool name of a Task's `Resource` (and, for `lambda:invoke`, its
    `FunctionName`): the name a `<file>.tools.yaml` side file declares it under."""
    text = resource.strip()
    text = re.sub(r"^arn:[^:]*:states:[^:]*:[^:]*:", "", text)
    text = re.sub(r"\.(sync(:\d+)?|waitForTaskToken)$", "", text)
    function = None
    if text in ("lambda:invoke", "lambda:invokeAsync") and isinstance(parameters, Mapping):
        raw = parameters.get("FunctionName")
        if isinstance(raw, str):
            function = raw.split(":function:")[-1].split(":")[0]
    if text.startswith("arn:") and ":function:" in text:
        function, text = text.split(":function:")[-1].split(":")[0], "lambda:invoke"
    parts = [p for p in re.split(r"[:/]", text) if p]
    if function:
        parts.append(function)
    cleaned = ".".join(ODD_CHARACTERS.sub("_", p).strip("_") or "x" for p in parts) or "task"
    if not re.match(r"^[A-Za-z_]", cleaned):
        cleaned = "t_" + cleaned
    return cleaned


def read_tools_file(name: str) -> dict[str, Any]:
    """Gives the tool declarations of a document's side file `<name>.tools.yaml`, none
    when there is no such file."""
    path = Path(name + ".tools.yaml")
    try:
        if not path.is_file():
            return {}
        with path.open(encoding="utf-8") as stream:
            loaded = yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as exc:
        raise DefinitionError([Finding(Severity.ERROR, "asl-tools-file", str(path),
                                       f"cannot read the tools side file: {exc}")], name) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping) or not all(
            isinstance(v, Mapping) for v in loaded.values()):
        raise DefinitionError([Finding(
            Severity.ERROR, "asl-tools-file", str(path),
            "the tools side file maps each tool name to a tool declaration "
            "(idempotency_keys, repeatable, output, description)")], name)
    return {str(k): dict(v) for k, v in loaded.items()}
