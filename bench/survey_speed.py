#!/usr/bin/env python3
"""Whether `envkit survey` of N partitions takes about as long as the slowest one, not the sum, in one run.

Starts the tests' Slurm cluster on localhost (tests/support/slurm_cluster.py: needs the Debian packages slurmctld,
slurmd, slurm-client and munge, and root to run the daemons as), with N single-GPU nodes each in its own partition and
the stand-in libnvidia-ml.so.1 on them. Each partition is surveyed alone, then all together, interleaved, several
times; the medians give the ratios. Goal: all N together within 1.5x of the slowest alone (far below the sum).

    python3 bench/survey_speed.py [--partitions 4] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

sys.path.insert(0, str(REPO / "tests"))

from bench_slurm import a100_cluster  # noqa: E402
from support.slurm_cluster import Node  # noqa: E402

GOAL = 1.5


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    add_venv_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-survey-bench-") as tmp:
        root = Path(tmp)
        nodes = tuple(Node(f"n{i}", 1, "a100", "a100") for i in range(1, args.partitions + 1))
        partitions = {f"p{i}": (f"n{i}",) for i in range(1, args.partitions + 1)}
        with a100_cluster(root, nodes, partitions) as (cluster, env):
            survey = [*envkit_command(), "survey"]
            names = list(cluster.partitions)
            commands = {name: [*survey, "-p", name] for name in names}
            commands["all"] = [*survey, *[arg for name in names for arg in ("-p", name)]]
            for argv in commands.values():  # warm up
                timed(argv, env)
            samples: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    samples[name].append(timed(argv, env))
    medians = {name: statistics.median(times) for name, times in samples.items()}
    slowest = max(medians[name] for name in names)
    total = sum(medians[name] for name in names)
    for name, value in medians.items():
        print(f"{'survey ' + ('of all ' + str(len(names)) if name == 'all' else name):24} {value * 1000:9.1f} ms")
    ratio = medians["all"] / slowest
    print(f"all together / slowest alone: {ratio:.2f}x   all together / sum of each alone: "
          f"{medians['all'] / total:.2f}x")
    print(f"goal: at most {GOAL}x the slowest; {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
