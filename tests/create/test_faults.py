"""envkit killed for real (SIGKILL) at every step of `envkit create`, inside the backend's making of the prefix
included, for the venv and the embedded conda engine (rattler), a fresh create and a --force replacement: what is
left afterwards (the prefix, the set-aside copy, the records, `envkit envs`) and what the next `remove` and `create`
make of it. Nothing is lost (the environment --force was replacing comes back, or the complete new one stands),
nothing half-made is ever recorded, a removed environment stays removed, and nothing the dead run started is still
running. The test-only hook ENVKIT_TEST_PAUSE_AT (envkit/state/testpause.py) holds envkit at the step so that the kill
lands exactly there."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, Home, conda_mirrors, fake_torch_files, held_at
from support.pypi_index import IndexServer
from support.wheels import build_wheel
from test_create_conda import no_conda

# The points a run passes, in order ("inside-backend": the backend's child runs (venv) or the engine is installing
# into the prefix (rattler); "installing", "checking": the installer / the check runs, envkit holds).
COMMON = ("journal", "aside", "begun", "inside-backend", "backend", "stamped")
TAIL = ("checking", "checked", "recorded", "unstamped", "committed")
STEPS = {"venv": COMMON + ("installing", "installed") + TAIL, "rattler": COMMON + TAIL}
# From "unstamped" on, the new environment is complete: it stands; before, the run is undone.
COMPLETE = ("unstamped", "committed")
CASES = [(backend, step, mode) for backend, steps in STEPS.items() for mode in ("fresh", "force") for step in steps
         if not (step == "aside" and mode == "fresh")]  # a fresh run sets nothing aside: the same as "journal"


def _counts() -> dict[str, int]:
    out: dict[str, int] = {}
    for backend, _, mode in CASES:
        out[f"SIGKILL x {backend} x {mode}"] = out.get(f"SIGKILL x {backend} x {mode}", 0) + 1
    return out


def test_the_fault_matrix_covers_every_step_of_both_backends_fresh_and_forced():
    assert _counts() == {"SIGKILL x venv x fresh": 12, "SIGKILL x venv x force": 13,
                         "SIGKILL x rattler x fresh": 10, "SIGKILL x rattler x force": 11}


class Target:
    def __init__(self, home: Home, backend: str, args: tuple[str, ...], env: dict[str, str], name: str):
        self.home, self.backend, self.args, self.env, self.name = home, backend, args, env, name

    @property
    def prefix(self) -> Path:
        return self.home.prefix(self.name)

    def envkit(self, *args: str) -> subprocess.CompletedProcess:
        return self.home.envkit(*args, env=self.env)

    def create(self, *extra: str) -> subprocess.CompletedProcess:
        return self.envkit("create", *self.args, "--yes", *extra)

    def kill_at(self, step: str, *extra: str, sig: int = signal.SIGKILL) -> str:
        """Send ``sig`` to `envkit create` held at ``step``; what it printed on stderr."""
        with self.held_at(step, *extra) as (process, _):
            process.send_signal(sig)
            _, err = process.communicate(timeout=60)
        assert process.returncode == (-sig if sig == signal.SIGKILL else 128 + sig), err
        return err

    def held_at(self, step: str, *extra: str) -> contextlib.AbstractContextManager[tuple[subprocess.Popen, Path]]:
        """`envkit create` started and held at ``step``: (the process, the file whose removal lets it go on). It is
        killed if the block leaves it running."""
        return held_at(self.home, ["create", *self.args, "--yes", *extra], step, self.env)

    def beside(self) -> list[str]:
        """What is in the environments directory: the prefix and any set-aside copy."""
        parent = self.prefix.parent
        return sorted(p.name for p in parent.iterdir()) if parent.exists() else []

    def envs(self) -> list[dict]:
        done = self.envkit("envs", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["environments"]


def _running_in(prefix: Path) -> list[str]:
    """Live processes whose command line names ``prefix`` (an installer or check the dead run left)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z":
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                if str(prefix) in line:
                    out.append(line)
        except (OSError, IndexError):
            continue
    return out


@pytest.fixture
def venv_target(home: Home, torch_index: IndexServer) -> Target:
    return Target(home, "venv", CU126, {}, "torch-cu126")


@pytest.fixture
def rattler_target(home: Home, legacy_channel: Path, conda_manifests: Path) -> Target:
    home.write_config(conda_mirrors(legacy_channel))
    args = (*LEGACY_BUILD, *GTX1080TI, "--backend", "rattler", "--manifests", str(conda_manifests))
    return Target(home, "rattler", args, no_conda(home), "tensorflow-cu101")


