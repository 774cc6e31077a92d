"""Small value types for the versions envkit compares: CUDA versions, compute capabilities, driver versions, glibc,
Linux for Tegra releases.

All are immutable, ordered, and parse from the forms users and tools write ("12.4", "sm_75", "7.5", 12040,
"535.54.03"). Parsing failures raise ValueError with a message fit to show a user.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple, Optional, Union

# ASCII digits only (\d would take any Unicode digit: '１２.４'), and few of them: a part of a CUDA version has at most
# three digits, a compute capability's minor one (sm_XY cannot write more), so 99999999999.0 is refused, not ranked.
# Patterns, not compiled ones: re compiles each when first matched (and keeps it), and most commands never parse a
# version; compiling them all on import was a third of a millisecond of every `envkit list`.
_CUDA = r"^\s*([0-9]{1,3})\.([0-9]{1,3})\s*$"
_CAPABILITY = r"^\s*([0-9]{1,3})\.([0-9])\s*$"
_SM = r"^\s*(?:sm|compute)_([0-9]{1,3})([0-9])\s*$"
# A GNU C library version, 2.17 or 2.28 (what a manylinux_2_28 wheel needs, and what `ldd --version` prints).
_GLIBC = r"^\s*([0-9])\.([0-9]{1,3})\s*$"
# A Linux for Tegra release (a Jetson's system): major.minor.patch, 36.4.4 (R36 REVISION 4.4), or 36.4 (patch 0).
_L4T = r"^\s*([0-9]{2})\.([0-9]{1,2})(?:\.([0-9]{1,2}))?\s*$"
# An NVIDIA driver as NVIDIA numbers them: branch.minor[.patch], 580.159.04, 470.256.02, 390.157 (or a branch: 580).
_DRIVER = r"^[0-9]{2,3}(?:\.[0-9]{1,3}){0,2}$"
# The largest CUDA version encoded as NVML and cuDriverGetVersion encode it (999.99 -> 999990).
_MAX_DRIVER_INT = 999_990
# A __cuda as conda takes it from $CONDA_OVERRIDE_CUDA: 12, 12.4 or 12.4.1 (and the driver's X.Y is one of those).
# Compiled on first use (re's cache), not when `envkit list` imports this module.
_SOLVE_CUDA = r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}"
# A ROCm release as AMD and the PyTorch indexes name them: 6.4, 7.2 (the index rocm6.2.4 is the release 6.2).
_ROCM = r"^\s*([0-9]{1,2})\.([0-9]{1,2})(?:\.[0-9]{1,3})?\s*$"
# An AMD GPU's LLVM target: gfx, the major (7 to 19), then the minor and the stepping as one hex digit each (gfx906,
# gfx90a, gfx942, gfx1030, gfx1151). A feature suffix (gfx90a:sramecc+:xnack-, as HIP's gcnArchName says it) is not
# part of the target.
_GFX = r"^gfx([7-9]|1[0-9])([0-9a-f])([0-9a-f])$"


def is_ascii_number(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits and nothing else: what int() reads as the same number everywhere.
    (str.isdigit alone takes '²' and '１', which int() refuses or other programs do not read; no sign, no space.)"""
    return text.isascii() and text.isdigit()


def is_solve_cuda(text: str) -> bool:
    """Whether ``text`` is a ``__cuda`` a conda solve may see: $CONDA_OVERRIDE_CUDA as conda takes it (12, 12.4,
    12.4.1; no spaces), or the driver's X.Y. Checked where it is set (envkit.backends.plan) and where a lock says it."""
    return bool(re.fullmatch(_SOLVE_CUDA, text))


