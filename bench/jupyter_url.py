#!/usr/bin/env python3
"""How soon `envkit jupyter` prints its URL once the job's server answers, in one run.

Starts the tests' Slurm cluster on localhost (tests/support/slurm_cluster.py: needs the Debian packages slurmctld,
slurmd, slurm-client and munge, and root to run the daemons as) with one node of two stand-in A100s, and a stand-in
environment whose Jupyter is the jupyter_server this Python has (`pip install jupyter_server`, or the README's test
install). Each run starts `envkit jupyter`, and beside it a watcher that reads the job's connection file and asks
the server itself every 20 ms: the moment the server first answers is the job's own start-up, the moment envkit
prints the URL is what the user waits for. Then the server is stopped (`envkit jupyter --stop`).

Printed: the medians of the job's own start-up (submit to the server answering), envkit's time to the URL, the lag
between them (goal: at most 2 s), and their ratio. A report, not a test: it exits 0 whether the goal is met or not.

    python3 bench/jupyter_url.py [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv(["jupyter_server"])  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "slurm"))

from bench_slurm import a100_cluster  # noqa: E402
from support.slurm_cluster import Node  # noqa: E402

GOAL_LAG = 2.0


def first_answer(data: Path, stop: threading.Event, found: list[float]) -> None:
    """Until ``stop``: look for the job's connection file and ask its server; the time it first answers 200."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while not stop.is_set():
        for directory in (data / "jupyter").glob("*") if (data / "jupyter").is_dir() else ():
            try:
                node, address, port, _ = (directory / "connection").read_text().split()
                token = (directory / "token").read_text().strip()
                request = urllib.request.Request(f"http://{address}:{port}/api/status",
                                                 headers={"Authorization": f"token {token}"})
                with opener.open(request, timeout=1) as response:
                    if response.status == 200:
                        found.append(time.monotonic())
                        return
            except (OSError, ValueError, urllib.error.URLError):
                continue
        time.sleep(0.02)


def one_run(env: dict[str, str], data: Path) -> tuple[float, float]:
    """(seconds from the start to the server's first answer, seconds from the start to envkit's URL)."""
    stop, found = threading.Event(), []
    started = time.monotonic()
    watcher = threading.Thread(target=first_answer, args=(data, stop, found), daemon=True)
    watcher.start()
    process = subprocess.Popen([*envkit_command(), "jupyter", "jup", "-p", "p1", "--gpus", "1",
                                "--timeout", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url_at, job = None, None
    assert process.stdout is not None
    for line in process.stdout:
        if "URL (" in line and url_at is None:
            url_at = time.monotonic()
        found_job = re.search(r"in job ([0-9]+) on node", line)
        job = found_job.group(1) if found_job else job
    process.wait()
    stop.set()
    watcher.join()
    if process.returncode != 0 or url_at is None or not found or job is None:
        raise SystemExit(f"envkit jupyter failed: {process.stderr.read() if process.stderr else ''}")
    subprocess.run([*envkit_command(), "jupyter", "--stop", job], env=env, capture_output=True,
                   timeout=120, check=True)
    return found[0] - started, url_at - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    add_venv_option(parser)
    args = parser.parse_args()
    try:
        import jupyter_server  # noqa: F401
    except ImportError:
        raise SystemExit(f"jupyter_server is not installed for {sys.executable} (pip install jupyter_server)")
    from slurm_helpers import make_torch_env

    with tempfile.TemporaryDirectory(prefix="envkit-jupyter-bench-") as tmp:
        root = Path(tmp)
        samples: list[tuple[float, float]] = []
        with a100_cluster(root, (Node("n1", 2, "a100", "a100"),), {"p1": ("n1",)}) as (_, env):
            done = subprocess.run([*envkit_command(), "survey", "-p", "p1"], env=env, cwd=root,
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise SystemExit(f"envkit survey failed:\n{done.stderr}")
            prefix = make_torch_env(root / "envs" / "jup", env, name="jup")
            [site] = prefix.glob("lib/python*/site-packages")
            (site / "bench-jupyter.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
            program = prefix / "bin" / "jupyter-server"
            program.write_text(f"#!{prefix / 'bin' / 'python'}\nimport sys\nfrom jupyter_server.serverapp import main\n"
                               "sys.exit(main())\n")
            program.chmod(0o755)
            for _ in range(args.runs):
                samples.append(one_run(env, root / "data" / "envkit"))
    answer = statistics.median(s[0] for s in samples)
    url = statistics.median(s[1] for s in samples)
    lag = statistics.median(s[1] - s[0] for s in samples)
    print(f"job's own start-up (submit to the server answering) {answer * 1000:9.1f} ms")
    print(f"envkit jupyter: submit to the URL printed           {url * 1000:9.1f} ms")
    print(f"lag after the server answers: {lag * 1000:.1f} ms (goal: at most {GOAL_LAG * 1000:.0f} ms)   "
          f"time to URL / job's own start-up: {url / answer:.2f}x   ({args.runs} runs)")
    print("goal met" if lag <= GOAL_LAG else "goal NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
