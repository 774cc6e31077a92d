"""The lock format: envkit's writer and parser against conda-lock's own code (the reference), and every broken
file a user can hand over, each with a sentence naming the file, the package and the field."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.errors import BadInputError, ConfigError
from envkit.lockfile.format import LockFileError, dump_lock, parse_lock, read_lock
from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile
from envkit.lockfile.pylock import best_wheel, pylock_packages
from envkit.state.config import Config, Mirror

SHA = hashlib.sha256(b"a").hexdigest()
MD5 = hashlib.md5(b"a").hexdigest()


def sample() -> LockFile:
    return LockFile(
        packages=(
            LockedPackage("python", "3.11.7", "conda", PLATFORM, "https://conda.anaconda.org/c/linux-64/python-3.11.7-0.tar.bz2",
                          SHA, MD5, build="0"),
            LockedPackage("tensorflow-gpu", "2.4.1", "conda", PLATFORM,
                          "https://conda.anaconda.org/c/linux-64/tensorflow-gpu-2.4.1-0.tar.bz2", SHA, MD5, build="0",
                          dependencies=(("__cuda", ">=10.1"), ("python", ">=3.11,<3.12"))),
            LockedPackage("filelock", "3.20.0", "pip", PLATFORM,
                          "https://pypi.org/packages/filelock-3.20.0-py3-none-any.whl", SHA),
        ),
        channels=("https://conda.anaconda.org/c",), content_hash={PLATFORM: SHA}, sources=("envs/tensorflow.yaml",),
        custom={"envkit.build": "tensorflow-2.4.1-cu101", "envkit.python": "3.11"}, created_at="2026-11-22T18:00:00Z")


def test_round_trip_keeps_every_field():
    lock = sample()
    again = parse_lock(dump_lock(lock), "x.yml")
    assert sorted(again.packages, key=lambda p: p.name) == sorted(lock.packages, key=lambda p: p.name)
    assert again.custom == lock.custom and again.channels == lock.channels and again.platforms == (PLATFORM,)


@pytest.mark.parametrize("file_name, word", [("my lock.yml", "'my lock.yml'"), ("-x.yml", "./-x.yml"),
                                              ("a\nversion: 9.yml", "FILE")])
def test_the_commands_in_the_header_take_the_file_as_it_is_named(file_name, word):
    text = dump_lock(sample(), file_name)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert len(header) == 3 and "version: 9" not in text
    assert f"envkit create --from-lock {word} --name ENV" in header[1]
    assert header[2].endswith(f"conda-lock install -n ENV {word}")
    assert parse_lock(text, "x.yml").packages == parse_lock(dump_lock(sample()), "x.yml").packages


def test_the_header_installs_under_the_name_given_and_with_conda_lock_only_with_a_conda_part():
    header = dump_lock(sample(), "torch-a100.conda-lock.yml", "torch-a100").splitlines()[:3]
    assert header[1].endswith("envkit create --from-lock torch-a100.conda-lock.yml --name torch-a100")
    assert header[2].endswith("conda-lock install -n torch-a100 torch-a100.conda-lock.yml")
    # Without a conda part, conda-lock makes an environment with no Python and runs another pip for the wheels.
    pip_only = sample()
    pip_only = LockFile(packages=pip_only.pip(), channels=(), content_hash=pip_only.content_hash,
                        custom=pip_only.custom)
    text = dump_lock(pip_only, "t.yml")
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header[1].endswith("envkit create --from-lock t.yml --name ENV")
    assert "conda-lock install -n" not in text and "not with conda-lock install: the lock has no conda part" in header[2]
    assert parse_lock(text, "t.yml").packages == pip_only.packages


def conda_lock_python(code: str, *args: str) -> str:
    """Run ``code`` with conda-lock in a child Python: importing conda-lock writes CONDA_ROOT into os.environ (work
    at import time), which must not leak into the other tests."""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


READ = """
import json, pathlib, sys
from conda_lock.lockfile import parse_conda_lock_file
lock = parse_conda_lock_file(pathlib.Path(sys.argv[1]))
print(json.dumps({"packages": [[p.name, p.manager, p.url, p.hash.sha256] for p in lock.package],
                  "custom": lock.metadata.custom_metadata, "platforms": lock.metadata.platforms}))
"""

WRITE = """
import pathlib, sys
from conda_lock.lockfile import write_conda_lock_file
from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency, Lockfile, LockMeta
md5, sha = sys.argv[2], sys.argv[3]
packages = [LockedDependency(name="zlib", version="1.3", manager="conda", platform="linux-64",
                             url="https://conda.anaconda.org/c/linux-64/zlib-1.3-0.conda", build="0",
                             hash=HashModel(md5=md5, sha256=sha), categories={"main", "dev"}),
            LockedDependency(name="pytest", version="8.0", manager="pip", platform="linux-64",
                             url="https://files/pytest-8.0-py3-none-any.whl", hash=HashModel(sha256=sha),
                             categories={"dev"})]
