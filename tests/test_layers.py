"""The house rules, checked on the code itself: each room of the house imports only the rooms on its floors below,
no modules import each other in a loop, and no module grows huge.

A room is a package of envkit/ or a module at its root. docs/architecture.md draws the floors; FLOORS states them
(which room may import which) and these tests keep the drawing true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "envkit"
MAX_LINES = 450

# The ground: what every room may import, and which imports nothing of envkit. ("envkit" is the package
# itself: its __version__.)
GROUND = ("envkit", "envkit.errors", "envkit.versions", "envkit.text")
# Each room above the ground -> the rooms it may import besides the ground, from the lowest floor up.
FLOORS: dict[str, tuple[str, ...]] = {
    "envkit.state": (),
    "envkit.system": ("envkit.state",),
    "envkit.machines": ("envkit.state",),
    "envkit.storage": ("envkit.state",),
    "envkit.catalog": ("envkit.machines", "envkit.state"),
    "envkit.detect": ("envkit.machines", "envkit.system"),
    "envkit.site": ("envkit.machines", "envkit.state"),
    "envkit.pick": ("envkit.catalog", "envkit.machines"),  # pure: no I/O, no detection
    "envkit.backends": ("envkit.catalog", "envkit.machines", "envkit.state", "envkit.system"),
    "envkit.shared": ("envkit.site", "envkit.state"),
    "envkit.slurm": ("envkit.machines", "envkit.site", "envkit.system"),
    "envkit.probe": ("envkit.catalog", "envkit.machines", "envkit.pick", "envkit.slurm", "envkit.state",
                     "envkit.system"),
    "envkit.create": ("envkit.backends", "envkit.catalog", "envkit.machines", "envkit.pick", "envkit.probe",
                      "envkit.shared", "envkit.site", "envkit.state", "envkit.storage", "envkit.system"),
    "envkit.lockfile": ("envkit.backends", "envkit.catalog", "envkit.create", "envkit.machines", "envkit.pick",
                        "envkit.state", "envkit.system"),
    "envkit.travel": ("envkit.catalog", "envkit.lockfile", "envkit.machines", "envkit.state", "envkit.system"),
    "envkit.maintain": ("envkit.backends", "envkit.catalog", "envkit.lockfile", "envkit.machines", "envkit.pick",
                        "envkit.state", "envkit.system"),
}
FLOORS["envkit.commands"] = tuple(FLOORS)  # the command line uses the whole library, which never imports it
FLOORS["envkit.cli"] = ("envkit.commands",)
FLOORS["envkit.__main__"] = ("envkit.cli",)
# Modules that must not import a room their own room may: (module prefix, module prefix it never imports, why)
NEVER = [
    ("envkit.storage", "envkit.state.config", "the caches' place is given to storage; create/storage.py reads the "
                                              "config"),
]


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


def imported(path: Path, name: str) -> set[str]:
    """Every module an envkit module imports, at any depth of the code (lazy imports count too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _reaches(module: str, forbidden: str) -> bool:
    return module == forbidden or module.startswith(forbidden + ".")


def room(module: str) -> str:
    """The room a module (or a name imported from one) is in: envkit.pick for envkit.pick.resolve.rank, envkit for
    envkit.__version__."""
    parts = module.split(".")
    if len(parts) > 1 and ((PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file()):
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def rooms_imported(path: Path, name: str) -> set[str]:
    return {room(m) for m in imported(path, name) if m == "envkit" or m.startswith("envkit.")} - {room(name)}


@pytest.mark.parametrize("name,path", modules(), ids=[name for name, _ in modules()])
def test_no_import_runs_up(name: str, path: Path):
    here = room(name)
    assert here in GROUND or here in FLOORS, f"{here} stands on no floor: add it to FLOORS and docs/architecture.md"
    allowed = set(GROUND) if here not in GROUND else set()
    allowed.update(FLOORS.get(here, ()))
    wrong = sorted(rooms_imported(path, name) - allowed)
    assert not wrong, f"{name} imports {wrong}: not on a floor below {here} (docs/architecture.md)"
    for prefix, bad, why in NEVER:
        if _reaches(name, prefix):
            reached = sorted(m for m in imported(path, name) if _reaches(m, bad))
            assert not reached, f"{name} imports {reached}: {why}"


def test_the_rule_sees_a_violation(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from envkit.create.execute import execute\n    from envkit import __version__\n")
    assert rooms_imported(bad, "envkit.backends.bad") == {"envkit.create", "envkit"}
    assert "envkit.create" not in FLOORS["envkit.backends"]


def test_the_floors_draw_without_a_circle():
    """The floors themselves: each room's imports stand on floors below it, so no loop of rooms is allowed, and
    every room of envkit/ has its floor."""
    floor: dict[str, int] = {ground: 0 for ground in GROUND}

    def height(name: str, seen: tuple[str, ...] = ()) -> int:
        assert name not in seen, f"the floors allow a circle: {' -> '.join([*seen, name])}"
        if name not in floor:
            floor[name] = 1 + max((height(below, (*seen, name)) for below in FLOORS[name]), default=0)
        return floor[name]

    for name in FLOORS:
        height(name)
    every = {room(name) for name, _ in modules()}
    assert every <= set(floor), sorted(every - set(floor))
    assert set(FLOORS) - every == set(), "FLOORS names a room that is not in envkit/"


@pytest.mark.parametrize("name,path", modules(), ids=[name for name, _ in modules()])
def test_no_module_is_over_the_size_limit(name: str, path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines (at most {MAX_LINES}): split it by concern"


def import_cycles() -> list[list[str]]:
    """The groups of envkit modules that import each other in a loop (lazy imports count), by Tarjan's algorithm."""
    names = {name for name, _ in modules()}
    edges = {name: sorted(m for m in imported(path, name) if m in names and m != name) for name, path in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return cycles


def test_no_modules_import_each_other_in_a_loop():
    """A loop means two modules that cannot be understood (or moved) one without the other: what they share goes
    in a module of its own (maintain/findings.py, maintain/problems.py, commands/making.py)."""
    assert import_cycles() == []


def test_the_command_line_module_keeps_only_the_wiring():
    """envkit/cli.py holds the typer app, the global options and the wiring (under 300 lines); the commands live in
    envkit/commands/, one module per group, each registering its commands."""
    cli = PACKAGE / "cli.py"
    assert len(cli.read_text().splitlines()) < 300
    groups = [p for p in (PACKAGE / "commands").glob("*.py") if "\ndef register(" in p.read_text()]
    assert len(groups) >= 8 and "@app.command" not in cli.read_text()
