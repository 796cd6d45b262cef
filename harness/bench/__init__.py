"""The benchmark suite behind `fsmharness bench` and `tests/benchmarks/`: machine shapes, the
contenders that walk them, and the side-by-side timer.

On top of `harness`: it may import any subpackage; none imports it. Inside, each module imports
only modules before it in this order, so none imports one above it: `timing` (the core: the
contender, group and figure types and the side-by-side timer), `planted` (the hand-rolled
runtime and its bugs), one module per group of sections (`shapes`, `durable`, `simulator`,
`engines`, `checkers`, `exhaustive`, `scaling`, `memory`, `hunt`, `langgraph_group`), and
`suite` (the sections, the document, the aims, the comparison) on top.
"""
