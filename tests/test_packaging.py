"""What a user installs (issue 43): the core stays what fuzzing a definition needs, C extensions
and integrations are extras, the `dev` extra holds what the project's own checks run (with
`test` its former name), and the README's two commands and `.ci/run` agree on installing and
testing."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: the core the project states: what `fsmharness fuzz` imports on its way
CORE = {"pydantic", "pyyaml", "jsonschema", "referencing", "click", "rich", "faker", "freezegun",
        "hypothesis"}
#: what must never be a core dependency: a C extension to build, or an integration's library
HEAVY = {"pygraphviz", "langgraph", "langgraph-checkpoint-sqlite", "langchain-core", "psycopg",
         "redis", "distributed", "dask", "ray", "mkdocs", "mkdocs-material", "coverage",
         "transitions", "python-statemachine", "pytest", "mypy", "ruff"}


def names(requirements: list[str]) -> set[str]:
    """Gives the distribution names of requirement strings, normalised (PEP 503)."""
    found = (re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement) for requirement in requirements)
    return {re.sub(r"[-_.]+", "-", match[0]).lower() for match in found if match}


class TestCore:
    def test_the_core_is_the_stated_one(self) -> None:
        """The core dependencies are exactly the stated ones: adding one is a decision."""
        assert names(PROJECT["dependencies"]) == CORE

    def test_no_c_extension_or_integration_in_the_core(self) -> None:
        """pygraphviz and the integrations' libraries stay in extras."""
        assert not names(PROJECT["dependencies"]) & HEAVY

    def test_pygraphviz_is_the_diagrams_extra(self) -> None:
        assert names(PROJECT["optional-dependencies"]["diagrams"]) == {"pygraphviz"}


class TestDevExtra:
    def test_dev_holds_the_checks_and_the_packaging_tools(self) -> None:
        """`dev` installs what .ci/run runs: pytest, ruff, mypy, build, twine, pygraphviz."""
        assert {"pytest", "ruff", "mypy", "build", "twine", "pygraphviz"} <= names(
            PROJECT["optional-dependencies"]["dev"])

    def test_test_is_an_alias_of_dev(self) -> None:
        """`pip install -e '.[test]'` of older instructions installs the same as `dev`."""
        assert PROJECT["optional-dependencies"]["test"] == ["fsmharness[dev]"]

    def test_every_integration_extra_is_in_dev(self) -> None:
        """The project's tests cover every integration, so `dev` holds each extra's library."""
        dev = names(PROJECT["optional-dependencies"]["dev"])
        for extra, requirements in PROJECT["optional-dependencies"].items():
            if extra not in ("dev", "test"):
                assert names(requirements) <= dev, extra


class TestTwoCommands:
    def test_the_readme_installs_the_core_then_the_dev_extra(self) -> None:
        """The README's first command installs the core only and fuzzes; the second installs
        `dev` and runs the tests."""
        first = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 2)[1]
        install, test = re.findall(r"```bash\n(.*?)```", first, flags=re.DOTALL)
        assert "pip install -e . &&" in install
        assert install.strip().endswith("&& fsmharness fuzz scenarios/")
        assert test.strip() == "pip install -e '.[dev]' && python -m pytest"

    def test_ci_installs_dev_and_runs_the_readme_test_command(self) -> None:
        run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        assert "pip install --quiet -e '.[dev]'" in run
        assert re.search(r"^python -m pytest$", run, flags=re.MULTILINE)

    def test_ci_checks_the_wheel_with_the_core_only(self) -> None:
        """.ci/run builds and checks the wheel and sdist, installs the wheel without extras
        and fuzzes the scenarios it carries."""
        run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        assert "python -m build" in run
        assert 'twine check --strict "$packaged"/dist/*' in run
        assert re.search(r'pip install --quiet "\$packaged"/dist/\*\.whl$', run,
                         flags=re.MULTILINE)
        assert "fsmharness fuzz \"$bundled\"" in run
