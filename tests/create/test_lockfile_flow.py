"""`envkit lock`, `envkit create --from-lock` and `envkit export` end to end: real solves of a local conda channel,
real uv resolutions against the loopback index, real installs, the real post-install check."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
from pathlib import Path

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, LEGACY_CHANNEL, PROFILES, PYTHON, Home, conda_mirrors
from support.pypi_index import IndexServer

from envkit.lockfile.format import read_lock
from envkit.lockfile import model

from test_create_conda import leftovers, no_conda


@pytest.fixture
def conda_home(home: Home, legacy_channel: Path) -> Home:
    home.write_config(conda_mirrors(legacy_channel))
    return home


def conda_meta(prefix: Path) -> dict[str, dict]:
    """Each conda package's identity and its files with their hashes, as conda-meta records them."""
    out = {}
    for path in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(path.read_text())
        out[data["name"]] = {"version": data["version"], "build": data["build"], "sha256": data["sha256"],
                             "md5": data["md5"],
                             "files": sorted((p["_path"], p.get("sha256")) for p in data["paths_data"]["paths"])}
    return out


def test_legacy_conda_build_locks_installs_exactly_and_exports(conda_home: Home, legacy_channel: Path,
                                                                conda_manifests: Path):
    home = conda_home
    lock = home.root / "tf.lock.yml"
    done = home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "-o", str(lock),
                       "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["conda"] == 3 and report["pip"] == 0 and report["metadata"][model.TARGET] == "profile course-01"
    locked = read_lock(lock)
    assert {(p["name"], p["sha256"]) for p in report["packages"]} == {(p.name, p.sha256) for p in locked.packages}
    names = {p.name for p in locked.conda()}
    assert names == {"python", "cudatoolkit", "tensorflow-gpu"}
    for package in locked.conda():  # upstream URLs, not the mirror, and both hashes
        assert package.url.startswith(LEGACY_CHANNEL + "/"), package.url
        assert len(package.sha256) == 64 and len(package.md5) == 32
    assert locked.custom[model.BUILD] == "tensorflow-2.4.1-cu101"
    assert locked.custom[model.CUDA_DRIVER] == "10.1" and locked.custom[model.CUDA_ARCH] == "6.1"
    assert locked.custom[model.PYTHON] == PYTHON

    made = home.envkit("create", "--from-lock", str(lock), "--name", "tf-locked", *GTX1080TI, "--manifests",
                       str(conda_manifests), "--yes", env=no_conda(home))
    assert made.returncode == 0, made.stderr + made.stdout
    prefix = home.prefix("tf-locked")
    meta = conda_meta(prefix)
    assert {name: (m["sha256"]) for name, m in meta.items()} == {p.name: p.sha256 for p in locked.conda()}
    assert home.record("tf-locked")["verify"]["ok"] is True

    exported = home.root / "exported.yml"
    done = home.envkit("export", "tf-locked", "-o", str(exported), "--manifests", str(conda_manifests))
    assert done.returncode == 0, done.stderr
    again = read_lock(exported)
    assert {(p.name, p.url, p.sha256) for p in again.conda()} == {(p.name, p.url, p.sha256) for p in locked.conda()}


def installed_files(prefix: Path) -> set[tuple[str, str]]:
    """Each installed distribution's files and their hashes, as its RECORD lists them (installer-written files and
    bytecode aside): (distribution name, "path,hash")."""
    out = set()
    for record in prefix.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        name = record.parent.name.split("-")[0]
        for line in record.read_text().splitlines():
            path = line.split(",")[0]
            if not path.endswith((".pyc", "RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json")):
                out.add((name, line))
    return out


