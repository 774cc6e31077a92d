#!/usr/bin/env python3
"""How fast `envkit add` adds a small pure-Python package to an environment, next to raw uv with the same
constraints.

One environment of torch-2.13 (the real PyTorch CPU wheel this machine keeps, with its real dependencies, or with
--workload synthetic the tiny stand-ins of create_speed.py) is made once from a local index on 127.0.0.1; then a
small pure-Python package (a few modules, no dependencies) is added to it, and removed again untimed, by:

  envkit        python -m envkit add ENV PKG --no-verify  (as a user runs it; the judged route: create_speed.py
                judges create --no-verify the same way)
  envkit+check  python -m envkit add ENV PKG  (with the framework's check after it, importing the real torch: shown,
                not judged; the real-torch workload only, the synthetic torch cannot be checked)
  uv            uv pip install --python ENV/bin/python --index-url INDEX -c ENV/.envkit/constraints.txt PKG  (the
                same uv, the same cache, the same constraints)

Warm caches: one uncounted round of each route first. The routes run interleaved, the order rotating each round,
and each round's envkit/uv is taken; their median is judged (create_speed.py's round_ratios says why). Goal: envkit
within 1.3x of raw uv. A report, not a test: it exits 0 whether the goal is met or not (1 only when a route fails).

    python3 bench/add_speed.py [--workload real-torch|synthetic] [--rounds 9] [--json] [--venv DIR]

Started with the machine's python3, it runs itself again in a venv of its own with envkit installed from this
checkout (bench_venv.py). Nothing touches the network beyond 127.0.0.1; everything is made in one temporary
directory, removed at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402

run_in_venv()

from create_speed import (PROFILE, PYTHON, ROOT, Bench, _run, ratio_text, round_ratios,  # noqa: E402
                          run_on_a_workload)
from support.pypi_index import IndexServer  # noqa: E402  (create_speed put tests/ on the path)
from support.wheels import build_wheel  # noqa: E402

GOAL = 1.3  # envkit add --no-verify / raw uv, at most
ROUTES = ("envkit", "envkit+check", "uv")
NAME = "bench-add"
PACKAGE = "benchpkg"


def small_package(wheels: Path) -> Path:
    files = {f"{PACKAGE}/__init__.py": "VALUE = 1\n",
             **{f"{PACKAGE}/m{i}.py": f"def f(x):\n    return x + {i}\n" for i in range(20)}}
    return build_wheel(wheels, PACKAGE, "1.0", files=files)


class AddBench:
    def __init__(self, temp: Path, server: IndexServer, workload) -> None:
        self.create = Bench(temp, server, workload)  # its home, config and environments (create_speed.py)
        self.pypi = server.index_url("/pypi/simple")
        # the real CPU torch made for a machine without a GPU (its check then passes); the synthetic one as create
        # bench makes it
        machine = ROOT / "tests" / "profiles" / "no-gpu.yaml" if workload.name == "real-torch" else PROFILE
        _run([*envkit_command(), "create", "torch", "--build", workload.build, "--python", PYTHON, "--machine",
              str(machine), "--name", NAME, "--yes", "--no-verify"], self.create.envkit_env)
        self.prefix = self.create.envs / NAME
        self.python = self.prefix / "bin" / "python"
        self.constraints = self.prefix / ".envkit" / "constraints.txt"

    def run(self, route: str) -> float:
        if route == "uv":
            argv = [self.create.uv, "pip", "install", "--python", str(self.python), "--index-url", self.pypi, "-c",
                    str(self.constraints), PACKAGE]
            env = self.create.uv_env
        else:
            argv = [*envkit_command(), "add", NAME, PACKAGE, *(["--no-verify"] if route == "envkit" else [])]
            env = self.create.envkit_env
        start = time.perf_counter()
        _run(argv, env)
        seconds = time.perf_counter() - start
        if not list(self.prefix.glob(f"lib/python*/site-packages/{PACKAGE}-1.0.dist-info")):
            raise RuntimeError(f"{route}: {PACKAGE} is not installed")
        _run([self.create.uv, "pip", "uninstall", "--python", str(self.python), PACKAGE], self.create.uv_env)
        return seconds


def measure(temp: Path, workload, rounds: int) -> dict:
    routes = ROUTES if workload.name == "real-torch" else ("envkit", "uv")
    with IndexServer() as server:
        server.add_index(f"/whl/{workload.variant}", workload.wheels)
        server.add_index("/pypi/simple", [*workload.pypi, small_package(temp / "small")])
        (temp / "bench").mkdir(parents=True)
        bench = AddBench(temp / "bench", server, workload)
        for route in routes:  # warm: every cache filled, not counted
            bench.run(route)
        samples: dict[str, list[float]] = {route: [] for route in routes}
        for number in range(rounds):
            shift = number % len(routes)
            for route in [*routes[shift:], *routes[:shift]]:
                samples[route].append(bench.run(route))
    judged = round_ratios(samples, "envkit", "uv")
    shown = {"envkit+check/uv": round_ratios(samples, "envkit+check", "uv")} if "envkit+check" in samples else {}
    return {"workload": workload.name, "environment": workload.describe, "rounds": rounds,
            "median_s": {route: statistics.median(times) for route, times in samples.items()},
            "samples_s": samples,
            "ratios": {"envkit/uv": judged, **shown},
            "envkit_minus_uv_s": statistics.median(a - b for a, b in zip(samples["envkit"], samples["uv"])),
            "goal": f"envkit/uv <= {GOAL}", "pass": judged["median"] <= GOAL}


def print_result(result: dict) -> None:
    print(f"== {result['workload']}: an environment of {result['environment']}; {result['rounds']} rounds, "
          "interleaved, warm caches")
    labels = {"envkit": "envkit add --no-verify", "envkit+check": "envkit add (with the check)",
              "uv": "uv pip install -c constraints"}
    for route in result["samples_s"]:
        times = result["samples_s"][route]
        print(f"{labels[route]:32} median {result['median_s'][route]:.3f} s (min {min(times):.3f}, max "
              f"{max(times):.3f})")
    verdict = "PASS" if result["pass"] else "MISS"
    print(f"envkit/uv       {ratio_text(result['ratios']['envkit/uv'])}  goal <= {GOAL}: {verdict}")
    if "envkit+check/uv" in result["ratios"]:
        print(f"envkit+check/uv {ratio_text(result['ratios']['envkit+check/uv'])}  (shown, not judged)")
    print(f"envkit's own time (envkit - uv, the rounds' median): {result['envkit_minus_uv_s'] * 1000:+.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("real-torch", "synthetic"), default="real-torch",
                        help="the environment added to (default real-torch; synthetic where its wheel is missing)")
    parser.add_argument("--rounds", type=int, default=9, help="counted rounds of each route (default 9)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_venv_option(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return run_on_a_workload("add_speed", args.workload, lambda temp, workload: measure(temp, workload, args.rounds),
                             print_result, args.json)


if __name__ == "__main__":
    sys.exit(main())
