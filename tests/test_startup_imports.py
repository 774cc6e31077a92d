"""What a warm `envkit list --json` imports: none of the heavy things its answer does not need (YAML, the specifier
parser, NVML, rattler, requests, the manifest schema checks), so start-up cannot silently grow back. Timing itself
is bench/list_startup.py's job; this checks the cause. A listing asked again is its kept answer
(tests/test_listing_cache.py), which needs neither the catalog nor the resolver. Also: `envkit detect` reads the
tables from the same cache, only when the machine needs them, and `create --from-lock` of a shipped build does
without the specifier parser."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import fake_nvml

from envkit.catalog.cache import cached_machine_tables
from envkit.catalog.load import load_machine_tables, load_tables

PROFILES = Path(__file__).parent / "profiles"
# Modules the warm `envkit list --json --machine PROFILE` must not import (their packages' submodules neither).
NEVER_ON_THE_WARM_PATH = ("yaml", "packaging.specifiers", "packaging.tags", "pynvml", "rattler", "requests",
                          "envkit.catalog.load", "envkit.catalog.schema", "envkit.catalog.tables",
                          "envkit.state.yamltext", "envkit.site", "envkit.probe", "envkit.maintain", "envkit.create",
                          "envkit.backends", "envkit.detect", "ctypes", "tempfile")
# Runs envkit as its console script does and writes the names of the modules it imported to argv[1]: those that
# were not already there when the interpreter started (a Python's own .pth hooks may import some, e.g. tempfile).
WRAPPER = """
import sys
before = set(sys.modules)
out, sys.argv = sys.argv[1], ["envkit", *sys.argv[2:]]
try:
    from envkit.__main__ import main
    main()
finally:
    with open(out, "w") as f:
        f.write("\\n".join(sorted(set(sys.modules) - before)))
