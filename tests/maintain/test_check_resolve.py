"""`manifests check --resolve`: real uv resolutions against a real index on 127.0.0.1 (real wheels, with their
metadata), for what the index pages of a build's own packages cannot show: what an extra pulls in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from packaging.version import Version
from maintain_helpers import manifests_dir_with
from uv import find_uv_bin

from support.pypi_index import IndexServer
from support.wheels import build_wheel

from envkit.catalog import load_catalog
from envkit.errors import EnvkitError, InstallError
from envkit.maintain.check import MISSING, UNREADABLE, check_builds, claimed_pythons, select_builds
from envkit.maintain.fetch import FetchSettings
from envkit.maintain.resolvable import (Resolution, check_resolvable, finding_for, resolutions, uv_reason,
                                        uv_resolver)
from envkit.state.config import Config, Mirror

FAST = FetchSettings(timeout_s=2, retries=0, backoff_s=0.01, jobs=4)
# A jax-like manifest: jax is pure Python, but its extra pins a plugin that has wheels for some Pythons only.
JAX = """
name: jax
summary: a small jax manifest for the resolve tests
framework: jax
releases:
  - version: "0.6"
    python: ">=3.11,<3.13"
    builds:
      - variant: cu12
        cuda: "12.0"
        arch: {ptx: ["5.2"]}
        pip: {packages: ["jax[cuda12]==0.6.*"]}
      - variant: cpu
        pip: {packages: ["jax==0.6.*"]}
"""


@pytest.fixture
def manifests(envs_dir: Path, tmp_path: Path) -> Path:
    return manifests_dir_with(envs_dir, tmp_path / "manifests", "jax", JAX)


@pytest.fixture
def pypi(tmp_path: Path):
    """PyPI on 127.0.0.1: jax 0.6.2 (pure Python, an extra cuda12 that pins the plugin) and a plugin with a
    wheel for CPython 3.11 only."""
    wheels = tmp_path / "wheels"
    served = [
        build_wheel(wheels, "jax", "0.6.2", requires=['jax-cuda12-plugin==0.6.2; extra == "cuda12"'],
                    requires_python=">=3.10"),
        build_wheel(wheels, "jax-cuda12-plugin", "0.6.2", tag="cp311-cp311-manylinux_2_28_x86_64"),
    ]
    with IndexServer() as server:
        server.add_index("/pypi", served)
        yield server


def mirrored(server: IndexServer) -> Config:
    return Config(path=None, mirrors=(Mirror("https://pypi.org/simple", f"{server.url}/pypi"),))


def environ(tmp_path: Path) -> dict[str, str]:
    """uv with a cache of its own and no user configuration, as envkit runs it."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    return {**kept, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}


def resolver(config: Config, tmp_path: Path):
    return uv_resolver(Path(find_uv_bin()), config, environ(tmp_path), FAST.timeout_s, FAST.retries)


def check(manifests: Path, config: Config, tmp_path: Path, resolve: bool, progress=None):
    return check_builds(load_catalog(manifests), config, settings=FAST,
                        resolver=resolver(config, tmp_path) if resolve else None, resolve_progress=progress)


def test_the_pages_alone_miss_what_an_extra_pulls_in_and_a_resolution_finds_it(manifests, pypi, tmp_path):
    config = mirrored(pypi)
    shallow = check(manifests, config, tmp_path, resolve=False)
    assert shallow.ok and shallow.resolutions == 0  # jax itself has a wheel for 3.11 and 3.12
    seen = []
    deep = check(manifests, config, tmp_path, resolve=True, progress=lambda *call: seen.append(call))
    assert deep.resolutions == 4  # two builds, two Pythons each
    assert sorted(done for done, _, _ in seen) == [1, 2, 3, 4] and {total for _, total, _ in seen} == {4}
    assert "jax-0.6-cu12 for Python 3.12" in {label for _, _, label in seen}
    [finding] = deep.findings
    assert finding.kind == MISSING and finding.build == "jax-0.6-cu12" and finding.url == "https://pypi.org/simple"
    assert finding.message.startswith("jax-0.6-cu12: cannot be locked for Python 3.12 from https://pypi.org/simple: ")
    reason = finding.message.rsplit("https://pypi.org/simple: ", 1)[1]  # uv's, in one line
    assert "jax-cuda12-plugin" in reason and "cp312" in reason and "\n" not in reason
    assert not deep.ok and deep.to_dict()["resolutions"] == 4


def test_a_build_whose_own_packages_are_missing_is_not_resolved_again(manifests, tmp_path):
    wheels = tmp_path / "wheels"
    only_312 = build_wheel(wheels, "jax", "0.6.2", requires_python=">=3.12")  # no jax at all for Python 3.11
    with IndexServer() as server:
        server.add_index("/pypi", [only_312])
        report = check(manifests, mirrored(server), tmp_path, resolve=True)
    assert report.resolutions == 0
    assert [(f.kind, f.build) for f in report.findings] == [(MISSING, "jax-0.6-cu12"), (MISSING, "jax-0.6-cpu")]
    assert all("no jax wheel for Python 3.11" in f.message for f in report.findings)


