"""The probe program as envkit runs it: the modules of envkit/probe/program/ in one zipapp, kept in the user's cache.

The probe runs inside another environment, with that environment's Python (3.6 and newer) in isolated mode, so it
cannot import envkit: it gets its modules as one file. A zipapp (PEP 441) holds them as the package ``envkit_probe``
beside a ``__main__.py``; ``python -I probe.pyz ARGS`` runs it, and the archive is all it adds to sys.path (its two
top-level names shadow nothing a framework imports). The archive's name carries envkit's version and a hash of the
modules' bytes, so an editable checkout never runs a stale copy and the second run builds nothing. It is written
atomically: two envkits starting at once never run half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Iterator, Mapping

from envkit import __version__
from envkit.errors import EnvkitError
from envkit.state.files import write_atomic

SOURCE = Path(__file__).with_name("program")
PACKAGE = "envkit_probe"
MAIN = (
    '"""envkit\'s post-install probe: envkit/probe/program/, assembled by envkit.probe.zipapp."""\n\n'
    "import sys\n\n"
    f"from {PACKAGE}.main import main\n\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
KEEP = 8  # archives kept in the cache: the newest; older ones (other versions, other edits) are deleted
_STAMP = (1980, 1, 1, 0, 0, 0)  # every entry's date: the same modules always give the same bytes


def program_files(source: Path = SOURCE) -> dict[str, bytes]:
    """The archive's entries, {name inside it: bytes}: the package's modules and the ``__main__.py`` that runs it."""
    files = {f"{PACKAGE}/{path.name}": path.read_bytes() for path in sorted(source.glob("*.py"))}
    files["__main__.py"] = MAIN.encode("utf-8")
    return files


def archive_name(files: Mapping[str, bytes]) -> str:
    """``probe-VERSION-HASH.pyz``: the hash covers every entry's name and bytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        for part in (name.encode("utf-8"), files[name]):
            digest.update(len(part).to_bytes(8, "big") + part)
    return f"probe-{__version__}-{digest.hexdigest()[:16]}.pyz"


def archive_bytes(files: Mapping[str, bytes]) -> bytes:
    """The zipapp itself, uncompressed (zipimport then needs no zlib in the foreign Python)."""
    import io
    import zipfile  # here, not above: a run whose archive is cached does not need it

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _STAMP)
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name])
    return buffer.getvalue()


def cached_program(cache_dir: Path, source: Path = SOURCE) -> Path:
    """The zipapp in ``cache_dir/probe/``, built there first when this version and content has none yet.

    Raises OSError when the modules cannot be read or the cache cannot be written.
    """
    files = program_files(source)
    path = cache_dir / "probe" / archive_name(files)
    if not path.is_file():
        write_atomic(path, archive_bytes(files))
        _prune(path.parent)
    return path


@contextlib.contextmanager
def probe_program(cache_dir: Path, source: Path = SOURCE) -> Iterator[Path]:
    """The zipapp to run: the cached one; where the cache cannot be written (a read-only home), a temporary one,
    deleted after the run. Raises EnvkitError when neither can be made."""
    try:
        cached = cached_program(cache_dir, source)
    except OSError:
        cached = None
    if cached is not None:
        yield cached
        return
    from envkit.system.scratch import make_scratch, remove

    try:
        directory = make_scratch("probe")
    except OSError as exc:
        raise _cannot_assemble(exc) from None
    try:
        path = directory / "probe.pyz"
        try:
            path.write_bytes(archive_bytes(program_files(source)))
        except OSError as exc:
            raise _cannot_assemble(exc) from None
        yield path
    finally:
        remove(directory)


def _cannot_assemble(exc: OSError) -> EnvkitError:
    return EnvkitError(f"cannot assemble the probe program: {exc.strerror or exc}",
                       hint="Check that $XDG_CACHE_HOME (or ~/.cache) or $TMPDIR is writable.")


def _prune(directory: Path) -> None:
    """Keep the KEEP newest archives; a race with another envkit or an unwritable directory is no harm."""
    try:
        archives = sorted(directory.glob("probe-*.pyz"), key=lambda entry: entry.stat().st_mtime_ns, reverse=True)
        for stale in archives[KEEP:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass
