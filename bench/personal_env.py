#!/usr/bin/env python3
"""What a personal environment on top of a site's shared one costs (`envkit create --on site:torch --name mine`):
its disk, and how fast `python -c 'import torch'` starts in it next to the site environment itself.

The site environment is torch-2.13-cpu with the real PyTorch CPU wheel this machine keeps (and its real
dependencies; --workload synthetic: create_speed.py's tiny stand-ins), published with `envkit create --shared` into
a shared directory of the bench's own, from a local index on 127.0.0.1. The personal environment stands on it. Then:

  disk    what the personal environment adds, counted as du counts (each file once); goal under 5 MB
  import  `PREFIX/bin/python -c 'import torch'` in the personal environment and in the site's, interleaved, the
          order rotating each round; each round's personal/site is taken and their median judged (create_speed.py's
          round_ratios says why); goal within 1.1x

A report, not a test: it exits 0 whether the goals are met or not (1 only when a step fails).

    python3 bench/personal_env.py [--workload real-torch|synthetic] [--rounds 15] [--json] [--venv DIR]

Started with the machine's python3, it runs itself again in a venv of its own with envkit installed from this
checkout (bench_venv.py). Nothing touches the network beyond 127.0.0.1; everything is made in one temporary
directory, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402

run_in_venv()

from create_speed import (PROFILE, PYTHON, ROOT, Bench, _run, ratio_text, round_ratios,  # noqa: E402
                          run_on_a_workload)
from support.pypi_index import IndexServer  # noqa: E402  (create_speed put tests/ on the path)

GOAL_DISK = 5 << 20  # bytes, under
GOAL_IMPORT = 1.1  # personal / site, at most


def disk_bytes(root: Path) -> int:
    """What ``root`` takes on disk, each file once (hard links), as du counts blocks."""
    seen, total = set(), 0
    for directory, dirs, files in os.walk(root):
        for name in [*files, *dirs]:
            info = os.lstat(os.path.join(directory, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def _import_seconds(python: Path, env: dict[str, str], module: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", f"import {module}"], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{python} -c 'import {module}' failed: {done.stderr.strip()[-400:]}")
    return seconds


def measure(temp: Path, workload, rounds: int) -> dict:
    with IndexServer() as server:
        server.add_index(f"/whl/{workload.variant}", workload.wheels)
        server.add_index("/pypi/simple", workload.pypi)
        (temp / "bench").mkdir(parents=True)
        bench = Bench(temp / "bench", server, workload)  # its home and config (create_speed.py)
        shared = temp / "shared"
        shared.mkdir()
        env = {**bench.envkit_env, "ENVKIT_SHARED": str(shared), "MODULEPATH": str(shared / "modulefiles")}
        machine = ROOT / "tests" / "profiles" / "no-gpu.yaml" if workload.name == "real-torch" else PROFILE
        _run([*envkit_command(), "create", "torch", "--build", workload.build, "--python", PYTHON, "--machine",
              str(machine), "--shared", "--yes", "--no-verify"], env)
        site = Path(json.loads((shared / "records" / "torch.json").read_text(encoding="utf-8"))["prefix"])
        _run([*envkit_command(), "create", "--on", "site:torch", "--name", "mine", "--yes", "--no-verify"], env)
        mine = bench.envs / "mine"
        module = "torch"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        for python in (site / "bin" / "python", mine / "bin" / "python"):  # warm: bytecode and page caches
            _import_seconds(python, clean, module)
        samples: dict[str, list[float]] = {"personal": [], "site": []}
        pythons = {"personal": mine / "bin" / "python", "site": site / "bin" / "python"}
        for number in range(rounds):
            order = ["personal", "site"] if number % 2 == 0 else ["site", "personal"]
            for which in order:
                samples[which].append(_import_seconds(pythons[which], clean, module))
        size = disk_bytes(mine)
        ratio = round_ratios(samples, "personal", "site")
    return {"workload": workload.name, "site": workload.describe, "rounds": rounds, "disk_bytes": size,
            "site_disk_bytes": disk_bytes(site), "median_s": {k: statistics.median(v) for k, v in samples.items()},
            "samples_s": samples, "ratio": ratio, "goals": {"disk": f"< {GOAL_DISK} bytes",
                                                            "import": f"personal/site <= {GOAL_IMPORT}"},
            "pass": {"disk": size < GOAL_DISK, "import": ratio["median"] <= GOAL_IMPORT}}


def print_result(result: dict) -> None:
    print(f"== {result['workload']}: site:torch of {result['site']}; {result['rounds']} rounds, interleaved")
    verdict = "PASS" if result["pass"]["disk"] else "MISS"
    print(f"disk of the personal environment  {result['disk_bytes'] / 1024:8.0f} KiB  (the site's: "
          f"{result['site_disk_bytes'] / 2**20:.0f} MiB)  goal < 5 MB: {verdict}")
    for which in ("personal", "site"):
        times = result["samples_s"][which]
        print(f"import torch, {which:8}         median {result['median_s'][which]:.3f} s (min {min(times):.3f}, "
              f"max {max(times):.3f})")
    verdict = "PASS" if result["pass"]["import"] else "MISS"
    print(f"personal/site  {ratio_text(result['ratio'])}  goal <= {GOAL_IMPORT}: {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("real-torch", "synthetic"), default="real-torch",
                        help="the site environment (default real-torch; synthetic where its wheel is missing)")
    parser.add_argument("--rounds", type=int, default=15, help="counted rounds of each (default 15)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_venv_option(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return run_on_a_workload("personal_env", args.workload, lambda temp, workload: measure(temp, workload, args.rounds),
                             print_result, args.json)


if __name__ == "__main__":
    sys.exit(main())
