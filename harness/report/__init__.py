"""What a run writes for people: the versioned JSON report document with its schema (`document`,
the workflow's graph in it from `diagram`), one renderer per format (`markdown_page` with its
`mermaid` diagram, `html_page` with its SVG `drawing` and `plot`), `writing` the three files all
or nothing, a history told as readable steps (`trace`), and the redaction of secrets (`redact`).

Of `harness`, it imports only `harness.checks`, `harness.sim` and `harness.errors` (never the
engines that produce its input).
"""
