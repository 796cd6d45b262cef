"""The layout is a contract: `harness`'s subpackages import down one list (`sim` at the bottom,
`cli`, `bench` and the plugin on top), never up, so no two of them form a cycle; and
`reference_machine` imports none of the other packages, `fault_injection` only it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The rooms of `harness`, bottom first: each imports only rooms before it in this list. The
#: top is the public thin modules, then the benchmark suite and the plugin, then the CLI.
LAYERS = ("sim", "checks", "adapters", "report", "engines", "stateful", "strategies", "bench",
          "pytest_plugin", "cli")
TOP = LAYERS[LAYERS.index("stateful"):]
#: Modules every room may import: they import nothing of `harness` but each other.
FOUNDATIONS = ("errors", "files")
RANK = {"stateful": 5, "strategies": 5, "bench": 6, "pytest_plugin": 6, "cli": 7}


def imported(path: Path) -> set[str]:
    """Gives every module a file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def room(module: str) -> str | None:
    """Gives the room of `harness` a module name lies in (None: not in `harness`)."""
    parts = module.split(".")
    if parts[0] != "harness":
        return None
    return parts[1] if len(parts) > 1 else ""


def rank(name: str) -> int:
    return RANK.get(name, LAYERS.index(name))


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


HARNESS = [path for path in sources("harness") if path.parent != ROOT / "harness"
           or path.stem in TOP]


def upward_imports(path: Path, base: Path) -> list[str]:
    """Gives what a module under `base` (a `harness` folder) imports against the layering: a
    module imports its own room, rooms below it, and the foundations `harness.errors` and
    `harness.files` (writing outputs, which need nothing else); only the top imports
    the `harness` package itself (whose `__init__` imports every room) and `harness.adapters`."""
    relative = path.relative_to(base)
    own = relative.parts[0] if len(relative.parts) > 1 else relative.stem
    problems = []
    for module in sorted(imported(path)):
        target = room(module)
        if target is None or target in FOUNDATIONS or target == own:
            continue
        if target in ("", "adapters") and module.count(".") <= 1 and own in TOP:
            continue
        if target not in LAYERS or rank(target) >= rank(own):
            problems.append(f"{relative} (room {own!r}) imports {module} (room {target!r})")
    return problems


@pytest.mark.parametrize("path", HARNESS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_room_imports_only_rooms_below_it(path: Path) -> None:
    """Every module of `harness` keeps to the order sim < checks < adapters < report < engines
    < stateful, strategies < bench, the plugin < cli."""
    assert upward_imports(path, ROOT / "harness") == []


@pytest.mark.parametrize("name", FOUNDATIONS)
def test_the_foundations_import_only_each_other(name: str) -> None:
    rooms = {room(module) for module in imported(ROOT / "harness" / f"{name}.py")}
    assert rooms - {None, *FOUNDATIONS} == set()


@pytest.mark.parametrize(("package", "allowed"), [
    ("reference_machine", set()),
    ("fault_injection", {"reference_machine"}),
])
def test_the_lower_packages_stay_below(package: str, allowed: set[str]) -> None:
    """`reference_machine` imports none of the others; `fault_injection` only it."""
    ours = {"reference_machine", "fault_injection", "harness", "scenarios"} - {package}
    for path in sources(package):
        for module in imported(path):
            top = module.split(".")[0]
            assert top not in ours - allowed, f"{path.relative_to(ROOT)} imports {module}"


def test_every_room_says_what_it_holds() -> None:
    """Each subpackage's `__init__` has a docstring naming what it may import."""
    for init in sorted((ROOT / "harness").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc, f"{init.relative_to(ROOT)}: say what the room may import"


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The rule is not vacuous: a `sim` module importing an engine, even inside a function, or
    `checks` importing the `harness` package, is named."""
    base = tmp_path / "harness"
    (base / "sim").mkdir(parents=True)
    (base / "checks").mkdir()
    (base / "sim" / "bad.py").write_text("def f():\n    from harness.engines.fuzz import fuzz\n")
    (base / "checks" / "worse.py").write_text("import harness\nfrom harness.sim import x\n")
    assert upward_imports(base / "sim" / "bad.py", base) == [
        "sim/bad.py (room 'sim') imports harness.engines.fuzz (room 'engines')",
        "sim/bad.py (room 'sim') imports harness.engines.fuzz.fuzz (room 'engines')"]
    assert upward_imports(base / "checks" / "worse.py", base) == [
        "checks/worse.py (room 'checks') imports harness (room '')"]


def test_every_room_imports_by_its_dotted_name() -> None:
    """No public name shadows a room: `import harness.checks.invariants.registry as c` works
    (a room named `check` or `explore` would be hidden behind the functions `harness.check` and
    `harness.explore`)."""
    import importlib

    import harness

    for room_name in ("sim", "checks", "adapters", "report", "engines", "bench", "cli"):
        module = importlib.import_module(f"harness.{room_name}")
        assert getattr(harness, room_name) is module, room_name
