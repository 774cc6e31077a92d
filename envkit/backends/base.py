"""The interface every backend implements: say what it will run, then make the environment's prefix with Python
and the plan's conda packages. The pip steps that follow are the same for all of them (envkit.backends.installers)."""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Protocol, Sequence

from envkit.backends.plan import Plan
from envkit.backends.tools import Tools
from envkit.errors import BadInputError, InstallError
from envkit.system.process import Pending, run_streamed, start_captured

OnLine = Callable[[str], None]

# How long one installer command may run, and may stay silent (no byte of output), before envkit stops it (its
# whole process group) and undoes the run: a `micromamba create` that hangs must not hang envkit with it. Silence is
# generous: uv says nothing while it downloads a 3 GB wheel over a slow link. Both can be changed per run.
INSTALL_TIMEOUT = 6 * 3600.0
INSTALL_SILENCE = 3600.0
TIMEOUT_VARIABLE, SILENCE_VARIABLE = "ENVKIT_INSTALL_TIMEOUT", "ENVKIT_INSTALL_SILENCE"


@dataclass(frozen=True)
class Context:
    """What a backend may use besides the plan: the tools found, the installers' environment, envkit's caches."""

    tools: Tools
    environ: Mapping[str, str]  # already isolated from the user's installer config (installers.installer_environ)
    conda_cache: Path
    mirrors: tuple[str, ...] = ()  # the configured mirrors' URLs: where plain http may go (envkit.system.egress)


class Backend(Protocol):
    name: str

    def describe(self, plan: Plan, context: Context) -> list[str]:
        """The commands (or, for the embedded engine, the operation) that make the prefix, as shown to users."""

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        """Create ``plan.prefix`` with the plan's Python (and conda packages). Raises InstallError on failure."""


def python_of(prefix: Path) -> Path:
    return prefix / "bin" / "python"


PYTHON_CHECK_TIMEOUT = 120.0  # seconds for the new Python to start and say its version (a cold NFS home is slow)


class PythonCheck:
    """An installer's "success" is checked before anything is recorded: the prefix must hold a Python that starts.
    Started at once (start_python_check), so that the Python's start-up runs beside the next step; ``result`` then
    raises InstallError naming what is wrong (an installer that exits 0 having made an empty prefix)."""

    def __init__(self, prefix: Path, pending: Optional[Pending], why: Optional[str]) -> None:
        self.prefix, self.pending, self.why = prefix, pending, why

    def result(self, installer: str) -> None:
        python = python_of(self.prefix)
        why, self.why = self.why, None
        if self.pending is not None:
            done, self.pending = self.pending.finish(PYTHON_CHECK_TIMEOUT), None
            if done.returncode is None:
                why = f"{python} did not answer within {PYTHON_CHECK_TIMEOUT:g} s"
            elif done.returncode != 0 or not done.stdout.strip():
                last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
                why = f"{python} does not run: {last}"
        if why is not None:
            raise InstallError(f"{installer} reported success, but the environment at {self.prefix} holds no working "
                               f"Python ({why})", hint="What this run made was removed. The installer's lines above "
                                                      "may say why; try again, or another --backend.")

    def stop(self) -> None:
        """No result wanted (the step beside it failed otherwise, or was interrupted): its Python is stopped."""
        if self.pending is not None:
            self.pending, pending = None, self.pending
            pending.stop()


def start_python_check(prefix: Path, environ: Mapping[str, str]) -> PythonCheck:
    """Start the check that ``prefix`` holds a Python that starts and says its version (PythonCheck)."""
    python = python_of(prefix)
    if not os.path.lexists(python):
        return PythonCheck(prefix, None, f"there is no {python}")
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        return PythonCheck(prefix, start_captured([str(python), "-I", "-c", code], environ, max_output=1 << 16), None)
    except OSError as error:
        return PythonCheck(prefix, None, f"{python} cannot run: {error.strerror or error}")


def command_text(argv: Sequence[str]) -> str:
    return shlex.join(str(a) for a in argv)


def install_limits(environ: Mapping[str, str]) -> tuple[float, float]:
    """(time limit, silence limit) in seconds for one installer command: the defaults, or what the environment's
    ENVKIT_INSTALL_TIMEOUT and ENVKIT_INSTALL_SILENCE say. BadInputError (exit 2) for a value that is not a
    positive number of seconds."""
    return (seconds_setting(environ, TIMEOUT_VARIABLE, INSTALL_TIMEOUT),
            seconds_setting(environ, SILENCE_VARIABLE, INSTALL_SILENCE))


def seconds_setting(environ: Mapping[str, str], variable: str, default: float) -> float:
    """The positive number of seconds the environment's ``variable`` gives, else ``default``; BadInputError (exit
    2) for anything else."""
    text = environ.get(variable, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise BadInputError(f"{variable}={text!r} is not a positive number of seconds",
                            hint=f"Unset it for the default ({default:g} s), or give seconds: {variable}="
                                 f"{2 * default:g}")
    return value


def run_step(argv: Sequence[str], environ: Mapping[str, str], on_line: OnLine, failure: str, hint: str,
             terminal: bool = False) -> None:
    """Run one installer command within its limits (install_limits); when it fails or is stopped, an InstallError
    with its last lines. ``terminal``: its stderr a pseudo-terminal, for uv to draw its download bars on (the
    progress shown on envkit's own terminal: envkit.create.progress)."""
    timeout, silence = install_limits(environ)
    finished = run_streamed(argv, environ, on_line, timeout=timeout, silence=silence, terminal=terminal)
    if finished.returncode is None:
        why = (f"it printed nothing for {silence:g} s" if finished.silent else f"it ran for {timeout:g} s")
        variable = SILENCE_VARIABLE if finished.silent else TIMEOUT_VARIABLE
        raise InstallError(f"{failure}: {why} and was stopped (with everything it started)", tail=finished.tail,
                           hint=f"What this run made was removed. If it was only slow, allow it more: {variable}=SECONDS.")
    if finished.returncode != 0:
        raise InstallError(f"{failure} (exit code {finished.returncode})", hint=hint, tail=finished.tail)
