"""The layout is a contract: `harness`'s subpackages import down one list (`sim` at the bottom,
`cli`, `bench` and the plugin on top), never up, so no two of them form a cycle; and
`reference_machine` imports none of the other packages, `fault_injection` only it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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


# -- the module graph: private names stay home, no circles, units a reader can hold -----------

PACKAGES = ("reference_machine", "fault_injection", "harness")
#: The most lines of one module, and of one class, in the three packages.
MODULE_LINES_MAX = 800
CLASS_LINES_MAX = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in sources(package)}


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def import_edges(path: Path, own: str) -> list[tuple[str, tuple[str, ...]]]:
    """Gives each import of module `own` (at its top or inside a function; not those under
    `if TYPE_CHECKING:`, which never run): the module imported, resolved to a module of ours
    where it names a submodule, and the names taken from it."""
    package = own if path.stem == "__init__" else own.rpartition(".")[0]
    edges: list[tuple[str, tuple[str, ...]]] = []
    skipped: set[int] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if _type_checking_only(node):
            skipped.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            edges.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:
                    edges.append((submodule, ()))
                else:
                    edges.append((base, (alias.name,)))
    return edges


def private_imports(path: Path, own: str) -> list[str]:
    """Gives the imports of module `own` that take another module's private name (`from m
    import _x`) or a private module (`_m`) from outside the package that holds it."""
    problems: list[str] = []
    for module, names in import_edges(path, own):
        parts = module.split(".")
        if parts[0] not in PACKAGES:
            continue
        problems.extend(f"{own} imports {name} from {module}" for name in names
                        if name.startswith("_") and not name.startswith("__"))
        for depth, part in enumerate(parts):
            holder = ".".join(parts[:depth])
            if part.startswith("_") and not part.startswith("__") and not (
                    own == holder or own.startswith(holder + ".")):
                problems.append(f"{own} imports the private module {module}")
                break
    return list(dict.fromkeys(problems))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Gives every import circle of a module graph (Tarjan's strongly connected components of
    more than one module, or one importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def module_graph() -> dict[str, set[str]]:
    return {name: {module for module, _ in import_edges(path, name) if module in MODULES}
            for name, path in MODULES.items()}


def oversized(path: Path) -> list[str]:
    """Gives a module's size, and each class's, where over the bounds."""
    text = path.read_text()
    problems = []
    lines = text.count("\n")
    if lines > MODULE_LINES_MAX:
        problems.append(f"{path.relative_to(ROOT)}: {lines} lines")
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ClassDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > CLASS_LINES_MAX:
                problems.append(f"{path.relative_to(ROOT)}: class {node.name}, {length} lines")
    return problems


def test_no_module_imports_anothers_private_names() -> None:
    """A leading underscore means "this module's own": no other module takes such a name, and
    no module outside a package takes that package's private module."""
    problems = [problem for name, path in MODULES.items()
                for problem in private_imports(path, name)]
    assert problems == []


def test_no_import_circle() -> None:
    """No two modules import each other, directly or round a longer way (inside functions
    too): a circle is a seam that was never cut."""
    assert circles(module_graph()) == []


def test_modules_and_classes_stay_readable() -> None:
    """No module over 800 lines, no class over 400: past that, a unit is split along its
    seams."""
    assert [problem for path in MODULES.values() for problem in oversized(path)] == []


def test_the_graph_rules_are_not_vacuous(tmp_path: Path) -> None:
    """A private name taken across modules, a private module taken from outside its package,
    and a circle through a function-level import are each found."""
    module = tmp_path / "mod.py"
    module.write_text("def f():\n    from harness.engines.fuzz import _secret\n"
                      "from reference_machine._decide import decide\n")
    assert sorted(private_imports(module, "harness.report.mod")) == [
        "harness.report.mod imports _secret from harness.engines.fuzz",
        "harness.report.mod imports the private module reference_machine._decide"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"a"}, "b": set()}) == [["a"]]
    assert oversized(ROOT / "tests" / "test_layout.py") == []

