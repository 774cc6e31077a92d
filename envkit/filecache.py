"""Results computed from files, kept in the user's cache directory until one of those files changes.

Parsing YAML (and importing PyYAML) and validating manifests is most of what `envkit list` and `envkit create` do
before any real work. So the result is pickled, keyed by the state of every input: each file's path, size and
modification time, the source of the envkit code that computes it, and anything else the caller names. Any change is
a miss, and a miss computes afresh. The whole key is kept inside the entry, so two keys that share a file name never
mix. An entry that cannot be read or written is ignored; a computation that fails is never cached.
"""

from __future__ import annotations

import pickle
import zlib
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

from envkit.files import real_path, write_atomic

T = TypeVar("T")
ENVKIT = Path(__file__).resolve().parent
KEEP = 16  # entries of each kind: the newest are kept, the others deleted


def cached(cache_dir: Optional[Path], kind: str, inputs: Sequence[Path], code: Sequence[str],
           compute: Callable[[], T], extra: Sequence[str] = ()) -> T:
    """``compute()``, or what it returned before when ``inputs`` and ``code`` (paths below envkit/) are unchanged."""
    key = _key(kind, inputs, code, extra) if cache_dir is not None else None
    if key is None:
        return compute()
    assert cache_dir is not None
    path = cache_dir / kind / f"{zlib.crc32(key.encode('utf-8')):08x}.pickle"
    try:
        stored, value = pickle.loads(path.read_bytes())
        if stored == key:
            return value
    except Exception:  # missing, truncated, written by another version: compute afresh
        pass
    value = compute()
    _store(path, (key, value))
    return value


def _key(kind: str, inputs: Sequence[Path], code: Sequence[str], extra: Sequence[str]) -> Optional[str]:
    try:
        files = [real_path(path) for path in inputs] + [ENVKIT / part for part in code]
        stats = [f"{p}:{s.st_size}:{s.st_mtime_ns}" for p in files for s in (p.stat(),)]
    except OSError:  # a file missing or unreadable, a symlink loop: let the computation report it
        return None
    return "\n".join([kind, *extra, *stats])


def _store(path: Path, entry: tuple[str, object]) -> None:
    try:
        write_atomic(path, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
        entries = sorted(path.parent.glob("*.pickle"), key=lambda entry: entry.stat().st_mtime_ns, reverse=True)
        for stale in entries[KEEP:]:
            stale.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError):
        pass  # a read-only home, a full disk, a race with another run: no cache, no harm
