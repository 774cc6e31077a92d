"""The machine profile: what a machine's GPU drivers and GPUs can run (NVIDIA's, AMD's, or both).

One shape serves three purposes: ``envkit detect --json`` prints it, a profile file (another machine, a Slurm
partition) is read back from it, and resolution takes it as input. The file contract::

    name: deepnine                 # optional label
    driver_version: "550.54.14"    # optional
    cuda_driver: "12.4"            # highest CUDA the driver supports; absent or null without an NVIDIA driver
    libc: "glibc 2.28"             # optional: the C library (a build whose wheels need a newer glibc is refused);
                                   # absent or null: unknown, and no build is refused for it
    amdgpu: "6.12.12"              # optional: the AMD GPU kernel driver's version, or "kernel 6.8.0-45-generic"
                                   # for the kernel's own amdgpu (AMD GPUs only)
    platform: linux-aarch64        # optional: conda's name of the platform (linux-64, linux-aarch64); absent: linux-64
    l4t: "36.4.4"                  # a Jetson only: its Linux for Tegra release (needs platform linux-aarch64)
    gpus:                          # empty list when there is no GPU
      - name: NVIDIA GeForce RTX 2070
        compute_capability: "7.5"  # null when unknown (detect could not tell; pass --gpu-arch)
        memory_mib: 8192           # optional
      - name: AMD Instinct MI300X  # an AMD GPU says its vendor and its gfx target instead
        vendor: amd
        gfx: gfx942                # null when unknown (pass --gpu-arch gfxNNNN)
    # detect also writes (and a file may keep) each GPU's index and source, and the profile's sources and notes.

Any other key is an error, so that a typo (``gpu:``) cannot turn a GPU machine into one without GPUs. Versions are
quoted: unquoted, YAML reads ``cuda_driver: 12.10`` as the number 12.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from envkit.errors import ProfileError
from envkit.machines.amd import AMD, NVIDIA, VENDORS, AmdgpuDriver
from envkit.text.jsonout import KEY as VERSION_KEY, version_problem
from envkit.machines.platforms import DEFAULT_PLATFORM, LINUX_AARCH64, platform_problem
from envkit.versions import (ComputeCapability, CudaVersion, DriverVersion, GlibcVersion, L4tVersion, parse_gfx,
                             quote_it)

# Keys of MachineProfile.sources: which probe (or file, or option) gave each fact.
DRIVER_VERSION = "driver_version"
CUDA_DRIVER = "cuda_driver"
GPUS = "gpus"
LIBC = "libc"
AMDGPU = "amdgpu"  # the AMD GPU kernel driver
AMD_GPUS = "amd_gpus"  # the probe that listed the AMD GPUs (GPUS: the NVIDIA ones)
GLIBC = "glibc"  # the C library envkit knows the versions of (manylinux wheels name the glibc they need)
PLATFORM = "platform"  # conda's name of the machine's platform (envkit.machines.platforms)
L4T = "l4t"  # a Jetson's Linux for Tegra release


class Gpu(NamedTuple):
    """One GPU as detected or described: its index, name, compute capability (NVIDIA) or gfx target (AMD), memory."""

    index: int  # NVIDIA's: as NVML numbers them; AMD's: as HIP numbers them (KFD's GPU nodes in order)
    name: str
    compute_capability: Optional[ComputeCapability]  # None: no probe could tell (always, for an AMD GPU)
    memory_mib: Optional[int] = None
    source: str = ""
    # Only NVML tells these; they say which GPUs a CUDA_VISIBLE_DEVICES of UUIDs names (envkit.slurm.job_context).
    # Facts of this machine's GPUs, not of a kind of machine: never saved nor compared.
    uuid: Optional[str] = None  # "GPU-..."
    mig_uuids: tuple[str, ...] = ()  # its MIG devices' "MIG-..." when MIG mode is on
    vendor: str = NVIDIA  # or AMD
    gfx: Optional[str] = None  # an AMD GPU's target, "gfx942"; None: unknown (or an NVIDIA GPU)

    @property
    def is_amd(self) -> bool:
        return self.vendor == AMD

    @property
    def arch(self) -> Optional[str]:
        """What decides which code runs on it: "sm_80" or "gfx942"; None when unknown."""
        if self.is_amd:
            return self.gfx
        return self.compute_capability.sm if self.compute_capability else None

    @property
    def description(self) -> str:
        unknown = "unknown gfx target" if self.is_amd else "unknown architecture"
        return f"{self.name} ({self.arch or unknown})"

    @property
    def label(self) -> str:
        return f"{'AMD GPU' if self.is_amd else 'GPU'} {self.index}, {self.description}"


class MachineProfile(NamedTuple):
    """A machine's driver, the highest CUDA it supports and its GPUs, each fact with its source."""

    gpus: tuple[Gpu, ...] = ()
    cuda_driver: Optional[CudaVersion] = None
    driver_version: Optional[DriverVersion] = None
    name: Optional[str] = None
    # One shared empty dict is the default: no code changes a profile's sources in place (they are copied first).
    sources: Mapping[str, str] = {}
    notes: tuple[str, ...] = ()
    # The GPUs the driver lists that CUDA_VISIBLE_DEVICES hides from this process (envkit.slurm.job_context): how
    # the check tells GPUs hidden from a machine without any. A fact of this process, not of the machine: never saved.
    hidden_gpus: tuple[Gpu, ...] = ()
    glibc: Optional[GlibcVersion] = None  # the machine's C library when it is glibc; None: unknown (or another one)
    amdgpu: Optional[AmdgpuDriver] = None  # the AMD GPU kernel driver; None: none found (or not known)

    @property
    def nvidia_gpus(self) -> tuple[Gpu, ...]:
        return tuple(gpu for gpu in self.gpus if not gpu.is_amd)

    @property
    def amd_gpus(self) -> tuple[Gpu, ...]:
        return tuple(gpu for gpu in self.gpus if gpu.is_amd)
    platform: str = DEFAULT_PLATFORM  # linux-64 or linux-aarch64 (envkit.machines.platforms)
    l4t: Optional[L4tVersion] = None  # a Jetson's Linux for Tegra release; None: not a Jetson

    @property
    def is_jetson(self) -> bool:
        """A Jetson: its GPU is the board's integrated one (Tegra), never judged as a discrete GPU."""
        return self.l4t is not None

    @property
    def libc(self) -> Optional[str]:
        """The C library as a profile file says it: "glibc 2.28", or None when unknown."""
        return f"{GLIBC} {self.glibc}" if self.glibc is not None else None

    @property
    def has_driver(self) -> bool:
        return self.cuda_driver is not None

    def whole(self) -> MachineProfile:
        """The machine with the GPUs CUDA_VISIBLE_DEVICES hides put back: what a build must fit to use them."""
        if not self.hidden_gpus:
            return self
        gpus = tuple(sorted(self.gpus + self.hidden_gpus, key=lambda gpu: gpu.index))
        return self._replace(gpus=gpus, hidden_gpus=())

    def to_dict(self) -> dict[str, Any]:
        """The ``envkit detect --json`` form, readable again by :func:`profile_from_dict`. ``libc`` only when known:
        a profile without it reads as before (and in an envkit from before it); so do ``amdgpu``, ``platform`` (only
        when not linux-64) and ``l4t``."""
        known = {LIBC: self.libc} if self.libc is not None else {}
        if self.amdgpu is not None:
            known[AMDGPU] = str(self.amdgpu)
        if self.platform != DEFAULT_PLATFORM:
            known[PLATFORM] = self.platform
        if self.l4t is not None:
            known[L4T] = str(self.l4t)
        return {
            "name": self.name,
            "driver_version": str(self.driver_version) if self.driver_version else None,
            "cuda_driver": str(self.cuda_driver) if self.cuda_driver else None,
            **known,
            "gpus": [_gpu_dict(gpu) for gpu in self.gpus],
            "sources": dict(self.sources),
            "notes": list(self.notes),
        }

    def seen_dict(self) -> dict[str, Any]:
        """The form commands print for the machine they judged: :meth:`to_dict` and the GPUs CUDA_VISIBLE_DEVICES
        hides from this process (never in a saved profile, a record or the site file)."""
        return {**self.to_dict(), "hidden_gpus": [_gpu_dict(gpu) for gpu in self.hidden_gpus]}


