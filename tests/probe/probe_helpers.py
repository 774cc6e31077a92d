"""Helpers shared by the probe tests (imported by name: tests/probe is on sys.path through its conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from envkit.machines.profile import MachineProfile
from envkit.probe.result import ProbeResult
from envkit.probe.runner import ProbeOptions, run_probe
from envkit.probe.zipapp import cached_program
from envkit.slurm.job_context import apply_job_context, job_context
from envkit.state.userdirs import user_dirs
from support.next_steps import check_pasted

HERE = Path(__file__).parent
FAKES = HERE / "fakes"
DATA = HERE / "data"
PROFILES = HERE.parent / "profiles"
REPO = HERE.parent.parent

# One GPU of each kind the tests use, in the stand-ins' form.
A100 = {"name": "NVIDIA A100-SXM4-80GB", "capability": [8, 0], "memory": 85899345920}
V100 = {"name": "Tesla V100-SXM2-32GB", "capability": [7, 0], "memory": 34359738368}
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "capability": [12, 0], "memory": 34190917632}


@dataclass(frozen=True)
class FakeEnv:
    root: Path
    python: Path
    site: Path


def base_environ(**extra: str) -> dict[str, str]:
    """What the probe's runner is given in the tests: PATH, and only the variables a test sets."""
    return {"PATH": os.environ.get("PATH", os.defpath), **extra}


def probe(python: Path, framework: str = "auto", environ: Optional[Mapping[str, str]] = None,
          timeout: float = 60.0, multi_gpu: bool = False, bench: bool = False) -> ProbeResult:
    options = ProbeOptions(framework=framework, multi_gpu=multi_gpu, bench=bench, timeout=timeout)
    return run_probe(python, options, environ if environ is not None else base_environ())


def raw_probe(python: Path, *args: str, environ: Optional[Mapping[str, str]] = None) -> dict:
    """The probe's JSON as printed, run directly (for checks on the format itself)."""
    program = cached_program(user_dirs(os.environ).cache)  # the tests' own cache (tests/conftest.py)
    done = subprocess.run([str(python), "-I", str(program), *args], capture_output=True, text=True, timeout=60,
                          env=dict(environ if environ is not None else base_environ()))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def narrowed(profile: MachineProfile, **environ: str) -> MachineProfile:
    """``profile`` as doctor narrows the one it detects: by CUDA_VISIBLE_DEVICES (and the Slurm job) in ``environ``."""
    return apply_job_context(profile, job_context(environ))


def envkit(*args: str, env: Optional[Mapping[str, str]] = None, timeout: float = 120,
           cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """envkit as a user runs it: a subprocess with a clean environment (no ENVKIT_*, no active venv)."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("ENVKIT_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_VISIBLE_DEVICES",
                                                                "SLURM_JOB_ID")}
    environment.update(env or {})
    done = subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=environment,
                          timeout=timeout, cwd=cwd or REPO)
    check_pasted(args, done.stdout + done.stderr, environment, cwd or REPO)
    return done
