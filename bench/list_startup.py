#!/usr/bin/env python3
"""How much slower `envkit list --json` starts than a bare Python, measured in one run.

The machines are noisy, so absolute times mean little: the two commands run interleaved, many times, and the
ratio of their medians is what counts. Goal: envkit list --json within 6x of `python -c pass`.

    python3 bench/list_startup.py [--runs 21] [-- extra envkit list arguments]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

GOAL = 6.0


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("extra", nargs="*", help="extra arguments for envkit list")
    args = parser.parse_args()

    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m envkit list --json": [sys.executable, "-m", "envkit", "list", "--json", *args.extra],
    }
    script = shutil.which("envkit")
    if script:
        commands["envkit list --json"] = [script, "list", "--json", *args.extra]
    for argv in commands.values():  # warm the file cache and the bytecode cache
        timed(argv)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv))

    baseline = statistics.median(samples["python -c pass"])
    print(f"{'command':34} {'median ms':>10} {'ratio':>7}")
    worst = 0.0
    for name, times in samples.items():
        ratio = statistics.median(times) / baseline
        if name != "python -c pass":
            worst = max(worst, ratio)
        print(f"{name:34} {statistics.median(times) * 1000:10.1f} {ratio:7.2f}x")
    print(f"goal: at most {GOAL:.0f}x; {'met' if worst <= GOAL else 'NOT met'} ({worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