def _gpu_dict(gpu: Gpu) -> dict[str, Any]:
    """An NVIDIA GPU as before AMD GPUs were known; an AMD one says its vendor and its gfx target instead of a
    compute capability."""
    arch = {"vendor": AMD, "gfx": gpu.gfx} if gpu.is_amd else {
        "compute_capability": str(gpu.compute_capability) if gpu.compute_capability else None}
    return {"index": gpu.index, "name": gpu.name, **arch, "memory_mib": gpu.memory_mib, "source": gpu.source}


# The keys of a profile and of its GPUs: what to_dict writes (detect --json, records, the site file).
PROFILE_KEYS = ("name", "driver_version", "cuda_driver", LIBC, AMDGPU, PLATFORM, L4T, "gpus", "sources", "notes")
GPU_KEYS = ("index", "name", "compute_capability", "vendor", "gfx", "memory_mib", "source")
# Bounds no real GPU comes near, so that a typo or a corrupt file is not planned with: 16 TiB is over 50 times the
# largest GPU memory of 2026 (288 GB), and no node has a thousand GPUs (envkit job --gpus takes at most 1024).
MAX_MEMORY_MIB = 1 << 24
MAX_GPU_INDEX = 1023
# seen_dict's key: the GPUs CUDA_VISIBLE_DEVICES hid from the command that printed it (detect/list/create/verify
# --json). Read back as a note: the profile is the GPUs that command saw.
_HIDDEN = "hidden_gpus"