def read_as_number(value: object) -> Optional[str]:
    """How YAML read ``value`` when it is a number (a version written unquoted), fit to follow "must be quoted":
    'YAML reads 12.10 as the number 12.1' (a float from envkit.state.yamltext keeps its text as written), or where the
    text is the number 'unquoted, YAML reads it as a number (and 12.10 as 12.1)'. None when ``value`` is not a
    number: text, true/false, nothing."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    written = str(value)
    read = repr(float(value)) if isinstance(value, float) else str(int(value))
    if written != read:
        return f"YAML reads {written} as the number {read}"
    return "unquoted, YAML reads it as a number (and 12.10 as 12.1)"


def quote_it(value: object) -> Optional[str]:
    """The problem with a version that YAML read as a number, in a form fit to show a user:
    '12.10 must be quoted ("12.10"): YAML reads 12.10 as the number 12.1' (double quotes: YAML and JSON both).
    None when ``value`` is not a number (see :func:`read_as_number`)."""
    how = read_as_number(value)
    return None if how is None else f'{value} must be quoted ("{value}"): {how}'


class MajorMinor(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def _parse_major_minor(value: Union[str, int, float], patterns: tuple[str, ...], wanted: str) -> MajorMinor:
    """Shared parsing of "X.Y" forms (YAML may hand over 7.5 as a float); ``wanted`` completes the error."""
    if not isinstance(value, bool) and isinstance(value, (str, int, float)):
        for pattern in patterns:
            match = re.match(pattern, str(value))
            if match:
                return MajorMinor(int(match[1]), int(match[2]))
    raise ValueError(f"{value!r} is not {wanted}")


class CudaVersion(MajorMinor):
    """A CUDA version such as 12.4: a toolkit a build targets, or the highest one a driver supports."""

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> CudaVersion:
        return cls(*_parse_major_minor(value, (_CUDA,), "a CUDA version like '12.4'"))

    @classmethod
    def from_driver_int(cls, value: int) -> CudaVersion:
        """NVML's and cuDriverGetVersion's encoding, 1000 * major + 10 * minor (12040 -> 12.4)."""
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_DRIVER_INT:
            raise ValueError(f"{value} is not a CUDA driver version number like 12040")
        return cls(value // 1000, (value % 1000) // 10)

    @property
    def tag(self) -> str:
        """The wheel-index form: 12.6 -> 'cu126'."""
        return f"cu{self.major}{self.minor}"


class ComputeCapability(MajorMinor):
    """A GPU architecture: 7.0 is Volta (sm_70), 9.0 Hopper (sm_90), 12.0 consumer Blackwell (sm_120)."""

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> ComputeCapability:
        return cls(*_parse_major_minor(value, (_CAPABILITY, _SM), "a compute capability like '7.5' or 'sm_75'"))

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"

    @property
    def compute(self) -> str:
        return f"compute_{self.major}{self.minor}"


class RocmVersion(MajorMinor):
    """A ROCm release such as 6.4: the user space a ROCm build bundles, or the one an amdgpu driver shipped with."""

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> RocmVersion:
        return cls(*_parse_major_minor(value, (_ROCM,), "a ROCm release like '6.4'"))

    @property
    def tag(self) -> str:
        """The wheel-index form: 6.4 -> 'rocm6.4'."""
        return f"rocm{self.major}.{self.minor}"


def parse_gfx(value: object) -> str:
    """An AMD GPU target as envkit writes it ("gfx90a") from the forms tools print ("gfx90a", "GFX942",
    "gfx90a:sramecc+:xnack-"); ValueError, in words fit to show a user, for anything else."""
    text = value.strip().lower().split(":")[0] if isinstance(value, str) else ""
    if not re.match(_GFX, text):
        raise ValueError(f"{value!r} is not an AMD GPU target like 'gfx90a' or 'gfx1100'")
    return text


def gfx_from_kfd(value: int) -> str:
    """The target of a KFD topology node's ``gfx_target_version``, major * 10000 + minor * 100 + stepping, the minor
    and stepping written in hex (90402 -> gfx942, 90010 -> gfx90a, 110501 -> gfx1151); ValueError when the number
    names no target (0 is the CPU node's)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a gfx_target_version (a whole number)")
    major, minor, stepping = value // 10000, value // 100 % 100, value % 100
    if minor > 15 or stepping > 15 or not 7 <= major <= 19:
        raise ValueError(f"{value} is not a gfx_target_version (major * 10000 + minor * 100 + stepping)")
    return f"gfx{major}{minor:x}{stepping:x}"


class GlibcVersion(MajorMinor):
    """A GNU C library version such as 2.28: the oldest a build's wheels install on (manylinux_2_28), or a
    machine's."""

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> GlibcVersion:
        return cls(*_parse_major_minor(value, (_GLIBC,), "a glibc version like '2.28'"))


class L4tVersion(NamedTuple):
    """A Linux for Tegra release such as 36.4.4, the system of a Jetson (/etc/nv_tegra_release says "R36 ...
    REVISION: 4.4"); its JetPack follows from it (cuda.yaml's ``jetpack`` table)."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> L4tVersion:
        match = None if isinstance(value, bool) else re.match(_L4T, str(value))
        if match is None:
            raise ValueError(f"{value!r} is not a Linux for Tegra release like '36.4.4'")
        return cls(int(match[1]), int(match[2]), int(match[3] or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


@functools.total_ordering
class DriverVersion:
    """An NVIDIA driver version such as 535.54.03, compared numerically part by part ("580" == "580.0").

    A plain class rather than a dataclass (which would cost start-up: see envkit.catalog.model): equality,
    ordering and hashing look at ``key`` only, ``text`` is how it was written."""

    __slots__ = ("key", "text")

    def __init__(self, key: tuple[int, ...], text: str) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "text", text)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DriverVersion is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return self.key == other.key if isinstance(other, DriverVersion) else NotImplemented

    def __lt__(self, other: object) -> bool:
        return self.key < other.key if isinstance(other, DriverVersion) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"DriverVersion(key={self.key!r}, text={self.text!r})"

    def __reduce__(self) -> tuple[type, tuple[tuple[int, ...], str]]:
        return DriverVersion, (self.key, self.text)

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> DriverVersion:
        text = str(value).strip()
        if isinstance(value, bool) or not re.match(_DRIVER, text):
            raise ValueError(f"{value!r} is not an NVIDIA driver version like '535.54.03'")
        parts = [int(part) for part in text.split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return cls(tuple(parts), text)

    @property
    def branch(self) -> int:
        return self.key[0]

    def __str__(self) -> str:
        return self.text
