"""`envkit create` of conda builds, end to end: a legacy-TensorFlow-like manifest (--manifests) whose conda channel is
mirrored to a real local channel (tests/support/conda_channel.py), real solves and installs by the embedded engine
(py-rattler), a stand-in micromamba for the conda backend, real uv for the pip steps, the real post-install check
(on the stand-in TensorFlow that the channel's tensorflow-gpu ships)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import (GTX1080TI, LEGACY_BUILD, LEGACY_CHANNEL, PROFILES, PYTHON, PYTHON_FULL, REPO, SITE_PACKAGES, Home,
                      conda_mirrors, fake_tensorflow_files)
from support.pypi_index import IndexServer
from support.wheels import build_wheel

from envkit.backends.tools import CONDA_KINDS

NAME = "tensorflow-cu101"  # the default name of the legacy build
INSIDE = ("import os, sys, tensorflow; print(os.environ.get('CONDA_PREFIX')); print(sys.prefix); "
          "print(tensorflow.__file__); print(tensorflow.__version__); print(os.environ.get('CUDA_TEST_HOME'))")


def no_conda(home: Home) -> dict[str, str]:
    """Environment overrides that hide every conda, mamba and micromamba of this machine from envkit: its PATH
    without their directories, and no $MAMBA_EXE or $CONDA_EXE (an empty value counts as unset)."""
    kept = [entry for entry in home.env["PATH"].split(os.pathsep)
            if entry and not any((Path(entry) / kind).exists() for kind in CONDA_KINDS)]
    return {"PATH": os.pathsep.join(kept), "MAMBA_EXE": "", "CONDA_EXE": ""}


@pytest.fixture
def conda_home(home: Home, legacy_channel: Path) -> Home:
    home.write_config(conda_mirrors(legacy_channel))
    return home


def create(home: Home, manifests: Path, *args: str, env: dict[str, str] | None = None):
    return home.envkit("create", *args, "--manifests", str(manifests), env=env)


def leftovers(home: Home) -> list[str]:
    """Everything under envkit's environments directory (none: nothing was left behind)."""
    envs = home.data / "envs"
    return sorted(path.name for path in envs.iterdir()) if envs.exists() else []


# --- the embedded conda engine (rattler) ---------------------------------------------------------------------------

def test_auto_makes_a_legacy_gpu_build_with_the_embedded_engine_and_it_runs_activated(
        conda_home: Home, legacy_channel: Path, conda_manifests: Path):
    home = conda_home
    done = create(home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env=no_conda(home))
    assert done.returncode == 0, done.stderr
    prefix = home.prefix(NAME)
    out = done.stdout
    assert ("Backend:     rattler: tensorflow-2.4.1-cu101 installs conda packages (tensorflow-gpu, cudatoolkit) and "
            "there is no conda, mamba or micromamba on PATH: envkit's embedded conda engine") in out
    assert f"Conda:       python={PYTHON} tensorflow-gpu=2.4.1 cudatoolkit=10.1\n" in out  # no pip: no pip step
    assert f"  channels:  {legacy_channel.as_uri()} (no others)" in out
    assert "  __cuda:    10.1 (the driver's)\n" in out
    assert f"embedded conda engine (py-rattler): solve (__cuda=10.1) and install into {prefix}" in out
    assert "[1/2] Creating the environment" in done.stderr and "[2/2] Checking that it works" in done.stderr
    # What the solve installed: tensorflow-gpu with the cudatoolkit it pins and conda's Python.
    assert (prefix / "lib" / "libcudart.so.10.1.243").read_text() == "cudart 10.1.243\n"
    installed = {json.loads(path.read_text())["name"] for path in (prefix / "conda-meta").glob("*.json")}
    assert installed == {"python", "cudatoolkit", "tensorflow-gpu"}
    record = home.record(NAME)
    assert record["backend"] == "rattler" and record["kind"] == "conda" and record["prefix"] == str(prefix)
    assert record["build"] == "tensorflow-2.4.1-cu101" and record["python"] == PYTHON
    assert record["installer"] is None and record["on_target"] is False
    assert record["machine"]["name"] == "course-01"
    # The post-install check ran the probe with the environment's Python, on the stand-in TensorFlow 2.4.1.
    assert record["verify"]["ok"] is True, out
    assert record["verify"]["version"] == "2.4.1"
    assert f"envkit run {NAME} -- bash" in out and f"activate {prefix}" in out  # no conda here
    # `envkit run` activates it as conda would, the cudatoolkit's activate.d script included.
    lines = home.in_env(NAME, INSIDE).splitlines()
    assert lines == [str(prefix), str(prefix), str(prefix / SITE_PACKAGES / "tensorflow" / "__init__.py"), "2.4.1",
                     str(prefix / "cuda")]
    envs = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert [(e["name"], e["backend"], e["exists"]) for e in envs] == [(NAME, "rattler", True)]
    assert not home.sudo_log.exists()


