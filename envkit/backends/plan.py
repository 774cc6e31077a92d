"""The plan of an environment: where it goes, its Python, what the backend installs from where. Pure functions.

A plan is what `envkit create --dry-run` prints and what the backends execute; every URL in it is already on the
user's mirror, so the dry run shows exactly what will be fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from packaging.version import Version

from envkit.catalog.model import Build, PythonTable
from envkit.errors import BadInputError
from envkit.machines.profile import MachineProfile
from envkit.state.config import Config, check_transport
from envkit.versions import is_solve_cuda

JUPYTER_PACKAGES = ("ipykernel",)
CUDA_OVERRIDE = "CONDA_OVERRIDE_CUDA"


@dataclass(frozen=True)
class CondaPart:
    """What a conda engine installs: the specs (Python first) from these channels only, in this order."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]
    cuda: Optional[str]  # the __cuda virtual package the solve sees (None: no __cuda, a CPU-only solve)
    cuda_source: str = ""  # where that came from, in words


@dataclass(frozen=True)
class PipPart:
    """One pip install step: these packages, with this index as the only index (no PyPI fallback), and for the
    builds that come from a flat page of links (PyTorch 1.x's torch_stable.html), that page as well."""

    purpose: str
    packages: tuple[str, ...]
    index_url: str
    find_links: Optional[str] = None
    # A file of hash-pinned requirements (``name @ URL --hash=sha256:...``, one per line) installed exactly as they
    # are, instead of ``packages`` from ``index_url``: a lock's pip part (``packages`` then only names them).
    requirements: Optional[Path] = None
    # Each package's local version ("cu126", "cpu"; "": none), pinned before the install (envkit.create.variants)
    # and checked after it (envkit.backends.installers.wrong_builds); None: neither.
    local: Optional[str] = None
    plain: tuple[str, ...] = ()  # packages installed with a plain version where the others carry ``local``
    # Additions (envkit add, create --with): the environment's held build (its constraints files, envkit.backends.
    # held) and the requested packages as a requirements file (``packages`` then only names them).
    constraints: tuple[Path, ...] = ()
    wanted: Optional[Path] = None


@dataclass(frozen=True)
class Plan:
    manifest: str
    build: Build
    name: str
    prefix: Path
    python: Version
    backend: str  # "conda", "rattler" or "venv"
    backend_reason: str
    conda: Optional[CondaPart]  # None for a venv
    pip: tuple[PipPart, ...]
    jupyter: bool
    verify: bool
    profile: MachineProfile
    on_target: bool  # whether the profile is this machine's (so the check after installing can judge its GPUs)
    in_conda_envs: bool = False  # made by name in the user's conda envs directory: `conda activate NAME` finds it
    gpu_unused: Optional[str] = None  # why a CPU build was picked on a machine with GPUs (envkit.pick.cpu_fallback)
    target: Optional[dict] = None  # the machines it is for, when not this one (recorded; see envkit.machines.target)
    unchecked: str = "--no-verify"  # without ``verify``: why not, in words
    companions: tuple[str, ...] = ()  # the framework's other packages (the manifest's), held absent when not installed
    additions: tuple[str, ...] = ()  # the user's own packages (create --with, -r), installed with the build held
    on: Optional[dict] = None  # a personal environment: the site environment it stands on (envkit.backends.on_site)

    @property
    def kind(self) -> str:
        """How the environment is activated: "venv" or "conda" (a conda prefix, whichever engine made it)."""
        return "venv" if self.backend == "venv" else "conda"


def additions_part(step: PipPart, prefix: Path) -> PipPart:
    """The step of the user's packages, reading the build's constraints in ``prefix`` (envkit.backends.guard writes
    them there once the build is in) and their requirements from a file beside them."""
    from dataclasses import replace

    held = prefix / ".envkit"
    return replace(step, constraints=(held / "constraints.txt",), wanted=held / "additions.txt")


