#!/usr/bin/env python3
"""What environments of one build cost on disk in three layouts, and how fast the second one is made.

Environments of torch-2.13-cu126 (stand-in wheels served from a local index on 127.0.0.1, carrying --megabytes of
incompressible data in many files, as a real build carries its libraries: 1200 MB by default, under a quarter of a
real CUDA PyTorch with torchvision, about 5.5 GB) are made with `envkit create` one after
another; after the 1st, 2nd and 5th, the disk used by the environments and the package caches together is counted
as `du` counts it (each inode once, so what an environment shares with the cache is counted once). Layouts:

  one-fs     $HOME, envkit's cache and the environments on one filesystem
  follow     envs_dir on another filesystem, no cache_dir: the cache follows the environments
             (<envs_dir>/.envkit-cache)
  pinned     envs_dir on another filesystem, cache_dir pinned to the home filesystem: every environment is a copy

Goals: 5 environments cost at most 1.1x one in one-fs and follow; the home filesystem grows by less than 50 MB
when envs_dir is elsewhere (follow); the second environment (warm cache) takes at most 0.2x the time of the first
(cold cache). One run, ratios printed; a report, not a test: it exits 0 whether the goals are met or not.

The second environment's time is nearly fixed (envkit's own cost and the links from the cache: about 0.2 s), while
the first one's grows with the build: the time ratio depends on the size, and a small --megabytes measures envkit's
fixed cost rather than the install. The pinned layout holds six copies: the other filesystem needs room for 7x
--megabytes (the tmpfs mounted as root is sized for it).

"Another filesystem" is /dev/shm (a tmpfs) when hard links from the temporary directory into it fail, or, as root,
a tmpfs mounted for the run; without either, follow and pinned are skipped, saying why.

    python3 bench/storage_layouts.py [--megabytes 1200] [--json]

Runs from a fresh clone with the machine's python3: it runs itself again in a venv with envkit installed from this
checkout (bench_venv.py; --venv DIR keeps that venv for the next run). Everything is made in temporary directories, removed
(and unmounted) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, help_asked, run_in_venv  # noqa: E402  (bench/: on the path now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

if not help_asked():  # (the help is printed by the machine's python3, which has no envkit)
    from envkit.storage.links import probe_links  # noqa: E402
    from envkit.storage.usage import Usage, usage_of  # noqa: E402
    from envkit.text.words import size_text  # noqa: E402
from support.pypi_index import IndexServer  # noqa: E402
from support.wheels import build_wheel  # noqa: E402

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
PROFILE = ROOT / "tests" / "profiles" / "rtx4090-cuda126.yaml"
COUNTS = (1, 2, 5)
GOAL_FIVE_OVER_ONE = 1.1
GOAL_HOME_GROWTH = 50_000_000
GOAL_SECOND_OVER_FIRST = 0.2


def build_wheels(out: Path, megabytes: int) -> list[Path]:
    files: dict[str, str | bytes] = {"torch/__init__.py": '__version__ = "2.13.0+cu126"\n'}
    for i in range(max(megabytes, 1)):  # 1 MB libraries, incompressible as compiled code nearly is
        files[f"torch/lib/lib{i:03d}.so"] = os.urandom(1_000_000)
    for i in range(300):
        files[f"torch/_ops/m{i:04d}.py"] = "".join(f"def f{j}(x):\n    return x * {j}\n\n" for j in range(40))
    return [build_wheel(out, "torch", "2.13.0+cu126", files=files),
            build_wheel(out, "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"]),
            build_wheel(out, "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"])]


@contextlib.contextmanager
def other_filesystem(temp: Path, megabytes: int) -> Iterator[tuple[Optional[Path], str]]:
    """A directory on a filesystem that hard links from ``temp`` cannot reach, and what it is; None and why not."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and probe_links(temp, shm).works is False:
        place = Path(tempfile.mkdtemp(prefix="envkit-bench-", dir=shm))
        try:
            yield place, "/dev/shm (tmpfs)"
        finally:
            shutil.rmtree(place, ignore_errors=True)
        return
    if os.geteuid() == 0:
        place = temp / "other-fs"
        place.mkdir()
        size = max(4096, 7 * megabytes + 512)  # the pinned layout's six copies, and room to spare
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m", "tmpfs", str(place)], check=True)
        try:
            yield place, "a tmpfs mounted for the run"
        finally:
            subprocess.run(["umount", "-l", str(place)], check=False)
        return
    yield None, "/dev/shm is not another filesystem here (or missing) and mounting one needs root"


