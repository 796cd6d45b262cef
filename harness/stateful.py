"""Hypothesis stateful testing of a workflow (`workflow_machine`); the machine itself lives in
`harness.engines.stateful`, whose docstring tells the rules.

    from harness.stateful import workflow_machine
    from reference_machine import load_definition

    RefundMachine = workflow_machine(load_definition("scenarios/refund_escalation.yaml"))
    TestRefund = RefundMachine.TestCase            # pytest and unittest collect it
"""

from harness.engines.stateful import InvariantViolated, MachineHung, workflow_machine

__all__ = ["InvariantViolated", "MachineHung", "workflow_machine"]
