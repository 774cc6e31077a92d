"""envkit jupyter on the test cluster: a real Jupyter server (jupyter_server from PyPI) in a stand-in environment,
started by sbatch on a node, reached at the printed URL with its token; the token kept out of every argv, the job
script and any file others can read; --list, --stop; and each way it can go wrong leaves nothing running."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from slurm_helpers import envkit, make_torch_env

URL = re.compile(r"URL \(for you alone: it holds the token\): (\S+)")


def make_jupyter_env(root: Path, env: dict[str, str], name: str, server: str | None = None) -> Path:
    """The probe tests' stand-in PyTorch env with a real jupyter-server program: jupyter_server is the one this test
    run installed (the README's test command), reached through a .pth file; ``server`` replaces the program with a
    script of that text (a server that dies at start)."""
    make_torch_env(root, env, name=name)
    [site] = root.glob("lib/python*/site-packages")
    (site / "test-jupyter.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    program = root / "bin" / "jupyter-server"
    program.write_text(server or (f"#!{root / 'bin' / 'python'}\nimport sys\n"
                                  "from jupyter_server.serverapp import main\nsys.exit(main())\n"), encoding="utf-8")
    program.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def jupyter_user(cluster_user):
    env, home = cluster_user
    make_jupyter_env(home / "envs" / "jup-test", env, "jup-test")
    return env, home


def status(url: str, token: str | None) -> int | None:
    parts = urlsplit(url)
    query = f"?token={token}" if token is not None else ""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{parts.scheme}://{parts.netloc}/api/status{query}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def gone(marker: str, within: float = 30.0) -> bool:
    """Whether no process has ``marker`` in its argv, waiting at most ``within`` seconds for Slurm to reap them."""
    deadline = time.monotonic() + within
    while True:
        args = subprocess.run(["ps", "-eww", "-o", "stat=,args="], capture_output=True, text=True, check=True).stdout
        alive = [line for line in args.splitlines() if marker in line and not line.lstrip().startswith("Z")]
        if not alive:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def files_with(text: str, roots: list[Path]) -> list[tuple[Path, int]]:
    """(path, mode) of every regular file under ``roots`` that holds ``text``."""
    found = []
    needle = text.encode()
    for root in roots:
        for directory, _, names in os.walk(root):
            for name in names:
                path = Path(directory) / name
                try:
                    info = path.lstat()
                    if stat.S_ISREG(info.st_mode) and info.st_size < 50_000_000 and needle in path.read_bytes():
                        found.append((path, stat.S_IMODE(info.st_mode)))
                except OSError:
                    continue
    return found


def test_jupyter_serves_with_its_token_keeps_it_secret_lists_and_stops(slurm_site, jupyter_user, tmp_path):
    env, home = jupyter_user
    done = envkit("jupyter", "jup-test", "-p", "part-a", "--gpus", "1", "--cpus", "1", "--time", "10",
                  "--timeout", "60", "--server-timeout", "120", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [url] = URL.findall(done.stdout)
    token = parse_qs(urlsplit(url).query)["token"][0]
    assert len(token) >= 32 and urlsplit(url).hostname == "127.0.0.1"  # the node's NodeAddr in this cluster
    job = re.search(r"Jupyter is running in job ([0-9]+) on node (gpu-a[12]) \(127\.0\.0\.1\), port ([0-9]+)\.",
                    done.stdout)
    assert job is not None, done.stdout
    job_id, node, port = job.groups()
    assert f"ssh -N -L {port}:127.0.0.1:{port} " in done.stdout
    assert f"envkit jupyter --stop {job_id}" in done.stdout
    assert f"The check on {node} passed:" in done.stdout and "PASS" in done.stdout  # above the URL
    assert done.stdout.index("The check on") < done.stdout.index("URL (")
    try:
        assert status(url, token) == 200
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=5) as page:  # the printed URL itself, as a browser would follow it
            assert page.status == 200
        assert status(url, None) == 403
        assert status(url, "not-" + token) == 403
        # The token in no argv of any process, not in the job script Slurm keeps, not in a file others can read.
        args = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True).stdout
        assert token not in args
        script = slurm_site.cluster.query(["scontrol", "write", "batch_script", job_id, "-"])
        assert script.returncode == 0 and "#SBATCH --job-name=envkit-jupyter" in script.stdout
        assert token not in script.stdout
        holders = files_with(token, [home, tmp_path, slurm_site.root])
        assert holders, "the token file is there"
        assert all(mode & 0o077 == 0 for _, mode in holders), holders
        # --list shows it with its node and time left
        listed = envkit("jupyter", "--list", env=env, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        row = next(line for line in listed.stdout.splitlines() if line.startswith(job_id))
        assert node in row and port in row and "running" in row
        as_json = json.loads(envkit("jupyter", "--list", "--json", env=env, cwd=tmp_path).stdout)["servers"]
        assert [(s["job"], s["node"], s["port"]) for s in as_json] == [(job_id, node, int(port))]
        assert re.fullmatch(r"[0-9:-]+", as_json[0]["time_left"])
    finally:
        stopped = envkit("jupyter", "--stop", job_id, env=env, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert job_id not in slurm_site.cluster.jobs()
    assert status(url, token) is None  # nothing answers on that port
    assert gone(str(home / "envs" / "jup-test")), "the server's processes are still there after --stop"
    assert envkit("jupyter", "--list", env=env, cwd=tmp_path).stdout.startswith("No Jupyter servers")
    again = envkit("jupyter", "--stop", job_id, env=env, cwd=tmp_path)
    assert again.returncode == 2 and f"job {job_id} is not a Jupyter server envkit started" in again.stderr


def test_an_environment_without_jupyter_is_refused_with_the_command_that_adds_it(slurm_site, cluster_user):
    env, home = cluster_user
    done = envkit("jupyter", "torch-test", "-p", "part-a", env=env)
    assert done.returncode == 1, done.stderr
    assert "torch-test has no Jupyter" in done.stderr
    python = home / "envs" / "torch-test" / "bin" / "python"
    cache = home / "cache" / "envkit" / "uv"  # envkit's package cache, as create uses it: not ~/.cache/uv
    assert f" pip install --cache-dir {cache} --python {python} jupyterlab" in done.stderr
    assert not (home / "envs" / "torch-test" / "bin" / "jupyter-lab").exists()  # never changed silently
    assert slurm_site.cluster.jobs() == []
    # Pasted (offline here: no index to reach), it writes envkit's cache, and no cache of uv's own in the home.
    command = shlex.split(done.stderr.split("Add JupyterLab to it: ", 1)[1].splitlines()[0])
    pasted = subprocess.run([*command, "--offline"], env=env, capture_output=True, text=True, timeout=120)
    assert "jupyterlab" in pasted.stderr and cache.is_dir()
    assert not (home / "cache" / "uv").exists() and not (home / "home" / ".cache").exists()


@pytest.mark.parametrize("args,code,words", [
    (["-p", "part-a", "--time", "1:2:3:4"], 2, "--time '1:2:3:4' is not a time limit sbatch reads"),
    (["-p", "part-a", "--time", "-5"], 2, "cannot be passed to sbatch"),
    (["-p", "part-v"], 1, "would not run on partition part-v"),
    (["-p", "cpu"], 2, "unknown partition 'cpu' in site file"),
    (["-p", "part-a", "--gpus", "3"], 2, "--gpus 3: the nodes of partition part-a have at most 2 GPU(s)"),
    (["-p", "part-a:gpu-v1"], 2, "gpu-v1"),
])
def test_bad_input_is_one_error_before_any_job(slurm_site, jupyter_user, args, code, words):
    env, _ = jupyter_user
    done = envkit("jupyter", "jup-test", *args, env=env)
    assert done.returncode == code, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert slurm_site.cluster.jobs() == []


def test_a_partition_without_gpus_is_refused(slurm_site, jupyter_user, tmp_path):
    # (survey takes GPU partitions only: a site file may still name one without, written by hand)
    import yaml

    env, home = jupyter_user
    site = yaml.safe_load(Path(env["ENVKIT_SITE"]).read_text())
    site["partitions"]["cpu"] = {"nodes": [{"node": "cpu-1", "count": 1, "profile": {"name": "cpu-1", "gpus": []}}]}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    env = {**env, "ENVKIT_SITE": str(tmp_path / "site.yaml")}
    for command in (["jupyter", "jup-test"], ["shell", "jup-test"]):
        done = envkit(*command, "-p", "cpu", env=env, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert "would not run on partition cpu: cpu-1: needs an NVIDIA GPU; the machine has none" in done.stderr
        assert "Traceback" not in done.stderr
    assert slurm_site.cluster.jobs() == []


def test_a_server_that_dies_at_start_is_reported_and_its_job_is_gone(slurm_site, cluster_user, tmp_path):
    env, home = cluster_user
    make_jupyter_env(home / "envs" / "jup-dies", env, "jup-dies",
                     server="#!/bin/sh\necho 'boom: the server cannot start' >&2\nexit 7\n")
    done = envkit("jupyter", "jup-dies", "-p", "part-a", "--gpus", "1", "--timeout", "60", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "before its Jupyter server answered: boom: the server cannot start" in done.stderr
    assert slurm_site.cluster.jobs() == []


def test_a_job_pending_past_the_timeout_is_cancelled(slurm_site, jupyter_user, tmp_path):
    env, _ = jupyter_user
    hold = slurm_site.cluster.query(["sbatch", "--parsable", "-p", "part-a", "-N", "2", "--exclusive",
                                     f"--chdir={tmp_path}", "--wrap", "sleep 300"])
    assert hold.returncode == 0, hold.stderr
    try:
        done = envkit("jupyter", "jup-test", "-p", "part-a", "--gpus", "1", "--timeout", "3", env=env, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert "did not start within 3 s (it is cancelled)" in done.stderr
        jobs = slurm_site.cluster.jobs()
        assert jobs == [hold.stdout.strip().split(";")[0]], jobs
    finally:
        slurm_site.cluster.query(["scancel", hold.stdout.strip().split(";")[0]])


def test_stop_and_list_take_a_job_id_and_nothing_else(jupyter_user):
    env, _ = jupyter_user
    for args in (["--stop", "-1"], ["--stop", "12;rm"], ["--list", "jup-test"], ["--list", "--stop", "3"]):
        done = envkit("jupyter", *args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("envkit: error:") and "Traceback" not in done.stderr


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("Linux only")


def test_a_port_taken_between_choosing_and_binding_is_chosen_again(slurm_site, cluster_user, tmp_path):
    # The stand-in's first start finds its port taken (another program bound it after the job chose it): Jupyter
    # refuses it (port_retries=0), and the job chooses another port and says so in its connection file.
    env, home = cluster_user
    root = home / "envs" / "jup-race"
    marker = tmp_path / "taken"
    real = (f"{root / 'bin' / 'python'} -c 'import sys; from jupyter_server.serverapp import main; "
            "sys.argv[0] = \"jupyter-server\"; sys.exit(main())'")
    take = ("import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); "
            "import os; open(sys.argv[3], 'w').write(str(os.getpid())); time.sleep(600)")
    server = "\n".join([
        "#!/bin/bash",
        'for a in "$@"; do case "$a" in --port=*) port="${a#--port=}";; --ip=*) ip="${a#--ip=}";; esac; done',
        f"if [ ! -e {marker} ]; then",
        f"    {sys.executable} -c \"{take}\" \"$ip\" \"$port\" {marker}.held &",
        f"    while [ ! -e {marker}.held ]; do sleep 0.05; done; touch {marker}; echo \"$port\" > {marker}",
        "fi",
        f'exec {real} "$@"',
        "",
    ])
    make_jupyter_env(root, env, "jup-race", server=server)
    done = envkit("jupyter", "jup-race", "-p", "part-a", "--gpus", "1", "--timeout", "60", "--json", env=env,
                  cwd=tmp_path)
    report = json.loads(done.stdout) if done.returncode == 0 else {}
    job = re.fullmatch(r"([0-9]+)", report.get("job", ""))
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert job is not None and done.stderr == ""  # --json: the report alone
        taken = marker.read_text().strip()
        assert taken.isdigit() and report["port"] != int(taken)
        url = report["url"]
        assert urlsplit(url).port == report["port"] and report["address"] == "127.0.0.1"
        assert status(url, parse_qs(urlsplit(url).query)["token"][0]) == 200
        assert report["tunnel"].startswith(f"ssh -N -L {report['port']}:127.0.0.1:{report['port']} ")
        assert report["stop"] == f"envkit jupyter --stop {job.group(1)}" and report["check"]["status"] == 0
        directory = next(path for path in (home / "data" / "envkit" / "jupyter").iterdir()
                         if (path / "job").read_text().strip() == job.group(1))
        assert "is already in use" in (directory / "server-1.log").read_text()
        assert (directory / "connection").read_text().split()[3] == "2"
    finally:
        if job is not None:
            assert envkit("jupyter", "--stop", job.group(1), env=env, cwd=tmp_path).returncode == 0
        # The program that took the port stands for another one: not the job's, so ended here (by its pid; the
        # test cluster's proctrack/linuxproc does not follow a process whose parent left, as cgroups would).
        held = Path(f"{marker}.held")
        if held.exists() and held.read_text().isdigit():
            try:
                os.kill(int(held.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert gone(str(marker))


def _silent_env(home: Path, env: dict[str, str], marker: Path) -> str:
    """An environment whose "Jupyter server" never answers (it sleeps, with ``marker`` in its argv): its name."""
    sleeper = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    if not (home / "envs" / "jup-silent").exists():
        make_jupyter_env(home / "envs" / "jup-silent", env, "jup-silent", server=f"#!/bin/sh\nexec {sleeper}\n")
    else:
        (home / "envs" / "jup-silent" / "bin" / "jupyter-server").write_text(f"#!/bin/sh\nexec {sleeper}\n")
    return "jup-silent"


def test_a_server_that_never_answers_is_reported_and_its_job_cancelled(slurm_site, cluster_user, tmp_path):
    env, home = cluster_user
    name = _silent_env(home, env, tmp_path / "sleeper")
    done = envkit("jupyter", name, "-p", "part-a", "--gpus", "1", "--server-timeout", "3", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not answer within 3 s of the job's start (the job is cancelled)" in done.stderr
    assert slurm_site.cluster.jobs() == []
    assert gone(f"{tmp_path}/sleeper")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_a_signal_while_waiting_cancels_the_job(slurm_site, cluster_user, tmp_path, signum):
    env, home = cluster_user
    name = _silent_env(home, env, tmp_path / "sleeper")
    process = subprocess.Popen([sys.executable, "-m", "envkit", "jupyter", name, "-p", "part-a", "--gpus", "1"],
                               env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:  # until the job runs
            if " started on " in line:
                break
        assert len(slurm_site.cluster.jobs()) == 1
        deadline = time.monotonic() + 60
        while gone(f"{tmp_path}/sleeper", within=0) and time.monotonic() < deadline:  # until its "server" runs
            time.sleep(0.2)
        assert not gone(f"{tmp_path}/sleeper", within=0)
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # 130 (128 + N), or ended by the signal itself, which a shell reports as the same 130: one CI run saw Python end
    # by SIGINT after envkit had said "interrupted" and cancelled the job (a second KeyboardInterrupt on the way out,
    # not yet explained). What a user needs is checked below: one word, the job cancelled, nothing left running.
    assert process.returncode in (128 + signum, -signum), err
    assert err.count("envkit: interrupted") == 1, err
    assert slurm_site.cluster.jobs() == []
    assert gone(f"{tmp_path}/sleeper")
    listed = envkit("jupyter", "--list", env=env, cwd=tmp_path)
    assert listed.stdout.startswith("No Jupyter servers") and list((home / "data" / "envkit" / "jupyter").glob(
        "*/token")) == []  # no token is left behind by the servers that ended


def test_a_jupyter_configuration_with_another_token_is_said_and_the_job_cancelled(slurm_site, jupyter_user, tmp_path):
    env, home = jupyter_user
    config = tmp_path / "jupyter-config"
    config.mkdir()
    (config / "jupyter_server_config.py").write_text("c.IdentityProvider.token = 'my-own-token'\n")
    done = envkit("jupyter", "jup-test", "-p", "part-a", "--gpus", "1", env={**env, "JUPYTER_CONFIG_DIR": str(config)},
                  cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refuses envkit's token (HTTP 403): a Jupyter configuration of yours sets another token" in done.stderr
    assert slurm_site.cluster.jobs() == []
    assert gone(str(home / "envs" / "jup-test"))