class Layout:
    def __init__(self, name: str, temp: Path, server: IndexServer, envs: Path, cache_dir: Optional[Path]) -> None:
        self.name, self.home, self.envs, self.cache_dir = name, temp / name / "home", envs, cache_dir
        self.home.mkdir(parents=True)
        config = self.home / "envkit.yaml"
        lines = ["mirrors:", f'  "https://download.pytorch.org/whl": "{server.url}/whl"',
                 f'  "https://pypi.org/simple": "{server.url}/pypi/simple"', f"envs_dir: {envs}"]
        if cache_dir is not None:
            lines.append(f"cache_dir: {cache_dir}")
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        dropped = ("UV_", "PIP_", "VIRTUAL_ENV", "CONDA_", "ENVKIT_", "PYTHONHOME")
        self.environ = {k: v for k, v in os.environ.items() if not k.upper().startswith(dropped)}
        self.environ.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
                            XDG_DATA_HOME=str(self.home / ".local/share"), XDG_CACHE_HOME=str(self.home / ".cache"),
                            ENVKIT_CONFIG=str(config), NO_PROXY="127.0.0.1,localhost")

    def create(self, index: int) -> float:
        argv = [*envkit_command(), "create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON,
                "--machine", str(PROFILE), "--name", f"env{index}", "--yes", "--no-verify"]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=self.environ, timeout=600)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"storage_layouts: {self.name}: envkit create failed:\n{done.stderr}")
        return elapsed

    def caches(self) -> list[Path]:
        out = [self.home / ".cache" / "envkit", self.envs / ".envkit-cache"]
        return out + ([self.cache_dir] if self.cache_dir is not None else [])

    def used(self, made: int) -> Usage:
        """Environments and caches together, each inode once."""
        seen: set[tuple[int, int]] = set()
        return sum(usage_of([*self.caches(), *(self.envs / f"env{i}" for i in range(made))], seen), Usage())

    def home_used(self) -> Usage:
        return sum(usage_of([self.home]), Usage())


def run_layout(layout: Layout) -> dict:
    before = layout.home_used()
    times, used = [], {}
    for index in range(max(COUNTS)):
        times.append(layout.create(index))
        if index + 1 in COUNTS:
            used[index + 1] = layout.used(index + 1)
    home = layout.home_used()
    return {"layout": layout.name, "used": {n: u._asdict() for n, u in used.items()},
            "five_over_one": used[5].bytes / used[1].bytes, "files_five_over_one": used[5].files / used[1].files,
            "home_growth_bytes": home.bytes - before.bytes, "first_s": times[0], "second_s": times[1],
            "second_over_first": times[1] / times[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=1200,
                        help="data in the stand-in torch wheel (default 1200; a real CUDA build is about 5500)")
    parser.add_argument("--json", action="store_true")
    add_venv_option(parser)
    args = parser.parse_args()
    results, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="envkit-storage-bench-") as scratch:
        temp = Path(scratch)
        wheels = build_wheels(temp / "wheels", args.megabytes)
        with IndexServer() as server, other_filesystem(temp, args.megabytes) as (other, what):
            server.add_index("/whl/cu126", wheels)
            server.add_index("/pypi/simple", wheels)
            results.append(run_layout(Layout("one-fs", temp, server, temp / "one-fs" / "envs", None)))
            if other is None:
                skipped.append(f"follow, pinned: {what}")
            else:
                results.append(run_layout(Layout("follow", temp, server, other / "follow-envs", None)))
                results.append(run_layout(Layout("pinned", temp, server, other / "pinned-envs",
                                                 temp / "pinned" / "home" / "pinned-cache")))
    if args.json:
        print(json.dumps({"results": results, "skipped": skipped, "other_filesystem": what}, indent=1))
        return 0
    print(f"envkit create of torch-2.13-cu126 ({args.megabytes} MB of data), another filesystem: {what}")
    print(f"{'layout':<8} {'1 env':>16} {'2 envs':>16} {'5 envs':>16} {'5/1':>6} {'home +':>9} "
          f"{'1st s':>6} {'2nd s':>6} {'2nd/1st':>7}")
    for r in results:
        cells = [f"{size_text(r['used'][n]['bytes'])}/{r['used'][n]['files']:,}f" for n in COUNTS]
        print(f"{r['layout']:<8} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {r['five_over_one']:>5.2f}x "
              f"{size_text(r['home_growth_bytes']):>9} {r['first_s']:>6.2f} {r['second_s']:>6.2f} "
              f"{r['second_over_first']:>6.2f}x")
    for line in skipped:
        print(f"skipped: {line}")
    by = {r["layout"]: r for r in results}
    goals = [f"5 envs <= {GOAL_FIVE_OVER_ONE}x one ({name}): {by[name]['five_over_one']:.2f}x, "
             f"{'met' if by[name]['five_over_one'] <= GOAL_FIVE_OVER_ONE else 'NOT met'}"
             for name in ("one-fs", "follow") if name in by]
    if "follow" in by:
        growth = by["follow"]["home_growth_bytes"]
        goals.append(f"home grows < 50 MB with envs_dir elsewhere: {size_text(growth)}, "
                     f"{'met' if growth < GOAL_HOME_GROWTH else 'NOT met'}")
    second = by["one-fs"]["second_over_first"]
    goals.append(f"2nd env <= {GOAL_SECOND_OVER_FIRST}x the 1st (one-fs): {second:.2f}x, "
                 f"{'met' if second <= GOAL_SECOND_OVER_FIRST else 'NOT met'}")
    print("Goals: " + "; ".join(goals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