def test_the_plan_of_a_dry_run_names_the_engine_and_the_cuda_and_changes_nothing(
        conda_home: Home, legacy_channel: Path, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--dry-run", "--json", env=no_conda(conda_home))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["backend"] == "rattler" and "no conda, mamba or micromamba on PATH" in plan["backend_reason"]
    assert plan["conda"] == {"channels": [legacy_channel.as_uri()],
                             "specs": [f"python={PYTHON}", "tensorflow-gpu=2.4.1", "cudatoolkit=10.1"], "cuda": "10.1"}
    assert plan["pip"] == [] and plan["prefix"] == str(conda_home.prefix(NAME))
    assert not conda_home.data.exists()


def test_no_cuda_for_the_solve_fails_it_clearly_and_leaves_nothing(
        conda_home: Home, conda_manifests: Path):
    """CONDA_OVERRIDE_CUDA="" is conda's way to say "no driver": the build still fits the profile (driver 418, CUDA
    10.1), but the solve sees no __cuda, which tensorflow-gpu and its cudatoolkit need."""
    env = {**no_conda(conda_home), "CONDA_OVERRIDE_CUDA": ""}
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  __cuda:    none (a CPU-only solve) (from CONDA_OVERRIDE_CUDA; the driver supports 10.1)" in done.stdout
    assert "needs __cuda >=10.1, but the solve has no __cuda" in done.stderr
    assert "CONDA_OVERRIDE_CUDA" in done.stderr and "  | " in done.stderr  # the hint, and the solver's lines
    assert "Traceback" not in done.stderr
    assert not conda_home.prefix(NAME).exists() and conda_home.record(NAME) is None
    assert leftovers(conda_home) == []


def test_a_cuda_override_below_what_the_packages_need_is_what_the_solve_sees(
        conda_home: Home, conda_manifests: Path):
    """The profile's driver runs CUDA 10.1, so the build fits; CONDA_OVERRIDE_CUDA=9.0 (building for an older
    driver) reaches the solve, which then refuses tensorflow-gpu and names the CUDA it saw."""
    env = {**no_conda(conda_home), "CONDA_OVERRIDE_CUDA": "9.0"}
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  __cuda:    9.0 (from CONDA_OVERRIDE_CUDA; the driver supports 10.1)\n" in done.stdout
    assert "needs __cuda >=10.1, but the solve's __cuda is 9.0" in done.stderr
    assert not conda_home.prefix(NAME).exists() and conda_home.record(NAME) is None
    assert leftovers(conda_home) == []


def test_a_cuda_override_does_not_make_a_gpu_build_fit_a_machine_without_a_driver_but_wins_in_the_solve(
        conda_home: Home, conda_manifests: Path):
    """CONDA_OVERRIDE_CUDA is for the solve only: a profile without a driver still refuses the GPU build before any
    solve. With --cuda 11.0 --gpu-arch 6.1 the build fits, and the override (10.1), not the profile's 11.0, is the
    __cuda the solve sees."""
    no_gpu = ("--machine", str(PROFILES / "no-gpu.yaml"))
    env = {**no_conda(conda_home), "CONDA_OVERRIDE_CUDA": "10.1"}
    refused = create(conda_home, conda_manifests, *LEGACY_BUILD, *no_gpu, "--yes", env=env)
    assert refused.returncode == 1 and "tensorflow-2.4.1-cu101 does not fit" in refused.stderr
    assert not conda_home.data.exists() or leftovers(conda_home) == []
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *no_gpu, "--cuda", "11.0", "--gpu-arch", "6.1",
                  "--yes", "--no-verify", env=env)
    assert done.returncode == 0, done.stderr
    assert "CUDA 11.0 (--cuda option)" in done.stdout and "  __cuda:    10.1 (from CONDA_OVERRIDE_CUDA; the driver supports 11.0)\n" in done.stdout
    assert "solve (__cuda=10.1)" in done.stdout
    assert (conda_home.prefix(NAME) / "lib" / "libcudart.so.10.1.243").is_file()
    assert conda_home.record(NAME)["machine"]["cuda_driver"] == "11.0"