"""


def imported_by(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[set[str], str]:
    # (Without the suite's _ENVKIT_TEST_JSON_DIR: its copy of each JSON output imports json and tempfile, which a
    # user's run does not.)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "_ENVKIT_TEST_JSON_DIR"))}
    environ.update(env or {})
    environ.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                   XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    modules = tmp_path / "modules.txt"
    result = subprocess.run([sys.executable, "-c", WRAPPER, str(modules), *args], capture_output=True, text=True,
                            env=environ, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(modules.read_text().split()), result.stdout


def heavy(modules: set[str], never: tuple[str, ...] = NEVER_ON_THE_WARM_PATH) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in never))


def test_a_warm_list_for_a_profile_imports_nothing_heavy(tmp_path: Path):
    args = ("list", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    cold, first = imported_by(tmp_path, *args)
    assert "yaml" in cold and "envkit.catalog.schema" in cold  # the first run parses (so the check below can fail)
    warm, second = imported_by(tmp_path, *args)
    assert heavy(warm) == []
    assert json.loads(second) == json.loads(first)  # and answers the same from the cache


def test_no_dataclass_is_defined_on_the_list_path(tmp_path: Path):
    """Defining a frozen dataclass costs about 0.5 ms of start-up (its methods are generated and compiled): the
    records `envkit list` loads are NamedTuples (docs/architecture.md)."""
    import dataclasses
    import importlib

    args = ("list", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    imported_by(tmp_path, *args)
    warm, _ = imported_by(tmp_path, *args, "--all")  # the catalog from the cache, the answer computed
    envkit_modules = sorted(m for m in warm if m == "envkit" or m.startswith("envkit."))
    assert "envkit.catalog.model" in envkit_modules and "envkit.pick.resolve" in envkit_modules
    defined = [f"{name}.{attribute}" for name in envkit_modules
               for attribute, value in vars(importlib.import_module(name)).items()
               if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)]
    assert defined == []


def test_a_warm_list_on_this_machine_imports_no_yaml_and_no_specifiers(tmp_path: Path):
    imported_by(tmp_path, "list", "--json", "torch")
    warm, output = imported_by(tmp_path, "list", "--json", "torch")
    assert heavy(warm, ("yaml", "packaging.specifiers", "envkit.catalog.load", "envkit.state.yamltext")) == []
    assert json.loads(output)


@pytest.mark.skipif(fake_nvml.real_library_present(), reason="this machine has an NVIDIA driver")
def test_a_warm_list_on_a_machine_without_a_driver_imports_no_ctypes(tmp_path: Path):
    """Whether the loader finds NVML's library is asked as ctypes asks, of the C module under it
    (envkit.detect.nvml): importing ctypes for that alone cost about 1.5 ms of every listing here."""
    cold, first = imported_by(tmp_path, "list", "--json", "torch")
    warm, second = imported_by(tmp_path, "list", "--json", "torch")
    assert json.loads(first)["machine"]["notes"][0] == "NVML: library libnvidia-ml.so.1 not found"
    assert second == first
    assert "_ctypes" in warm and heavy(warm, ("ctypes", "pynvml")) == []


def test_a_listing_asked_again_needs_no_catalog_and_no_resolver(tmp_path: Path, this_machine):
    """This machine as NVML tells it (its CUDA and every GPU's capability): detection looks nothing up in the
    tables, and the answer is the kept one, so neither a table nor the catalog is unpickled (pickle is not even
    imported), and nothing is resolved, rendered or encoded."""
    machine = this_machine([{"name": "NVIDIA A100-SXM4-80GB", "capability": (8, 0), "memory": 80 * 2**30}])
    cold, first = imported_by(tmp_path, "list", "--json", env=machine)
    assert "envkit.pick.resolve" in cold and "json" in cold  # the first run computes (so the check below can fail)
    warm, second = imported_by(tmp_path, "list", "--json", env=machine)
    detection = ("pynvml", "envkit.detect", "ctypes", "tempfile")  # this machine is detected, by NVML (pynvml)
    kept = ("pickle", "json", "packaging.version", "envkit.catalog.model", "envkit.pick")
    assert heavy(warm, kept + tuple(m for m in NEVER_ON_THE_WARM_PATH if m not in detection)) == []
    assert second == first and json.loads(second)["machine"]["gpus"][0]["compute_capability"] == "8.0"


def test_detect_reads_the_tables_from_the_cache_when_it_needs_them(tmp_path: Path, this_machine):
    """A driver whose CUDA NVML does not tell (0): detection takes it from the driver's version and cuda.yaml, read
    once and then from the cache. A listing for profile files never reads the tables."""
    machine = this_machine([{"name": "Tesla V100-SXM2-16GB", "capability": (7, 0), "memory": 16 * 2**30}],
                           driver="535.129.03", cuda=0)
    cold, first = imported_by(tmp_path, "detect", "--json", env=machine)
    assert "yaml" in cold
    warm, second = imported_by(tmp_path, "detect", "--json", env=machine)
    assert heavy(warm, ("yaml", "envkit.catalog.load", "envkit.catalog.schema", "envkit.state.yamltext")) == []
    assert json.loads(second) == json.loads(first)
    assert json.loads(first)["sources"]["cuda_driver"] == "driver version + envs/cuda.yaml"
    tables = tmp_path / "cache" / "envkit" / "machine-tables"
    assert len(list(tables.glob("*.pickle"))) == 1
    shutil.rmtree(tables)
    imported_by(tmp_path, "list", "--json", "--machine", str(PROFILES / "v100x8-cuda130.yaml"))
    assert not tables.exists()


def test_cached_machine_tables_equal_a_fresh_load_and_follow_edits(envs_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    first = cached_machine_tables(envs_copy, cache)
    assert cached_machine_tables(envs_copy, cache) == first == load_machine_tables(envs_copy)
    assert (first.cuda, first.gpu_names) == (load_tables(envs_copy).cuda, load_tables(envs_copy).gpu_names)
    assert len(list((cache / "machine-tables").glob("*.pickle"))) == 1
    python = envs_copy / "python.yaml"  # not a table detection reads
    python.write_text(python.read_text() + "\n# edited\n")
    cached_machine_tables(envs_copy, cache)
    assert len(list((cache / "machine-tables").glob("*.pickle"))) == 1
    gpus = envs_copy / "gpus.yaml"
    gpus.write_text(gpus.read_text() + "\n# edited\n")
    cached_machine_tables(envs_copy, cache)
    assert len(list((cache / "machine-tables").glob("*.pickle"))) == 2


def test_a_build_python_range_answers_like_its_specifier_set(envs_copy: Path):
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from envkit.catalog import load_catalog

    catalog = load_catalog(envs_copy, ["torch"])
    others = [Version(v) for v in ("2.7", "3.6", "3.9.1", "3.99", "4.0")]
    for build in catalog.manifests["torch"].builds:
        spec = SpecifierSet(str(build.python))
        assert str(spec) == str(build.python)
        for version in (*catalog.tables.python.versions, *others):
            assert build.python.contains(version) == spec.contains(version), (build.id, version)


def test_the_command_table_names_every_command_its_group_registers():
    """envkit.cli builds only the named command's group: its table must say truly which group has which command."""
    import typer

    from envkit.cli import COMMAND_GROUPS, groups_for

    for group, commands in COMMAND_GROUPS:
        app = typer.Typer()
        [module] = groups_for([commands[0]])
        assert module.__name__ == f"envkit.commands.{group}"
        module.register(app)
        names = [info.name or info.callback.__name__ for info in app.registered_commands]
        names += [info.name for info in app.registered_groups]  # a group of subcommands (envkit envs_copy ...)
        assert names == list(commands)
    every = groups_for(["--help"])
    assert [m.__name__ for m in every] == [f"envkit.commands.{group}" for group, _ in COMMAND_GROUPS]
    modules = Path(__file__).parent.parent / "envkit" / "commands"
    with_register = {p.stem for p in modules.glob("*.py") if "\ndef register(" in p.read_text()}
    assert with_register == {group for group, _ in COMMAND_GROUPS}



def test_a_listing_with_no_config_file_does_not_import_the_config_reader(tmp_path: Path):
    """Most users have no config file, and `envkit list` then never imports envkit.state.config (about 0.5 ms); one that
    $ENVKIT_CONFIG names is still read, and its absence still said."""
    args = ("list", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    imported_by(tmp_path, *args)
    warm, _ = imported_by(tmp_path, *args)
    assert "envkit.state.userdirs" in warm and "envkit.state.config" not in warm
    missing = tmp_path / "nowhere.yaml"
    environ = {**os.environ, "HOME": str(tmp_path / "home"), "ENVKIT_CONFIG": str(missing)}
    result = subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=environ,
                            timeout=60)
    assert result.returncode == 2 and f"config file {missing} (from $ENVKIT_CONFIG) does not exist" in result.stderr


def test_only_the_named_command_is_built():
    """typer builds the options of every command registered before it runs one: the command named first is the only
    one registered (`list` without `detect`, `verify` without `doctor`); `envkit --help` still has them all."""
    probe = """
import sys, envkit.cli
try:
    envkit.cli.main(sys.argv[1:])
except SystemExit:
    pass
print("registered:", *(info.name or info.callback.__name__ for info in envkit.cli.app.registered_commands))
"""
    registered = {}
    for args in (["list", "--help"], ["verify", "--help"], ["envs", "--help"], ["--help"]):
        result = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        registered[args[0]] = result.stdout.rsplit("registered:", 1)[1].split()
    assert (registered["list"], registered["verify"], registered["envs"]) == (["list"], ["verify"], ["envs"])
    assert {"detect", "list", "doctor", "verify", "remove", "create"} <= set(registered["--help"])


def test_the_collector_is_settled_before_the_command_runs():
    """Run as the process's entry (the console script), envkit collects young objects every 100,000 new ones rather
    than every 700, and envkit.cli freezes what is imported by the time the command runs (typer, the command's group)
    out of the garbage collector's reach, so that no collection walks it again and the exit does not tear it down;
    what the command makes afterwards is collected while it runs, and frozen once it has returned (the exit's last
    collection skips it). envkit.cli.main called with arguments (by a program of someone's) changes nothing of
    theirs.
    Counted from what was frozen before envkit was imported: a site hook of the interpreter's may have frozen objects
    of its own (one on the GPU machine of issue 15 does)."""
    probe = """
import gc, sys
before = gc.get_freeze_count()
import envkit.commands.inspect as inspect
frozen = []
def listing():
    frozen.append([gc.get_freeze_count() - before, list(gc.get_threshold())])
inspect.list_builds = listing
try:
    if sys.argv[1] == "entry":  # the console script's
        from envkit.__main__ import main
        sys.argv[1:] = ["list"]
        main()
    else:
        from envkit.cli import main
        main(["list"])
finally:
    print(frozen, gc.get_freeze_count() - before)
"""
    from importlib.metadata import entry_points

    [script] = entry_points(group="console_scripts", name="envkit")
    assert script.value == "envkit.__main__:main"  # what "entry" below runs, as `python -m envkit` does
    counts, thresholds = {}, {}
    for how in ("entry", "called"):
        result = subprocess.run([sys.executable, "-c", probe, how], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        when_it_ran, at_exit = result.stdout.rsplit(maxsplit=1)
        [[counts[how], thresholds[how]]] = json.loads(when_it_ran)
        if how == "entry":
            assert int(at_exit) > counts[how]  # (frozen while the command ran: nothing more; after it: its objects)
        else:
            assert int(at_exit) == counts[how]
    assert counts["entry"] > 10_000  # typer's objects and envkit's, frozen before the command ran
    assert counts["called"] == 0
    assert thresholds["called"] == list(gc.get_threshold())  # the caller's, as this process has them
    assert thresholds["entry"] == [100_000, *gc.get_threshold()[1:]]  # the older generations' as they were


def test_create_from_a_lock_of_a_known_build_imports_no_specifier_parser(tmp_path: Path):
    """The specifier parser (with packaging.tags and logging, about 10 ms) is for a lock whose build the manifests
    do not have; a lock of a shipped build does not need it."""
    import hashlib

    from envkit.lockfile.format import dump_lock
    from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    sha = hashlib.sha256(b"filelock").hexdigest()
    wheel = LockedPackage("filelock", "3.20.0", "pip", PLATFORM,
                          "https://pypi.org/packages/filelock-3.20.0-py3-none-any.whl", sha)
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(dump_lock(LockFile(packages=(wheel,), channels=(), content_hash={PLATFORM: sha},
                                       sources=("envs/torch.yaml",),
                                       custom={"envkit.manifest": "torch", "envkit.build": "torch-2.15-cpu",
                                               "envkit.python": python}, created_at="2026-11-22T18:00:00Z")))
    args = ("create", "--from-lock", str(lock), "--machine", str(PROFILES / "no-gpu.yaml"), "--dry-run", "--json")
    cold, _ = imported_by(tmp_path, *args)  # parses the manifests and the lock, and caches them
    assert "packaging.specifiers" in cold  # (so the check below can fail)
    modules, output = imported_by(tmp_path, *args)
    assert json.loads(output)["build"] == "torch-2.15-cpu"
    assert "envkit.lockfile.install" in modules and heavy(modules, ("packaging.specifiers", "packaging.tags")) == []
    assert "envkit.site" not in modules  # the site file's package (2.4 ms) is for a lock made for a --partition


def test_the_plain_http_guard_around_each_installer_step_reaches_its_server_without_the_resolver():
    """Stopping the guard wakes its server with a connection to its address: through the resolver (a host name)
    that loaded the idna codec, 1.2 ms of every installer step."""
    probe = """
import sys
from envkit.system.egress import plain_http_guard
with plain_http_guard(("http://127.0.0.1:9/",), {}) as (proxy, refused):
    pass
print("encodings.idna" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
