"""An environment's image and what it records (pure, but for reading an image's first bytes): the SquashFS
superblock's check (not SquashFS, truncated), and the fit: what the environment is, what it was made for, what it
was checked on, and its lock, kept inside the image (``.envkit/image.json``) and beside it (``FILE.fit.json``).

The fit carries a digest of its own content: an edit of either copy, or two copies that differ, is an altered fit.
(The digest tells an edit from the fit envkit wrote; it is no signature: whoever can write a new image can write a
new fit for it.)
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

from envkit.errors import BadInputError
from envkit.state.records import Record, record_from_dict

FORMAT = "envkit-image"
VERSION = 1
FIT_IN_IMAGE = ".envkit/image.json"  # inside the image, beside the environment's own record (.envkit/record.json)
FIT_SUFFIX = ".fit.json"  # beside the image: FILE.fit.json
IMAGE_SUFFIXES = (".sqfs", ".squashfs")
_MAGIC = b"hsqs"
_SUPERBLOCK = struct.Struct("<4sIIIIHHHHHHQQ")  # magic ... version major, minor, root inode, bytes used


class ImageError(BadInputError):
    """An image envkit cannot use as it is (exit 2): not SquashFS, truncated, its fit missing or altered."""


def is_image_argument(text: str) -> bool:
    """Whether ENV names an image file rather than an environment: a path (``./torch.sqfs``, ``/sw/torch.sqfs``) or
    a name ending in .sqfs/.squashfs, which no environment envkit makes has as its name... by convention."""
    return os.sep in text or text.endswith(IMAGE_SUFFIXES)


def beside_path(image: Path) -> Path:
    return image.with_name(image.name + FIT_SUFFIX)


def squashfs_size(head: bytes, size: int, origin: str) -> int:
    """The bytes the SquashFS filesystem in a file of ``size`` bytes starting with ``head`` uses; ImageError when
    it is not SquashFS 4 (what squashfuse and the kernel read) or the file is shorter than that (truncated)."""
    if len(head) < _SUPERBLOCK.size or head[:4] != _MAGIC:
        raise ImageError(f"{origin} is not a SquashFS image (it does not begin as one)",
                         hint="Give an image `envkit pack` made (`envkit pack ENV -o FILE.sqfs`).")
    fields = _SUPERBLOCK.unpack_from(head)
    major, used = fields[9], fields[12]
    if major != 4:
        raise ImageError(f"{origin} is SquashFS version {major}: squashfuse reads version 4",
                         hint="Make it again with `envkit pack`.")
    if size < used:
        raise ImageError(f"{origin} is truncated: {size:,} of its {used:,} bytes are there",
                         hint="Copy it again in full (compare its size with the original's).")
    return used


def check_image_file(path: Path) -> int:
    """:func:`squashfs_size` of the file at ``path``; ImageError when it is missing or not a file."""
    try:
        with open(path, "rb") as handle:
            if not os.path.isfile(path):
                raise ImageError(f"{path} is not a file", hint="Give the image file `envkit pack` wrote.")
            head = handle.read(_SUPERBLOCK.size)
            size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        raise ImageError(f"image {path} does not exist", hint="Give the path of an image `envkit pack` wrote.") \
            from None
    except IsADirectoryError:
        raise ImageError(f"{path} is a directory, not an image", hint="Give the image file `envkit pack` wrote.") \
            from None
    except OSError as error:
        raise ImageError(f"image {path} cannot be read: {error.strerror or error}") from None
    return squashfs_size(head, size, str(path))


def digest(fit: dict[str, Any]) -> str:
    """The sha256 of the fit without its digest, as canonical JSON."""
    content = {key: value for key, value in fit.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def fit_document(record: Record, prefix: str, lock: Optional[tuple[str, str]], envkit_version: str, packed: str,
                 platform: str, packages: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """What an image records (docs/travel.md#what-an-image-records): the environment's record (its prefix the
    image's), the build and manifest it came from, the machines it was made for (its target, or the machine it was
    made on), the last check (where, when, the driver and GPUs it ran on), its lock (name, text) where it has one,
    the packages installed ((manager, name, version) each), the path it mounts at, the platform it was packed on,
    and the envkit that packed it; with its digest."""
    data = {
        "format": FORMAT, "version": VERSION, "prefix": prefix, "packed": packed, "envkit": envkit_version,
        "platform": platform, "manifest": record.manifest, "build": record.build, "python": record.python,
        "made_for": record.target if record.target is not None else {"machine": record.machine},
        "checked": record.verify,
        "lock": None if lock is None else {"name": lock[0], "text": lock[1]},
        "packages": [list(package) for package in packages],
        "record": replace(record, prefix=prefix).to_dict(),
    }
    data["digest"] = digest(data)
    return data


def fit_text(fit: dict[str, Any]) -> str:
    return json.dumps(fit, indent=2, sort_keys=True) + "\n"


def parse_fit(text: Optional[str], origin: str) -> dict[str, Any]:
    """The fit in ``text`` (None: the image has none); ImageError when it is missing, not envkit's, or altered."""
    hint = "Pack the environment again (`envkit pack`), or add --no-fit-check to run it unchecked."
    if text is None:
        raise ImageError(f"{origin} records no fit (no {FIT_IN_IMAGE} in it): envkit cannot tell what it runs on",
                         hint=hint)
    try:
        fit = json.loads(text)
    except ValueError:
        raise ImageError(f"the fit {origin} records is not JSON: it was altered", hint=hint) from None
    if not isinstance(fit, dict) or fit.get("format") != FORMAT:
        raise ImageError(f"the fit {origin} records is not an envkit image's", hint=hint)
    if fit.get("version") != VERSION:
        raise ImageError(f"the fit {origin} records is of version {fit.get('version')!r}; this envkit reads "
                         f"version {VERSION}", hint="Use the envkit that packed it, or pack it again.")
    if fit.get("digest") != digest(fit):
        raise ImageError(f"the fit {origin} records was altered (its digest does not match its content)", hint=hint)
    prefix = fit.get("prefix")
    if not isinstance(prefix, str) or not os.path.isabs(prefix) or os.path.normpath(prefix) == "/":
        raise ImageError(f"the fit {origin} records names no usable path to mount it at", hint=hint)
    record_from_dict(fit.get("record"), f"the fit {origin} records")
    return fit


def check_beside(inside: dict[str, Any], beside: Optional[str], image: Path) -> None:
    """ImageError when the fit beside the image is there and is not the one inside it."""
    if beside is None:
        return
    origin = str(beside_path(image))
    try:
        other = parse_fit(beside, origin)
    except ImageError as error:
        raise ImageError(f"{error.message} (beside the image)", hint=error.hint) from None
    if other != inside:
        raise ImageError(f"the fit beside {image} ({origin}) differs from the one inside it: one of them was altered",
                         hint="Pack the environment again, or add --no-fit-check to run it unchecked.")


def image_record(fit: Optional[dict[str, Any]], image: Path) -> Record:
    """The environment an image holds, as the commands that act on one take it: its record, at the image's prefix,
    with the image named in ``extra["image"]``."""
    assert fit is not None
    record = record_from_dict(fit["record"], str(image))
    return replace(record, prefix=fit["prefix"], extra={**record.extra, "image": str(image)})