def test_a_venv_cannot_hold_a_conda_build(conda_home: Home, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--backend", "venv", "--yes")
    assert done.returncode == 2, done.stderr
    assert "tensorflow-2.4.1-cu101 installs conda packages (tensorflow-gpu, cudatoolkit): a venv cannot hold them" \
        in done.stderr
    assert "--backend conda or --backend rattler" in done.stderr
    assert not conda_home.data.exists() or leftovers(conda_home) == []


def test_the_conda_backend_without_a_conda_is_bad_input_pointing_at_rattler(conda_home: Home, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--backend", "conda", "--yes",
                  env=no_conda(conda_home))
    assert done.returncode == 2, done.stderr
    assert "there is no conda, mamba or micromamba on PATH" in done.stderr and "--backend rattler" in done.stderr
    assert not conda_home.data.exists() or leftovers(conda_home) == []


# --- the user's own conda: a stand-in micromamba --------------------------------------------------------------------

_MICROMAMBA = """#!{python}
\"\"\"A stand-in micromamba: records each call, answers `info --json`, and makes `create --prefix P
--override-channels -c C... SPECS` with envkit's embedded engine, seeing __cuda as micromamba does (from
CONDA_OVERRIDE_CUDA). With $FAKE_MAMBA_FAIL set, `create` starts the prefix, prints a few lines and fails; with
$FAKE_MAMBA_MODE hang, held or empty it hangs, fails leaving a child on its output, or succeeds with an empty prefix.\"\"\"
import json, os, sys
from pathlib import Path

sys.path.insert(0, {repo!r})
LOG, ENVS, CACHE = Path({log!r}), Path({envs!r}), Path({cache!r})


def main(argv):
    with LOG.open("a") as out:
        out.write(json.dumps({{"argv": argv, "CONDA_OVERRIDE_CUDA": os.environ.get("CONDA_OVERRIDE_CUDA")}}) + "\\n")
    if argv[:2] == ["info", "--json"]:
        print(json.dumps({{"envs directories": [str(ENVS)], "base environment": str(ENVS.parent)}}))  # micromamba's keys
        return 0
    if argv[:1] != ["create"]:
        print("stand-in micromamba: unknown command", argv, file=sys.stderr)
        return 2
    args, channels, specs, prefix = list(argv[1:]), [], [], None
    while args:
        arg = args.pop(0)
        if arg == "-c":
            channels.append(args.pop(0))
        elif arg == "--prefix":
            prefix = Path(args.pop(0))
        elif arg in ("--yes", "-y", "--quiet", "-q", "--override-channels"):
            continue
        elif arg.startswith("-"):  # as micromamba does: an option it does not know is an error
            print("The following argument was not expected:", arg, file=sys.stderr)
            return 109
        else:
            specs.append(arg)
    if os.environ.get("FAKE_MAMBA_FAIL"):
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "history").write_text("half made\\n")
        print("Transaction starting")
        print("critical libmamba Download error (28) Timeout was reached", file=sys.stderr)
        return 1
    mode = os.environ.get("FAKE_MAMBA_MODE", "")
    if mode:  # the installers the fault campaign met
        prefix.mkdir(parents=True)
        print("Transaction starting", flush=True)
        if mode == "hang":  # never ends, says nothing more
            import time
            time.sleep(3600)
        if mode == "held":  # fails, leaving a child that holds its output open
            import subprocess
            child = subprocess.Popen(["sleep", "3600"])
            (LOG.parent / "held-child.pid").write_text(str(child.pid))
            return 1
        return 0  # "empty": success, and an empty prefix
    from envkit.backends.conda_engine import CondaSolveRequest, create_prefix
    from envkit.errors import InstallError

    cuda = os.environ.get("CONDA_OVERRIDE_CUDA", "").strip()
    request = CondaSolveRequest(tuple(channels), tuple(specs), (("__cuda", cuda),) if cuda else ())
    try:
        create_prefix(prefix, request, CACHE, print)
    except InstallError as error:
        print("\\n".join(error.tail), file=sys.stderr)
        print("critical libmamba", error.message, file=sys.stderr)
        return 1
    return 0


sys.exit(main(sys.argv[1:]))
"""


class Micromamba:
    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.path = bin_dir / "micromamba"
        self.log = root / "micromamba-calls.jsonl"
        self.envs = root / "mamba" / "envs"
        self.path.write_text(_MICROMAMBA.format(python=sys.executable, repo=str(REPO), log=str(self.log),
                                                envs=str(self.envs), cache=str(root / "mamba" / "pkgs")))
        self.path.chmod(0o755)

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def creates(self) -> list[dict]:
        return [call for call in self.calls() if call["argv"][:1] == ["create"]]


@pytest.fixture
def micromamba(conda_home: Home, tmp_path: Path) -> Micromamba:
    """A stand-in micromamba first on PATH (in the home's bin/)."""
    return Micromamba(tmp_path, conda_home.root / "bin")


def test_auto_uses_the_users_micromamba_into_its_envs_directory(
        conda_home: Home, micromamba: Micromamba, legacy_channel: Path, conda_manifests: Path):
    home = conda_home
    done = create(home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes")
    assert done.returncode == 0, done.stderr
    prefix = micromamba.envs / NAME
    assert f"installs conda packages (tensorflow-gpu, cudatoolkit): using your micromamba at {micromamba.path}" \
        in done.stdout
    assert f"Environment: {NAME} at {prefix}\n" in done.stdout
    [call] = micromamba.creates()
    argv = call["argv"]
    assert argv[:6] == ["create", "--yes", "--quiet", "--prefix", str(prefix), "--override-channels"]
    assert argv[6:] == ["-c", legacy_channel.as_uri(), f"python={PYTHON}", "tensorflow-gpu=2.4.1", "cudatoolkit=10.1"]
    assert call["CONDA_OVERRIDE_CUDA"] == "10.1"
    assert (prefix / "lib" / "libcudart.so.10.1.243").is_file()
    assert not home.prefix(NAME).exists()  # not in envkit's own directory
    record = home.record(NAME)
    assert record["backend"] == "conda" and record["kind"] == "conda" and record["prefix"] == str(prefix)
    assert record["verify"]["ok"] is True
    assert f"  Activate it:  micromamba activate {NAME}\n" in done.stdout
    lines = home.in_env(NAME, INSIDE).splitlines()
    assert lines[:2] == [str(prefix), str(prefix)] and lines[-1] == str(prefix / "cuda")


def test_a_micromamba_that_only_the_shell_knows_of_is_found_through_mamba_exe(
        conda_home: Home, conda_manifests: Path, tmp_path: Path):
    """`micromamba shell init` sets $MAMBA_EXE and a shell function; the executable itself is often not on PATH."""
    hidden = tmp_path / "opt" / "bin"
    hidden.mkdir(parents=True)
    tool = Micromamba(tmp_path, hidden)
    env = {**no_conda(conda_home), "MAMBA_EXE": str(tool.path)}
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--dry-run", "--json", env=env)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["backend"] == "conda" and f"using your micromamba at {tool.path}" in plan["backend_reason"]
    assert plan["prefix"] == str(tool.envs / NAME)
    assert [call["argv"] for call in tool.calls()] == [["info", "--json"]]  # a dry run creates nothing


def test_a_failing_micromamba_is_shown_and_leaves_nothing(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env={"FAKE_MAMBA_FAIL": "1"})
    assert done.returncode == 1, done.stderr
    assert "  | critical libmamba Download error (28) Timeout was reached" in done.stderr
    assert "  | Transaction starting" in done.stderr
    assert "envkit: error: micromamba could not create the environment (exit code 1)" in done.stderr
    assert len(micromamba.creates()) == 1
    assert not (micromamba.envs / NAME).exists() and conda_home.record(NAME) is None
    assert not micromamba.envs.exists() or list(micromamba.envs.iterdir()) == []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_micromamba_that_hangs_silent_is_stopped_and_leaves_nothing(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path):
    # It was never timed out (killed from outside after 90 s).
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes",
                  env={"FAKE_MAMBA_MODE": "hang", "ENVKIT_INSTALL_SILENCE": "2"})
    assert done.returncode == 1, done.stderr
    assert ("envkit: error: micromamba could not create the environment: it printed nothing for 2 s and was stopped"
            in done.stderr) and "ENVKIT_INSTALL_SILENCE=SECONDS" in done.stderr
    assert "  | Transaction starting" in done.stderr and "Traceback" not in done.stderr
    assert not (micromamba.envs / NAME).exists() and conda_home.record(NAME) is None
    bad = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes",
                 env={"FAKE_MAMBA_MODE": "hang", "ENVKIT_INSTALL_TIMEOUT": "soon"})
    assert bad.returncode == 2 and "ENVKIT_INSTALL_TIMEOUT='soon' is not a positive number of seconds" in bad.stderr
    assert len(micromamba.creates()) == 1  # refused before anything was started or made
    assert not (micromamba.envs / NAME).exists() and conda_home.record(NAME) is None


