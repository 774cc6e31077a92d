"""A hostile lock never deletes or makes anything outside envkit's store (issue #40, item 1): a sha256 that is a
path, or a wheel URL whose file name is one once percent-decoded, is refused when the lock is read (exit 2, naming the
file and the package, before any download), in a pylock.toml and in envkit's own conda-lock format alike. The user's
~/.bashrc is real and must survive every case; envkit's store exists (an earlier from-lock made it)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import PYTHON, Home
from envkit.lockfile.format import dump_lock
from envkit.lockfile.model import PYTHON as PYTHON_FACT, LockedPackage, LockFile
from support.pypi_index import IndexServer
from support.wheels import build_wheel, sha256_of

BASHRC = "# the user's own shell setup\nexport PS1='$ '\n"


def pylock(url: str, sha256: str) -> str:
    """A pylock.toml of alpha's wheel at ``url``, named as a wheel whatever the URL ends in (packaging checks the
    name, envkit kept the file under the URL's)."""
    return (f'lock-version = "1.0"\ncreated-by = "a test"\nrequires-python = ">=3.10"\n\n[[packages]]\n'
            f'name = "alpha"\nversion = "1.0"\nwheels = [{{ name = "alpha-1.0-py3-none-any.whl", url = "{url}", '
            f'hashes = {{ sha256 = "{sha256}" }} }}]\n')


def conda_lock(url: str, sha256: str) -> str:
    package = LockedPackage("alpha", "1.0", "pip", "linux-64", url, "0" * 64)
    text = dump_lock(LockFile(packages=(package,), custom={PYTHON_FACT: PYTHON}))
    return text.replace("0" * 64, sha256) if sha256 != "0" * 64 else text


@pytest.fixture
def store(home: Home, pypi_server: IndexServer, tmp_path: Path):
    """(envkit's store of pip files after a real from-lock, the index's base URL, alpha's sha256)."""
    wheel = build_wheel(tmp_path / "wheels", "alpha", "1.0", files={"alpha/__init__.py": "NAME = 'alpha'\n"})
    base = pypi_server.add_index("/simple", [wheel])
    lock = home.root / "pylock.toml"
    lock.write_text(pylock(f"{base}alpha/{wheel.name}", sha256_of(wheel)), encoding="utf-8")
    made = home.envkit("create", "--from-lock", str(lock), "--name", "first", "--python", PYTHON, "--yes",
                       "--no-verify")
    assert made.returncode == 0, made.stderr
    [store] = [d for d in Path(home.env["XDG_CACHE_HOME"]).rglob("locked") if d.parent.name == "pip"]
    (home.root / ".bashrc").write_text(BASHRC, encoding="utf-8")
    return store, base, sha256_of(wheel)


def ups(store: Path, home: Home, below: int = 0) -> str:
    """The relative path from ``below`` levels under ``store`` up to the home directory."""
    return "/".join([".."] * below + [os.path.relpath(home.root, store)])


def cases(store: Path, home: Home, base: str, sha256: str) -> dict[str, tuple[str, str, str]]:
    """name -> (the lock's URL, its sha256, what the error says)."""
    escaping_name = quote(f"{ups(store, home, below=1)}/.bashrc", safe="")  # ..%2F..%2F...%2F.bashrc
    return {
        "a sha256 that is the path up to the home": (f"{base}alpha/.bashrc", ups(store, home),
                                                     "is not a sha256 (64 hexadecimal digits)"),
        "a file name that climbs out once decoded": (f"{base}alpha/{escaping_name}", sha256,
                                                     "is not a plain file name"),
        "a sha256 that makes a directory outside": (f"{base}alpha/alpha-1.0-py3-none-any.whl",
                                                    f"{ups(store, home)}/../made-by-lock",
                                                    "is not a sha256 (64 hexadecimal digits)"),
    }


@pytest.mark.parametrize("form", ["pylock.toml", "envkit.conda-lock.yml"])
def test_a_hostile_lock_is_refused_when_read_and_touches_nothing_outside_the_store(home: Home, store, form, tmp_path,
                                                                                  pypi_server: IndexServer):
    store, base, sha256 = store
    for case, (url, sha, words) in cases(store, home, base, sha256).items():
        lock = home.root / form
        lock.write_text(pylock(url, sha) if form == "pylock.toml" else conda_lock(url, sha), encoding="utf-8")
        asked = len(pypi_server.requests)
        for attempt in (1, 2):  # (the second run once deleted what the first had written)
            done = home.envkit("create", "--from-lock", str(lock), "--name", f"h{attempt}", "--python", PYTHON,
                               "--yes", "--no-verify") if form == "pylock.toml" else \
                home.envkit("create", "--from-lock", str(lock), "--name", f"h{attempt}", "--yes", "--no-verify")
            assert done.returncode == 2, (case, done.stderr)
            assert words in done.stderr and str(lock) in done.stderr and "alpha" in done.stderr, (case, done.stderr)
            assert "Traceback" not in done.stderr
        assert (home.root / ".bashrc").read_text(encoding="utf-8") == BASHRC, case
        assert pypi_server.requests[asked:] == [], case  # refused before any download
        assert not [p for p in tmp_path.rglob("made-by-lock")], case
        assert not home.prefix("h1").exists() and home.record("h1") is None


def test_a_pylock_s_envkit_facts_are_checked_as_conda_lock_s_are(home: Home):
    # [tool.envkit] manifest became the record's manifest and was looked up as MANIFESTS/<manifest>.yaml: a path
    # there read a file outside the manifests directory. Now refused as conda-lock's custom_metadata is.
    lock = home.root / "pylock.toml"
    lock.write_text(pylock("https://example.org/alpha-1.0-py3-none-any.whl", "a" * 64)
                    + '\n[tool.envkit]\nmanifest = "../../etc/passwd"\nbuild = "x"\n', encoding="utf-8")
    done = home.envkit("create", "--from-lock", str(lock), "--name", "f1", "--python", PYTHON, "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "envkit.manifest '../../etc/passwd' is not a manifest name" in done.stderr and str(lock) in done.stderr
