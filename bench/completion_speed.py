#!/usr/bin/env python3
"""How long a shell completion takes against `envkit list --json`'s kept answer, measured in one run.

A completion runs envkit once per Tab press, so it must answer as fast as the command people run most. Each
completion below is the request bash makes (``_ENVKIT_COMPLETE=complete_bash`` with COMP_WORDS and COMP_CWORD) for a
kind of name envkit completes: a manifest, a build id (from the parsed catalog envkit keeps), an environment (from
the records) and a partition (from the site file). `envkit list --json` is timed warm, its answer kept, as a user's
every listing but the first. Both run from a fresh venv with a plain install of envkit, with a cache, data and
config directory of the bench's own; runs are interleaved and the ratios of the medians are what counts.

Goal: every completion at most 1.3x `envkit list --json`'s kept answer.

    python3 bench/completion_speed.py [--runs 21] [--venv DIR]
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

GOAL = 1.3
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_venv import VENV_HELP, fresh_venv  # noqa: E402  (bench/ is on the path only now)
PROFILE = ROOT / "tests" / "profiles" / "h100-cuda130.yaml"
LISTING = "envkit list --json (kept answer)"
REQUESTS = {  # what is typed before Tab -> COMP_WORDS, COMP_CWORD
    "complete a manifest": ("envkit create t", 2),
    "complete a build id": ("envkit create torch --build torch-2.1", 4),
    "complete an environment": ("envkit run t", 2),
    "complete a partition": ("envkit list --partition g", 3),
}


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"{argv} answered nothing (exit {done.returncode}): the bench's setup is wrong")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--venv", type=Path, metavar="DIR", help=VENV_HELP)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as scratch:
        home = Path(scratch)
        python = fresh_venv(args.venv or home / "venv")
        envkit = str(python.parent / "envkit")
        (home / "site.yaml").write_text(f"version: 1\npartitions:\n  gpu-a100:\n    nodes:\n"
                                        f"      - {{node: a1, profile_file: {PROFILE}}}\n")
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
               "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
               "ENVKIT_SITE": str(home / "site.yaml")}
        env = {k: v for k, v in env.items() if k not in ("ENVKIT_MANIFESTS", "ENVKIT_CONFIG")}
        for name in ("torch-cu126", "tf-course"):  # two records for the environment completion
            record = home / "data" / "envkit" / "records" / f"{name}.json"
            record.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([str(python), "-c", (
                "import sys; from envkit import records; records.save(records.Record(name=sys.argv[1], "
                "prefix=sys.argv[2], kind='venv', backend='venv', manifest='torch', build='torch-2.14-cu126', "
                "python='3.12', created='2026-11-01T00:00:00Z', machine={}, on_target=True), "
                "__import__('pathlib').Path(sys.argv[3]))"), name, str(home / "envs" / name), str(record.parent)],
                check=True, env=env)
            (home / "envs" / name / "bin").mkdir(parents=True, exist_ok=True)
        commands = {LISTING: ([envkit, "list", "--json", "--machine", str(PROFILE)], env)}
        for label, (words, cword) in REQUESTS.items():
            commands[label] = ([envkit], {**env, "_ENVKIT_COMPLETE": "complete_bash", "COMP_WORDS": words,
                                          "COMP_CWORD": str(cword)})
        for argv, environ in commands.values():  # warm: bytecode, the catalog and the kept answer
            timed(argv, environ)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, environ) in commands.items():
                samples[name].append(timed(argv, environ))
    medians = {name: statistics.median(times) for name, times in samples.items()}
    print(f"{'command':34} {'median ms':>10} {'vs list':>8}")
    for name, value in medians.items():
        print(f"{name:34} {value * 1000:10.1f} {value / medians[LISTING]:7.2f}x")
    worst = max(value / medians[LISTING] for name, value in medians.items() if name != LISTING)
    print(f"goal: every completion at most {GOAL}x envkit list's kept answer; "
          f"{'met' if worst <= GOAL else 'NOT met'} (the slowest: {worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
