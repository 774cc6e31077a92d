"""The interface every backend implements: say what it will run, then make the environment's prefix with Python
and the plan's conda packages. The pip steps that follow are the same for all of them (envkit.installers)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from envkit.backends.tools import Tools
from envkit.plan import Plan
from envkit.errors import InstallError
from envkit.process import run_streamed

OnLine = Callable[[str], None]


@dataclass(frozen=True)
class Context:
    """What a backend may use besides the plan: the tools found, the installers' environment, envkit's caches."""

    tools: Tools
    environ: Mapping[str, str]  # already isolated from the user's installer config (installers.installer_environ)
    conda_cache: Path


class Backend(Protocol):
    name: str

    def describe(self, plan: Plan, context: Context) -> list[str]:
        """The commands (or, for the embedded engine, the operation) that make the prefix, as shown to users."""

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        """Create ``plan.prefix`` with the plan's Python (and conda packages). Raises InstallError on failure."""


def python_of(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def command_text(argv: Sequence[str]) -> str:
    return shlex.join(str(a) for a in argv)


def run_step(argv: Sequence[str], environ: Mapping[str, str], on_line: OnLine, failure: str, hint: str) -> None:
    """Run one installer command; when it fails, an InstallError with its last lines."""
    finished = run_streamed(argv, environ, on_line)
    if finished.returncode != 0:
        raise InstallError(f"{failure} (exit code {finished.returncode})", hint=hint, tail=finished.tail)
