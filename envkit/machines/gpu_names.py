"""The GPU name table (loaded from envs/gpus.yaml): model name -> compute capability, pure lookups, no I/O.

Detection falls back on it only when no probe reports a GPU's compute capability (the /proc fallback, and
nvidia-smi from drivers before R510).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

from envkit.errors import ManifestError
from envkit.versions import ComputeCapability, quote_it

FIELD = "compute_capability"


class GpuNameTable(NamedTuple):
    """gpus.yaml: the compute capability of each GPU model, by the name NVIDIA gives it."""

    # Model name as NVIDIA prints it ("A100", "RTX 3090", "K40m") -> its compute capability.
    compute_capability: Mapping[str, ComputeCapability]

    def lookup(self, name: str) -> Optional[ComputeCapability]:
        """The compute capability of the GPU called ``name``, or None when no key matches.

        A key matches where it appears in the name as whole words (case-insensitive, any run of whitespace
        equal to one space); the longest matching key wins, so "NVIDIA A100-SXM4-40GB" is an A100, not an A10.
        """
        text = _normalize(name)
        best: Optional[str] = None
        for key in self.compute_capability:
            if (best is None or len(key) > len(best)) and _contains_words(text, _normalize(key)):
                best = key
        return None if best is None else self.compute_capability[best]


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def _contains_words(text: str, key: str) -> bool:
    """Whether ``key`` occurs in ``text`` with no letter or digit right before or right after it."""
    start = text.find(key)
    while start >= 0:
        end = start + len(key)
        before_ok = start == 0 or not text[start - 1].isalnum()
        after_ok = end == len(text) or not text[end].isalnum()
        if before_ok and after_ok:
            return True
        start = text.find(key, start + 1)
    return False


def parse_gpu_names(data: Any, path: str) -> GpuNameTable:
    """Validate envs/gpus.yaml as loaded by a YAML parser; ``path`` names the file in errors."""
    if not isinstance(data, Mapping) or FIELD not in data:
        raise ManifestError(path, f"expected a mapping with a {FIELD!r} table of GPU name -> compute capability")
    unknown = [str(key) for key in data if key != FIELD]
    if unknown:
        raise ManifestError(path, f"unknown key; expected only {FIELD!r}", field=unknown[0])
    table = data[FIELD]
    if not isinstance(table, Mapping):
        raise ManifestError(path, "expected a mapping of GPU name -> compute capability", field=FIELD)
    out: dict[str, ComputeCapability] = {}
    seen: dict[str, str] = {}
    for key, value in table.items():
        if not isinstance(key, str) or not any(char.isalnum() for char in key):
            raise ManifestError(path, f"{key!r} is not a GPU model name like 'A100'", field=f"{FIELD}.{key}")
        field = f"{FIELD}.{key}"
        normalized = _normalize(key)
        if normalized in seen:
            # Keys match case-insensitively, so two spellings of one name would make lookups depend on order.
            raise ManifestError(path, f"the same name as {seen[normalized]!r} (names ignore case)", field=field)
        seen[normalized] = key
        problem = quote_it(value)  # as in cuda.yaml and python.yaml: unquoted, YAML reads 12.10 as 12.1
        if problem:
            raise ManifestError(path, problem, field=field)
        if not isinstance(value, str):
            raise ManifestError(path, f"expected a compute capability like '8.6', got {value!r}", field=field)
        try:
            out[key.strip()] = ComputeCapability.parse(value)
        except ValueError as exc:
            raise ManifestError(path, str(exc), field=field) from None
    return GpuNameTable(compute_capability=out)
