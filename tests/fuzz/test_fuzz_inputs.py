"""Property-based tests for every format envkit reads: whatever the input, a result or envkit's own error (one line
and exit 2 at the command line), never another exception (an internal error, a traceback); and what envkit writes,
it reads back the same. The inputs start from real files (tests/profiles, the recorded outputs of tests/detect and
tests/slurm, the shipped envs/, a lock as envkit writes it) and are then mutated: values replaced by anything JSON or YAML can hold (huge numbers,
5000-digit versions, NUL bytes and control characters, nesting), text cut, spliced and garbled."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

from hypothesis import given, strategies as st

from envkit.errors import EnvkitError

REPO = Path(__file__).resolve().parents[2]
PROFILES = REPO / "tests" / "profiles"
DETECT_DATA = REPO / "tests" / "detect" / "data"
SLURM_DATA = REPO / "tests" / "slurm" / "data"

# Scalars a hostile or broken file holds: long digit strings (a 5000-digit version), NUL bytes, escapes, floats.
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.just("9" * 5000), st.just("1." + "0" * 5000), st.just("x\0y.whl"), st.just("\x1b]0;t\x07"),
    st.from_regex(r"[0-9]{1,30}(\.[0-9]{1,30}){0,3}", fullmatch=True),
    st.sampled_from(["", " ", "-", "--help", "..", "/", "null", "true", "8.0", "12.4", "550.54.14", "sm_90"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=10**300, max_value=10**310),
                    st.floats(allow_nan=True), NASTY_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(NASTY_TEXT, inner, max_size=4)),
                      max_leaves=12)


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += _paths(value, prefix + (index,))
    return out


def mutated(draw: Callable, base: Any) -> Any:
    """``base`` with one to three of its values (at any depth, the whole included) replaced, or keys dropped."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        path = draw(st.sampled_from(paths))
        value = draw(VALUES)
        if not path:
            data = value
            continue
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()) and len(parent) > 1:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return data


def garbled(draw: Callable, text: str) -> str:
    """``text`` cut, spliced or with characters replaced."""
    kind = draw(st.sampled_from(["cut", "splice", "replace"]))
    at = draw(st.integers(0, len(text)))
    if kind == "cut":
        return text[:at]
    insert = draw(st.one_of(NASTY_TEXT, st.sampled_from(["\n", ":", "- ", "&a ", "*a", "{", "[", "'", '"', "|"])))
    end = at if kind == "splice" else min(len(text), at + draw(st.integers(0, 20)))
    return text[:at] + insert + text[end:]


def holds(call: Callable[[], Any], *allowed: type) -> Any:
    """``call()``'s result, or None when it raised envkit's error (or one of ``allowed``, a parser's documented
    error); anything else fails the test with the exception."""
    try:
        return call()
    except (EnvkitError, *allowed):
        return None


# --- machine profiles ------------------------------------------------------------------------------------------

def _profile_texts() -> list[str]:
    return [p.read_text() for p in sorted(PROFILES.glob("*.yaml"))[:8]]


PROFILE_TEXTS = _profile_texts()


@given(st.data())
def test_a_profile_is_read_or_refused(data):
    from envkit.machines.profile import profile_from_dict
    from envkit.state.yamltext import parse_yaml

    text = data.draw(st.sampled_from(PROFILE_TEXTS))
    base = parse_yaml(text)
    holds(lambda: profile_from_dict(mutated(data.draw, base), "fuzz.yaml"))
    holds(lambda: profile_from_dict(parse_yaml(garbled(data.draw, text)), "fuzz.yaml"), ValueError)


@given(st.data())
def test_a_profile_envkit_writes_reads_back_the_same(data):
    from envkit.machines.profile import profile_from_dict
    from envkit.state.yamltext import parse_yaml

    profile = profile_from_dict(parse_yaml(data.draw(st.sampled_from(PROFILE_TEXTS))), "p.yaml")
    name = data.draw(st.text(min_size=1, max_size=30).filter(lambda s: s.strip() == s and s.isprintable()))
    if profile.gpus:
        profile = profile._replace(gpus=(profile.gpus[0]._replace(name=name), *profile.gpus[1:]))
    again = profile_from_dict(json.loads(json.dumps(profile.to_dict())), "p.yaml")
    assert again.to_dict() == profile.to_dict() or _only_sources_differ(again.to_dict(), profile.to_dict())


