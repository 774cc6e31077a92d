"""envkit's facts in a lock's custom_metadata are checked when the lock is read (they become a record's manifest and
build, and are looked up in the manifests directory), and a lock for another platform says which one."""

from __future__ import annotations

import hashlib

import pytest

from envkit.lockfile.fit import check_platform
from envkit.lockfile.format import LockFileError, dump_lock, parse_lock
from envkit.lockfile.install import _python, _why_unchecked
from envkit.lockfile.model import LockedPackage, LockFile

SHA = hashlib.sha256(b"x").hexdigest()
MD5 = hashlib.md5(b"x").hexdigest()


def lock(custom: dict[str, str], platform: str = "linux-64", python: str = "3.11.9") -> LockFile:
    url = f"https://conda.anaconda.org/conda-forge/{platform}/python-{python}-0.conda"
    return LockFile(packages=(LockedPackage("python", python, "conda", platform, url, SHA, MD5, build="0"),),
                    custom=custom)


def read_back(custom: dict[str, str]) -> LockFile:
    return parse_lock(dump_lock(lock(custom)), "x.lock.yml")


@pytest.mark.parametrize("key, value, words", [
    ("envkit.manifest", "../../etc", "is not a manifest name"),
    ("envkit.manifest", "torch/../x", "is not a manifest name"),
    ("envkit.manifest", "-x", "is not a manifest name"),
    ("envkit.build", "-x", "is not a build id"),
    ("envkit.build", "torch 2.9", "is not a build id"),
    ("envkit.python", "3.99999999999999999999", "is not a Python version like 3.12"),
    ("envkit.python", "３.１２", "is not a Python version like 3.12"),
    ("envkit.python", "3.12; rm", "is not a Python version like 3.12"),
    ("envkit.cuda_driver", "banana", "is not a CUDA version like 12.4"),
    ("envkit.cuda_driver", "-x", "is not a CUDA version like 12.4"),
    ("envkit.cuda_driver", "99999999999999999999.0", "is not a CUDA version like 12.4"),
    ("envkit.cuda_driver", "12.4.1.7", "is not a CUDA version like 12.4"),
    ("envkit.cuda_driver", "12.4 ", "is not a CUDA version like 12.4"),
    ("envkit.cuda_driver", "１２.４", "is not a CUDA version like 12.4"),
    ("envkit.cuda_arch", "banana", "is not a compute capability like 8.0"),
    ("envkit.cuda_arch", "-x", "is not a compute capability like 8.0"),
    ("envkit.cuda_arch", "80000000000000000000.0", "is not a compute capability like 8.0"),
    ("envkit.cuda_arch", "sm_80", "is not a compute capability like 8.0"),
])
def test_envkits_facts_in_a_lock_are_what_they_say_they_are(key, value, words):
    with pytest.raises(LockFileError) as caught:
        read_back({key: value})
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"x.lock.yml: metadata.custom_metadata {key} {value!r} {words}")


def test_good_facts_and_none_at_all_are_read():
    facts = {"envkit.manifest": "torch", "envkit.build": "torch-2.9-cu126", "envkit.python": "3.12",
             "envkit.target": "partition gpu-a100 (2 machines)"}
    assert read_back(facts).custom == facts
    assert read_back({}).custom == {}


def test_a_locked_python_package_of_an_absurd_version_is_bad_input():
    with pytest.raises(LockFileError, match="is for Python '3.99999999999999999999', which is not a Python version"):
        _python(lock({}, python="3.99999999999999999999.1"), "x.lock.yml")
    assert str(_python(lock({}, python="3.11.9"), "x.lock.yml")) == "3.11"


def test_a_lock_whose_packages_are_for_another_platform_names_it():
    mac = LockFile(packages=lock({}, platform="osx-arm64").packages, platforms=("linux-64",))
    with pytest.raises(LockFileError) as caught:
        check_platform(mac, "x.lock.yml")
    assert "its packages are for osx-arm64" in caught.value.message
    assert "locks linux-64, not linux-64" not in caught.value.message
    other = LockFile(packages=mac.packages, platforms=("osx-arm64",))
    with pytest.raises(LockFileError, match="locks osx-arm64, not linux-64"):
        check_platform(other, "x.lock.yml")


def test_why_a_lock_is_not_checked_without_no_verify():
    assert _why_unchecked(lock({})) == "the lock names no envkit build to check against"
    named = lock({"envkit.manifest": "nosuch", "envkit.build": "nosuch-1.0-cpu"})
    assert _why_unchecked(named) == "the manifests have no build nosuch-1.0-cpu of nosuch to check against"


@pytest.mark.parametrize("key, values", [
    # What a solve may have seen is read: the driver's X.Y, $CONDA_OVERRIDE_CUDA as conda takes it, none at all.
    ("envkit.cuda_driver", ["12.4", "12", "12.4.1", "11.8", ""]),
    ("envkit.cuda_arch", ["8.0", "12.0", ""]),
])
def test_the_cuda_a_solve_may_have_seen_is_read(key, values):
    for good in values:
        assert read_back({key: good}).custom == {key: good}


@pytest.mark.parametrize("key", ["envkit.index_url", "envkit.find_links"])
@pytest.mark.parametrize("value, words", [
    ("https://pypi.org/simple --extra-index-url https://evil", "no spaces"),
    ("https://download.pytorch.org/whl/cu126 ", "no spaces"),
    ("-https://pypi.org/simple", "are the upstream https URLs"),
    ("--index-url=https://evil", "are the upstream https URLs"),
    ("pypi.org/simple", "are the upstream https URLs"),
    ("ftp://mirror/simple", "are the upstream https URLs"),
    ("https://pypi.org/simple?x=1", "no spaces, credentials, query or fragment"),
    ("https://pypi.org/<simple>", "hold no < >"),
])
def test_the_pip_urls_of_a_lock_are_upstream_https_urls(key, value, words):
    with pytest.raises(LockFileError) as caught:
        read_back({key: value})
    assert caught.value.exit_code == 2
    message = caught.value.message
    assert message.startswith(f"x.lock.yml: metadata.custom_metadata {key} {value!r}: ") and words in message
    for good in ("https://download.pytorch.org/whl/cu126", "https://download.pytorch.org/whl/torch_stable.html", ""):
        assert read_back({key: good}).custom == {key: good}
