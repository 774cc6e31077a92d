"""Run the probe program with an environment's own Python and read what it printed.

The one place in envkit.probe that starts processes: an argv list (never a shell), isolated mode (``-I``: the
environment's site-packages, but no PYTHONPATH, no user site, not the current directory on sys.path, on every
Python since 3.4; the probe's zipapp, envkit.probe.zipapp, is all it adds there), a clean environment that
keeps only what decides which GPUs a framework sees and where it finds its libraries, its own process group, and a
time limit after which the whole group is killed. Whatever the probe does, the caller gets a ProbeResult.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

from envkit.errors import BadInputError
from envkit.probe.result import ProbeResult, cut_off, parse_output
from envkit.probe.zipapp import probe_program
from envkit.state.userdirs import user_dirs
from envkit.system.process import run_captured

FRAMEWORK_CHOICES = ("auto", "torch", "tensorflow", "jax", "mxnet")

# Passed through to the probe: what decides which GPUs it sees and where libraries are found. Nothing else.
_KEEP_VARIABLES = (
    "PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "CUDA_HOME", "CUDA_PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "CONDA_PREFIX", "VIRTUAL_ENV",
    "SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
)
_KEEP_PREFIXES = ("NCCL_",)
# Set for the probe: frameworks must not take a whole shared GPU's memory for a small check.
_PROBE_SETTINGS = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
# Where the frameworks keep settings and caches, each set to a directory of the check's scratch (not $HOME).
_SCRATCH_HOMES = {"KERAS_HOME": "keras", "XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config",
                  "TORCH_HOME": "torch", "TRITON_CACHE_DIR": "triton", "CUDA_CACHE_PATH": "nv-cache",
                  "MPLCONFIGDIR": "matplotlib"}


@dataclass(frozen=True)
class ProbeOptions:
    framework: str = "auto"
    multi_gpu: bool = False
    bench: bool = False
    timeout: float = 300.0
    companions: tuple[str, ...] = ()  # the packages the build installs beside the framework: each one is checked


def probe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The probe's environment: the kept variables of ``environ``, plus the probe's own settings."""
    kept = {k: v for k, v in environ.items() if k in _KEEP_VARIABLES or k.startswith(_KEEP_PREFIXES)}
    kept.setdefault("PATH", os.defpath)
    return {**kept, **_PROBE_SETTINGS}


def default_python(environ: Mapping[str, str]) -> Path:
    """The active environment's Python: $VIRTUAL_ENV's, else $CONDA_PREFIX's, else ``python3`` on PATH.

    A virtual environment wins over conda: conda's base environment is often active underneath it. An active one
    without a Python (deleted, its Python gone) is bad input: checking another Python would judge what the user
    did not ask about.
    """
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(variable)
        if prefix:
            candidate = Path(prefix) / "bin" / "python"
            if candidate.exists():
                return candidate
            gone = "is gone" if not os.path.lexists(prefix) else f"has no working {candidate}"
            raise BadInputError(f"the active environment ${variable}={prefix} {gone}: there is no Python in it to "
                                "check",
                                hint="Deactivate it (`deactivate`, `conda deactivate`) or unset the variable, or pass "
                                     "the Python to check: --python PATH/TO/ENV/bin/python.")
    found = shutil.which("python3", path=environ.get("PATH", os.defpath))
    if found is None:
        raise BadInputError("no Python to check: no active environment and no python3 on PATH",
                            hint="Pass --python PATH/TO/ENV/bin/python.")
    return Path(found)


def locate_python(python: Path, environ: Mapping[str, str]) -> Path:
    """The Python to run, as an absolute path (a relative one would be searched on PATH when it is run): a bare
    command name (``--python python3.11``) looked up on PATH as a shell would (else the file of that name here), a
    path (``./python3``, ``envs/dl/bin/python``) as it is."""
    if len(python.parts) == 1 and not python.is_absolute():
        found = shutil.which(str(python), path=environ.get("PATH", os.defpath))
        if found is not None:
            return Path(found)
    return python.absolute() if python.exists() else python  # (a missing one is said as it was given)