def test_an_index_that_cannot_be_read_is_unreadable_not_missing(manifests, tmp_path):
    with IndexServer() as gone:
        config = mirrored(gone)  # a port that was just closed: nothing listens there
    resolution = resolutions(*_selected(manifests, config))[0]
    with pytest.raises(InstallError) as raised:
        resolver(config, tmp_path)(resolution)  # --retries 0 reaches uv: no waits between its tries
    finding = finding_for(resolution, raised.value)
    assert finding.kind == UNREADABLE
    assert finding.message.startswith(f"{resolution.build}: could not be resolved for Python {resolution.python} "
                                      "from https://pypi.org/simple: ")
    assert "Connection refused" in finding.message


def _selected(manifests: Path, config: Config):
    catalog = load_catalog(manifests)
    builds = select_builds(catalog)
    return builds, catalog, config, {b.id: claimed_pythons(b, catalog) for b in builds}


def test_resolutions_are_one_per_pip_build_and_python_through_the_mirrors(manifests):
    config = Config(path=None, mirrors=(Mirror("https://pypi.org/simple", "http://127.0.0.1:9/pypi"),))
    wanted = resolutions(*_selected(manifests, config))
    assert [(r.build, str(r.python)) for r in wanted] == [
        ("jax-0.6-cu12", "3.11"), ("jax-0.6-cu12", "3.12"), ("jax-0.6-cpu", "3.11"), ("jax-0.6-cpu", "3.12")]
    assert {r.index_url for r in wanted} == {"http://127.0.0.1:9/pypi"}
    assert {r.index for r in wanted} == {"https://pypi.org/simple"}
    assert wanted[0].packages == ("jax[cuda12]==0.6.*",)


def test_a_conda_builds_pip_part_is_resolved_as_envkit_lock_resolves_it(envs_dir):
    """The MXNet GPU builds: conda brings cudatoolkit, pip brings mxnet-cuXYZ and numpy (both locked by uv)."""
    catalog = load_catalog(envs_dir, ["mxnet"])
    builds = [b for b in catalog.manifests["mxnet"].builds if b.conda is not None and b.pip is not None]
    assert builds
    wanted = resolutions(builds, catalog, Config(path=None), {b.id: (Version("3.8"),) for b in builds})
    assert [r.build for r in wanted] == [b.id for b in builds]
    assert all(r.packages == b.pip.packages for r, b in zip(wanted, builds))


# What uv (0.13) and the lock say, as envkit captures them, and what each means.
NO_SOLUTION = ("error: No solution found when resolving dependencies",
               "  cause: Because jaxlib==0.6.2 has no wheels with a matching Python ABI tag (e.g., `cp314`) and",
               "         jax==0.6.2 depends on jaxlib==0.6.2, we can conclude that jax==0.6.2 cannot be used.")
NOT_ALLOWED = ("error: No solution found when resolving dependencies",
               "  cause: Because jax was not found in the package registry and you require jax==0.6.*, we can "
               "conclude that your requirements are unsatisfiable.", "",
               "hint: An index URL (https://pypi.example/simple) returned a 403 Forbidden error. This could "
               "indicate lack of valid authentication credentials, or the package may not exist on this index.")
REFUSED = ("error: Failed to fetch: `http://127.0.0.1:9/pypi/jax/`", "  cause: error sending request",
           "  cause: tcp connect error", "  cause: Connection refused (os error 111)")
NO_CACHE = ("error: Failed to initialize cache at `/nowhere/uv`", "  cause: Permission denied (os error 13)")


@pytest.mark.parametrize("tail,message,kind,words", [
    (NO_SOLUTION, "resolving jax[cuda12]==0.6.* failed (exit code 1)", MISSING, "jaxlib==0.6.2 has no wheels"),
    ((), "jaxlib 0.6.2 has no wheel for CPython 3.14 on x86_64-manylinux_2_28", MISSING, "has no wheel"),
    (NOT_ALLOWED, "resolving jax==0.6.* failed (exit code 1)", UNREADABLE, "returned a 403 Forbidden error"),
    (REFUSED, "resolving jax==0.6.* failed (exit code 2)", UNREADABLE, "Connection refused"),
    (NO_CACHE, "resolving jax==0.6.* failed (exit code 2)", UNREADABLE, "Failed to initialize cache"),
    (("Resolved 3 packages",), "resolving jax==0.6.* failed (timed out)", UNREADABLE, "Resolved 3 packages"),
])
def test_only_uvs_word_that_there_is_no_answer_is_missing(tail, message, kind, words):
    resolution = Resolution("jax-0.6-cpu", Version("3.14"), ("jax==0.6.*",), "http://127.0.0.1:9/pypi",
                            "https://pypi.org/simple")
    finding = finding_for(resolution, InstallError(message, tail=tail))
    assert finding.kind == kind and words in finding.message and "\n" not in finding.message