meta = LockMeta(content_hash={"linux-64": "x"}, channels=["https://conda.anaconda.org/c"], platforms=["linux-64"],
                sources=["environment.yml"])
write_conda_lock_file(Lockfile(package=packages, metadata=meta), pathlib.Path(sys.argv[1]), metadata_choices=None)
"""


def test_conda_lock_reads_envkits_lock(tmp_path: Path):
    path = tmp_path / "conda-lock.yml"
    path.write_text(dump_lock(sample()), encoding="utf-8")
    theirs = json.loads(conda_lock_python(READ, str(path)))
    assert {tuple(p) for p in theirs["packages"]} == {(p.name, p.manager, p.url, p.sha256) for p in sample().packages}
    assert theirs["custom"]["envkit.build"] == "tensorflow-2.4.1-cu101"
    assert theirs["platforms"] == [PLATFORM]


def test_envkit_reads_what_conda_locks_models_write(tmp_path: Path):
    path = tmp_path / "conda-lock.yml"
    conda_lock_python(WRITE, str(path), MD5, SHA)
    lock = read_lock(path)
    assert [(p.name, p.optional) for p in lock.for_platform()] == [("zlib", False)]  # one entry, main wins
    assert [p.name for p in lock.packages if p.optional] == ["pytest"]  # dev only: not installed
    assert lock.channels == ("https://conda.anaconda.org/c",)


@pytest.mark.parametrize("edit, words", [
    (lambda t: t[: len(t) // 2] + "\n  - {name: [", "not valid YAML"),
    (lambda t: t.replace("version: 1\n", "version: 7\n", 1), "has version 7"),
    (lambda t: t.replace("version: 1\n", "", 1), "has no 'version'"),
    (lambda t: t.replace(f"    sha256: {SHA}\n", "", 1), "no valid sha256 hash (has none)"),
    (lambda t: t.replace(f"md5: {MD5}", "md5: nothex", 1), "no valid md5 hash"),
    (lambda t: t.replace("manager: pip", "manager: npm", 1), "manager 'npm' is not one of conda, pip"),
    (lambda t: t.replace("version: 2.4.1", "version: 2.4", 1).replace("version: '2.4'", "version: 2.4"), "version"),
    (lambda t: "- just\n- a list\n", "not a conda-lock file"),
    # What envkit keeps a file under must be a plain name (issue #40): a conda package's file name, percent-decoded,
    # and a hash followed by a line break (a regular expression's $ matched before it).
    (lambda t: t.replace("python-3.11.7-0.tar.bz2", "..%2F..%2F..%2F.bashrc", 1),
     "package 1 (python): the URL 'https://conda.anaconda.org/c/linux-64/..%2F..%2F..%2F.bashrc' ends in "
     "'../../../.bashrc', which holds a path separator"),
    (lambda t: t.replace("python-3.11.7-0.tar.bz2", "%2E%2E", 1), "ends in '..', which names a directory"),
    (lambda t: t.replace(f"sha256: {SHA}", f'sha256: "{SHA}\\n"', 1), "is not a sha256 (64 hexadecimal digits)"),
])
def test_broken_locks_are_refused_with_a_sentence(edit, words):
    text = edit(dump_lock(sample()))
    with pytest.raises(LockFileError) as error:
        parse_lock(text, "broken.yml")
    assert words in error.value.message and "broken.yml" in error.value.message
    assert error.value.exit_code == 2


def test_unquoted_version_is_refused_not_misread():
    text = dump_lock(sample()).replace("version: 3.20.0", "version: 3.2", 1).replace("'3.2'", "3.2")
    text = text.replace("version: 2.4.1", "version: 2.40", 1)
    with pytest.raises(LockFileError) as error:
        parse_lock(text, "f.yml")
    assert "must be a quoted string, not 2.4" in error.value.message


def test_a_truncated_lock_is_refused(tmp_path: Path):
    text = dump_lock(sample())
    cut = text[: text.index("- name: tensorflow-gpu") + 40]
    with pytest.raises(LockFileError) as error:
        parse_lock(cut, "cut.yml")
    assert "cut.yml" in error.value.message


def test_missing_file_is_bad_input(tmp_path: Path):
    with pytest.raises(BadInputError, match="does not exist"):
        read_lock(tmp_path / "nope.yml")


def test_pip_names_that_could_be_read_as_options_are_refused():
    text = dump_lock(sample()).replace("name: filelock", "name: --index-url=http://evil", 1)
    with pytest.raises(LockFileError, match="not a valid package name"):
        parse_lock(text, "f.yml")


def test_pip_versions_that_could_carry_options_are_refused():
    text = dump_lock(sample()).replace("version: 3.20.0", "version: 3.20.0 --index-url http://evil", 1)
    with pytest.raises(LockFileError, match="is not a valid version"):
        parse_lock(text, "f.yml")


def test_urls_with_whitespace_are_refused():
    text = dump_lock(sample()).replace("filelock-3.20.0-py3-none-any.whl", "a.whl --index-url http://x", 1)
    with pytest.raises(LockFileError, match="not a URL"):
        parse_lock(text, "f.yml")


def test_best_wheel_prefers_the_targets_own_build_and_skips_others():
    urls = ["https://x/t-1-py3-none-any.whl", "https://x/t-1-cp312-cp312-manylinux_2_28_x86_64.whl",
            "https://x/t-1-cp311-cp311-manylinux_2_28_x86_64.whl", "https://x/t-1-cp312-cp312-macosx_11_0_arm64.whl"]
    assert best_wheel(urls, "3.12") == urls[1]
    assert best_wheel(urls[2:], "3.12") is None
    assert best_wheel(["https://x/t-1-cp312-cp312-manylinux_2_34_x86_64.whl"], "3.12") is None  # newer glibc


def test_pylock_wheels_go_back_to_their_upstream_urls():
    text = f"""
