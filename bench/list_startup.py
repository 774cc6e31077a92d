#!/usr/bin/env python3
"""How much slower `envkit list --json` starts than a bare typer app with one command, measured in one run.

Start-up is what people feel on `envkit list`, and most of it is Python and typer, which envkit cannot change: the
number that is envkit's own is the ratio to a bare typer app of one command, run by the same interpreter. Both run
from a fresh venv with a plain (non-editable) install of envkit, as a user has it: an editable install or a Python
with `.pth` hooks adds the same cost to both and flatters the ratio. The machines are noisy, so the commands run
interleaved, many times, and the ratios of their medians are what counts.

envkit settles the garbage collector for a command that runs once: its entry (envkit/__main__.py) collects young
objects every 100,000 new ones instead of every 700, before typer is imported, and envkit.cli freezes the imported
modules out of the collector's reach before the command runs, which spares the collections that would walk them
and their teardown at exit. Together about 15 ms, most of it typer's own. A bare typer app gains the same from the
same two lines, so the bench also runs one that has them, and that like-for-like ratio is the one that measures
envkit's own cost, and the one the goal is judged on.

envkit keeps `envkit list`'s answer (envkit.catalog.cache.cached_answer): asked again with nothing changed, it
detects the machine, reads the kept answer and prints it. That is what a user's every `envkit list` but the first
costs, and what the goal is judged on. The bench also times the run that computes the answer (its kept answers
deleted before each run, the catalog still from the cache), for reference. envkit runs with a cache directory of
the bench's own.

Goal: envkit list --json at most 1.3x the bare typer app that settles its collector as envkit does (and the ratios
to the plain bare app and to `python -c pass`, for reference).

Wall-clock ratios move by a few hundredths with the machine's load (envkit makes more system calls than the bare
app, and they slow down more). With --instructions, where valgrind is installed, the bench also counts the
instructions each command executes (callgrind): a ratio that load does not move, to compare two versions of envkit
by, though it leaves out the time system calls and cache misses take.

    python3 bench/list_startup.py [--runs 31] [--venv DIR] [--instructions] [-- extra envkit list arguments]
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

GOAL = 1.3
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_venv import VENV_HELP, fresh_venv  # noqa: E402  (bench/ is on the path only now)
BARE_APP = '''
import typer

app = typer.Typer(add_completion=False)


@app.command()
def listing(json_output: bool = typer.Option(False, "--json")) -> None:
    print("{}")


app()
'''


def envkit_young_threshold() -> int:
    """envkit's YOUNG_GENERATION_THRESHOLD (envkit/__main__.py), read from the source: this Python may lack typer."""
    source = (ROOT / "envkit" / "__main__.py").read_text()
    [value] = [node.value for node in ast.parse(source).body if isinstance(node, ast.Assign)
               and [getattr(target, "id", None) for target in node.targets] == ["YOUNG_GENERATION_THRESHOLD"]]
    return ast.literal_eval(value)


# The same app, settling its garbage collector as envkit's entry and envkit.cli do: young objects collected every
# YOUNG_GENERATION_THRESHOLD new ones from the start, and what is imported frozen before the command runs.
SETTLED_APP = (f"import gc\n\ngc.set_threshold({envkit_young_threshold()}, *gc.get_threshold()[1:])\n"
               + BARE_APP.replace("\napp()\n", "\ngc.freeze()\napp()\n"))
assert "gc.freeze()" in SETTLED_APP, "the bare app's last line changed: freeze before app() again"
PLAIN, SETTLED, ENVKIT = "bare typer app --json", "bare typer app, settled", "envkit list --json"
COMPUTED = "  answer computed"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - start


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """How many instructions ``argv`` executes, as valgrind's callgrind counts them."""
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True, env=env)
    [count] = re.findall(r"Collected : (\d+)", run.stderr)
    return int(count)


def print_ratios(heading: str, unit: str, values: dict[str, float], scale: float) -> None:
    """One table: each command's value (times ``scale``, in ``unit``) and its ratios to the three references."""
    print(f"{heading:24} {unit:>10} {'vs python':>10} {'vs typer':>9} {'vs settled typer':>17}")
    for name, value in values.items():
        print(f"{name:24} {value * scale:10.1f} {value / values['python -c pass']:9.2f}x "
              f"{value / values[PLAIN]:8.2f}x {value / values[SETTLED]:16.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--venv", type=Path, metavar="DIR", help=VENV_HELP)
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions under valgrind (median of 3 counts)")
    parser.add_argument("extra", nargs="*", help="extra arguments for envkit list")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt install valgrind)")

    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as scratch:
        python = fresh_venv(args.venv or Path(scratch) / "venv")
        bare, settled = Path(scratch) / "bare_typer_app.py", Path(scratch) / "settled_typer_app.py"
        bare.write_text(BARE_APP)
        settled.write_text(SETTLED_APP)
        envkit = str(python.parent / "envkit")
        commands = {
            "python -c pass": [str(python), "-c", "pass"],
            PLAIN: [str(python), str(bare), "--json"],
            SETTLED: [str(python), str(settled), "--json"],
            ENVKIT: [envkit, "list", "--json", *args.extra],
            COMPUTED: [envkit, "list", "--json", *args.extra],
        }
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(scratch) / "cache")}
        answers = Path(scratch) / "cache" / "envkit" / "listing"
        for argv in commands.values():  # warm the file cache, the bytecode cache, envkit's catalog and its kept answer
            timed(argv, env)

        def measure(name: str, how: Callable[[list[str], dict[str, str]], float]) -> float:
            if name == COMPUTED:  # its run starts with no answer kept
                shutil.rmtree(answers)
            return how(commands[name], env)

        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name in commands:
                samples[name].append(measure(name, timed))
        counts = {name: statistics.median(measure(name, instructions) for _ in range(3))
                  for name in (commands if args.instructions else ())}

    medians = {name: statistics.median(times) for name, times in samples.items()}
    print_ratios("command", "median ms", medians, 1000)
    if counts:
        print_ratios("instructions (callgrind)", "millions", counts, 1e-6)
    ratio = medians[ENVKIT] / medians[SETTLED]
    print(f"envkit's own cost: {(medians[ENVKIT] - medians[SETTLED]) * 1000:.1f} ms over the settled bare app")
    print(f"goal: envkit list --json at most {GOAL}x the bare typer app that settles its collector as envkit does; "
          f"{'met' if ratio <= GOAL else 'NOT met'} ({ratio:.2f}x; {medians[ENVKIT] / medians[PLAIN]:.2f}x the "
          "plain bare app)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
