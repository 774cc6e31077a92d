"""An image mounted at its prefix for as long as a command runs: squashfuse in user space (no root), unmounted when
the block ends, however it ends.

Nothing is left mounted: the normal way out unmounts (``fusermount3 -u``, lazily when something the command started
still holds a file); squashfuse is tied to envkit (envkit.system.attached: told SIGTERM when envkit dies, even by
SIGKILL), and on SIGTERM it unmounts and exits; and it runs with ``-o auto_unmount``, so that fusermount3 unmounts
even when squashfuse itself is killed. A mount point envkit made (with its parents) is removed again.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Iterator, Mapping, Optional

from envkit.errors import BadInputError, EnvkitError

FUSE_DEVICE = Path("/dev/fuse")
MOUNT_WAIT = 20.0  # seconds for squashfuse to mount
PROGRAMS = ("squashfuse_ll", "fusermount3")  # (Debian's squashfuse package has both squashfuse and the faster _ll)
# A read-only image: nothing changes under the kernel's caches, so it may keep names, attributes and pages.
OPTIONS = "ro,auto_unmount"


class FuseUnavailable(BadInputError):
    """No FUSE for this user here: the image cannot be mounted (exit 2); it can be unpacked instead."""


def unpack_hint(image: Path, prefix: str) -> str:
    return (f"Unpack it instead (squashfs-tools): `unsquashfs -d {shlex.quote(prefix)} {shlex.quote(str(image))}`, "
            "then use the environment there as any other.")


def fuse_problem(environ: Mapping[str, str], device: Path = FUSE_DEVICE) -> Optional[str]:
    """Why this user cannot mount an image here (no /dev/fuse, not allowed to open it, no squashfuse_ll or
    fusermount3), or None."""
    missing = [name for name in PROGRAMS if shutil.which(name, path=environ.get("PATH", os.defpath)) is None]
    if missing:
        return (f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed here (Debian and "
                "Ubuntu: the packages squashfuse and fuse3)")
    try:
        fd = os.open(device, os.O_RDWR)
    except FileNotFoundError:
        return f"{device} does not exist (no FUSE in this node's kernel, or none given to this container)"
    except PermissionError:
        return f"this user may not open {device} (FUSE is not open to users here)"
    except OSError as error:
        return f"{device} cannot be opened: {error.strerror or error}"
    os.close(fd)
    return None


def mount_points(mountinfo: str) -> set[str]:
    """The mount points /proc/self/mountinfo lists (its fifth field, octal escapes undone). Pure."""
    points = set()
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            points.add(fields[4].encode("latin-1").decode("unicode_escape"))
    return points


def is_mounted(path: Path) -> bool:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
            return str(path) in mount_points(info.read())
    except OSError:
        return os.path.ismount(path)


def prepare_mount_point(path: Path, image: Path) -> list[Path]:
    """Make ``path`` ready to mount on: an empty directory, made (with its missing parents) when it is not there.
    The directories made, the deepest first. BadInputError (exit 2) for one that is not empty, is mounted on, is not
    a directory, or cannot be made."""
    if os.path.lexists(path):
        if path.is_symlink() or not path.is_dir():
            raise BadInputError(f"the image mounts at {path}, which is not a directory",
                                hint="Move it away, or pack the environment for another path (`envkit pack "
                                     "--relocate PATH`).")
        if is_mounted(path):
            raise BadInputError(f"something is already mounted at {path}, where the image mounts",
                                hint="Wait for the command that runs from it to end, or unmount it "
                                     f"(`fusermount3 -u {shlex.quote(str(path))}`).")
        try:
            if os.listdir(path):
                raise BadInputError(f"the image mounts at {path}, which is not empty",
                                    hint="An environment is there already: run it by its name, or pack this one for "
                                         "another path (`envkit pack ENV --relocate PATH -o FILE`).")
        except PermissionError:
            raise BadInputError(f"the image mounts at {path}, which this user cannot read") from None
        return []
    made: list[Path] = []
    missing = [path, *(parent for parent in path.parents if not os.path.lexists(parent))]
    try:
        for directory in reversed(missing):
            directory.mkdir()
            made.append(directory)
    except OSError as error:
        remove_made(made[::-1])
        raise BadInputError(f"the image mounts at {path}, which cannot be made: {error.strerror or error}",
                            hint="Ask for that directory to be made for you, pack the environment for a path you can "
                                 f"make (`envkit pack --relocate PATH`), or unpack it: {unpack_hint(image, str(path))}"
                            ) from None
    return made[::-1]


def remove_made(made: list[Path]) -> None:
    for directory in made:
        with contextlib.suppress(OSError):
            directory.rmdir()


def unmount(path: Path, environ: Mapping[str, str]) -> bool:
    """Unmount ``path`` (lazily when something still holds it); whether it is unmounted."""
    from envkit.system.process import run_captured

    for argv in (["fusermount3", "-u", "-q", str(path)], ["fusermount3", "-u", "-q", "-z", str(path)]):
        if not is_mounted(path):
            return True
        with contextlib.suppress(OSError):
            run_captured(argv, environ, timeout=30)
    return not is_mounted(path)


@contextlib.contextmanager
def mounted(image: Path, prefix: str, environ: Mapping[str, str], scratch: Path) -> Iterator[None]:
    """``image`` (absolute) mounted at ``prefix`` (absolute) within the block; FuseUnavailable (exit 2) when it cannot
    be here, with how to unpack it instead; EnvkitError (exit 1) when squashfuse fails to mount it. ``scratch``: a
    private directory for squashfuse's log."""
    from envkit.system.attached import end_tied, start_tied

    problem = fuse_problem(environ)
    if problem is not None:
        raise FuseUnavailable(f"{image} cannot be mounted here: {problem}", hint=unpack_hint(image, prefix))
    point = Path(prefix)
    made = prepare_mount_point(point, image)
    log = scratch / "squashfuse.log"
    server = None
    try:
        server = start_tied(["squashfuse_ll", "-f", "-o", OPTIONS, str(image), str(point)], environ, log)
        deadline = time.monotonic() + MOUNT_WAIT
        while not is_mounted(point):
            if server.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                raise EnvkitError(f"squashfuse_ll did not mount {image} at {point}"
                                  + (f": {' '.join(said)}" if said else ""),
                                  hint=unpack_hint(image, prefix))
            time.sleep(0.01)
        yield
    finally:
        if server is not None:
            unmount(point, environ)
            end_tied(server, wait=10.0)
        remove_made(made)
