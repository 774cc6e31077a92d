"""Small value types for the versions envkit compares: CUDA versions, compute capabilities, driver versions.

All are immutable, ordered, and parse from the forms users and tools write ("12.4", "sm_75", "7.5", 12040,
"535.54.03"). Parsing failures raise ValueError with a message fit to show a user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple, Union

_MAJOR_MINOR = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
_SM = re.compile(r"^\s*(?:sm|compute)_(\d+)(\d)\s*$")


class MajorMinor(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def _parse_major_minor(value: Union[str, int, float], patterns: tuple[re.Pattern[str], ...], wanted: str) -> MajorMinor:
    """Shared parsing of "X.Y" forms (YAML may hand over 7.5 as a float); ``wanted`` completes the error."""
    if not isinstance(value, bool) and isinstance(value, (str, int, float)):
        for pattern in patterns:
            match = pattern.match(str(value))
            if match:
                return MajorMinor(int(match[1]), int(match[2]))
    raise ValueError(f"{value!r} is not {wanted}")


class CudaVersion(MajorMinor):
    """A CUDA version such as 12.4: a toolkit a build targets, or the highest one a driver supports."""

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> CudaVersion:
        return cls(*_parse_major_minor(value, (_MAJOR_MINOR,), "a CUDA version like '12.4'"))

    @classmethod
    def from_driver_int(cls, value: int) -> CudaVersion:
        """NVML's and cuDriverGetVersion's encoding, 1000 * major + 10 * minor (12040 -> 12.4)."""
        if value <= 0:
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
        return cls(*_parse_major_minor(value, (_MAJOR_MINOR, _SM), "a compute capability like '7.5' or 'sm_75'"))

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"

    @property
    def compute(self) -> str:
        return f"compute_{self.major}{self.minor}"


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA driver version such as 535.54.03, compared numerically part by part ("580" == "580.0")."""

    key: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, value: Union[str, int, float]) -> DriverVersion:
        text = str(value).strip()
        if isinstance(value, bool) or not re.match(r"^\d+(\.\d+){0,3}$", text):
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
