"""The smoke subset (`python -m pytest -m smoke`) runs every CLI command end to end: a command
added without a smoke test fails here, naming it.

The tests are read, not run: a test counts as smoke when it, its class or its module carries
`pytest.mark.smoke`; it runs a command when its body, or a function of its module it calls,
calls a runner (`cli`, `run`, `invoke`, `main`) with the command's name first (`cli("lint",
...)`, `invoke(group, ["lint", ...])`), or spells the command line out (`[sys.executable, "-m",
"harness.cli", "lint", ...]`)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.main import cli

TESTS = Path(__file__).resolve().parent
#: What the tests call to run the command line
RUNNERS = frozenset({"cli", "run", "invoke", "main"})
#: What comes just before the command in a command line spelled out
PROGRAMS = frozenset({"fsmharness", "harness.cli"})


def _is_smoke(decorators: list[ast.expr]) -> bool:
    return any(ast.unparse(each) in ("pytest.mark.smoke", "mark.smoke") for each in decorators)


def _module_is_smoke(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in node.targets):
            return "mark.smoke" in ast.unparse(node.value)
    return False


def smoke_tests(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    """Gives the test functions of a module that carry the smoke marker."""
    everything = _module_is_smoke(tree)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            in_class = everything or _is_smoke(node.decorator_list)
            yield from (method for method in node.body
                        if isinstance(method, ast.FunctionDef)
                        and method.name.startswith("test")
                        and (in_class or _is_smoke(method.decorator_list)))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test") and (
                everything or _is_smoke(node.decorator_list)):
            yield node


def _text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def commands_run(test: ast.FunctionDef, names: frozenset[str],
                 helpers: dict[str, ast.FunctionDef]) -> set[str]:
    """Gives the commands among `names` a test's body runs, itself or through the `helpers`
    (its module's functions) it calls."""
    found: set[str] = set()
    todo, seen = [test], {test.name}
    while todo:
        found |= _commands_in(todo.pop(), names, helpers, todo, seen)
    return found


def _commands_in(function: ast.FunctionDef, names: frozenset[str],
                 helpers: dict[str, ast.FunctionDef], todo: list[ast.FunctionDef],
                 seen: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.id if isinstance(callee, ast.Name) else (
                callee.attr if isinstance(callee, ast.Attribute) else "")
            if name in helpers and name not in seen:
                seen.add(name)
                todo.append(helpers[name])
            if name not in RUNNERS:
                continue
            for argument in node.args:
                first = (argument.elts[0] if isinstance(argument, ast.List | ast.Tuple)
                         and argument.elts else argument)
                if _text(first) in names:
                    found.add(str(_text(first)))
                    break
        elif isinstance(node, ast.List | ast.Tuple):
            words = [_text(each) for each in node.elts]
            found.update(str(after) for before, after in itertools.pairwise(words)
                         if before in PROGRAMS and after in names)
    return found


def smoke_coverage(folder: Path, names: frozenset[str]) -> dict[str, list[str]]:
    """Gives, for each command of `names`, the smoke tests under `folder` that run it."""
    covered: dict[str, list[str]] = {name: [] for name in sorted(names)}
    for path in sorted(folder.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        helpers = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)
                   and not node.name.startswith("test")}
        for test in smoke_tests(tree):
            for name in commands_run(test, names, helpers):
                covered[name].append(f"{path.relative_to(folder)}::{test.name}")
    return covered


COMMANDS = frozenset(cli.commands)


@pytest.mark.smoke
def test_every_cli_command_has_a_smoke_test() -> None:
    covered = smoke_coverage(TESTS, COMMANDS)
    bare = [name for name, tests in covered.items() if not tests]
    assert not bare, (f"no smoke test runs `fsmharness {', '.join(bare)}`: mark one of its "
                      f"end-to-end tests with @pytest.mark.smoke")


def test_the_scan_finds_each_form_a_test_runs_a_command_in(tmp_path: Path) -> None:
    """A marked function, a marked class's methods and a marked module's tests count, in each
    form of call; an unmarked test and a command only mentioned do not."""
    (tmp_path / "test_forms.py").write_text('''
import pytest

@pytest.mark.smoke
def test_by_helper():
    cli("lint", "flow.yaml")

@pytest.mark.smoke
class TestMarked:
    def test_by_runner(self):
        CliRunner().invoke(group, ["fuzz", "flow.yaml"])

class TestPartly:
    @pytest.mark.smoke
    def test_spelled_out(self):
        subprocess.run([sys.executable, "-m", "harness.cli", "explore", "flow.yaml"])

    def test_unmarked(self):
        cli("bench")

@pytest.mark.smoke
def test_only_mentioned():
    assert "schema" in cli("diagram", "flow.yaml").stdout

def helper():
    return cli("import", "flow.asl.json")

@pytest.mark.smoke
def test_through_a_helper():
    assert helper().returncode == 0
''')
    (tmp_path / "test_module.py").write_text('''
import pytest

pytestmark = [pytest.mark.smoke]

def test_main():
    main(["report", "r.json"])
''')
    names = frozenset({"lint", "fuzz", "explore", "bench", "schema", "diagram", "report",
                       "import"})
    assert smoke_coverage(tmp_path, names) == {
        "bench": [], "schema": [],
        "diagram": ["test_forms.py::test_only_mentioned"],
        "explore": ["test_forms.py::test_spelled_out"],
        "fuzz": ["test_forms.py::test_by_runner"],
        "import": ["test_forms.py::test_through_a_helper"],
        "lint": ["test_forms.py::test_by_helper"],
        "report": ["test_module.py::test_main"]}


def test_the_readme_tells_the_suites_duration_and_the_subset() -> None:
    """Issue 43: a new user learns how long the test command takes, and the quick first
    pass, from the README's first section."""
    first = (TESTS.parent / "README.md").read_text(encoding="utf-8").split("\n## ", 2)[1]
    assert "python -m pytest -m smoke" in first
    assert "about 14 minutes" in first and "2-core" in first
