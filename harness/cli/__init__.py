"""The `fsmharness` command (the console script is `harness.cli:main`; `python -m harness.cli`
runs it too).

On top of `harness`: it may import any subpackage; none imports it.
"""

from harness.cli.main import main

__all__ = ["main"]
