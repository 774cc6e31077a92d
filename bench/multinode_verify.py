#!/usr/bin/env python3
"""What the check across nodes costs next to the check on one node, in one run: `envkit verify ENV -p P --nodes 2`
(each node's own check and a gloo all-reduce across the two) against `envkit verify ENV -p P` (one node's check), of
the same environment. Goal: the cross-node check within 1.5x of the single-node one.

Starts the tests' Slurm cluster on localhost (tests/support/slurm_cluster.py: needs the Debian packages slurmctld,
slurmd, slurm-client and munge, and root to run the daemons as), two nodes in one partition, and makes a venv with
the real PyTorch CPU wheel (torch 2.13.0+cpu, which this kind of machine keeps on disk for pip). The two checks
run interleaved, several times; the medians give the ratio. A report, not a test: it exits 0 whether the goal is met
or not (1 when a check fails).

    python3 bench/multinode_verify.py [--runs 3] [--venv DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from bench_slurm import a100_cluster  # noqa: E402
from support.slurm_cluster import Node  # noqa: E402

GOAL = 1.5
NAME = "torch-cpu"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start


def make_env(root: Path, env: dict[str, str]) -> None:
    from envkit.state import records
    from envkit.state.userdirs import user_dirs

    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=120)
    from support.local_wheels import find_torch_cpu_wheel

    wheel = find_torch_cpu_wheel()
    if wheel is None:
        raise SystemExit("no PyTorch CPU wheel for this Python on this machine (pip's find-links)")
    subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=900)
    records.save(records.Record(
        name=NAME, prefix=str(root), kind="venv", backend="venv", manifest="torch", build="torch-2.13-cpu",
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={}, on_target=False),
        user_dirs(env).records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    add_venv_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-multinode-bench-") as tmp:
        root = Path(tmp)
        nodes = (Node("n1", 1, "a100", "a100"), Node("n2", 1, "a100", "a100"))
        with a100_cluster(root, nodes, {"p": ("n1", "n2")}) as (_, env):
            make_env(root / "envs" / NAME, env)
            verify = [*envkit_command(), "verify", NAME, "-p", "p"]
            commands = {"one node": verify, "2 nodes (check + all-reduce)": [*verify, "--nodes", "2"]}
            for argv in commands.values():  # warm up: the probe's zipapp, the page cache
                timed(argv, env)
            samples: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    samples[name].append(timed(argv, env))
    medians = {name: statistics.median(times) for name, times in samples.items()}
    for name, value in medians.items():
        print(f"verify on {name:30} {value:7.2f} s")
    single, across = medians.values()
    ratio = across / single
    print(f"2 nodes / one node: {ratio:.2f}x; goal: at most {GOAL}x; {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
