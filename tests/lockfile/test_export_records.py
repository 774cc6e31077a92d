"""`envkit export` reads an environment's conda-meta records as any file of another program: bounded, never waiting
on a FIFO, and one error naming the file for one it cannot use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.errors import EnvkitError
from envkit.lockfile.export import _conda_package
from envkit.state.config import Config

GOOD = {"name": "python", "version": "3.11.7", "build": "0", "url": "https://conda.anaconda.org/c/linux-64/p.conda",
        "sha256": "a" * 64, "md5": "b" * 32, "depends": []}


def _record(tmp_path: Path, body) -> Path:
    path = tmp_path / "conda-meta" / "python-3.11.7-0.json"
    path.parent.mkdir(exist_ok=True)
    if isinstance(body, dict):
        path.write_text(json.dumps(body))
    else:
        body(path)
    return path


def test_a_record_reads_as_a_locked_package(tmp_path: Path):
    package = _conda_package(_record(tmp_path, GOOD), Config(path=None), {})
    assert (package.name, package.version, package.build, package.sha256) == ("python", "3.11.7", "0", "a" * 64)


@pytest.mark.parametrize("make, said", [
    (lambda path: os.mkfifo(path), "is not a readable conda-meta record"),  # nobody writes to it: read empty
    (lambda path: path.symlink_to("/dev/zero"), "is over 256 MiB, the most envkit reads of a conda-meta record"),
    (lambda path: path.write_text("{not json"), "is not a readable conda-meta record"),
    (lambda path: path.write_text("[1, 2]"), "is not a readable conda-meta record"),
])
def test_a_record_envkit_cannot_use_is_one_error_naming_it(tmp_path: Path, make, said):
    path = _record(tmp_path, make)
    with pytest.raises(EnvkitError) as caught:
        _conda_package(path, Config(path=None), {})
    assert caught.value.message.startswith(str(path)) and said in caught.value.message
