#!/usr/bin/env python3
"""What a fleet costs: `envkit list torch --json` for one profile against a directory of 500 node profiles (5
distinct configurations, 100 nodes each), measured in one run. Goal: the directory within 2x of one profile.

Identical profiles are resolved once, and a directory's parsed profiles are cached as one entry
(envkit.state.filecache), so the cost that grows with the nodes is a stat per file and the JSON listing of the
machines. The two commands run interleaved, many times, in a private temporary home (its own cache); the ratio of
their medians is what counts.

    python3 bench/fleet_list.py [--runs 15] [--nodes 500]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

GOAL = 2.0
CONFIGS = [  # (cuda_driver, driver_version, gpu name, compute capability, gpus per node)
    ("12.2", "535.104.05", "NVIDIA A100-SXM4-80GB", "8.0", 4),
    ("12.2", "535.104.05", "Tesla V100-SXM2-32GB", "7.0", 8),
    ("12.8", "570.86.10", "NVIDIA H100 80GB HBM3", "9.0", 4),
    ("12.4", "550.54.14", "NVIDIA GeForce RTX 2070", "7.5", 2),
    ("11.4", "470.82.01", "Tesla K80", "3.7", 8),
]


def profile(name: str, config: tuple) -> str:
    cuda, driver, gpu, capability, count = config
    gpus = "".join(f"  - {{name: {gpu}, compute_capability: \"{capability}\", memory_mib: 32768}}\n"
                   for _ in range(count))
    return f"name: {name}\ndriver_version: \"{driver}\"\ncuda_driver: \"{cuda}\"\ngpus:\n{gpus}"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--nodes", type=int, default=500)
    add_venv_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-fleet-bench-") as scratch:
        root = Path(scratch)
        nodes = root / "nodes"
        nodes.mkdir()
        for i in range(args.nodes):
            (nodes / f"node{i:04}.yaml").write_text(profile(f"node{i:04}", CONFIGS[i % len(CONFIGS)]))
        one = root / "one.yaml"
        one.write_text(profile("node0000", CONFIGS[0]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
        env.update({"HOME": str(root), "XDG_CACHE_HOME": str(root / "cache"),
                    "XDG_CONFIG_HOME": str(root / "config"), "XDG_DATA_HOME": str(root / "data")})
        base = [*envkit_command(), "list", "torch", "--json", "--machine"]
        commands = {"one profile": base + [str(one)], f"{args.nodes} profiles (dir)": base + [str(nodes)]}
        for argv in commands.values():  # warm the caches: what a user meets from the second run on
            timed(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                samples[name].append(timed(argv, env))
    medians = {name: statistics.median(times) for name, times in samples.items()}
    baseline = medians["one profile"]
    print(f"{'envkit list torch --json --machine':40} {'median ms':>10} {'ratio':>7}")
    for name, median in medians.items():
        print(f"{name:40} {median * 1000:10.1f} {median / baseline:7.2f}x")
    worst = max(medians.values()) / baseline
    print(f"goal: at most {GOAL:.0f}x; {'met' if worst <= GOAL else 'NOT met'} ({worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
