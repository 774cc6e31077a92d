#!/usr/bin/env python3
"""How fast `envkit create` makes a pure-pip environment, next to raw uv and to the manual venv + pip route.

The same environment, served from a local index on 127.0.0.1, is created three ways. Two workloads:

  real-torch  what `envkit create torch` installs on a CPU machine: the real PyTorch 2.13 CPU wheel this machine
              keeps on disk (pip's find-links) and its real dependencies, torch-2.13-cpu of envs/torch.yaml
              (torchvision and torchaudio are tiny stand-ins: no CPU wheels of them are at hand). Skipped where the
              wheel is not on the machine.
  synthetic   torch-2.13-cu126 as tiny hand-built wheels of a few hundred small modules each: envkit's fixed
              start-up cost against an installer with almost nothing to do.

  envkit  python -m envkit create torch --build BUILD ... --yes --no-verify  (as a user runs it: the shipped
          manifests, a config file mapping the upstream indexes to the local one; the venv backend, uv)
  uv      uv venv --python PY DIR && uv pip install --python DIR/bin/python --index-url INDEX PACKAGES
          (the same uv, the same uv cache as envkit's)
  manual  python -m venv DIR && DIR/bin/python -m pip install --index-url INDEX PACKAGES  (pip's own cache)

Warm caches: one round of each route runs first and is not counted (uv's cache, pip's cache, and Python's bytecode
caches, kept under the temporary directory by PYTHONPYCACHEPREFIX): a second environment on a machine. Cold caches:
uv's and pip's package caches are emptied before each run: the first environment on a machine. The machines are
noisy, so the routes run interleaved (the order rotates each round), and each round's envkit/uv is taken (their
median is judged; round_ratios says why).
Every route makes its environments in envkit's environments directory, and each run starts with the last one's
environment removed and written out (sync), untimed (Bench.__init__ and _settle say why). Goals: envkit within
1.2x of raw uv (for the real torch wheel: on the tiny synthetic wheels uv has almost nothing to do, and envkit's
fixed cost is the ratio), the manual route at least 5x slower than envkit. This is a report, not a test: it exits
0 whether the goals are met or not (1 only if a route fails to create the environment).

    python3 bench/create_speed.py [--workload both|real-torch|synthetic] [--caches both|warm|cold] [--rounds 5]
                                  [--modules 300] [--json] [--venv DIR]

Started with the machine's python3, it runs itself again in a venv of its own with envkit installed from this
checkout (bench_venv.py), and runs envkit from there as a user does.

Nothing touches the network beyond 127.0.0.1; everything is made in one temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_venv import add_venv_option, envkit_command, run_in_venv  # noqa: E402  (bench/ is on the path only now)

run_in_venv()  # the machine's python3 has no envkit: the rest runs in a venv that has it (bench_venv.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# (tests/ is on the path only now)
from support.local_wheels import (  # noqa: E402
    find_torch_cpu_wheel,
    local_distribution_files,
    torch_cpu_dependencies,
)
from support.pypi_index import IndexServer  # noqa: E402
from support.wheels import build_wheel  # noqa: E402

GOAL_ENVKIT_OVER_UV = 1.2  # at most
GOAL_MANUAL_OVER_ENVKIT = 5.0  # at least
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
PROFILE = ROOT / "tests" / "profiles" / "rtx4090-cuda126.yaml"
PACKAGES = ("torch==2.13.*", "torchvision==0.28.*", "torchaudio==2.11.*")  # both workloads' builds pin these
ROUTES = ("envkit", "uv", "manual")
MODULES_PER_WHEEL = 300  # default of --modules

# What the tiny torch needs, with plausible versions (and what those need in turn).
DEPENDENCIES = {
    "filelock": ("3.16.1", ()),
    "typing-extensions": ("4.12.2", ()),
    "mpmath": ("1.3.0", ()),
    "sympy": ("1.13.3", ("mpmath>=1.1.0,<1.4",)),
    "networkx": ("3.4.2", ()),
    "MarkupSafe": ("3.0.2", ()),
    "jinja2": ("3.1.4", ("MarkupSafe>=2.0",)),
}
TORCH_REQUIRES = ("filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3", "networkx", "jinja2")


# --------------------------------------------------------------------------------------------------------------
# The index


def _modules(package: str, count: int) -> dict[str, str]:
    """`count` modules of about 2 KB each under `package`/, plus its __init__.py."""
    files = {f"{package}/__init__.py": f'"""{package} (a benchmark stand-in)."""\n__version__ = "0"\n'}
    for i in range(count):
        body = "".join(f"def f{i}_{j}(x, y=0):\n    return x * {j} + y - {i}\n\n\n" for j in range(40))
        files[f"{package}/_ops/m{i:04d}.py"] = f'"""Module {i} of {package}."""\n\n\n{body}'
    files[f"{package}/_ops/__init__.py"] = ""
    return files


def _module_name(project: str) -> str:
    return project.lower().replace("-", "_")


def build_index(wheels: Path, modules: int = MODULES_PER_WHEEL) -> tuple[list[Path], list[Path]]:
    """(every wheel of the cu126 index, the plain dependencies also served as the PyPI mirror)."""
    deps = [build_wheel(wheels, name, version, requires=requires, files={f"{_module_name(name)}/__init__.py": ""})
            for name, (version, requires) in DEPENDENCIES.items()]
    frameworks = [
        build_wheel(wheels, "torch", "2.13.0+cu126", requires=TORCH_REQUIRES, requires_python=">=3.10",
                    files=_modules("torch", modules)),
        build_wheel(wheels, "torchvision", "0.28.0+cu126", requires=("torch==2.13.0",), requires_python=">=3.10",
                    files=_modules("torchvision", modules)),
        build_wheel(wheels, "torchaudio", "2.11.0+cu126", requires=("torch==2.13.0",), requires_python=">=3.10",
                    files=_modules("torchaudio", modules)),
    ]
    return frameworks + deps, deps


class Workload:
    """One environment to create: the build envkit installs, and the index (at /whl/<variant>) that serves it."""

    def __init__(self, name: str, build: str, variant: str, wheels: list[Path], pypi: list[Path],
                 describe: str, check) -> None:
        self.name, self.build, self.variant = name, build, variant
        self.wheels, self.pypi, self.describe, self.check = wheels, pypi, describe, check


def synthetic_workload(wheels: Path, modules: int) -> Workload:
    all_wheels, deps = build_index(wheels, modules)
    return Workload("synthetic", "torch-2.13-cu126", "cu126", all_wheels, deps,
                    f"tiny torch, torchvision, torchaudio ({modules} modules each) and {len(DEPENDENCIES)} "
                    "dependencies", lambda prefix: check_installed(prefix, modules))


def real_torch_workload(wheels: Path):
    """The real PyTorch CPU wheel and its real dependencies from this machine's disk, or None where it has none."""
    torch = find_torch_cpu_wheel()
    if torch is None:
        return None
    deps = local_distribution_files(torch_cpu_dependencies(torch))
    stand_ins = [build_wheel(wheels, "torchvision", "0.28.0+cpu", requires=("torch==2.13.0",)),
                 build_wheel(wheels, "torchaudio", "2.11.0+cpu", requires=("torch==2.13.0",))]
    size = torch.stat().st_size / 2**20
    return Workload("real-torch", "torch-2.13-cpu", "cpu", [torch, *deps, *stand_ins], deps,
                    f"the real {torch.name} ({size:.0f} MiB) and its {len(deps)} real dependencies",
                    check_real_torch)


