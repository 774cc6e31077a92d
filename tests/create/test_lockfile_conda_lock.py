"""envkit installs a conda-lock.yml written by conda-lock's own models: conda packages from the local channel and a
pip package from the loopback index, every file hash-checked, no solve, and no envkit facts in the file."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from conftest import PYTHON, PYTHON_FULL, Home
from support.pypi_index import IndexServer
from support.wheels import build_wheel

from test_create_conda import leftovers, no_conda

WRITE = """
import json, pathlib, sys
from conda_lock.lockfile import write_conda_lock_file
from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency, Lockfile, LockMeta
spec = json.loads(sys.argv[2])
packages = [LockedDependency(name=p["name"], version=p["version"], manager=p["manager"], platform="linux-64",
                             url=p["url"], build=p.get("build"), dependencies=p.get("dependencies", {}),
                             hash=HashModel(md5=p.get("md5"), sha256=p["sha256"]), categories={"main"})
            for p in spec["packages"]]
meta = LockMeta(content_hash={"linux-64": "x"}, channels=spec["channels"], platforms=["linux-64"],
                sources=["environment.yml"])
write_conda_lock_file(Lockfile(package=packages, metadata=meta), pathlib.Path(sys.argv[1]), metadata_choices=None)
"""


def hashes(path: Path) -> dict[str, str]:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest()}


def test_envkit_installs_a_lock_written_by_conda_lock(home: Home, legacy_channel: Path, pypi_server: IndexServer,
                                                      tmp_path: Path):
    wheel = build_wheel(tmp_path / "wheels", "lockdemo", "1.2.3", files={"lockdemo/__init__.py": "VALUE = 42\n"})
    pypi_server.add_index("/pypi/simple", [wheel])
    upstream = "https://conda.anaconda.org/some-channel"
    home.write_config({upstream: legacy_channel.as_uri()})
    python_archive = next((legacy_channel / "linux-64").glob(f"python-{PYTHON_FULL}-*.tar.bz2"))
    pip_archive = next((legacy_channel / "noarch").glob("pip-*.tar.bz2"))
    packages = [
        {"name": "python", "version": PYTHON_FULL, "manager": "conda", "build": "0",
         "url": f"{upstream}/linux-64/{python_archive.name}", **hashes(python_archive)},
        {"name": "pip", "version": "24.0", "manager": "conda", "build": "0", "dependencies": {"python": ""},
         "url": f"{upstream}/noarch/{pip_archive.name}", **hashes(pip_archive)},
        {"name": "lockdemo", "version": "1.2.3", "manager": "pip",
         "url": f"{pypi_server.url}/pypi/simple/lockdemo/{wheel.name}", "sha256": hashes(wheel)["sha256"]},
    ]
    lock = tmp_path / "conda-lock.yml"
    written = subprocess.run([sys.executable, "-W", "ignore", "-c", WRITE, str(lock),
                              json.dumps({"packages": packages, "channels": [upstream]})],
                             capture_output=True, text=True, timeout=120)
    assert written.returncode == 0, written.stderr
    done = home.envkit("create", "--from-lock", str(lock), "--name", "foreign", "--yes", env=no_conda(home))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "no post-install check" in done.stderr  # nothing says which framework it holds
    prefix = home.prefix("foreign")
    installed = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
    assert installed == {"python", "pip"}
    assert home.in_env("foreign", "import lockdemo, sys; print(lockdemo.VALUE, sys.prefix)") == f"42 {prefix}"
    record = home.record("foreign")
    assert record["python"] == PYTHON and record["backend"] == "rattler"

    # The same file with the wheel's hash changed: envkit refuses the file before anything is made.
    tampered = tmp_path / "tampered.yml"
    tampered.write_text(lock.read_text().replace(hashes(wheel)["sha256"], "f" * 64))
    done = home.envkit("create", "--from-lock", str(tampered), "--name", "tampered", "--yes", env=no_conda(home))
    assert done.returncode == 1, done.stderr
    assert f"lockdemo 1.2.3 from {pypi_server.url}/pypi/simple/lockdemo/{wheel.name} has sha256" in done.stderr
    assert f"but the lock pins {'f' * 64}" in done.stderr and "Traceback" not in done.stderr
    assert leftovers(home) == ["foreign"] and home.record("tampered") is None