def _parse_field(origin: str, where: str, parser: Any, value: Any) -> Any:
    try:
        return parser(value)
    except ValueError as exc:
        raise ProfileError(f"machine profile {origin}: {where}: {exc}") from None


def _parse_version(origin: str, where: str, parser: Any, value: Any) -> Any:
    """A version field: text, never a YAML number (12.10 would be read as 12.1)."""
    problem = quote_it(value)
    if problem:
        raise ProfileError(f"machine profile {origin}: {where}: {problem}")
    return _parse_field(origin, where, parser, value)


def not_text(value: Any) -> Optional[str]:
    """Why a value that should be text is not, when YAML read unquoted text as something else: a number
    (:func:`envkit.versions.quote_it`: '3.10 must be quoted ("3.10"): YAML reads 3.10 as the number 3.1') or
    true/false; None for anything else (the caller says what it expected)."""
    if isinstance(value, bool):
        return "must be quoted: YAML reads an unquoted yes, no, on, off, true or false as true/false"
    return quote_it(value)


def _known_keys(data: Mapping, keys: tuple[str, ...], origin: str, where: str) -> None:
    """ProfileError naming the first key of ``data`` that is not one of ``keys`` (and the one it may mean)."""
    unknown = [key for key in data if key not in keys]
    if not unknown:
        return
    import difflib

    key = unknown[0]
    close = difflib.get_close_matches(str(key), keys, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    raise ProfileError(f"machine profile {origin}: {where}unknown key {key!r}{guess}; the keys are: {', '.join(keys)}")


def profile_from_dict(data: Any, origin: str) -> MachineProfile:
    """Validate a profile read from a file (or detect's JSON). ``origin`` names it in errors and in sources."""
    if not isinstance(data, Mapping):
        raise ProfileError(f"machine profile {origin}: expected a mapping with 'cuda_driver' and 'gpus' keys")
    _known_keys(data, (*PROFILE_KEYS, _HIDDEN, VERSION_KEY), origin, "")
    if VERSION_KEY in data and version_problem(data[VERSION_KEY]) is not None:  # detect --json's version
        raise ProfileError(f"machine profile {origin}: {version_problem(data[VERSION_KEY])}")
    hidden = data.get(_HIDDEN)
    if hidden is not None and not isinstance(hidden, list):
        raise ProfileError(f"machine profile {origin}: {_HIDDEN}: expected a list, got {type(hidden).__name__}")
    # Hidden from the process that printed it (detect/list --json inside a job), not from this one: the profile is
    # the GPUs that process saw ('gpus'), as detect says; the hidden ones are checked, not counted, and said.
    hidden_gpus = [_gpu_from_dict(entry, position, origin, _HIDDEN) for position, entry in enumerate(hidden or [])]
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise ProfileError(f"machine profile {origin}: name: {not_text(name) or f'expected text, got {name!r}'}")
    driver = data.get("driver_version")
    driver_version = None if driver is None else _parse_version(origin, "driver_version", DriverVersion.parse, driver)
    cuda = data.get("cuda_driver")
    cuda_driver = None if cuda is None else _parse_version(origin, "cuda_driver", CudaVersion.parse, cuda)
    glibc = _parse_field(origin, LIBC, parse_libc, data[LIBC]) if data.get(LIBC) is not None else None
    amdgpu = _parse_field(origin, AMDGPU, AmdgpuDriver.parse, data[AMDGPU]) if data.get(AMDGPU) is not None else None
    platform, l4t = _platform(data, origin)
    raw_gpus = data.get("gpus", [])
    if raw_gpus is None:
        raw_gpus = []
    if not isinstance(raw_gpus, list):
        raise ProfileError(f"machine profile {origin}: gpus: expected a list, got {type(raw_gpus).__name__}")
    gpus = tuple(_gpu_from_dict(entry, position, origin) for position, entry in enumerate(raw_gpus))
    _check_provenance(data, origin)
    source = f"file {origin}"
    sources = {key: source for key, value in ((DRIVER_VERSION, driver_version), (CUDA_DRIVER, cuda_driver),
                                              (LIBC, glibc), (AMDGPU, amdgpu), (PLATFORM, data.get(PLATFORM)),
                                              (L4T, l4t)) if value}
    if any(not gpu.is_amd for gpu in gpus):
        sources[GPUS] = source
    if any(gpu.is_amd for gpu in gpus):
        sources[AMD_GPUS] = source
    notes = (f"file {origin}: {len(hidden_gpus)} GPU(s) that CUDA_VISIBLE_DEVICES hid where it was printed are not "
             f"counted ({', '.join(gpu.name for gpu in hidden_gpus)}): list them under 'gpus' to judge them too",
             ) if hidden_gpus else ()
    return MachineProfile(gpus=gpus, cuda_driver=cuda_driver, driver_version=driver_version, name=name,
                          sources=sources, notes=notes, glibc=glibc, amdgpu=amdgpu, platform=platform, l4t=l4t)


def _platform(data: Mapping, origin: str) -> tuple[str, Optional[L4tVersion]]:
    """The profile's platform (absent: linux-64) and a Jetson's L4T release, which needs linux-aarch64."""
    platform = data.get(PLATFORM)
    if platform is None:
        platform = DEFAULT_PLATFORM
    else:
        problem = platform_problem(platform)
        if problem:
            raise ProfileError(f"machine profile {origin}: {PLATFORM}: {not_text(platform) or problem}")
    raw = data.get(L4T)
    if raw is None:
        return platform, None
    l4t = _parse_version(origin, L4T, L4tVersion.parse, raw)
    if platform != LINUX_AARCH64:
        raise ProfileError(f"machine profile {origin}: {L4T} {raw!r} names a Jetson's Linux for Tegra release, and "
                           f"every Jetson is aarch64: add '{PLATFORM}: {LINUX_AARCH64}' (the profile says "
                           f"{platform})")
    return platform, l4t


def parse_libc(value: Any) -> GlibcVersion:
    """A profile's ``libc``, "glibc 2.28" (as `envkit detect` writes it), to the glibc version; ValueError otherwise."""
    words = value.split() if isinstance(value, str) else []
    if len(words) != 2 or words[0] != GLIBC:
        raise ValueError(f"expected the C library as 'glibc X.Y' (e.g. 'glibc 2.28'), got {value!r}")
    return GlibcVersion.parse(words[1])


def _check_provenance(data: Mapping, origin: str) -> None:
    """``sources`` (fact -> where it came from) and ``notes`` (lines of text), as detect writes them. A file's own
    facts come from the file: these are checked, not read."""
    sources = data.get("sources")
    if sources is not None and (not isinstance(sources, Mapping)
                                or not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items())):
        raise ProfileError(f"machine profile {origin}: sources: expected a mapping of fact to source (text), "
                           f"got {sources!r}")
    notes = data.get("notes")
    if notes is not None and (not isinstance(notes, list) or not all(isinstance(note, str) for note in notes)):
        raise ProfileError(f"machine profile {origin}: notes: expected a list of text, got {notes!r}")