def test_a_micromamba_that_fails_leaving_a_child_on_its_output_does_not_hang_envkit(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env={"FAKE_MAMBA_MODE": "held"})
    assert done.returncode == 1, done.stderr
    assert "envkit: error: micromamba could not create the environment (exit code 1)" in done.stderr
    assert not _alive(int((micromamba.log.parent / "held-child.pid").read_text()))  # ended with its installer
    assert not (micromamba.envs / NAME).exists() and conda_home.record(NAME) is None


@pytest.mark.parametrize("check", ["--no-verify", "--verify"])
def test_a_micromamba_that_succeeds_with_an_empty_prefix_records_nothing(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path, check: str):
    # It was recorded as a created environment (--no-verify), and the check's error blamed --python.
    args = (*LEGACY_BUILD, *GTX1080TI, "--yes") + ((check,) if check == "--no-verify" else ())
    done = create(conda_home, conda_manifests, *args, env={"FAKE_MAMBA_MODE": "empty"})
    assert done.returncode == 1, done.stderr
    prefix = micromamba.envs / NAME
    assert (f"envkit: error: conda reported success, but the environment at {prefix} holds no working Python "
            f"(there is no {prefix}/bin/python)") in done.stderr, done.stderr
    assert "--python" not in done.stderr and "Traceback" not in done.stderr
    assert not prefix.exists() and conda_home.record(NAME) is None


