"""The house rules, checked on the code itself: lower floors never import higher ones, and no module grows huge.

docs/architecture.md draws the floors; these tests keep the drawing true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "envkit"
MAX_LINES = 450

# module prefix -> the envkit packages it must never import
FORBIDDEN = {
    "envkit.backends": ("envkit.create", "envkit.commands", "envkit.cli", "envkit.probe"),
    "envkit.backends.plan": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe"),
    "envkit.pick.resolve": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe",
                       "envkit.detect"),
    "envkit.catalog": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe",
                       "envkit.pick.resolve", "envkit.detect"),
    "envkit.detect": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe",
                      "envkit.pick.resolve", "envkit.catalog"),
    "envkit.storage": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe",
                       "envkit.pick.resolve", "envkit.catalog", "envkit.detect", "envkit.state.config"),
    "envkit.machines.profile": ("envkit.create", "envkit.backends", "envkit.commands", "envkit.cli", "envkit.probe",
                       "envkit.pick.resolve", "envkit.catalog", "envkit.detect"),
}


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


@pytest.mark.parametrize("name,path", modules(), ids=[name for name, _ in modules()])
def test_no_import_runs_up(name: str, path: Path):
    if name.startswith(("envkit.commands", "envkit.cli", "envkit.__main__")):
        return
    rules = [bad for prefix, bad in FORBIDDEN.items() if name == prefix or name.startswith(prefix + ".")]
    upward = {"envkit.commands", "envkit.cli"}  # the library never imports the command line
    for bad in rules:
        upward.update(bad)
    wrong = sorted(m for m in imported(path, name) for b in upward if _reaches(m, b))
    assert not wrong, f"{name} imports {wrong}: a lower floor reaching a higher one (docs/architecture.md)"


def test_the_rule_sees_a_violation(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from envkit.create.execute import execute\n")
    assert any(_reaches(m, "envkit.create") for m in imported(bad, "envkit.backends.bad"))


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