def _whole_number(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def _gpu_from_dict(entry: Any, position: int, origin: str, key: str = "gpus") -> Gpu:
    where = f"{key}[{position}]"
    if not isinstance(entry, Mapping):
        raise ProfileError(f"machine profile {origin}: {where}: expected a mapping with name and compute_capability")
    _known_keys(entry, GPU_KEYS, origin, f"{where}: ")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(f"machine profile {origin}: {where}.name: {not_text(name) or 'missing or not text'}")
    vendor, gfx = _vendor_and_gfx(entry, origin, where)
    if vendor == AMD:
        capability = None
    elif "compute_capability" not in entry:
        raise ProfileError(f"machine profile {origin}: {where}.compute_capability: missing (e.g. '7.5')")
    else:
        # An explicit null is what detect prints for a GPU no probe could place; resolution then asks for --gpu-arch.
        raw_capability = entry["compute_capability"]
        capability = None if raw_capability is None else _parse_version(
            origin, f"{where}.compute_capability", ComputeCapability.parse, raw_capability
        )
    memory = entry.get("memory_mib")
    if memory is not None and not _whole_number(memory, MAX_MEMORY_MIB):
        raise ProfileError(f"machine profile {origin}: {where}.memory_mib: expected a whole number of MiB up to "
                           f"{MAX_MEMORY_MIB}, got {memory!r}")
    index = entry.get("index", position)
    if not _whole_number(index, MAX_GPU_INDEX):
        raise ProfileError(f"machine profile {origin}: {where}.index: expected a whole number up to {MAX_GPU_INDEX}, "
                           f"got {index!r}")
    source = entry.get("source")
    if source is not None and not isinstance(source, str):
        raise ProfileError(f"machine profile {origin}: {where}.source: expected text, got {source!r}")
    from envkit.text.terminal import printable

    return Gpu(index=index, name=printable(name.strip()), compute_capability=capability, memory_mib=memory,
               source=f"file {origin}", vendor=vendor, gfx=gfx)


def _vendor_and_gfx(entry: Mapping, origin: str, where: str) -> tuple[str, Optional[str]]:
    """A GPU entry's vendor (absent: NVIDIA, as every profile before AMD GPUs) and an AMD GPU's gfx target: required
    (null when unknown), and an AMD GPU has no compute capability, nor an NVIDIA one a gfx target."""
    vendor = entry.get("vendor", NVIDIA)
    if vendor not in VENDORS:
        raise ProfileError(f"machine profile {origin}: {where}.vendor: {vendor!r} is not one of {', '.join(VENDORS)}")
    if vendor == NVIDIA:
        if entry.get("gfx") is not None:
            raise ProfileError(f"machine profile {origin}: {where}.gfx: an NVIDIA GPU has no gfx target (an AMD GPU "
                               "says vendor: amd)")
        return vendor, None
    if entry.get("compute_capability") is not None:
        raise ProfileError(f"machine profile {origin}: {where}.compute_capability: an AMD GPU has a gfx target "
                           "instead ('gfx942')")
    if "gfx" not in entry:
        raise ProfileError(f"machine profile {origin}: {where}.gfx: missing (e.g. 'gfx942'; null when unknown)")
    if entry["gfx"] is None:
        return vendor, None
    return vendor, _parse_field(origin, f"{where}.gfx", parse_gfx, entry["gfx"])


_SAVE_HINT = ("Save a machine's profile with `envkit detect --json > FILE` on it, and give that FILE (or a directory "
              "of them).")


def read_profile(path: Path, cache_dir: Optional[Path] = None) -> MachineProfile:
    """Read a machine profile file (YAML or JSON: the output of ``envkit detect --json`` works as is); its parsed
    text from ``cache_dir`` (envkit.state.filecache) when the file has not changed."""
    from envkit.state.filecache import cached

    def parse() -> Any:
        from envkit.state.yamltext import parse_yaml

        from envkit.state.files import read_text_file

        try:
            text = read_text_file(path, "machine profile")
        except FileNotFoundError:
            raise ProfileError(f"cannot read machine profile {path}: it does not exist", hint=_SAVE_HINT) from None
        except ValueError as exc:
            raise ProfileError(f"machine profile {path} {exc}", hint=_SAVE_HINT) from None
        try:
            return parse_yaml(text)
        except ValueError as exc:
            raise ProfileError(f"machine profile {path} is not valid YAML or JSON: {exc}") from None

    return profile_from_dict(cached(cache_dir, "yaml", [path], ("state/yamltext.py",), parse), str(path))
