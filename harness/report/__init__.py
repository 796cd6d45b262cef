"""What a run writes for people: the versioned JSON report document with its schema, its Markdown
and HTML renderings, a history told as readable steps, and the redaction of secrets.

Of `harness`, it imports only `harness.checks`, `harness.sim` and `harness.errors` (never the
engines that produce its input).
"""