def test_uvs_reason_is_one_line_without_its_drawing_and_hints():
    said = ("Because jaxlib==0.6.2 has no wheels with a matching Python ABI tag and jax==0.6.2 depends on "
            "jaxlib==0.6.2, we can conclude that jax==0.6.2 cannot be used.")
    captured = ("error: No solution found when resolving dependencies",  # uv's words when its stderr is a pipe
                "  cause: Because jaxlib==0.6.2 has no wheels with a matching Python ABI tag and jax==0.6.2 depends",
                "         on jaxlib==0.6.2, we can conclude that jax==0.6.2 cannot be used.",
                "", "hint: You require CPython 3.14 (`cp314`)")
    at_a_terminal = ("  × No solution found when resolving dependencies:",
                     "  ╰─▶ Because jaxlib==0.6.2 has no wheels with a matching Python ABI tag and jax==0.6.2",
                     "      depends on jaxlib==0.6.2, we can conclude that jax==0.6.2 cannot be used.",
                     "      hint: You require CPython 3.14 (`cp314`)")
    assert uv_reason(captured) == uv_reason(at_a_terminal) == said
    assert uv_reason(captured, hints=True) == said + " hint: You require CPython 3.14 (`cp314`)"
    assert len(uv_reason(["x" * 1000])) == 400


def test_ctrl_c_stops_the_uv_runs_at_once_and_starts_no_other():
    """Each resolution's uv runs in a session of its own (Ctrl-C at the terminal reaches envkit only): envkit stops
    them itself. Here each "resolution" is a real child that would run for a minute."""
    marker = f"envkit-test-{uuid.uuid4().hex}"  # names this test's children, and only them
    script = f"""
import os, signal, sys, threading, time
from packaging.version import Version
from envkit.maintain.resolvable import Resolution, check_resolvable
from envkit.system.process import run_captured
wanted = [Resolution(f"b{{n}}", Version("3.12"), ("x",), "http://127.0.0.1:9/", "https://pypi.org/simple")
          for n in range(8)]
started = time.monotonic()
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    check_resolvable(wanted, lambda r: run_captured(["sh", "-c", "sleep 60 # {marker}"], os.environ, 120), jobs=2)
except KeyboardInterrupt:
    print(round(time.monotonic() - started, 1))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 10  # not the minute the children would have taken
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", left.stdout  # and none of them is left running


def test_the_command_resolves_on_request_and_exits_1_on_a_miss(manifests, pypi, tmp_path):
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    config.write_text(f'mirrors:\n  "https://pypi.org/simple": "{pypi.url}/pypi"\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "UV_", "PIP_"))},
           "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_DATA_HOME": str(home / "data"), "ENVKIT_CONFIG": str(config)}
    argv = [sys.executable, "-m", "envkit", "manifests", "check", "--manifests", str(manifests), "--retries", "0"]
    shallow = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert shallow.returncode == 0, shallow.stderr
    deep = subprocess.run([*argv, "--resolve", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert deep.returncode == 1, deep.stderr
    report = json.loads(deep.stdout)
    assert report["resolutions"] == 4 and [m["build"] for m in report["missing"]] == ["jax-0.6-cu12"]
    text = subprocess.run([*argv, "--resolve"], capture_output=True, text=True, env=env, timeout=120)
    assert "jax-0.6-cu12: cannot be locked for Python 3.12" in text.stdout
    assert "4 uv resolutions): 1 problem." in text.stdout


def test_a_uv_that_cannot_run_ends_the_check_with_one_error(manifests, tmp_path):
    config = Config(path=None)
    broken = uv_resolver(tmp_path / "no-uv-here", config, environ(tmp_path), 1, 0)
    with pytest.raises(EnvkitError) as raised:
        check_resolvable(resolutions(*_selected(manifests, config)), broken, jobs=2)
    assert not isinstance(raised.value, InstallError)  # not a finding for every build: one error for the run
    assert raised.value.message.startswith(f"uv ({tmp_path / 'no-uv-here'}) could not resolve ")


def test_without_uv_the_command_says_so_before_reading_anything(manifests, tmp_path):
    # A uv package whose binary is gone (a broken install), found first on the path.
    broken = tmp_path / "broken-uv" / "uv"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("def find_uv_bin():\n    raise FileNotFoundError('uv')\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "UV_", "PIP_"))},
           "PYTHONPATH": os.pathsep.join(filter(None, [str(broken.parent), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-m", "envkit", "manifests", "check", "--manifests", str(manifests),
                           "--resolve", "--retries", "0"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("envkit: error: uv, which is installed with envkit, is missing")
    assert "Traceback" not in done.stderr and "reading index pages" not in done.stderr