def _only_sources_differ(a: dict, b: dict) -> bool:
    strip = lambda d: {k: v for k, v in d.items() if k not in ("sources", "gpus")}  # noqa: E731
    return strip(a) == strip(b) and [g["name"] for g in a.get("gpus", [])] == [g["name"] for g in b.get("gpus", [])]


# --- the config file and the site file -------------------------------------------------------------------------

CONFIG = {"mirrors": {"https://pypi.org/simple": "http://127.0.0.1:8080/pypi/simple",
                      "https://download.pytorch.org/whl": "http://alice:pw@cache.lab/whl"},
          "envs_dir": "/scratch/envs", "site": "site.yaml", "manifests": "/shared/manifests"}


@given(st.data())
def test_a_config_is_read_or_refused(data):
    from envkit.state.config import config_from_data, parse_config

    holds(lambda: config_from_data(mutated(data.draw, CONFIG), Path("/fuzz/config.yaml")))
    text = json.dumps(CONFIG, indent=1)
    holds(lambda: parse_config(garbled(data.draw, text), Path("/fuzz/config.yaml")))


def _site_data() -> dict:
    profile = json.loads(json.dumps(__import__("envkit.machines.profile", fromlist=["x"]).read_profile(
        PROFILES / "h100-cuda128.yaml").to_dict()))
    return {"version": 1, "partitions": {"gpu": {"nodes": [{"node": "n1", "count": 2, "profile": profile}]},
                                         "cpu": {"unreachable": [{"node": "c1", "reason": "no answer"}]}}}


@given(st.data())
def test_a_site_file_is_read_or_refused_and_written_back_the_same(data):
    from envkit.site.read import site_from_dict
    from envkit.site.write import site_to_dict

    base = _site_data()
    holds(lambda: site_from_dict(mutated(data.draw, base), Path("/fuzz/site.yaml")))
    site = site_from_dict(base, Path("/fuzz/site.yaml"))
    assert site_to_dict(site_from_dict(site_to_dict(site), Path("/fuzz/site.yaml"))) == site_to_dict(site)


# --- locks: conda-lock.yml and pylock.toml ---------------------------------------------------------------------

def _lock_texts() -> list[str]:
    """Locks as envkit writes them: tests/lockfile's sample (a conda and a pip part), and its pip part alone."""
    import dataclasses
    import sys

    sys.path.insert(0, str(REPO / "tests" / "lockfile"))
    from test_format import sample

    from envkit.lockfile.format import dump_lock

    lock = sample()
    pip_only = dataclasses.replace(lock, packages=tuple(p for p in lock.packages if p.manager == "pip"))
    return [dump_lock(lock), dump_lock(pip_only)]


LOCK_TEXTS = _lock_texts()
LOCK_TEXT = LOCK_TEXTS[0]
LOCK_DATA = __import__("envkit.state.yamltext", fromlist=["x"]).parse_yaml(LOCK_TEXT)


@given(st.data())
def test_a_lock_is_read_or_refused(data):
    from envkit.lockfile.format import parse_lock

    holds(lambda: parse_lock(json.dumps(mutated(data.draw, LOCK_DATA)), "fuzz.yml"))
    holds(lambda: parse_lock(garbled(data.draw, LOCK_TEXT), "fuzz.yml"))


def test_a_lock_envkit_writes_reads_back_the_same():
    from envkit.lockfile.format import dump_lock, parse_lock

    for text in LOCK_TEXTS:
        lock = parse_lock(text, "fuzz.yml")
        again = parse_lock(dump_lock(lock), "again.yml")
        def same(packages):  # (the writer sorts packages and each one's dependencies: the same lock)
            from dataclasses import replace

            return sorted((replace(p, dependencies=tuple(sorted(p.dependencies))) for p in packages),
                          key=lambda p: (p.platform, p.manager, p.name, p.url))

        assert same(again.packages) == same(lock.packages)
        assert again.platforms == lock.platforms and again.channels == lock.channels


