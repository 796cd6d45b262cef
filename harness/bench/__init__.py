"""The benchmark suite behind `fsmharness bench` and `tests/benchmarks/`: machine shapes, the
contenders that walk them, and the side-by-side timer.

On top of `harness`: it may import any subpackage; none imports it.
"""
