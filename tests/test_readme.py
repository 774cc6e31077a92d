"""The README's two newcomer commands stay true: CI runs the test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).parent.parent


def readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", (REPO / "README.md").read_text())


def test_readme_gives_exactly_two_commands_install_and_test():
    commands = readme_commands()
    assert len(commands) == 2
    install, tests = commands
    assert install.startswith("python3 -m pip install . && envkit ")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_ci_runs_it_in_a_fresh_venv_as_a_newcomer_would_and_on_the_machine_python():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    runs = [i for i, line in enumerate(ci) if line.split("#")[0].strip() == "readme_tests"]
    assert ci[ci.index("readme_tests() {") + 1] == readme_commands()[1]  # the function runs the command verbatim
    made = next(i for i, line in enumerate(ci) if line.startswith("python3 -m venv "))
    activated = next(i for i, line in enumerate(ci) if line.startswith(". ") and line.endswith("/bin/activate\""))
    left = ci.index("deactivate")
    assert len(runs) == 2 and made < activated < runs[0] < left < runs[1]