def relocated(plan: Plan, prefix: Path) -> Plan:
    """``plan`` made at ``prefix`` instead (create --shared's new version), its steps reading from there."""
    from dataclasses import replace

    steps = tuple(additions_part(step, prefix) if step.constraints else step for step in plan.pip)
    return replace(plan, prefix=prefix, pip=steps)


def default_name(manifest: str, build: Build) -> str:
    """The manifest name plus the variant: torch-cu126, tensorflow-cpu."""
    return f"{manifest}-{build.variant}"


def cuda_for_solve(profile: MachineProfile, environ: Mapping[str, str]) -> tuple[Optional[str], str]:
    """The ``__cuda`` a conda solve should see, as conda decides it, and where it comes from: $CONDA_OVERRIDE_CUDA
    when set (empty: none, as conda reads it), else the highest CUDA the profile's driver supports (None without an
    NVIDIA driver). BadInputError (exit 2) for an override that is not a version (12, 12.4, 12.4.1): it reaches the
    solver, and conda's own command line through the conda backend's environment."""
    driver = str(profile.cuda_driver) if profile.cuda_driver is not None else None
    if CUDA_OVERRIDE in environ:
        said = f"the driver supports {driver}" if driver else "the machine has no NVIDIA driver"
        text = environ[CUDA_OVERRIDE].strip()
        if text and not is_solve_cuda(text):  # conda takes 12, 12.4 and 12.4.1 alike
            raise BadInputError(f"{CUDA_OVERRIDE}={environ[CUDA_OVERRIDE]!r} is not a CUDA version like 12.4",
                                hint="Set it to the CUDA version the solve should see (12.4), to the empty string "
                                     "for none, or unset it to use the machine's driver.")
        return text or None, f"from {CUDA_OVERRIDE}; {said}"
    return driver, "the driver's" if driver else "no NVIDIA driver"


def conda_part(build: Build, python: Version, pythons: PythonTable, config: Config,
               cuda: tuple[Optional[str], str], with_pip: bool) -> CondaPart:
    """The conda install of a conda-made environment: the build's channels and specs, or just Python for a
    pure-pip build. pip comes along whenever pip packages follow, as conda users expect."""
    if build.conda is not None:
        channels, specs = build.conda.channels, build.conda.packages
    else:
        channels, specs = (pythons.conda_channel,), ()
    python_spec = (f"python={python}",)
    pip_spec = ("pip",) if with_pip else ()
    mirrored = tuple(check_transport(config.mirrored(c), config, "channel") for c in channels)
    return CondaPart(channels=mirrored, specs=python_spec + tuple(specs) + pip_spec, cuda=cuda[0], cuda_source=cuda[1])


ADDITIONS = "your packages"


def pip_parts(build: Build, pythons: PythonTable, config: Config, jupyter: bool,
              additions: tuple[str, ...] = (), prefix: Optional[Path] = None) -> tuple[PipPart, ...]:
    """The build's pip packages from its own index only; the user's ``additions`` (create --with) from the default
    index with the build held (its constraints, written in ``prefix`` once the build is in); ipykernel for --jupyter
    from the default index."""
    default_index = check_transport(config.mirrored(pythons.pypi_index), config, "index")
    out = []
    if build.pip is not None and build.pip.packages:
        index = build.pip.index_url or pythons.pypi_index
        links = build.pip.find_links
        out.append(PipPart(f"{build.id} packages", build.pip.packages,
                           check_transport(config.mirrored(index), config, "index"),
                           check_transport(config.mirrored(links), config, "find-links page") if links else None,
                           local=build.pip.local_version, plain=build.pip.plain))
    if additions:
        assert prefix is not None
        out.append(additions_part(PipPart(ADDITIONS, additions, default_index), prefix))
    if jupyter:
        out.append(PipPart("Jupyter kernel", JUPYTER_PACKAGES, default_index))
    return tuple(out)
