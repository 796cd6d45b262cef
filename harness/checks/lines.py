"""Line coverage of the user's own code as guided fuzzing's feedback (an option).

Behaviour coverage (`harness.checks.behaviour`) reads what a run did off its history; it sees
what the machine told and the store kept, not which branch of the machine's own code ran. A
user whose machine hides its logic in Python (a hand-written runtime, a LangGraph node) can
add that code's arcs as behaviours: `FuzzOptions(line_coverage=("my_runtime",))`, or
`fsmharness fuzz --line-coverage my_runtime`. Each run is then measured with coverage.py's
API (its `source` option: a folder, a file's folder, or an importable package), and each arc
it took, `("ln", file, from line, to line)`, is one more behaviour a schedule is kept for.

It costs: coverage.py traces every line of the measured code, so a run of a machine measured
whole is several times slower (`fsmharness bench --only hunt` measures it beside the
strategies). Measure the code where the bugs may hide, not the libraries under it. Another
tracer (a debugger, pytest-cov measuring the same process) is suspended while a run is
measured.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import HarnessError

__all__ = ["LineCoverage", "check_sources"]

T = TypeVar("T")
Arc = tuple[str, str, int, int]
_QUIET = ["no-data-collected", "module-not-measured", "module-not-imported", "no-ctracer",
          "already-imported", "couldnt-parse"]


def check_sources(sources: Sequence[str]) -> tuple[str, ...]:
    """Gives the sources to measure as coverage.py takes them (a folder, or a package's
    name), raising `HarnessError` naming one that is neither an existing path nor an
    importable module, or when coverage.py is not installed."""
    if importlib.util.find_spec("coverage") is None:
        raise HarnessError("options.line_coverage: measuring lines needs coverage.py; "
                           "pip install 'fsmharness[lines]'")
    found = []
    for source in sources:
        if not isinstance(source, str) or not source:
            raise HarnessError(f"options.line_coverage: expected a folder, a file or a "
                               f"package's name, got {source!r}")
        path = Path(source)
        if path.is_dir():
            found.append(str(path.resolve()))
        elif path.is_file():
            found.append(str(path.resolve().parent))
        else:
            try:
                spec = importlib.util.find_spec(source)
            except (ImportError, ValueError):
                spec = None
            if spec is None:
                raise HarnessError(f"options.line_coverage: {source!r} is no folder, file or "
                                   "importable package")
            found.append(source)
    return tuple(found)


class LineCoverage:
    """Measures the arcs a run takes through the given sources (see `check_sources`). The
    coverage.py measurer is made in the process that first measures (a campaign's worker
    child makes its own)."""

    def __init__(self, sources: Sequence[str]) -> None:
        self.sources = check_sources(sources)
        self._measurer: Any = None

    def measure(self, run: Callable[[], T]) -> tuple[T, frozenset[Arc]]:
        """Runs `run` measured; gives what it gave and the arcs it took."""
        measurer = self._measurer
        if measurer is None:
            import coverage

            measurer = self._measurer = coverage.Coverage(
                data_file=None, branch=True, source=list(self.sources), config_file=False)
            measurer.set_option("run:disable_warnings", _QUIET)
        measurer.erase()
        tracer = sys.gettrace()
        measurer.start()
        try:
            result = run()
        finally:
            measurer.stop()
            sys.settrace(tracer)
        data = measurer.get_data()
        arcs: set[Arc] = set()
        for name in data.measured_files():
            for start, end in data.arcs(name) or ():
                arcs.add(("ln", name, start, end))
        return result, frozenset(arcs)
