"""An image as a command takes it, before anything is mounted: the file checked (SquashFS, whole), its fit read
from inside it (``unsquashfs -cat``: one small file, without mounting) and from beside it, and the environment it
holds as a record."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from envkit.errors import BadInputError, EnvkitError
from envkit.state.records import RECORD_DIR, RECORD_FILE, Record
from envkit.travel.image import (FIT_IN_IMAGE, ImageError, beside_path, check_beside, check_image_file, image_record,
                                 parse_fit)

_READ_LIMIT = 16 << 20  # bytes of one member read from an image (a fit holds a lock: a few hundred KiB)


class Opened(NamedTuple):
    record: Record  # the environment it holds, at the path it mounts at; extra["image"] names the image
    fit: Optional[dict[str, Any]]  # None with --no-fit-check


def image_path(text: str) -> Path:
    """The absolute path of an image named on the command line (a relative one from the working directory)."""
    return Path(os.path.abspath(os.path.expanduser(text)))


def read_member(image: Path, member: str, environ: Mapping[str, str]) -> Optional[str]:
    """The text of ``member`` inside the image, None when it has no such file."""
    from envkit.system.process import run_captured

    if shutil.which("unsquashfs", path=environ.get("PATH", os.defpath)) is None:
        raise BadInputError("unsquashfs is not installed here: envkit reads an image's fit with it",
                            hint="Install squashfs-tools (Debian and Ubuntu: apt-get install squashfs-tools).")
    try:
        done = run_captured(["unsquashfs", "-cat", str(image), member], environ, timeout=60,
                            max_output=_READ_LIMIT)
    except OSError as error:
        raise EnvkitError(f"unsquashfs cannot be run: {error.strerror or error}") from None
    if done.returncode == 0:
        return done.stdout
    if "no matches" in done.stderr or "not a regular file" in done.stderr:
        return None
    lines = done.stderr.strip().splitlines()
    raise ImageError(f"{image} cannot be read as a SquashFS image: {lines[-1] if lines else 'unsquashfs failed'}",
                     hint="Copy it again in full, or pack the environment again.")


def open_image(text: str, environ: Mapping[str, str], fit_check: bool = True) -> Opened:
    """The image named ``text``, checked. With ``fit_check`` its fit must be inside it, unaltered, and the same
    beside it when there is one there (ImageError, exit 2, otherwise). Without it (--no-fit-check), the
    environment's own record inside the image says where it mounts."""
    image = image_path(text)
    check_image_file(image)
    if fit_check:
        fit = parse_fit(read_member(image, FIT_IN_IMAGE, environ), str(image))
        beside = beside_path(image)
        check_beside(fit, beside.read_text(encoding="utf-8", errors="replace") if beside.is_file() else None, image)
        return Opened(image_record(fit, image), fit)
    import json
    from dataclasses import replace

    from envkit.state.records import record_from_dict

    text_record = read_member(image, f"{RECORD_DIR}/{RECORD_FILE}", environ)
    if text_record is None:
        raise ImageError(f"{image} holds no envkit record ({RECORD_DIR}/{RECORD_FILE}): envkit cannot tell where it "
                         "mounts", hint="Unpack it with unsquashfs instead.")
    try:
        record = record_from_dict(json.loads(text_record), f"{image}: {RECORD_DIR}/{RECORD_FILE}")
    except ValueError:
        raise ImageError(f"{image}: its {RECORD_DIR}/{RECORD_FILE} is not JSON") from None
    if not os.path.isabs(record.prefix) or os.path.normpath(record.prefix) == "/":
        raise ImageError(f"{image}: its record names no usable path to mount it at")
    return Opened(replace(record, extra={**record.extra, "image": str(image)}), None)
