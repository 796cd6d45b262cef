"""A user's project, as the plugin and CLI tests lay it out: a workflow definition file and a
machine under test with one classic bug (an idempotency key per attempt)."""

from __future__ import annotations

from pathlib import Path

WORKFLOW = (Path(__file__).resolve().parents[1] / "data" / "workflows"
            / "planted.yaml").read_text(encoding="utf-8")

NAIVE_MACHINE = '''
from harness import ReferenceMachine
from reference_machine import Runtime


class _KeyPerAttempt(Runtime):
    def _call(self, execution_id, command, resent=False):
        # the bug: each attempt goes to the tool under its own idempotency key
        return super()._call(execution_id, command._replace(key=command.effect_id), resent)


class KeyPerAttempt(ReferenceMachine):
    runtime_class = _KeyPerAttempt
    definition = "workflow_pay.yaml"
'''
