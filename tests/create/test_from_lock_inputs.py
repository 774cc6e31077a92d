"""`envkit create --from-lock` with a lock whose envkit facts are wrong, or that names a build the manifests do not
have: exit 2 before anything is made, or a plan that says why it will not be checked. Dry runs and refusals only:
nothing is fetched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from conftest import PROFILES, Home
from envkit.lockfile.format import dump_lock
from envkit.lockfile.model import LockedPackage, LockFile

SHA = hashlib.sha256(b"x").hexdigest()
MD5 = hashlib.md5(b"x").hexdigest()
H100 = ("--machine", str(PROFILES / "h100-cuda128.yaml"))


def write_lock(home: Home, custom: dict[str, str], platform: str = "linux-64") -> Path:
    url = f"https://conda.anaconda.org/conda-forge/{platform}/python-3.11.9-0.conda"
    lock = LockFile(packages=(LockedPackage("python", "3.11.9", "conda", platform, url, SHA, MD5, build="0"),),
                    custom=custom)
    empty = home.root / "no-channel"  # what a regression would fetch from: nothing, offline
    empty.mkdir(exist_ok=True)
    home.write_config({"https://conda.anaconda.org/conda-forge": empty.as_uri()})
    path = home.root / "x.lock.yml"
    path.write_text(dump_lock(lock), encoding="utf-8")
    return path


@pytest.mark.parametrize("custom, words", [
    ({"envkit.manifest": "../../etc", "envkit.build": "x"}, "envkit.manifest '../../etc' is not a manifest name"),
    ({"envkit.manifest": "torch", "envkit.build": "-x"}, "envkit.build '-x' is not a build id"),
    ({"envkit.python": "3.99999999999999999999"}, "is not a Python version like 3.12"),
])
def test_a_lock_with_bad_facts_makes_no_record(home: Home, custom, words):
    done = home.envkit("create", "--from-lock", str(write_lock(home, custom)), "--name", "x", *H100, "--yes")
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert home.record("x") is None and not home.prefix("x").exists()


def test_a_lock_for_another_platform_names_the_platform_found(home: Home):
    done = home.envkit("create", "--from-lock", str(write_lock(home, {}, platform="osx-arm64")), "--name", "x",
                       *H100, "--dry-run")
    assert done.returncode == 2 and "osx-arm64" in done.stderr and "linux-64, not linux-64" not in done.stderr


def test_a_lock_of_a_build_the_manifests_lack_says_why_it_is_not_checked(home: Home):
    lock = write_lock(home, {"envkit.manifest": "nosuch", "envkit.build": "nosuch-1.0-cpu", "envkit.python": "3.11"})
    done = home.envkit("create", "--from-lock", str(lock), "--name", "x", *H100, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "Check:       no (the manifests have no build nosuch-1.0-cpu of nosuch to check against)" in done.stdout
    assert "--no-verify" not in done.stdout
    skipped = home.envkit("create", "--from-lock", str(lock), "--name", "x", *H100, "--dry-run", "--no-verify")
    assert "Check:       no (--no-verify)" in skipped.stdout


def test_a_lock_whose_build_does_not_fit_says_so_once_with_the_reasons(home: Home):
    lock = write_lock(home, {"envkit.manifest": "jax", "envkit.build": "jax-0.9-cu13", "envkit.python": "3.11"})
    done = home.envkit("create", "--from-lock", str(lock), "--name", "x", "--machine",
                       str(PROFILES / "k80x2-cuda114.yaml"), "--dry-run")
    assert done.returncode == 1, done.stderr
    assert "the lock of jax-0.9-cu13 does not fit profile kepler: needs driver CUDA >= 13.0" in done.stderr
    assert done.stderr.count("does not fit") == 1 and "Traceback" not in done.stderr


def test_a_lock_is_not_installed_into_envkits_own_directory(home: Home):
    # `create` refused such a --prefix, `create --from-lock` made an environment there: one holding envkit's records.
    lock = write_lock(home, {"envkit.manifest": "nosuch", "envkit.build": "nosuch-1.0-cpu", "envkit.python": "3.11"})
    (home.data / "envs").mkdir(parents=True)
    done = home.envkit("create", "--from-lock", str(lock), "--prefix", str(home.data), *H100, "--dry-run")
    assert done.returncode == 2 and f"--prefix {home.data} is envkit's data directory" in done.stderr, done.stderr
    assert sorted(p.name for p in home.data.iterdir()) == ["envs"]


def test_a_lock_named_after_an_environment_installs_as_it_without_name(home: Home):
    # `envkit lock` of a fleet's group writes NAME.conda-lock.yml and says to install it as NAME; without --name it
    # was installed under the build's default name, as another group's lock of the same build would be.
    lock = write_lock(home, {"envkit.manifest": "nosuch", "envkit.build": "nosuch-1.0-cpu", "envkit.python": "3.11"})
    named = lock.rename(home.root / "nosuch-lab-02.conda-lock.yml")
    done = home.envkit("create", "--from-lock", str(named), *H100, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"Environment: nosuch-lab-02 at {home.prefix('nosuch-lab-02')}" in done.stdout
    other = write_lock(home, {"envkit.manifest": "nosuch", "envkit.build": "nosuch-1.0-cpu", "envkit.python": "3.11"})
    plain = home.envkit("create", "--from-lock", str(other), *H100, "--dry-run")  # x.lock.yml: the default name
    assert plain.returncode == 0 and "Environment: nosuch-cpu at" in plain.stdout, plain.stderr