def test_pip_build_locks_and_installs_with_hashes(home: Home, torch_index: IndexServer, torch_wheels):
    lock = home.root / "torch lock.yml"  # a space: the printed next step quotes it
    done = home.envkit("lock", *CU126, "-o", str(lock))
    assert done.returncode == 0, done.stderr
    # The next step names the machine the lock is for: pasted here (no GPU), it installs the lock for that machine.
    [install] = [line for line in done.stdout.splitlines() if line.startswith("Install it with: ")]
    pasted = shlex.split(install.split(": ", 1)[1])
    assert pasted == ["envkit", "create", "--from-lock", str(lock), "--machine", str(PROFILES / "rtx4090-cuda126.yaml")]
    locked = read_lock(lock)
    assert not locked.conda()
    pins = {p.name: p for p in locked.pip()}
    assert set(pins) == {"torch", "torchvision", "torchaudio", "filelock"}
    assert pins["torch"].version == "2.13.0+cu126"
    assert pins["torch"].url.startswith("https://download.pytorch.org/whl/cu126/"), pins["torch"].url
    made = home.envkit(*pasted[1:], "--name", "t1", "--yes")
    assert made.returncode == 0, made.stderr + made.stdout
    assert home.in_env("t1", "import torch; print(torch.__version__)") == "2.13.0+cu126"
    # The same lock at a --prefix, through another mirror of the index: the same distributions, file for file.
    torch_index.add_index("/mirror2/cu126", torch_wheels["cu126"])
    home.write_config({"https://download.pytorch.org/whl": f"{torch_index.url}/mirror2",
                       "https://pypi.org/simple": f"{torch_index.url}/pypi/simple"})
    elsewhere = home.root / "elsewhere" / "t1b"
    kept = [d for d in Path(home.env["XDG_CACHE_HOME"]).rglob("locked") if d.parent.name == "pip"]
    assert kept and all(shutil.rmtree(d) is None for d in kept)  # the copies envkit keeps: fetched again below
    made = home.envkit("create", "--from-lock", str(lock), "--prefix", str(elsewhere), "--machine",
                       str(PROFILES / "rtx4090-cuda126.yaml"), "--yes", "--verbose")
    assert made.returncode == 0, made.stderr + made.stdout
    assert "| downloading torch-2.13.0+cu126-" in made.stderr
    assert f"from {torch_index.url}/mirror2/cu126/" in made.stderr  # envkit fetched them through the other mirror
    assert "all 4 pip packages match their locked hashes" in made.stderr
    first = installed_files(home.prefix("t1"))
    assert first == installed_files(elsewhere) and {"torch", "torchvision", "torchaudio", "filelock"} <= {
        name for name, _ in first}
    # The wheel's hash changed in the lock: the file envkit fetches is not that one, it refuses, nothing is made.
    tampered = home.root / "tampered.yml"
    tampered.write_text(lock.read_text().replace(pins["torch"].sha256, "f" * 64))
    bad = home.envkit("create", "--from-lock", str(tampered), "--name", "t2", "--machine",
                      str(PROFILES / "rtx4090-cuda126.yaml"), "--yes")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert f"but the lock pins {'f' * 64}" in bad.stderr and "torch 2.13.0+cu126 from " in bad.stderr
    assert home.record("t2") is None and not home.prefix("t2").exists()
    exported = home.root / "t1.yml"
    done = home.envkit("export", "t1", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    # t1 was made for the RTX 4090 profile: its lock is installed for that machine, as t1 was (pasted here, without
    # the profile, it would be judged against this machine).
    [install] = [line for line in done.stdout.splitlines() if line.startswith("Install it with: ")]
    assert shlex.split(install.split(": ", 1)[1]) == [
        "envkit", "create", "--from-lock", str(exported), "--machine", str(PROFILES / "rtx4090-cuda126.yaml")]
    assert {(p.name, p.url, p.sha256) for p in read_lock(exported).pip()} == {
        (p.name, p.url, p.sha256) for p in locked.pip()}
    # -o is never written through a symbolic link: refused, or with --force the link (not its target) replaced;
    # never over what is not a file.
    link = home.root / "current.yml"
    link.symlink_to(exported)
    before = exported.read_bytes()
    refused = home.envkit("export", "t1", "-o", str(link))
    assert refused.returncode == 2 and "is a symbolic link" in refused.stderr and "--force" in refused.stderr
    again = home.envkit("export", "t1", "-o", str(link), "--force")
    assert again.returncode == 0 and not link.is_symlink() and exported.read_bytes() == before
    assert read_lock(exported).pip() == read_lock(link).pip()
    fifo = home.root / "fifo"
    os.mkfifo(fifo)
    refused = home.envkit("export", "t1", "-o", str(fifo))
    assert refused.returncode == 2 and f"the lock {fifo} is not a regular file" in refused.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def lock_legacy(home: Home, manifests: Path) -> Path:
    lock = home.root / "tf.lock.yml"
    done = home.envkit("lock", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(manifests), "-o", str(lock))
    assert done.returncode == 0, done.stderr
    return lock


def from_lock(home: Home, lock: Path, name: str, *args: str, manifests: Path | None = None):
    extra = ("--manifests", str(manifests)) if manifests else ()
    return home.envkit("create", "--from-lock", str(lock), "--name", name, *args, *extra, "--yes", env=no_conda(home))


def test_same_environment_everywhere_file_for_file(conda_home: Home, legacy_channel: Path, conda_manifests: Path,
                                                   tmp_path: Path):
    """Two environments from one lock, one at a --prefix and one through another mirror of the channel: the same
    conda packages with the same files, and the conda-lock render of the lock names them all."""
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    first = from_lock(home, lock, "a", *GTX1080TI, manifests=conda_manifests)
    assert first.returncode == 0, first.stderr
    import shutil

    copy = tmp_path / "mirror-copy"
    shutil.copytree(legacy_channel, copy)
    home.write_config(conda_mirrors(copy))
    elsewhere = tmp_path / "elsewhere" / "b"
    second = from_lock(home, lock, "b", "--prefix", str(elsewhere), *GTX1080TI, manifests=conda_manifests)
    assert second.returncode == 0, second.stderr
    a, b = conda_meta(home.prefix("a")), conda_meta(elsewhere)
    assert a == b and set(a) == {"python", "cudatoolkit", "tensorflow-gpu"}
    assert all(m["files"] for m in a.values())
    urls = {json.loads(p.read_text())["url"] for p in (elsewhere / "conda-meta").glob("*.json")}
    assert not any(str(legacy_channel) in url for url in urls)  # the second one really came through the copy

    import subprocess
    import sys

    rendered = subprocess.run([str(Path(sys.executable).parent / "conda-lock"), "render", "--kind", "explicit", "-p",
                               "linux-64", "--filename-template", str(tmp_path / "explicit-{platform}.txt"),
                               str(lock)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    explicit = (tmp_path / "explicit-linux-64.txt").read_text()
    assert "@EXPLICIT" in explicit
    for package in read_lock(lock).conda():
        assert f"{package.url}#{package.md5}" in explicit


def test_a_tampered_package_is_refused_and_nothing_is_left(conda_home: Home, legacy_channel: Path,
                                                           conda_manifests: Path, tmp_path: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    import shutil

    copy = tmp_path / "tampered"
    shutil.copytree(legacy_channel, copy)
    archive = next((copy / "linux-64").glob("cudatoolkit-*.tar.bz2"))
    archive.write_bytes(archive.read_bytes() + b"\0")
    home.write_config(conda_mirrors(copy))
    done = from_lock(home, lock, "bad", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 1, done.stderr
    assert "cudatoolkit 10.1.243" in done.stderr and "but the lock pins" in done.stderr
    assert "nothing was installed" in done.stderr and "Traceback" not in done.stderr
    assert leftovers(home) == [] and home.record("bad") is None


OLD_01 = ('name: old-01\ndriver_version: "410.48"\ncuda_driver: "10.0"\n'  # too old a driver for CUDA 10.1
          'gpus:\n  - {name: GeForce GTX 1080 Ti, compute_capability: "6.1"}\n')


def test_a_lock_for_a_machine_that_does_not_fit_is_refused(conda_home: Home, conda_manifests: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    done = from_lock(home, lock, "nofit", "--cuda", "10.0", "--gpu-arch", "6.1", manifests=conda_manifests)
    assert done.returncode == 1, done.stderr
    assert "does not fit this machine with --cuda 10.0 --gpu-arch 6.1: " in done.stderr
    assert "needs __cuda >=10.1, but this machine has __cuda=10.0" in done.stderr
    done = from_lock(home, lock, "nofit", "--machine", str(PROFILES / "rtx4090-cuda126.yaml"), manifests=conda_manifests)
    assert done.returncode == 1 and "does not fit" in done.stderr, done.stderr  # the build has no sm_89 code
    # Judged against a profile, the reasons name that machine, never "this machine" (the one envkit runs on).
    old = home.root / "old.yaml"
    old.write_text(OLD_01)
    done = from_lock(home, lock, "nofit", "--machine", str(old), manifests=conda_manifests)
    assert done.returncode == 1, done.stderr
    assert "does not fit profile old-01: " in done.stderr and "this machine" not in done.stderr, done.stderr
    assert "tensorflow-gpu 2.4.1 needs __cuda >=10.1, but old-01 has __cuda=10.0" in done.stderr
    assert "needs driver CUDA >= 10.1, the driver has 10.0" in done.stderr
    # The hint's command makes a lock for that machine, into a file of its own; it names where this one fits.
    remake = shlex.split(done.stderr.split("Make a lock for it (`", 1)[1].split("`", 1)[0])
    assert remake == ["envkit", "lock", "tensorflow", "-o", "tensorflow-old-01.conda-lock.yml", "--machine", str(old),
                      "--manifests", str(conda_manifests)]
    assert "install this one where it fits (profile course-01)" in done.stderr
    assert leftovers(home) == []


def test_plain_http_outside_loopback_and_mirrors_is_refused(conda_home: Home, conda_manifests: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    text = lock.read_text().replace(LEGACY_CHANNEL, "http://conda.example.org/legacy-test")
    lock.write_text(text)
    done = from_lock(home, lock, "http", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 2, done.stderr
    assert "is not https" in done.stderr and "http://conda.example.org/legacy-test" in done.stderr
    assert leftovers(home) == []


def test_a_lock_for_another_platform_is_refused(conda_home: Home, conda_manifests: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    lock.write_text(lock.read_text().replace("linux-64", "osx-arm64"))
    done = from_lock(home, lock, "mac", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 2, done.stderr
    assert "locks osx-arm64, not linux-64" in done.stderr and leftovers(home) == []


def test_a_lock_without_hashes_and_a_truncated_one_are_refused(conda_home: Home, conda_manifests: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    text = lock.read_text()
    lock.write_text("\n".join(line for line in text.splitlines() if "sha256:" not in line) + "\n")
    done = from_lock(home, lock, "nohash", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 2 and "no valid sha256 hash" in done.stderr, done.stderr
    lock.write_text(text[: len(text) * 2 // 3])
    done = from_lock(home, lock, "cut", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 2 and str(lock) in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert leftovers(home) == []


def test_from_lock_refuses_options_that_choose_what_to_install(conda_home: Home, conda_manifests: Path):
    home = conda_home
    lock = lock_legacy(home, conda_manifests)
    done = from_lock(home, lock, "x", "--build", "tensorflow-2.15-cpu", *GTX1080TI, manifests=conda_manifests)
    assert done.returncode == 2 and "--build cannot go with it" in done.stderr, done.stderr


def test_export_of_a_solved_environment_installs_the_same_packages(conda_home: Home, conda_manifests: Path):
    """An environment made by a solve (no lock), exported: its upstream URLs and hashes, and a lock that makes the
    same environment again; --json and --dry-run say what would happen without doing it."""
    home = conda_home
    made = home.envkit("create", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "--name", "solved",
                       "--yes", env=no_conda(home))
    assert made.returncode == 0, made.stderr
    exported = home.root / "solved.yml"
    done = home.envkit("export", "solved", "-o", str(exported), "--json", "--manifests", str(conda_manifests))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["conda"] == 3 and report["output"] == str(exported)
    lock = read_lock(exported)
    assert all(p.url.startswith(LEGACY_CHANNEL + "/") for p in lock.conda())
    assert lock.custom[model.BUILD] == "tensorflow-2.4.1-cu101"
    dry = from_lock(home, exported, "again", *GTX1080TI, "--dry-run", "--json", manifests=conda_manifests)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["name"] == "again" and not home.prefix("again").exists()
    again = from_lock(home, exported, "again", *GTX1080TI, manifests=conda_manifests)
    assert again.returncode == 0, again.stderr
    assert conda_meta(home.prefix("again")) == conda_meta(home.prefix("solved"))


def test_export_of_an_unknown_environment_is_bad_input(home: Home):
    done = home.envkit("export", "nope")
    assert done.returncode == 2 and "envkit made no environment named 'nope'" in done.stderr
