"""The engines that explore a workflow: native seeded fuzzing, shrinking, replay files,
exhaustive bounded search, the Hypothesis machine, and campaigns (a target run through an
engine into a report section).

It may import `harness.report`, `harness.adapters`, `harness.checks` and `harness.sim`.
"""