def check_framework(framework: str) -> None:
    """Raise BadInputError for a framework the probe does not know."""
    if framework not in FRAMEWORK_CHOICES:
        raise BadInputError(f"--framework {framework}: expected one of {', '.join(FRAMEWORK_CHOICES)}")


def check_request(python: Path, options: ProbeOptions) -> None:
    """Raise BadInputError for a Python that is not there or a framework the probe does not know."""
    check_framework(options.framework)
    odd = [name for name in options.companions if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name)]
    if odd:
        raise BadInputError(f"{odd[0]!r} is not the name of a package: a companion to check is named as pip names it")
    if not python.exists():
        raise BadInputError(f"--python {python}: no such file", hint="Pass the path of the environment's python.")
    if python.is_dir():
        # An environment's directory (PREFIX/bin/python) or its bin directory: the Python in it, where there is one.
        inside = next((candidate for candidate in (python / "bin" / "python", python / "python")
                       if candidate.is_file()), None)
        raise BadInputError(f"--python {python} is a directory",
                            hint=f"Did you mean {inside}?" if inside is not None
                            else "Pass the path of a Python interpreter (an environment's bin/python).")


def run_probe(
    python: Path,
    options: ProbeOptions,
    environ: Mapping[str, str],
    script: Optional[Path] = None,
    *,
    cache_dir: Optional[Path] = None,
) -> ProbeResult:
    """Run the probe with ``python``; a hang, a crash or garbage output becomes a ProbeResult, never an exception.

    ``script``: a probe program to run instead of envkit's own, which is assembled into ``cache_dir`` (by default
    envkit's user cache directory) on its first run. Raises BadInputError only when ``python`` cannot be run at all
    (no such file, not executable).
    """
    check_request(python, options)
    if script is not None:
        return _run(python, script, options, environ)
    with probe_program(cache_dir if cache_dir is not None else user_dirs(os.environ).cache) as program:
        return _run(python, program, options, environ)


@contextlib.contextmanager
def probe_scratch(environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """The probe's environment (:func:`probe_environment`) with a scratch directory of its own, removed afterwards
    (also when the probe is cut off: envkit.system.scratch): its $TMPDIR, and the homes of the frameworks' settings and
    caches (Keras writes keras.json into ~/.keras, CUDA its JIT cache into ~/.nv, ...), so that a check writes
    nothing into $HOME. Where $TMPDIR cannot be written, the environment as it is."""
    from envkit.system.scratch import make_scratch, remove

    try:
        tmpdir = make_scratch("check")
    except OSError:
        tmpdir = None
    settings = {"TMPDIR": str(tmpdir)} if tmpdir is not None else {}
    if tmpdir is not None:
        settings.update({variable: str(tmpdir / name) for variable, name in _SCRATCH_HOMES.items()})
    try:
        yield {**probe_environment(environ), **settings}
    finally:
        remove(tmpdir)


def _run(python: Path, program: Path, options: ProbeOptions, environ: Mapping[str, str]) -> ProbeResult:
    argv = [str(python), "-I", str(program), options.framework]
    argv += ["--multi-gpu"] * options.multi_gpu + ["--bench"] * options.bench
    if options.companions:
        argv.append(f"--companions={','.join(options.companions)}")
    with probe_scratch(environ) as env:
        try:
            done = run_captured(argv, env, options.timeout)
        except OSError as exc:
            raise BadInputError(f"cannot run {python}: {exc.strerror or exc}",
                                hint="Pass the path of a Python interpreter with --python.") from None
    if done.returncode is None:
        return cut_off(str(python), options.timeout, done.elapsed, done.stdout, done.stderr)
    return parse_output(str(python), done.returncode, done.elapsed, done.stdout, done.stderr)
