"""What a history is checked for: the invariants (built in, and `@invariant` for a user's own),
coverage of the definition, and metrics derived from the transition records.

Of `harness`, it imports only `harness.sim` (for the records) and `harness.errors`.
"""