@pytest.mark.parametrize("backend,step,mode", CASES, ids=[f"{b}-{s}-{m}" for b, s, m in CASES])
def test_sigkill_at_each_step(request, backend: str, step: str, mode: str):
    target: Target = request.getfixturevalue(f"{backend}_target")
    old_run = None
    if mode == "force":
        seeded = target.create()
        assert seeded.returncode == 0, seeded.stderr
        (target.prefix / "my-notes.txt").write_text("mine")
        old_run = target.home.record(target.name)["run"]
        assert old_run
    target.kill_at(step, *(("--force",) if mode == "force" else ()))

    # Right after the kill: the name shows as interrupted (never PASS on a half-made environment); a run that had
    # completed its environment (only deleting what it replaced was left) leaves one that is ready and runs.
    [entry] = [e for e in target.envs() if e["name"] == target.name]
    if step in COMPLETE:
        assert entry["state"] == "ready", entry
        assert "interrupted" not in target.envkit("envs").stdout
        ran = target.envkit("run", target.name, "--", "python", "-c", "import sys; print(sys.prefix)")
        assert ran.returncode == 0 and ran.stdout.strip() == str(target.prefix), ran.stderr
    else:
        assert entry["state"] == "interrupted", entry
        assert target.envkit("envs").stdout.count("interrupted") >= 1
        for command in (("run", target.name, "--", "python", "-c", "pass"), ("verify", target.name)):
            refused = target.envkit(*command)  # never run in, or judge, a half-made environment
            assert refused.returncode == 1 and "was interrupted before it finished" in refused.stderr, refused.stderr

    if mode == "force":
        # The next create (no --force) cleans up first: the old environment is back, or the complete new one stands.
        again = target.create()
        assert again.returncode == 1 and "already exists" in again.stderr, again.stderr
        assert target.beside() == [target.name], target.beside()  # no half-made prefix, no set-aside copy left
        record = target.home.record(target.name)
        inside = json.loads((target.prefix / ".envkit" / "record.json").read_text())
        assert inside == record and not (target.prefix / ".envkit" / "incomplete").exists()
        if step in COMPLETE:
            assert record["run"] != old_run and not (target.prefix / "my-notes.txt").exists()
        else:
            assert record["run"] == old_run and (target.prefix / "my-notes.txt").read_text() == "mine"
        assert target.envkit("run", target.name, "--", "python", "-c", "import sys; print(sys.prefix)").stdout.strip() \
            == str(target.prefix)
        [entry] = target.envs()
        assert entry["state"] == "ready" and entry["exists"]

    # `envkit remove` finishes or undoes what is left, and the environment stays removed.
    removed = target.envkit("remove", target.name, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert target.beside() == [] and target.home.record(target.name) is None
    assert target.envs() == []
    assert not (target.home.data / "locks" / f"{target.name}.creating").exists()
    assert _running_in(target.prefix) == []
    if mode == "force":
        made = target.create("--no-verify")  # nothing set aside comes back: a new environment is made
        assert made.returncode == 0, made.stderr
        assert target.home.record(target.name)["run"] not in (old_run, None)
        assert not (target.prefix / "my-notes.txt").exists()


@pytest.mark.parametrize("step, sig", [("journal", signal.SIGINT), ("journal", signal.SIGTERM),
                                       ("committed", signal.SIGINT)])
def test_an_interrupt_before_anything_changed_or_while_deleting_the_replaced_one_leaves_it_ready(
        venv_target: Target, step: str, sig: int):
    """Ctrl-C (or kill) right after the journal is written undoes the run, journal included; while the replaced
    environment is being deleted, the new one is complete and stands: `envkit run` works, no "interrupted"."""
    seeded = venv_target.create()
    assert seeded.returncode == 0, seeded.stderr
    (venv_target.prefix / "my-notes.txt").write_text("mine")
    old_run = venv_target.home.record(venv_target.name)["run"]
    err = venv_target.kill_at(step, "--force", sig=sig)
    assert "Traceback" not in err and "interrupted" in err
    [entry] = venv_target.envs()
    assert entry["state"] == "ready", entry
    ran = venv_target.envkit("run", venv_target.name, "--", "python", "-c", "import sys; print(sys.prefix)")
    assert ran.returncode == 0 and ran.stdout.strip() == str(venv_target.prefix), ran.stderr
    journal = venv_target.home.data / "locks" / f"{venv_target.name}.creating"
    if step == "journal":
        assert not journal.exists() and venv_target.beside() == [venv_target.name]
        assert venv_target.home.record(venv_target.name)["run"] == old_run
        assert (venv_target.prefix / "my-notes.txt").read_text() == "mine"
    else:
        assert "is complete and ready to use" in err and "~envkit-replaced-" in err
        assert venv_target.home.record(venv_target.name)["run"] != old_run
        other = venv_target.envkit("create", *CU126, "--yes", "--no-verify", "--name", "other")
        assert other.returncode == 0, other.stderr  # any next create deletes what was left set aside
        assert venv_target.beside() == ["other", venv_target.name] and not journal.exists()


@pytest.mark.parametrize("step", ["inside-backend", "stamped", "installing", "recorded"])
def test_a_killed_fresh_run_is_undone_by_the_next_create_of_another_name_too(venv_target: Target, step: str):
    venv_target.kill_at(step)
    other = venv_target.envkit("create", *CU126, "--yes", "--no-verify", "--name", "other")
    assert other.returncode == 0, other.stderr
    assert "undid an envkit run of torch-cu126" in other.stderr
    assert venv_target.beside() == ["other"] and venv_target.home.record("torch-cu126") is None
    assert [e["name"] for e in venv_target.envs()] == ["other"]
    again = venv_target.create("--no-verify")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("verify", [True, False])
def test_a_mirror_serving_a_plain_build_under_the_cuda_index_fails_the_run_and_leaves_nothing(
        home: Home, pypi_server: IndexServer, tmp_path: Path, verify: bool):
    """/whl/cu126 serves a plain torch 2.13.1 (the release line's pin admits it): never recorded as the cu126 build."""
    wheels = tmp_path / "plain"
    pypi_server.add_index("/whl/cu126", [
        build_wheel(wheels, "torch", "2.13.1", files=fake_torch_files("2.13.1", "12.6")),
        build_wheel(wheels, "torchvision", "0.28.1", requires=["torch==2.13.1"]),
        build_wheel(wheels, "torchaudio", "2.11.1", requires=["torch==2.13.1"]),
    ])
    home.mirror_to(pypi_server)
    done = home.envkit("create", *CU126, "--yes", *(() if verify else ("--no-verify",)))
    assert done.returncode == 1, done.stderr
    assert f"{pypi_server.url}/whl/cu126 (the mirror of https://download.pytorch.org/whl/cu126 in envkit's config) " \
           "serves torch 2.13.1 for torch==2.13.*, and no +cu126 build" in done.stderr
    assert pypi_server.fetched_files() == []  # refused before anything was downloaded
    assert "Installing torch-2.13-cu126 packages" not in done.stderr  # no installer was run
    assert not home.prefix("torch-cu126").exists() and home.record("torch-cu126") is None
    assert json.loads(home.envkit("envs", "--json").stdout)["environments"] == []


def test_an_installer_a_killed_run_left_running_is_stopped_before_anything_touches_the_prefix(
        venv_target: Target, torch_index: IndexServer, torch_wheels):
    wheel = next(w for w in torch_wheels["cu126"] if w.name.startswith("torchvision"))
    torch_index.delay_file(wheel.name, 30)  # uv is still downloading when envkit dies
    venv_target.kill_at("installing")
    deadline = time.monotonic() + 60
    while not any(path.endswith(wheel.name) for path in torch_index.requests):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _running_in(venv_target.prefix)  # uv, in its own session, outlived envkit
    removed = venv_target.envkit("remove", venv_target.name, "--yes")
    assert removed.returncode == 0, removed.stderr
    assert _running_in(venv_target.prefix) == []
    time.sleep(1)
    assert not venv_target.prefix.exists()  # and nothing writes into it again


def test_a_python_that_does_not_start_is_the_error_though_the_pip_step_ran_beside_its_check(venv_target: Target):
    """The new Python's start-up check runs beside the first pip step (about 10 ms of every create): when the Python
    is broken, uv fails too, and the error says why, not what uv made of it. Nothing is left or recorded."""
    prefix = venv_target.prefix
    with venv_target.held_at("backend") as (process, marker):
        python = prefix / "bin" / "python"
        python.unlink()  # (a symlink to the base Python) replaced by one that cannot start
        python.write_text("#!/bin/sh\necho 'error while loading shared libraries: libpython3.so' >&2\nexit 127\n")
        python.chmod(0o755)
        marker.unlink()
        _, err = process.communicate(timeout=180)
    assert process.returncode == 1, err
    assert (f"envkit: error: venv reported success, but the environment at {prefix} holds no working Python "
            f"({python} does not run: error while loading shared libraries: libpython3.so)") in err, err
    assert "Installing torch-2.13-cu126 packages with uv" in err and "Traceback" not in err  # it ran, and failed
    assert "Checking that it works" not in err
    assert not prefix.exists() and venv_target.home.record(venv_target.name) is None
    assert _running_in(prefix) == []
