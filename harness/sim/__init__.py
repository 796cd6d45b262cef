"""The simulated world, at the bottom of `harness`: the simulator and its options, the tool world
and its effect ledger, the machine-under-test protocol and the reference machine's wrapper,
history records, the one keyed choice source, and payloads drawn from schemas.

It imports nothing of `harness` but `harness.errors` (and `fault_injection`, `reference_machine`).
"""
