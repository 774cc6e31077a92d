#!/usr/bin/env python3
"""How long `envkit doctor` takes to start the probe, with the probe's zipapp cached and with an empty cache.

The probe is a zipapp that envkit assembles from envkit/probe/program/ into its cache directory (envkit.probe.zipapp)
the first time a version and content of it runs; every later run only hashes the modules and finds the file. This
measures both, as a user starts them: `envkit doctor --python WRAPPER`, where WRAPPER is a tiny shell script that
notes the moment it starts (the moment envkit starts the probe) and exits. The cache is emptied before each cold run.
The machines are noisy, so the runs are interleaved, many times, and medians are compared in one run. The assembly
itself is timed in-process too.

Goal: the cold start at most 1.1x the warm one (building the archive costs a few milliseconds), and the cached run
builds nothing.

    python3 bench/probe_start.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

GOAL = 1.1
ROOT = Path(__file__).resolve().parent.parent


def start_delay(wrapper: Path, stamp: Path, environ: dict[str, str]) -> float:
    """Seconds from launching `envkit doctor` to the probe's start."""
    stamp.unlink(missing_ok=True)
    started = time.time()
    subprocess.run([*envkit_command(), "doctor", "--json", "--python", str(wrapper)], env=environ,
                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(stamp.read_text()) - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    add_venv_option(parser)
    args = parser.parse_args()
    from envkit.probe.zipapp import cached_program  # the venv's envkit, installed from this checkout

    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as scratch:
        base = Path(scratch)
        stamp, wrapper, cache = base / "stamp", base / "python", base / "cache"
        # date +%s.%N: GNU date; the wrapper must cost next to nothing itself.
        wrapper.write_text(f"#!/bin/sh\ndate +%s.%N > {stamp}\nexit 3\n")
        wrapper.chmod(0o755)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
        environ.update(XDG_CACHE_HOME=str(cache))  # (envkit is the venv's: bench_venv.py)
        start_delay(wrapper, stamp, environ)  # warm the OS caches and envkit's other caches
        warm, cold = [], []
        for _ in range(args.runs):
            shutil.rmtree(cache / "envkit" / "probe", ignore_errors=True)
            cold.append(start_delay(wrapper, stamp, environ))
            archive = next((cache / "envkit" / "probe").glob("*.pyz"))
            built = archive.stat().st_mtime_ns
            warm.append(start_delay(wrapper, stamp, environ))
            assert archive.stat().st_mtime_ns == built, "the cached run built the archive again"
        build, lookup = [], []
        for _ in range(args.runs):
            shutil.rmtree(base / "inproc", ignore_errors=True)
            for kind in (build, lookup):
                started = time.perf_counter()
                cached_program(base / "inproc")
                kind.append(time.perf_counter() - started)
    w, c = statistics.median(warm), statistics.median(cold)
    print(f"envkit doctor -> probe started, cached archive: {w * 1000:.1f} ms (median of {args.runs})")
    print(f"envkit doctor -> probe started, empty cache:    {c * 1000:.1f} ms")
    print(f"in-process: build {statistics.median(build) * 1000:.2f} ms, "
          f"cached lookup {statistics.median(lookup) * 1000:.2f} ms")
    ratio = c / w
    print(f"cold/warm: {ratio:.2f}x (goal <= {GOAL}x): {'ok' if ratio <= GOAL else 'OVER'}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
