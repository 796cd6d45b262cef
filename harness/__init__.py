"""The harness: simulator, checkers, exploration, the pytest plugin, the CLI and reports.

Only the CLI exists so far; the rest arrives with the issues that build it.
"""

__all__: list[str] = []