lock-version = "1.0"
[[packages]]
name = "torch"
version = "2.13.0+cu126"
wheels = [{{ url = "http://127.0.0.1:9/whl/cu126/torch/torch-2.13.0%2Bcu126-py3-none-any.whl", hashes = {{ sha256 = "{SHA}" }} }}]
"""
    config = Config(path=None, mirrors=(Mirror("https://download.pytorch.org/whl", "http://127.0.0.1:9/whl"),))
    [package] = pylock_packages(text, "3.12", config)
    assert package.url == "https://download.pytorch.org/whl/cu126/torch/torch-2.13.0%2Bcu126-py3-none-any.whl"
    assert package.sha256 == SHA and package.manager == "pip"


def test_a_url_of_a_mirror_with_credentials_goes_back_upstream_without_them():
    from envkit.lockfile.urls import upstream_url

    config = Config(path=None, mirrors=(Mirror("https://download.pytorch.org/whl", "http://alice:pw@127.0.0.1:9/whl"),
                                        Mirror("https://pypi.org/simple", "http://127.0.0.1:9/pypi/simple")))
    wheel = "/cu126/torch/torch-2.13.0%2Bcu126-py3-none-any.whl"
    for reported in (f"http://127.0.0.1:9/whl{wheel}", f"http://alice:pw@127.0.0.1:9/whl{wheel}"):
        assert upstream_url(reported, config) == f"https://download.pytorch.org/whl{wheel}"  # uv reports it bare
    # On the mirrors' server but under no prefix they map: no upstream URL is known, and the lock is refused rather
    # than keeping the mirror's (issue #39), with the mirror named without its password.
    with pytest.raises(ConfigError, match=r"the mirror http://127\.0\.0\.1:9/whl serves x\.whl from "
                                          r"http://127\.0\.0\.1:9/other/x\.whl, outside the prefix") as refused:
        upstream_url("http://alice:pw@127.0.0.1:9/other/x.whl", config)
    assert "pw" not in refused.value.message and refused.value.exit_code == 2
    assert upstream_url("http://127.0.0.2:9/other/x.whl", config) == "http://127.0.0.2:9/other/x.whl"  # not a mirror
    assert upstream_url("http://127.0.0.1:9/pypi/simple/a/a-1.whl", config) == "https://pypi.org/simple/a/a-1.whl"


def test_a_cached_lock_is_read_again_when_the_file_changes(tmp_path: Path):
    path = tmp_path / "conda-lock.yml"
    path.write_text(dump_lock(sample()), encoding="utf-8")
    cache = tmp_path / "cache"
    assert read_lock(path, cache).custom["envkit.python"] == "3.11"
    assert list((cache / "lock").glob("*.pickle"))  # kept
    path.write_text(dump_lock(sample()).replace("envkit.python: '3.11'", "envkit.python: '3.12'"), encoding="utf-8")
    assert read_lock(path, cache).custom["envkit.python"] == "3.12"
    path.write_text("version: 1\n", encoding="utf-8")
    with pytest.raises(LockFileError):
        read_lock(path, cache)
