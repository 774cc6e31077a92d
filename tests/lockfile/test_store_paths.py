"""The second proof behind the lock readers (issue #40): where envkit's downloader keeps a locked file is made from
the lock's sha256 and the URL's file name only through envkit.state.files.inside, so that even a LockedPackage no reader
checked never becomes a path outside the store: nothing is read, deleted, made or fetched there."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.lockfile.fetch import fetch_verified, stored_at
from envkit.lockfile.format import LockFileError
from envkit.lockfile.model import PLATFORM, LockedPackage
from envkit.state.files import inside, plain_name_problem

SHA = "a" * 64


@pytest.mark.parametrize("name, words", [
    ("", "names no file"), (".", "names a directory"), ("..", "names a directory"), ("../x", "path separator"),
    ("a/b", "path separator"), ("x\0y", "control character"), ("x\ny", "control character"),
    ("x" * 256, "longer than 255 bytes"),
])
def test_what_is_not_a_plain_name_says_why(name, words):
    assert words in plain_name_problem(name)
    with pytest.raises(ValueError, match="|".join(words.split())):
        inside(Path("/store"), name)


def test_plain_names_stay_inside():
    assert plain_name_problem("torch-2.13.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl") is None
    assert inside(Path("/store"), SHA, "..x.whl") == Path(f"/store/{SHA}/..x.whl")


def test_a_package_whose_file_would_lie_outside_the_store_touches_nothing(tmp_path: Path):
    store = tmp_path / "home" / ".cache" / "envkit" / "pip" / "locked"
    (store / SHA).mkdir(parents=True)
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("mine\n")
    escaping = LockedPackage("alpha", "1.0", "pip", PLATFORM,
                             "http://127.0.0.1:9/simple/alpha/..%2F..%2F..%2F..%2F..%2F.bashrc", SHA)
    assert (store / SHA / escaping.file_name).resolve() == bashrc  # what the path would have been
    for call in (lambda: stored_at(store, escaping),
                 lambda: fetch_verified(escaping, escaping.url, store, lambda line: None)):
        with pytest.raises(LockFileError) as caught:
            call()
        assert caught.value.exit_code == 2 and "holds a path separator" in caught.value.message
        assert "outside its store" in caught.value.message
    assert bashrc.read_text() == "mine\n"
    made = LockedPackage("alpha", "1.0", "pip", PLATFORM, "http://127.0.0.1:9/a-1.0-py3-none-any.whl",
                         "../../../../made-by-lock")
    with pytest.raises(LockFileError):
        fetch_verified(made, made.url, store, lambda line: None)
    assert not list(tmp_path.rglob("made-by-lock"))


@pytest.mark.parametrize("field, value", [("build", "../../../../escaped"), ("name", "../escaped")])
def test_a_conda_package_whose_own_record_names_a_path_is_not_installed(tmp_path: Path, field, value):
    # The lock pins the archive by hash, so its author chose what the archive's info/index.json says; the package
    # cache and conda-meta name files after its name, version and build. The embedded engine refuses such a record.
    import hashlib
    import io
    import json
    import tarfile

    from envkit.backends.conda_engine import install_archives
    from envkit.errors import InstallError
    from support.conda_channel import build_package

    made = build_package(tmp_path / "channel", "evil", "1.0", files={"x.txt": "x"})
    archive = tmp_path / "evil-1.0-0.tar.bz2"
    with tarfile.open(made, "r:bz2") as source, tarfile.open(archive, "w:bz2") as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name == "info/index.json":
                data = json.dumps({**json.loads(data), field: value}).encode()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    body = archive.read_bytes()
    cache = tmp_path / "cache" / "a" / "b" / "c"
    cache.mkdir(parents=True)
    with pytest.raises(InstallError):
        install_archives(tmp_path / "prefix", [(archive, "https://conda.anaconda.org/x", hashlib.sha256(body).hexdigest(),
                                                hashlib.md5(body).hexdigest())], cache)
    assert not list(tmp_path.rglob("*escaped*")) and not (tmp_path / "prefix").exists()
