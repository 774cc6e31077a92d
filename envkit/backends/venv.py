"""Pure-pip builds in a virtual environment made from a Python already on this machine: by uv, else by venv."""

from __future__ import annotations

from envkit.backends.base import Context, OnLine, command_text, run_step
from envkit.backends.installers import uses_uv
from envkit.backends.plan import Plan
from envkit.errors import InstallError
from envkit.system.launch import python_module
from envkit.system.scratch import scratch_dir


class VenvBackend:
    name = "venv"

    def _argv(self, plan: Plan, context: Context) -> list[str]:
        python = context.tools.python
        if python is None:
            raise InstallError(f"no Python {plan.python} on this machine to make a venv with",
                               hint="Use --backend rattler: it brings its own Python.")
        if uses_uv(context.tools.uv, plan.python):
            return [str(context.tools.uv), "venv", "--quiet", "--python", str(python), str(plan.prefix)]
        return python_module(python, "venv", str(plan.prefix))  # with pip: it installs into this one

    def describe(self, plan: Plan, context: Context) -> list[str]:
        return [command_text(self._argv(plan, context))]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        argv = self._argv(plan, context)
        # `-m venv` runs ensurepip, whose bundled pip (Python 3.7 and 3.8's) copies its CA bundle out of the wheel
        # into $TMPDIR and never deletes it: 270 KB left in /tmp by every venv. It gets a directory of its own.
        with scratch_dir("venv") as scratch:
            run_step(argv, {**context.environ, "TMPDIR": str(scratch)}, on_line, f"making the venv at {plan.prefix} failed",
                     hint="The lines above are the installer's; fix what they say, or try --backend rattler.")