def test_a_conda_environment_outside_its_envs_directories_is_activated_by_its_path(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path, tmp_path: Path):
    """--prefix puts it where `conda activate NAME` does not look (NAME is a name in the envs directories)."""
    elsewhere = tmp_path / "projects" / "tf"
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", "--no-verify",
                  "--prefix", str(elsewhere))
    assert done.returncode == 0, done.stderr
    [call] = micromamba.creates()
    assert call["argv"][3:5] == ["--prefix", str(elsewhere)]
    assert conda_home.record("tf")["prefix"] == str(elsewhere)
    assert "  Activate it:  micromamba activate tf\n" not in done.stdout  # would activate nothing, or another env
    assert f"  Activate it:  micromamba activate {elsewhere}" in done.stdout


def test_a_conda_environment_envkit_did_not_make_is_never_replaced(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path):
    theirs = micromamba.envs / NAME
    (theirs / "conda-meta").mkdir(parents=True)
    (theirs / "conda-meta" / "history").write_text("==> 2021-03-01 <==\n# cmd: micromamba create -n tensorflow-cu101\n")
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", "--force")
    assert done.returncode == 1 and "already holds something envkit did not make" in done.stderr
    assert (theirs / "conda-meta" / "history").read_text().startswith("==> 2021-03-01")
    assert micromamba.creates() == [] and conda_home.record(NAME) is None


