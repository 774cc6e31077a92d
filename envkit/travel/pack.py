"""`envkit pack ENV -o FILE`: the environment as one compressed SquashFS image (mksquashfs), its fit inside it (a
pseudo file, so the environment itself is not touched) and beside it.

The image holds the prefix's tree as it is, so it mounts at the same path (a venv and a conda prefix name
themselves in their scripts). ``relocate`` packs a venv for another path: a tree of hard links to its files (a copy
where links cannot be made), in which the files that name the old path (bin/'s scripts, pyvenv.cfg, .pth files,
envkit's record) are replaced by rewritten copies, never written through the links.

The image is written beside FILE under a temporary name and renamed into place when complete: a failed or
interrupted pack leaves no image that looks whole.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Mapping, NamedTuple, Optional

from envkit.errors import BadInputError, EnvkitError
from envkit.state.records import RECORD_DIR, Record
from envkit.travel.image import FIT_IN_IMAGE, beside_path, fit_document, fit_text

FORMATS = ("sqfs",)
COMPRESSION = ("-comp", "zstd")  # squashfuse and the kernel (5.x) read it; fast to unpack, small
LOCK_NAMES = ("conda-lock.yml", "pylock.toml")  # what create --from-lock keeps beside the record (lockfile.install)
_REWRITE_LIMIT = 4 << 20  # bytes: a file larger than this in bin/ is a program, not a script naming the prefix


class Packed(NamedTuple):
    image: Path
    beside: Path
    size: int
    prefix: str  # where it mounts


def check_relocate(record: Record, relocate: Optional[Path]) -> Optional[str]:
    """The path to pack for (normalised), None for the environment's own; BadInputError (exit 2) where the backend
    cannot be moved or the path is not usable."""
    if relocate is None:
        return None
    if record.kind != "venv":
        raise BadInputError(f"{record.name} is a conda environment: its prefix is written into its programs and "
                            "libraries, so envkit packs it only at its own path",
                            hint=f"Make it at the path it should mount at (`envkit create ... --prefix {relocate}`), "
                                 "then pack that one.")
    path = os.path.normpath(str(relocate))
    if not os.path.isabs(path) or path == "/" or "\n" in path:
        raise BadInputError(f"--relocate {relocate}: give the absolute path the image should mount at")
    return path


def lock_in(prefix: Path) -> Optional[tuple[str, str]]:
    """(its name, its text) of the lock the environment keeps beside its record, if it keeps one."""
    for name in LOCK_NAMES:
        path = prefix / RECORD_DIR / name
        if path.is_file():
            return name, path.read_text(encoding="utf-8", errors="replace")
    return None


def installed(prefix: Path) -> list[tuple[str, str, str]]:
    """(manager, name, version) of each package installed: conda's (conda-meta) and pip's (their dist-info)."""
    from envkit.lockfile.export import installed_distributions

    conda = []
    for meta in sorted(prefix.glob("conda-meta/*.json")):
        name, _, rest = meta.stem.rpartition("-")[0].rpartition("-")
        if name:
            conda.append(("conda", name, rest))
    return conda + [("pip", name, version) for name, version, _ in installed_distributions(prefix)]


def check_mksquashfs(environ: Mapping[str, str]) -> None:
    if shutil.which("mksquashfs", path=environ.get("PATH", os.defpath)) is None:
        raise BadInputError("mksquashfs is not installed here: envkit packs images with it",
                            hint="Install squashfs-tools (Debian and Ubuntu: apt-get install squashfs-tools).")


def pack(record: Record, output: Path, relocate: Optional[Path], force: bool, environ: Mapping[str, str],
         packed: str, envkit_version: str, scratch: Path) -> Packed:
    """Pack the environment of ``record`` into ``output`` (and its fit beside it)."""
    from envkit.state.output import check_output, write_output

    prefix = Path(record.prefix)
    target = check_relocate(record, relocate) or str(prefix)
    check_mksquashfs(environ)
    output = Path(os.path.abspath(output))
    if output == prefix or prefix in output.parents:
        raise BadInputError(f"-o {output} is inside the environment it packs", hint="Write the image elsewhere.")
    if not output.parent.is_dir():
        raise BadInputError(f"-o {output}: the directory {output.parent} does not exist")
    check_output(output, force=force, what="the image")
    check_output(beside_path(output), force=force, what="the image's fit")
    fit = fit_document(record, target, lock_in(prefix), envkit_version, packed, os.uname().machine,
                       installed(prefix))
    fit_file = scratch / "fit.json"
    fit_file.write_text(fit_text(fit), encoding="utf-8")
    source, staged = prefix, None
    try:
        if target != str(prefix):
            staged = relocated_tree(prefix, target, replace(record, prefix=target))
            source = staged
        compile_bytecode(source, environ)
        handle, temporary = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent)
        os.close(handle)
        try:
            _mksquashfs(source, Path(temporary), fit_file, environ)
            os.chmod(temporary, 0o666 & ~_umask())  # as any file the user writes (mkstemp made it private)
            write_output(beside_path(output), fit_text(fit).encode("utf-8"), force=force)
            os.replace(temporary, output)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
    return Packed(output, beside_path(output), output.stat().st_size, target)


def compile_bytecode(root: Path, environ: Mapping[str, str]) -> None:
    """Compile the environment's modules to bytecode before packing (what Python would write on a first import,
    and cannot in a read-only image: every run would compile them again). Best effort: a module that does not
    compile, or a directory that cannot be written, stays as it is."""
    from envkit.system.process import run_captured

    python = root / "bin" / "python"
    libs = [str(path) for path in sorted(root.glob("lib/python*")) if path.is_dir()]
    if not python.exists() or not libs:
        return
    quiet = {k: v for k, v in environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    with contextlib.suppress(OSError):
        run_captured([str(python), "-m", "compileall", "-q", "-j", "0", *libs], quiet, timeout=1800)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mksquashfs(source: Path, image: Path, fit: Path, environ: Mapping[str, str]) -> None:
    from envkit.system.process import run_streamed

    pseudo = f"{FIT_IN_IMAGE} f 644 {os.getuid()} {os.getgid()} cat {shlex.quote(str(fit))}"
    done = run_streamed(["mksquashfs", str(source), str(image), "-noappend", *COMPRESSION, "-quiet", "-no-progress",
                         "-p", pseudo], environ)
    if done.returncode != 0:
        raise EnvkitError(f"mksquashfs failed to pack {source}: {' '.join(done.tail[-3:]) or 'no output'}",
                          hint="Check the room where the image goes (`df -h`), then pack again.")


def relocated_tree(prefix: Path, target: str, record: Record) -> Path:
    """A tree of ``prefix`` for ``target``: hard links to its files (copies across filesystems), the files naming
    ``prefix`` rewritten as new files. Made beside the prefix (the same filesystem), else in $TMPDIR."""
    try:
        stage = Path(tempfile.mkdtemp(prefix=".envkit-pack-", dir=prefix.parent))
    except OSError:
        stage = Path(tempfile.mkdtemp(prefix="envkit-pack-"))
    try:
        root = stage / "tree"
        _link_tree(prefix, root)
        old, new = str(prefix).encode(), target.encode()
        for path in _naming_files(root):
            data = path.read_bytes()
            if old in data:
                _replace_file(path, data.replace(old, new))
        from envkit.state.records import in_prefix, write_json_atomic

        write_json_atomic(in_prefix(root), record.to_dict())
        return root
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _link_tree(source: Path, target: Path) -> None:
    for directory, dirs, files in os.walk(source):
        here = target / os.path.relpath(directory, source)
        here.mkdir(exist_ok=True)
        shutil.copystat(directory, here)
        for name in [*dirs, *files]:
            origin, copy = Path(directory) / name, here / name
            if origin.is_symlink():
                os.symlink(os.readlink(origin), copy)
                if name in dirs:
                    dirs.remove(name)
            elif name in files:
                try:
                    os.link(origin, copy)
                except OSError:
                    shutil.copy2(origin, copy)


def _naming_files(root: Path) -> list[Path]:
    """The files of a venv that may name its path: bin/'s scripts, pyvenv.cfg, the .pth files of site-packages."""
    found = [path for path in (root / "bin").iterdir()
             if path.is_file() and not path.is_symlink() and path.stat().st_size <= _REWRITE_LIMIT] \
        if (root / "bin").is_dir() else []
    found += [path for path in [root / "pyvenv.cfg"] if path.is_file()]
    found += [path for path in root.glob("lib*/python*/site-packages/*.pth")
              if path.is_file() and not path.is_symlink()]
    return found


def _replace_file(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o7777
    path.unlink()
    with open(path, "xb") as out:
        out.write(data)
    os.chmod(path, mode)
