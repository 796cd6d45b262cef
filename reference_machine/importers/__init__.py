"""Importers: definitions other tools write (Amazon States Language, XState, SCXML) turned into
`WorkflowDefinition`s. Empty until issue 19 fills it; like the rest of `reference_machine`, it
imports nothing of `fault_injection` or `harness`.
"""
