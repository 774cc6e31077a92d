#!/usr/bin/env python3
"""Whether `envkit survey` grows linearly with a partition's nodes, in one run.

What survey does with sinfo's answer before any job starts (parse the rows, group them by partition with each node
once, pick one node per distinct configuration) is timed for a partition of N identical GPU nodes and of 4N. A
linear survey takes about 4x as long for 4N; a quadratic one about 16x (40,000 nodes once took 73 s against 2.2 s
for 10,000). Goal: at most 6x. The rows are made here, as `sinfo -h -N -o FORMAT` prints them; no Slurm is needed.

    python3 bench/survey_scale.py [--nodes 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, help_asked, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

if not help_asked():  # (the help is printed by the machine's python3, which has no envkit)
    from envkit.slurm.sinfo import distinct_configurations, parse_sinfo, partitions  # noqa: E402

GOAL = 6.0


def sinfo_text(nodes: int) -> str:
    return "".join(f"gpu|up|node{i:06d}|gpu:a100:4(S:0-1)|a100,ib|idle\n" for i in range(nodes))


def once(text: str) -> float:
    start = time.perf_counter()
    found = partitions(parse_sinfo(text))
    chosen = distinct_configurations(found["gpu"])
    elapsed = time.perf_counter() - start
    assert len(chosen) == 1 and chosen[0][1] == len(found["gpu"].nodes)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    add_venv_option(parser)
    args = parser.parse_args()
    sizes = (args.nodes, 4 * args.nodes)
    texts = {size: sinfo_text(size) for size in sizes}
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(args.runs):  # interleaved: a noisy machine slows both alike
        for size in sizes:
            samples[size].append(once(texts[size]))
    medians = {size: statistics.median(times) for size, times in samples.items()}
    for size, value in medians.items():
        print(f"survey's sinfo handling, {size:>7} identical nodes: {value * 1000:9.1f} ms")
    ratio = medians[sizes[1]] / medians[sizes[0]]
    print(f"{sizes[1]} nodes / {sizes[0]} nodes: {ratio:.2f}x (linear: 4x, quadratic: 16x)")
    print(f"goal: at most {GOAL:g}x; {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