PYLOCK = """lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.12"

[[packages]]
name = "filelock"
version = "3.20.0"
index = "https://pypi.org/simple"
wheels = [
    { url = "https://files.example.org/filelock-3.20.0-py3-none-any.whl", size = 16054, hashes = { sha256 = "%s" } },
]

[[packages]]
name = "torch"
version = "2.13.0+cu126"
index = "https://download.pytorch.org/whl/cu126"
wheels = [
    { url = "https://download.pytorch.org/whl/cu126/torch-2.13.0%%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl", hashes = { sha256 = "%s" } },
]
""" % ("a" * 64, "b" * 64)


def _pylock_texts() -> list[str]:
    return [PYLOCK]


@given(st.data())
def test_a_pylock_is_read_or_refused(data):
    from envkit.lockfile.pylock import pylock_packages
    from envkit.state.config import Config

    text = data.draw(st.sampled_from(_pylock_texts()))
    holds(lambda: pylock_packages(garbled(data.draw, text), "3.12", Config(path=None)))


def test_the_pylock_seed_is_read():
    from envkit.lockfile.pylock import pylock_packages
    from envkit.state.config import Config

    assert [p.name for p in pylock_packages(PYLOCK, "3.12", Config(path=None))] == ["filelock", "torch"]


# --- what other programs print: nvidia-smi, /proc, sinfo, the probe's JSON ----------------------------------------

def _texts(folder: Path, pattern: str) -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(folder.glob(pattern))]


@given(st.data())
def test_nvidia_smi_and_proc_text_is_parsed_or_refused(data):
    from envkit.detect.proc import parse_driver_version, parse_gpu_model
    from envkit.detect.smi import parse_header, parse_query

    query = garbled(data.draw, data.draw(st.sampled_from(_texts(DETECT_DATA / "smi", "q-*.txt"))))
    holds(lambda: parse_query(query), ValueError)
    header = garbled(data.draw, data.draw(st.sampled_from(_texts(DETECT_DATA / "smi", "header-*.txt"))))
    holds(lambda: parse_header(header), ValueError)
    version = garbled(data.draw, data.draw(st.sampled_from(_texts(DETECT_DATA / "proc", "version-*.txt"))))
    holds(lambda: parse_driver_version(version))
    information = garbled(data.draw, data.draw(st.sampled_from(_texts(DETECT_DATA / "proc", "information-*.txt"))))
    holds(lambda: parse_gpu_model(information))


@given(st.data())
def test_sinfo_text_is_parsed_or_refused(data):
    from envkit.slurm.sinfo import distinct_configurations, partitions, parse_sinfo

    text = garbled(data.draw, (SLURM_DATA / "sinfo-cluster.txt").read_text())
    rows = holds(lambda: parse_sinfo(text), ValueError)
    if rows is not None:
        for partition in partitions(rows).values():
            distinct_configurations(partition)
        for row in rows:
            assert not any(ord(c) < 0x20 and c != "\t" for c in row.partition + row.node)  # (a tab moves nothing)


@given(st.data())
def test_the_probe_s_json_is_parsed_whatever_it_says(data):
    from envkit.probe.result import parse_output

    probe_data = REPO / "tests" / "probe" / "data"
    base = json.loads(data.draw(st.sampled_from(sorted(p.read_text() for p in probe_data.glob("*.json")))))
    stdout = json.dumps(mutated(data.draw, base))
    result = parse_output("python3", 0, 1.0, garbled(data.draw, stdout) if data.draw(st.booleans()) else stdout, "")
    assert result is not None


# --- manifests ---------------------------------------------------------------------------------------------------

@given(st.data())
def test_a_manifest_is_read_or_refused(data):
    from envkit.catalog.schema import parse_manifest
    from envkit.state.yamltext import parse_yaml

    tables = _tables()
    name = data.draw(st.sampled_from(["torch", "tensorflow", "jax", "mxnet"]))
    base = parse_yaml((REPO / "envs" / f"{name}.yaml").read_text())
    holds(lambda: parse_manifest(mutated(data.draw, base), f"{name}.yaml", name, tables))
    errors: list = []
    holds(lambda: parse_manifest(mutated(data.draw, base), f"{name}.yaml", name, tables, errors))
    assert all(isinstance(error, EnvkitError) for error in errors)


_TABLES: list = []


def _tables():
    if not _TABLES:
        from envkit.catalog.load import load_tables

        _TABLES.append(load_tables(REPO / "envs"))
    return _TABLES[0]
