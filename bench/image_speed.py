#!/usr/bin/env python3
"""Running from an image against running from the unpacked environment, and packing against mksquashfs alone.

A stand-in environment: a venv whose `torch` package imports --modules small modules (the real torch imports some
two thousand files), beside --size-mb MB of stand-in libraries (random bytes, half of each compressible, as shared
libraries are). It is recorded as envkit makes environments, then packed with `envkit pack --relocate` so that its
image mounts elsewhere. Three measures, each as a ratio taken in this one run:

1. `python -c 'import torch'` from the image (mounted by `envkit run --no-fit-check`, which runs the timing loop
   inside it) against the unpacked environment on local disk, warm (one discarded round first), the median of
   --runs each, interleaved. Goal: within 1.2x.
2. The file-class system calls (strace -f -e trace=%file) of one such import that name a path on the filesystem
   holding the environment (its directory, or the image file beside it), from the image and unpacked. From the
   image, only envkit checking the image and squashfuse opening it reach it; the rest are served by the mount.
3. `envkit pack` of the stand-in against `mksquashfs` of the same tree alone (the same compression), the median of
   --rounds each, interleaved. Goal: within 1.5x.

Needs mksquashfs, squashfuse and fusermount3 (squashfs-tools, squashfuse, fuse3) and strace; root or a user
allowed to open /dev/fuse.

    python3 bench/image_speed.py [--runs 15] [--modules 2000] [--size-mb 1200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
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

IMPORT_GOAL, PACK_GOAL = 1.2, 1.5
TIMER = ("import subprocess, sys, time\n"
         "times = []\n"
         "for _ in range(int(sys.argv[1])):\n"
         "    start = time.perf_counter()\n"
         "    subprocess.run([sys.executable, '-c', 'import torch'], check=True)\n"
         "    times.append(time.perf_counter() - start)\n"
         "print(' '.join(f'{t:.6f}' for t in times))\n")


def stand_in(root: Path, modules: int, size_mb: int, environ: dict[str, str]) -> Path:
    """The venv at root/store/envs/bench, recorded as `bench` in the user directories of ``environ``."""
    from datetime import datetime, timezone

    from envkit.state import records
    from envkit.state.userdirs import user_dirs

    prefix = root / "store" / "envs" / "bench"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    [site] = prefix.glob("lib/python*/site-packages")
    package = site / "torch"
    package.mkdir()
    for index in range(modules):
        (package / f"m{index:05d}.py").write_text(f"VALUE = {index}\n\ndef f(x):\n    return x + VALUE\n")
    (package / "__init__.py").write_text("".join(f"from . import m{index:05d}\n" for index in range(modules)))
    libs = package / "lib"
    libs.mkdir()
    chunk = 64 << 20
    for index in range(max(1, size_mb // 64)):
        with open(libs / f"libstand_in_{index}.so", "wb") as out:
            out.write(os.urandom(chunk // 2) + bytes(chunk // 2))
    record = records.Record(name="bench", prefix=str(prefix), kind="venv", backend="venv", manifest="torch",
                            build="torch-bench", python=f"{sys.version_info[0]}.{sys.version_info[1]}",
                            created=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine={},
                            on_target=True)
    records.save(record, user_dirs(environ).records)
    return prefix


def median_pair(a: list[float], b: list[float]) -> tuple[float, float]:
    return statistics.median(a), statistics.median(b)


def import_times(runs: int, prefix: Path, image: Path, environ: dict[str, str]) -> tuple[list[float], list[float]]:
    """(from the image, unpacked): each round runs the timing loop once in each, warm, one discarded round first."""
    timer = image.parent / "timer.py"
    timer.write_text(TIMER)
    from_image, unpacked = [], []
    for round_ in range(4):
        done = subprocess.run([*envkit_command(), "run", "--no-fit-check", str(image), "--", "python", str(timer),
                               str(runs)], env=environ, capture_output=True, text=True, check=True)
        here = subprocess.run([str(prefix / "bin" / "python"), str(timer), str(runs)], env=environ,
                              capture_output=True, text=True, check=True)
        if round_:  # the first warms the page cache and squashfuse's
            from_image += [float(t) for t in done.stdout.split()]
            unpacked += [float(t) for t in here.stdout.split()]
    return from_image, unpacked


def file_calls(argv: list[str], holding: Path, environ: dict[str, str], log: Path) -> int:
    """The file-class system calls of ``argv`` and what it starts that name a path under ``holding``."""
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=%file", "-o", str(log), *argv], env=environ, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return sum(1 for line in log.read_text(errors="replace").splitlines() if f'"{holding}' in line)


def pack_times(rounds: int, prefix: Path, out: Path, environ: dict[str, str]) -> tuple[list[float], list[float]]:
    from envkit.travel.pack import COMPRESSION

    envkit, alone = [], []
    for _ in range(rounds):
        for what, argv in (("envkit", [*envkit_command(), "pack", "bench", "-o", str(out), "--force"]),
                           ("alone", ["mksquashfs", str(prefix), str(out), "-noappend", *COMPRESSION, "-quiet",
                                      "-no-progress"])):
            out.unlink(missing_ok=True)
            start = time.perf_counter()
            subprocess.run(argv, env=environ, check=True, stdout=subprocess.DEVNULL)
            (envkit if what == "envkit" else alone).append(time.perf_counter() - start)
    return envkit, alone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="imports timed per round (3 rounds)")
    parser.add_argument("--modules", type=int, default=2000, help="modules `import torch` imports")
    parser.add_argument("--size-mb", type=int, default=1200, help="MB of stand-in libraries")
    parser.add_argument("--rounds", type=int, default=3, help="packs of each kind")
    add_venv_option(parser)
    args = parser.parse_args()
    missing = [p for p in ("mksquashfs", "squashfuse", "fusermount3", "strace") if shutil.which(p) is None]
    if missing:
        print(f"image_speed.py: missing {', '.join(missing)} (squashfs-tools, squashfuse, fuse3, strace)",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="envkit-bench-image-") as scratch:
        root = Path(scratch)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
        environ.update(HOME=str(root), XDG_DATA_HOME=str(root / "data"), XDG_CACHE_HOME=str(root / "cache"),
                       XDG_CONFIG_HOME=str(root / "config"))
        prefix = stand_in(root, args.modules, args.size_mb, environ)
        size = sum(p.stat().st_size for p in prefix.rglob("*") if p.is_file())
        image = root / "store" / "bench.sqfs"
        subprocess.run([*envkit_command(), "pack", "bench", "-o", str(image), "--relocate",
                        str(root / "mnt" / "bench")], env=environ, check=True, stdout=subprocess.DEVNULL)
        from_image, unpacked = import_times(args.runs, prefix, image, environ)
        holding = root / "store"
        calls_image = file_calls([*envkit_command(), "run", "--no-fit-check", str(image), "--", "python", "-c",
                                  "import torch"], holding, environ, root / "strace-image")
        calls_unpacked = file_calls([str(prefix / "bin" / "python"), "-c", "import torch"], holding, environ,
                                    root / "strace-unpacked")
        packed, alone = pack_times(args.rounds, prefix, root / "timed.sqfs", environ)
    i, u = median_pair(from_image, unpacked)
    p, a = median_pair(packed, alone)
    print(f"stand-in: {args.modules} modules, {size / 1e9:.2f} GB")
    print(f"import torch, warm: from the image {i * 1000:.1f} ms, unpacked {u * 1000:.1f} ms: {i / u:.2f}x "
          f"(goal <= {IMPORT_GOAL}x; median of {len(from_image)} each)")
    print(f"file-class system calls naming the environment's filesystem ({holding.name}/) during one import: "
          f"from the image {calls_image} (envkit and squashfuse opening the image file), unpacked {calls_unpacked}")
    print(f"envkit pack {p:.1f} s, mksquashfs alone {a:.1f} s: {p / a:.2f}x (goal <= {PACK_GOAL}x; median of "
          f"{args.rounds} each)")
    print(json.dumps({"import_ratio": round(i / u, 3), "calls_image": calls_image, "calls_unpacked": calls_unpacked,
                      "pack_ratio": round(p / a, 3)}))
    return 0 if i / u <= IMPORT_GOAL and p / a <= PACK_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