def check_real_torch(prefix: Path) -> None:
    site = prefix / "lib" / f"python{PYTHON}" / "site-packages"
    if not (site / "torch" / "lib").is_dir() or not list(site.glob("torch-2.13.0+cpu.dist-info")):
        raise RuntimeError(f"{prefix}: the real torch 2.13.0+cpu is not installed")


# --------------------------------------------------------------------------------------------------------------
# The routes


class Bench:
    def __init__(self, temp: Path, server: IndexServer, workload: Workload) -> None:
        self.temp = temp
        self.workload = workload
        self.index = server.index_url(f"/whl/{workload.variant}").rstrip("/")
        home, config_home, data_home, cache_home = (temp / d for d in ("home", "config", "data", "cache"))
        for directory in (home, config_home, data_home, cache_home):
            directory.mkdir()
        config = temp / "config.yaml"
        config.write_text(
            "mirrors:\n"
            f'  "https://download.pytorch.org/whl": "{server.url}/whl"\n'
            f'  "https://pypi.org/simple": "{server.url}/pypi/simple"\n',
            encoding="utf-8",
        )
        # The user's environment without anything that configures an installer or points elsewhere.
        dropped = ("UV_", "PIP_", "VIRTUAL_ENV", "CONDA_", "ENVKIT_", "PYTHONPATH", "PYTHONHOME",
                   "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        base = {k: v for k, v in os.environ.items()
                if not k.upper().startswith(dropped) and not k.lower().endswith("_proxy")}
        base.update(HOME=str(home), XDG_CONFIG_HOME=str(config_home), XDG_DATA_HOME=str(data_home),
                    XDG_CACHE_HOME=str(cache_home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        # Bytecode caches as an installed envkit (and pip) have them, written here rather than into the checkout:
        # with PYTHONDONTWRITEBYTECODE (set on some machines) every run would compile envkit from source.
        base["PYTHONPYCACHEPREFIX"] = str(temp / "pycache")
        self.envkit_env = {**base, "ENVKIT_CONFIG": str(config)}
        self.uv_env = {**base, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(cache_home / "envkit" / "uv"),
                       "UV_PYTHON_DOWNLOADS": "never"}
        self.pip_env = {**base, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                        "PIP_CACHE_DIR": str(temp / "pip-cache"), "PIP_NO_INPUT": "1"}
        self.count = 0
        # Every route makes its environments in envs, the directory envkit puts its own in. Another directory of
        # the same temporary one can sit in another part of the disk (ext4 spreads directories over its block
        # groups): uv made the same torch environment 3.6x slower in envkit's directory than in the one its route
        # used, and each mkdir took 10x as long. The place, not the route, was timed.
        self.python, self.uv, self.envs = self._envkit_plan()
        self.envs.mkdir(parents=True, exist_ok=True)

    def _envkit_argv(self, name: str, *extra: str) -> list[str]:
        return [*envkit_command(), "create", "torch", "--build", self.workload.build, "--python", PYTHON,
                "--machine", str(PROFILE), "--name", name, "--yes", "--no-verify", *extra]

    def _envkit_plan(self) -> tuple[str, str, Path]:
        """The interpreter and the uv envkit's plan uses (the other routes use the same), and where envs go."""
        out = _run(self._envkit_argv("bench-plan", "--dry-run", "--json"), self.envkit_env)
        plan = json.loads(out)
        if plan["backend"] != "venv":
            raise SystemExit(f"create_speed: envkit planned the {plan['backend']} backend, not venv")
        venv = shlex.split(plan["commands"][0])
        if Path(venv[0]).name != "uv" or venv[1] != "venv":
            raise SystemExit(f"create_speed: envkit does not make the venv with uv: {plan['commands'][0]}")
        return venv[venv.index("--python") + 1], venv[0], Path(plan["prefix"]).parent

    def run(self, route: str, cold: bool = False) -> tuple[float, Path]:
        """Create the environment by `route`; (seconds, its prefix). ``cold``: with empty package caches (uv's and
        pip's; emptied before the clock starts), as the first environment on a machine is made."""
        self.count += 1
        if cold:
            _rmtree(Path(self.uv_env["UV_CACHE_DIR"]))
            _rmtree(Path(self.pip_env["PIP_CACHE_DIR"]))
        if route == "envkit":
            name = f"bench-{self.count}"
            commands = [(self._envkit_argv(name), self.envkit_env)]
            prefix = self.envs / name
        elif route == "uv":
            prefix = self.envs / f"bench-uv-{self.count}"
            commands = [
                ([self.uv, "venv", "--python", self.python, str(prefix)], self.uv_env),
                ([self.uv, "pip", "install", "--python", str(prefix / "bin" / "python"), "--index-url", self.index,
                  *PACKAGES], self.uv_env),
            ]
        else:
            prefix = self.envs / f"bench-manual-{self.count}"
            commands = [
                ([self.python, "-m", "venv", str(prefix)], self.pip_env),
                ([str(prefix / "bin" / "python"), "-m", "pip", "install", "--index-url", self.index, *PACKAGES],
                 self.pip_env),
            ]
        start = time.perf_counter()
        for argv, env in commands:
            _run(argv, env)
        return time.perf_counter() - start, prefix


def _run(argv: list[str], env: dict[str, str]) -> str:
    finished = subprocess.run(argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if finished.returncode != 0:
        tail = "\n".join((finished.stdout + finished.stderr).splitlines()[-20:])
        raise RuntimeError(f"{shlex.join(argv)} failed (exit code {finished.returncode}):\n{tail}")
    return finished.stdout


def check_installed(prefix: Path, modules: int) -> None:
    """The environment really holds the three packages at the index's versions, with all their modules."""
    site = prefix / "lib" / f"python{PYTHON}" / "site-packages"
    for dist, package in (("torch-2.13.0+cu126", "torch"), ("torchvision-0.28.0+cu126", "torchvision"),
                          ("torchaudio-2.11.0+cu126", "torchaudio")):
        if not (site / f"{dist}.dist-info").is_dir():
            raise RuntimeError(f"{prefix}: {dist} is not installed")
        found = len(list((site / package / "_ops").glob("m*.py")))
        if found != modules:
            raise RuntimeError(f"{prefix}: {package} has {found} modules, not {modules}")
    for name in DEPENDENCIES:
        if not list(site.glob(f"{_module_name(name)}-*.dist-info")):
            raise RuntimeError(f"{prefix}: the dependency {name} is not installed")


def _rmtree(path: Path) -> None:
    def writable(function, failed, _excinfo):  # a read-only file in a cache: make it writable and retry
        os.chmod(failed, stat.S_IRWXU)
        function(failed)

    if path.exists():
        shutil.rmtree(path, onerror=writable)


# --------------------------------------------------------------------------------------------------------------
# The report


def round_ratios(samples: dict[str, list[float]], over: str, under: str) -> dict[str, float]:
    """Each round's ``over`` / ``under`` (the two runs of a round are seconds apart): their median, the ratio that is
    judged, and their middle half (``low``, ``high``). These machines drift: a route's time moved from 0.75 s to
    1.2 s and back within one bench, and a ratio of the medians, which pairs runs of different minutes, ranged from
    1.06x to 1.45x over six runs of lock_create.py while the middle half of the rounds' own ratios stayed within
    1.11x to 1.24x. ``of_medians`` is shown beside it."""
    ratios = [a / b for a, b in zip(samples[over], samples[under])]
    low, _, high = (statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1
                    else (ratios[0], None, ratios[0]))
    return {"median": statistics.median(ratios), "low": low, "high": high,
            "of_medians": statistics.median(samples[over]) / statistics.median(samples[under])}


def report(samples: dict[str, list[float]], bench: Bench, rounds: int, cold: bool) -> dict:
    medians = {route: statistics.median(times) for route, times in samples.items()}
    envkit_over_uv = round_ratios(samples, "envkit", "uv")
    manual_over_envkit = round_ratios(samples, "manual", "envkit")
    return {
        "workload": bench.workload.name,
        "build": bench.workload.build,
        "packages": bench.workload.describe,
        "rounds": rounds,
        "python_version": PYTHON,
        "python": bench.python,
        "uv": bench.uv,
        "index": bench.index,
        "caches": "cold (uv's and pip's package caches emptied before each run)" if cold
                  else "warm (one uncounted round of each route first)",
        "median_s": medians,
        "samples_s": samples,
        "ratios": {"envkit/uv": envkit_over_uv, "manual/envkit": manual_over_envkit},
        # envkit's own time (start-up, imports, planning): the rounds' median difference
        "envkit_minus_uv_s": statistics.median(a - b for a, b in zip(samples["envkit"], samples["uv"])),
        "goals": {"envkit/uv": f"<= {GOAL_ENVKIT_OVER_UV}", "manual/envkit": f">= {GOAL_MANUAL_OVER_ENVKIT}"},
        "pass": {"envkit/uv": envkit_over_uv["median"] <= GOAL_ENVKIT_OVER_UV,
                 "manual/envkit": manual_over_envkit["median"] >= GOAL_MANUAL_OVER_ENVKIT},
    }


def ratio_text(ratio: dict[str, float]) -> str:
    """The rounds' median ratio, the middle half of them, and the ratio of the medians."""
    return (f"{ratio['median']:6.2f}x a round (middle half {ratio['low']:.2f}-{ratio['high']:.2f}x; "
            f"medians' ratio {ratio['of_medians']:.2f}x)")


def print_table(result: dict) -> None:
    labels = {
        "envkit": "envkit create (venv backend, uv)",
        "uv": "uv venv + uv pip install",
        "manual": "python -m venv + pip install",
    }
    print(f"== {result['workload']}, {result['caches'].split()[0]} caches: {result['build']}: {result['packages']}")
    print(f"Python {PYTHON} ({result['python']}); {result['rounds']} rounds, interleaved, order rotating; "
          f"index {result['index']}")
    print(f"caches {result['caches']}")
    print(f"{'route':34} {'median s':>9} {'min s':>7} {'max s':>7}")
    for route in ROUTES:
        times = result["samples_s"][route]
        print(f"{labels[route]:34} {result['median_s'][route]:9.3f} {min(times):7.3f} {max(times):7.3f}")
    for key, goal in (("envkit/uv", f"goal <= {GOAL_ENVKIT_OVER_UV}"),
                      ("manual/envkit", f"goal >= {GOAL_MANUAL_OVER_ENVKIT:.0f}")):
        verdict = "PASS" if result["pass"][key] else "MISS"
        print(f"{key:14} {ratio_text(result['ratios'][key])}  {goal}: {verdict}")
    print(f"envkit's own time (envkit - uv, the rounds' median): {result['envkit_minus_uv_s'] * 1000:+.0f} ms "
          "(Python start-up, imports, planning; the same uv does the work)")
    print()


def sample_routes(routes: Sequence[str], rounds: int, check: Callable[[Path], None],
                  run: Callable[[str], tuple[float, Path]],
                  timed: Optional[Callable[[str], tuple[float, Path]]] = None) -> dict[str, list[float]]:
    """Each route run once, not counted (it warms every cache; its environment is checked), then ``rounds`` counted
    rounds of every route (``timed``, else ``run``), in an order that shifts each round. Each environment is removed
    after its run, untimed, so that every run starts from the same state (`_settle`)."""
    for route in routes:
        _, prefix = run(route)
        check(prefix)
        _settle(prefix)
    samples: dict[str, list[float]] = {route: [] for route in routes}
    for number in range(rounds):
        shift = number % len(routes)
        for route in [*routes[shift:], *routes[:shift]]:
            seconds, prefix = (timed or run)(route)
            samples[route].append(seconds)
            _settle(prefix)
    return samples


def _settle(prefix: Path) -> None:
    """Remove an environment a run made and write everything out (sync), untimed: the next run starts with nothing
    of the last one's pending, as on a user's machine, where the kernel writes dirty data out within 30 s, long
    before the next create. Without the sync, runs a second apart met the last run's 16,000 files and their deletion
    still in memory: the times drifted (uv from 0.34 s to 0.62 s over 8 rounds) and each run paid for its
    neighbour's writes."""
    _rmtree(prefix)
    os.sync()


def measure(temp: Path, workload: Workload, rounds: int, cold: bool) -> dict:
    with IndexServer() as server:
        server.add_index(f"/whl/{workload.variant}", workload.wheels)
        server.add_index("/pypi/simple", workload.pypi)
        temp.mkdir()
        bench = Bench(temp, server, workload)
        samples = sample_routes(ROUTES, rounds, workload.check, bench.run, lambda route: bench.run(route, cold))
    return report(samples, bench, rounds, cold)


def run_on_a_workload(script: str, workload: str, measure: Callable[[Path, Workload], dict],
                      show: Callable[[dict], None], as_json: bool) -> int:
    """What add_speed.py and personal_env.py do once their options are read: the ``workload`` made ("real-torch",
    where this machine keeps the wheel, else "synthetic", said on stderr), measured in a temporary directory removed
    at the end, and shown (or printed as JSON); 1 when a step fails."""
    temp = Path(tempfile.mkdtemp(prefix=f"envkit-bench-{script}-"))
    try:
        chosen = real_torch_workload(temp / "wheels") if workload == "real-torch" else None
        if chosen is None:
            if workload == "real-torch":
                print(f"{script}: no PyTorch CPU wheel on this machine: the synthetic workload instead",
                      file=sys.stderr)
            chosen = synthetic_workload(temp / "wheels", MODULES_PER_WHEEL)
        try:
            result = measure(temp / "run", chosen)
        except (RuntimeError, subprocess.SubprocessError) as error:
            print(f"{script}: {error}", file=sys.stderr)
            return 1
        print(json.dumps(result, indent=2)) if as_json else show(result)
        return 0
    finally:
        _rmtree(temp)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("both", "real-torch", "synthetic"), default="both",
                        help="what to install (default both; real-torch is skipped where its wheel is missing)")
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds of each route (default 5)")
    parser.add_argument("--modules", type=int, default=MODULES_PER_WHEEL,
                        help=f"~2 KB modules in each of the synthetic framework wheels (default {MODULES_PER_WHEEL})")
    parser.add_argument("--caches", choices=("both", "warm", "cold"), default="both",
                        help="warm: package caches filled by a first round (a second environment); cold: emptied "
                        "before every run (the first environment on a machine); default both")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_venv_option(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.modules < 1 or args.modules > 5000:
        parser.error("--modules must be between 1 and 5000")

    temp = Path(tempfile.mkdtemp(prefix="envkit-bench-create-"))
    results = []
    try:
        workloads = []
        if args.workload in ("both", "real-torch"):
            real = real_torch_workload(temp / "wheels-real")
            if real is None:
                print("create_speed: no PyTorch CPU wheel on this machine: real-torch skipped", file=sys.stderr)
            else:
                workloads.append(real)
        if args.workload in ("both", "synthetic"):
            workloads.append(synthetic_workload(temp / "wheels-synthetic", args.modules))
        states = {"both": (False, True), "warm": (False,), "cold": (True,)}[args.caches]
        for workload in workloads:
            for cold in states:
                name = f"{workload.name}-{'cold' if cold else 'warm'}"
                results.append(measure(temp / name, workload, args.rounds, cold))
    except RuntimeError as error:
        print(f"create_speed: {error}", file=sys.stderr)
        return 1
    finally:
        _rmtree(temp)

    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for result in results:
            print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
