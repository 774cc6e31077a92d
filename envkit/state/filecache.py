"""Results computed from files, kept in the user's cache directory until one of those files changes.

Parsing YAML (and importing PyYAML) and validating manifests is most of what `envkit list` and `envkit create` do
before any real work. So the result is kept (pickled, or as it is when it is text), keyed by the state of every
input: each file's path as given, and of the file it names (through any links) its size, modification time, device,
inode and inode change time; the source of the envkit code that computes it (or of all of envkit); and anything else
the caller names. Any change is a miss, and a miss computes afresh. The whole key is kept inside the entry, so two
keys that share a file name never mix. An entry that cannot be read or written is ignored; a computation that fails
is never cached.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence, TypeVar, Union

from envkit.state.files import write_atomic

T = TypeVar("T")
ENVKIT = Path(__file__).resolve().parents[1]  # envkit/ (this module is envkit/state/filecache.py)
KEEP = 16  # entries of each kind: the newest are kept, the others deleted


class EveryModule:
    """As the ``code`` of an entry (EVERY_MODULE): every module of envkit, found afresh each time, for an answer that
    much of envkit computes (`envkit list`'s), where a list of the modules involved would go stale."""


EVERY_MODULE = EveryModule()
Code = Union[Sequence[str], EveryModule]  # paths below envkit/, or all of them


def cached(cache_dir: Optional[Path], kind: str, inputs: Sequence[Path], code: Code,
           compute: Callable[[], T], extra: Sequence[str] = ()) -> T:
    """``compute()``, or what it returned before when ``inputs`` and ``code`` (paths below envkit/) are unchanged."""
    return _cached(cache_dir, kind, inputs, code, compute, extra, _PICKLED)


def cached_text(cache_dir: Optional[Path], kind: str, inputs: Sequence[Path], code: Code,
                compute: Callable[[], str], extra: Sequence[str] = ()) -> str:
    """``cached`` for an answer that is text (`envkit list`'s output), kept as text: read back without importing
    pickle, about a millisecond of a warm `envkit list`."""
    return _cached(cache_dir, kind, inputs, code, compute, extra, _TEXT)


class _Format(NamedTuple):
    suffix: str
    dump: Callable[[str, Any], bytes]  # (key, value) -> the entry
    load: Callable[[bytes], "tuple[str, Any]"]  # the entry -> (key, value)


def _pickle_dump(key: str, value: Any) -> bytes:
    import pickle

    try:
        return pickle.dumps((key, value), protocol=pickle.HIGHEST_PROTOCOL)
    except pickle.PicklingError as error:  # to _store, a value that cannot be kept is a ValueError
        raise ValueError(str(error)) from error


def _pickle_load(entry: bytes) -> tuple[str, Any]:
    import pickle

    return pickle.loads(entry)


def _text_dump(key: str, value: str) -> bytes:
    """The key, a NUL, the text, and the CRC-32 of both: an entry cut short (a full disk, a crash before the data
    reached it) is a miss, not an answer cut short. No key holds a NUL: paths cannot, and the rest are reprs."""
    body = f"{key}\0{value}".encode("utf-8")
    return body + b"%08x" % zlib.crc32(body)


def _text_load(entry: bytes) -> tuple[str, str]:
    body, checksum = entry[:-8], entry[-8:]
    if b"%08x" % zlib.crc32(body) != checksum:
        raise ValueError("a damaged entry")
    key, _, value = body.decode("utf-8").partition("\0")
    return key, value


_PICKLED = _Format(".pickle", _pickle_dump, _pickle_load)
_TEXT = _Format(".txt", _text_dump, _text_load)


def _cached(cache_dir: Optional[Path], kind: str, inputs: Sequence[Path], code: Code,
            compute: Callable[[], T], extra: Sequence[str], form: _Format) -> T:
    key = _key(kind, inputs, code, extra) if cache_dir is not None else None
    if key is None:
        return compute()
    assert cache_dir is not None
    path = cache_dir / kind / f"{zlib.crc32(key.encode('utf-8')):08x}{form.suffix}"
    try:
        stored, value = form.load(path.read_bytes())
        if stored == key:
            return value
    except Exception:  # missing, truncated, written by another version: compute afresh
        pass
    value = compute()
    _store(path, form, key, value)
    return value


def _key(kind: str, inputs: Sequence[Path], code: Code, extra: Sequence[str]) -> Optional[str]:
    try:
        every = isinstance(code, EveryModule)
        files = [*inputs, *(ENVKIT / part for part in ([] if every else code))]
        stamps = [_stamp(str(path), path.stat()) for path in files]
        stamps += _every_module() if every else []
    except OSError:  # a file missing or unreadable, a symlink loop: let the computation report it
        return None
    return "\n".join([kind, *extra, *stamps])


def _stamp(path: str, stat: os.stat_result) -> str:
    """What tells one state of a file from another: its size and modification time, and its device, inode and inode
    change time, so that a file replaced by one of the same size and time (`sed -i` where timestamps are coarse, as
    FAT's two seconds), edited and given its old time back, or a link pointed at another such file, is another state.
    (A path is not resolved first: the device and inode say which file it names, without a system call for each
    directory on the way.)"""
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_dev}:{stat.st_ino}:{stat.st_ctime_ns}"


def _every_module() -> list[str]:
    """The stamp of every module below envkit/, found and stat'ed in one walk (through linked directories too, each
    directory once)."""
    found: list[str] = []
    top = ENVKIT.stat()
    pending, seen = [str(ENVKIT)], {(top.st_dev, top.st_ino)}
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir():
                    where = entry.stat()
                    if entry.name != "__pycache__" and (where.st_dev, where.st_ino) not in seen:
                        seen.add((where.st_dev, where.st_ino))
                        pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    found.append(_stamp(entry.path, entry.stat()))
    return sorted(found)


def _store(path: Path, form: _Format, key: str, value: object) -> None:
    try:
        # 0600: an entry holds what its inputs said (a config's mirror URLs with their passwords, from a file
        # that is itself 0600), and the cache is this user's alone
        write_atomic(path, form.dump(key, value), mode=0o600)
        entries = sorted(path.parent.glob(f"*{form.suffix}"), key=lambda entry: entry.stat().st_mtime_ns,
                         reverse=True)
        for stale in entries[KEEP:]:
            stale.unlink(missing_ok=True)
    except (OSError, ValueError):  # a read-only home, a full disk, a race, a value that cannot be kept: no cache
        pass