def test_the_users_micromamba_sees_no_cuda_when_the_override_says_none(
        conda_home: Home, micromamba: Micromamba, conda_manifests: Path):
    done = create(conda_home, conda_manifests, *LEGACY_BUILD, *GTX1080TI, "--yes", env={"CONDA_OVERRIDE_CUDA": ""})
    assert done.returncode == 1
    assert [call["CONDA_OVERRIDE_CUDA"] for call in micromamba.creates()] == [""]
    assert "no __cuda" in done.stderr and not (micromamba.envs / NAME).exists()


# --- a pure-pip build in a conda prefix -----------------------------------------------------------------------------

def test_a_pure_pip_build_made_by_rattler_gets_conda_python_then_uv_installs_from_the_index(
        home: Home, legacy_channel: Path, conda_manifests: Path, pypi_server: IndexServer, tmp_path: Path):
    wheel = build_wheel(tmp_path / "wheels", "tensorflow-cpu", "2.15.1", files=fake_tensorflow_files("2.15.1", None))
    pypi_server.add_index("/pypi/simple", [wheel])
    home.write_config(conda_mirrors(legacy_channel, pypi_server))
    args = ("tensorflow", "--build", "tensorflow-2.15-cpu", "--python", PYTHON, "--machine",
            str(PROFILES / "no-gpu.yaml"), "--backend", "rattler", "--yes")
    done = create(home, conda_manifests, *args, env=no_conda(home))
    assert done.returncode == 0, done.stderr
    prefix = home.prefix("tensorflow-cpu")
    assert "Backend:     rattler: asked for (--backend rattler)" in done.stdout
    assert f"Conda:       python={PYTHON} pip\n" in done.stdout  # pip comes along, as conda users expect
    assert f"  channels:  {legacy_channel.as_uri()} (no others)" in done.stdout
    assert f"uv pip install --python {prefix}/bin/python --index-url {pypi_server.url}/pypi/simple" in done.stdout
    installed = {json.loads(path.read_text())["name"] for path in (prefix / "conda-meta").glob("*.json")}
    assert installed == {"python", "pip"}
    assert (prefix / "conda-meta" / f"python-{PYTHON_FULL}-0.json").is_file()
    assert any(path.endswith(wheel.name) for path in pypi_server.fetched_files())
    code = "import sys, tensorflow; print(sys.prefix); print(tensorflow.__file__); print(tensorflow.__version__)"
    assert home.in_env("tensorflow-cpu", code).splitlines() == [
        str(prefix), str(prefix / SITE_PACKAGES / "tensorflow" / "__init__.py"), "2.15.1"]
    record = home.record("tensorflow-cpu")
    assert record["backend"] == "rattler" and record["kind"] == "conda" and record["installer"] == "uv"
    assert record["verify"]["ok"] is True and record["verify"]["version"] == "2.15.1", done.stdout


# --- an interrupt while the engine downloads --------------------------------------------------------------------

class SlowChannel:
    """``directory`` served on 127.0.0.1; the tensorflow-gpu package is held back until ``release`` is set."""

    def __init__(self, directory: Path) -> None:
        self.release = threading.Event()
        self.requests: list[str] = []
        channel = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                channel.requests.append(self.path)
                if "tensorflow-gpu" in self.path and self.path.endswith(".tar.bz2"):
                    channel.release.wait(60)
                try:
                    super().do_GET()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was interrupted: what this server is for

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(directory)))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slow_channel(legacy_channel: Path):
    channel = SlowChannel(legacy_channel)
    yield channel
    channel.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_the_engine_downloads_removes_the_prefix(
        home: Home, slow_channel: SlowChannel, conda_manifests: Path, sig):
    home.write_config({LEGACY_CHANNEL: slow_channel.url})
    argv = [sys.executable, "-m", "envkit", "create", *LEGACY_BUILD, *GTX1080TI, "--yes", "--manifests",
            str(conda_manifests)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**home.env, **no_conda(home)}, cwd=home.root)
    try:
        # Held back: tensorflow-gpu's download; by then the engine has begun the prefix (conda-meta, python, ...).
        _wait_for(lambda: any("tensorflow-gpu" in path for path in slow_channel.requests)
                  and (home.prefix(NAME) / "conda-meta").is_dir())
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        slow_channel.release.set()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + sig and "interrupted" in err  # 143 for SIGTERM, as shells count, err
    assert not home.prefix(NAME).exists() and home.record(NAME) is None
    assert leftovers(home) == []


def _wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
