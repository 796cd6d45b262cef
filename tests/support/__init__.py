"""Helpers the tests share: machines, worlds, definitions, servers and runners.

pytest puts this folder on the path (`pythonpath` in pyproject.toml), so a test imports a
module of it by its own name (`from planted import PLANTED`); scripts run as a subprocess
put it there themselves."""
