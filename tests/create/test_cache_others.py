"""A package cache that another user may write (issue #40, item 3), with a real second Unix user who plants what
the issue found: in a group-writable cache_dir, `uv -> /victim-dir` and `.envkit-cache.lock -> /victim-file` sent
`envkit cache clean` and `create` into the victim directory and made a file through the lock link; in a 1777 cache
where that user made `uv/` first, environments were hard-linked from files the user can swap. Now each is refused
(exit 2) before anything is written, naming what someone else could change, and what envkit makes in a cache is the
user's alone. Runs as root (the test's user, the one at risk), with the real user `ekmal*` planting."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import CU126, Home
from support import module_systems, unix_users


def _unavailable(reason: str):
    if module_systems.required(os.environ):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def planter():
    """(a real user who is not the one running envkit, their group's gid, a directory both can reach)."""
    problem = unix_users.why_not()
    if problem is not None:
        _unavailable(problem)
    tag = f"{os.getpid() % 100000}"
    with unix_users.public_directory() as root, \
            unix_users.users_and_group(root, [f"ekmal{tag}"], f"ekmalg{tag}", [f"ekmal{tag}"]) as made:
        yield made[f"ekmal{tag}"], made["group"], root


# The build's indexes on a loopback port nobody listens on: whatever happens, nothing leaves 127.0.0.1.
NOWHERE = {"https://download.pytorch.org/whl": "http://127.0.0.1:9/whl",
           "https://pypi.org/simple": "http://127.0.0.1:9/pypi/simple"}


def _as(user, *argv: str) -> None:
    done = user.run(list(argv), {"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


@pytest.fixture
def victim(planter, home: Home):
    """What the planted links point at: a directory of the user's with a file in it, and a file that must not be made."""
    directory = home.root / "victim-dir"
    directory.mkdir()
    (directory / "precious").write_text("mine\n")
    return directory, home.root / "victim-file"


def _untouched(victim) -> None:
    directory, file = victim
    assert sorted(p.name for p in directory.iterdir()) == ["precious"]
    assert (directory / "precious").read_text() == "mine\n"
    assert not os.path.lexists(file)


def _refused(done, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("envkit: error: the package cache ") and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_a_group_writable_cache_with_planted_links_is_refused_and_nothing_is_written_through_them(planter, victim,
                                                                                                 home: Home):
    user, group, root = planter
    cache = root / f"group-cache-{os.getpid()}"
    cache.mkdir()
    os.chown(cache, 0, group)
    os.chmod(cache, 0o2775)  # the lab's group may write it, as the docs allowed
    _as(user, "ln", "-s", str(victim[0]), str(cache / "uv"))
    _as(user, "ln", "-s", str(victim[1]), str(cache / ".envkit-cache.lock"))
    home.write_config(NOWHERE, cache_dir=str(cache))
    words = (f"{cache} may be written by the group ekmalg", "not sticky")
    _refused(home.envkit("cache", "clean", "--yes"), *words)
    _refused(home.envkit("create", *CU126, "--dry-run"), *words)
    _refused(home.envkit("create", *CU126, "--yes", "--no-verify"), *words)
    _refused(home.envkit("lock", *CU126, "-o", str(home.root / "x.yml")), *words)
    _untouched(victim)
    assert home.record("torch-cu126") is None and not home.prefix("torch-cu126").exists()
    assert not (home.root / "x.yml").exists()


def test_a_sticky_cache_refuses_what_another_user_made_in_it_first(planter, victim, home: Home):
    user, _, root = planter
    cache = root / f"sticky-cache-{os.getpid()}"
    cache.mkdir()
    os.chmod(cache, 0o1777)  # everyone may add, nobody may replace another's entries
    home.write_config(NOWHERE, cache_dir=str(cache))
    _as(user, "mkdir", "-m", "0777", str(cache / "uv"))  # made first by the other user
    _refused(home.envkit("create", *CU126, "--yes", "--no-verify"), f"{cache / 'uv'} belongs to {user.name}")
    _refused(home.envkit("cache", "clean", "--yes"), f"{cache / 'uv'} belongs to {user.name}")
    assert list((cache / "uv").iterdir()) == []  # nothing of this user's went into it
    _as(user, "rmdir", str(cache / "uv"))
    _as(user, "ln", "-s", str(victim[1]), str(cache / ".envkit-cache.lock"))
    _refused(home.envkit("cache", "clean", "--yes"),
             f"{cache / '.envkit-cache.lock'} is a symbolic link (to {victim[1]}), which envkit never follows")
    _untouched(victim)
    _as(user, "rm", str(cache / ".envkit-cache.lock"))
    # With nothing of theirs in it, envkit takes the sticky cache over safely: its parts and lock file are made
    # this user's alone (a umask of 002 notwithstanding), and what it made is used and cleaned as in any cache.
    done = home.envkit("create", *CU126, "--dry-run")
    assert done.returncode == 0, done.stderr
    cleaned = home.envkit("cache", "clean", "--yes", "--json")
    assert cleaned.returncode == 0 and json.loads(cleaned.stdout)["caches"][0]["path"] == str(cache), cleaned.stderr
    lock = os.lstat(cache / ".envkit-cache.lock")
    assert stat.S_ISREG(lock.st_mode) and lock.st_uid == os.geteuid() and not lock.st_mode & 0o022
    refused = user.run(["sh", "-c", f"echo x > {cache / '.envkit-cache.lock'}"], {"PATH": "/usr/bin:/bin"})
    assert refused.returncode != 0  # the other user cannot write the lock file envkit made


def test_parts_envkit_makes_are_the_users_alone_under_a_group_umask(tmp_path: Path):
    from envkit.storage.cache import PARTS, using_cache

    old = os.umask(0o002)
    try:
        with using_cache(tmp_path / "cache"):
            pass
    finally:
        os.umask(old)
    for part in PARTS:
        info = os.lstat(tmp_path / "cache" / part)
        assert stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o022, (part, oct(info.st_mode))
    assert not os.lstat(tmp_path / "cache").st_mode & 0o022
