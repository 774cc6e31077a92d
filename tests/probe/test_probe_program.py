"""The probe program's modules stay runnable by an old foreign Python, and envkit assembles them into one zipapp that
runs in isolated mode from any directory, built once per version and content."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import tempfile
import zipfile

import pytest
from probe_helpers import A100, PROFILES, base_environ, envkit
from test_probe_script import _interpreter

from envkit import __version__
from envkit.errors import EnvkitError
from envkit.probe import zipapp
from envkit.probe.runner import ProbeOptions, run_probe
from envkit.probe.zipapp import KEEP, PACKAGE, SOURCE, cached_program, probe_program

MODULES = sorted(SOURCE.glob("*.py"))
# What the modules may import at their top: modules of the standard library that every Python since 3.6 has.
STDLIB_36 = {"contextlib", "io", "json", "math", "os", "platform", "re", "subprocess", "sys", "tempfile",
             "threading", "time", "traceback", "warnings"}


def test_the_program_is_split_by_framework():
    names = {path.stem for path in MODULES}
    assert {"main", "torch_probe", "tensorflow_probe", "jax_probe", "mxnet_probe"} <= names
    assert all(len(path.read_text().splitlines()) <= 450 for path in MODULES)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_every_module_keeps_to_python_3_6(path):
    """The parser's 3.6 grammar rejects walrus, positional-only parameters and f"{x=}"; the rest is checked here."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 6))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            assert "annotations" not in {alias.name for alias in node.names}, f"{path.name}:{node.lineno}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top not in ("envkit", "dataclasses"), f"{path.name}:{node.lineno} imports {name}"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            # list[int] and friends fail at run time before 3.9 wherever they are evaluated
            assert node.value.id not in ("list", "dict", "tuple", "set", "type"), f"{path.name}:{node.lineno}"
    for node in tree.body:  # what runs at import: the standard library of 3.6, or a module of the program itself
        if isinstance(node, ast.Import):
            assert {alias.name for alias in node.names} <= STDLIB_36, f"{path.name}:{node.lineno}"
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1 or node.module in STDLIB_36, f"{path.name}:{node.lineno}"


def test_every_module_compiles_on_a_real_python_3_6(tmp_path):
    interpreter = _interpreter("3.6")
    if interpreter is None:
        pytest.skip("no Python 3.6 on this machine")
    code = "import sys\nfor path in sys.argv[1:]:\n    compile(open(path, encoding='utf-8').read(), path, 'exec')\n"
    done = subprocess.run([interpreter, "-I", "-c", code, *map(str, MODULES)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_zipapp_runs_in_isolated_mode_from_an_unrelated_directory(fake_env, tmp_path):
    env = fake_env({"torch": {"gpus": [A100]}})
    program = cached_program(tmp_path / "cache")
    elsewhere = tmp_path / "elsewhere"
    # Decoys: the current directory and PYTHONPATH would shadow the probe's own modules and the standard library
    # if the probe ran without -I.
    for decoy in (elsewhere, tmp_path / "pythonpath"):
        (decoy / PACKAGE).mkdir(parents=True)
        (decoy / PACKAGE / "__init__.py").write_text("raise SystemExit('decoy package imported')\n")
        (decoy / "json.py").write_text("raise SystemExit('decoy json imported')\n")
    done = subprocess.run([str(env.python), "-I", str(program), "torch"], capture_output=True, text=True, timeout=60,
                          cwd=elsewhere, env=base_environ(PYTHONPATH=str(tmp_path / "pythonpath")))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["framework"] == "torch" and report["probe_error"] is None
    assert report["devices"][0]["name"] == A100["name"] and report["devices"][0]["checks"][0]["ok"] is True


def test_the_archive_holds_the_package_and_its_main(tmp_path):
    program = cached_program(tmp_path)
    assert program.parent == tmp_path / "probe" and program.name.startswith(f"probe-{__version__}-")
    names = set(zipfile.ZipFile(program).namelist())
    assert names == {"__main__.py"} | {f"{PACKAGE}/{path.name}" for path in MODULES}


def test_the_second_run_builds_nothing(tmp_path, monkeypatch):
    first = cached_program(tmp_path)
    before = first.stat()

    def no_build(*args):
        raise AssertionError("the archive was built again")

    monkeypatch.setattr(zipapp, "write_atomic", no_build)
    second = cached_program(tmp_path)
    assert second == first and second.stat().st_mtime_ns == before.st_mtime_ns
    assert second.stat().st_ino == before.st_ino


def test_an_edited_module_gives_a_new_archive(tmp_path):
    source = tmp_path / "program"
    source.mkdir()
    for path in MODULES:
        (source / path.name).write_bytes(path.read_bytes())
    first = cached_program(tmp_path / "cache", source)
    with open(source / "main.py", "a", encoding="utf-8") as out:
        out.write("\n# edited\n")
    second = cached_program(tmp_path / "cache", source)
    assert second != first and second.is_file() and first.is_file()
    assert zipfile.ZipFile(second).read(f"{PACKAGE}/main.py").endswith(b"# edited\n")


def test_the_same_modules_give_the_same_bytes(tmp_path):
    one, two = cached_program(tmp_path / "one"), cached_program(tmp_path / "two")
    assert one.name == two.name and one.read_bytes() == two.read_bytes()


def test_older_archives_are_pruned(tmp_path):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    for number in range(KEEP + 3):
        old = probe_dir / f"probe-0.0.{number}-0000.pyz"
        old.write_bytes(b"old")
        os.utime(old, ns=(number * 10**9, number * 10**9))
    current = cached_program(tmp_path)
    left = sorted(path.name for path in probe_dir.glob("probe-*.pyz"))
    assert len(left) == KEEP and current.name in left
    assert "probe-0.0.0-0000.pyz" not in left and f"probe-0.0.{KEEP + 2}-0000.pyz" in left


def test_an_unwritable_cache_runs_a_temporary_archive_then_deletes_it(tmp_path, fake_env):
    not_a_directory = tmp_path / "cache"
    not_a_directory.write_text("a file where the cache directory should be")
    with probe_program(not_a_directory) as program:
        assert program.is_file() and not program.is_relative_to(not_a_directory)
        assert "__main__.py" in zipfile.ZipFile(program).namelist()
    assert not program.exists() and not program.parent.exists()
    env = fake_env({"torch": {"gpus": [A100]}})
    result = run_probe(env.python, ProbeOptions(framework="torch", timeout=60), base_environ(),
                       cache_dir=not_a_directory)
    assert result.reported and result.devices[0].ok


def test_no_place_to_write_the_archive_is_one_clear_error(tmp_path, monkeypatch):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_directory))
    with pytest.raises(EnvkitError, match="cannot assemble the probe program") as raised:
        with probe_program(not_a_directory):
            pass
    assert raised.value.exit_code == 1 and "XDG_CACHE_HOME" in (raised.value.hint or "")


def test_the_runner_builds_into_the_cache_it_is_given(tmp_path, fake_env):
    env = fake_env({"torch": {"gpus": [A100]}})
    result = run_probe(env.python, ProbeOptions(framework="torch", timeout=60), base_environ(),
                       cache_dir=tmp_path / "cache")
    assert result.reported and result.devices[0].ok
    [built] = (tmp_path / "cache" / "probe").glob("probe-*.pyz")
    assert built.name.startswith(f"probe-{__version__}-")



# --- as `envkit doctor` runs it ----------------------------------------------------------------------------------

def test_doctor_builds_the_archive_once(fake_env, tmp_path):
    env = fake_env({"torch": {"gpus": [A100]}})
    cache = tmp_path / "xdg-cache"
    args = ("doctor", "--json", "--python", str(env.python), "--machine", str(PROFILES / "h100-cuda128.yaml"))
    first = envkit(*args, env={"XDG_CACHE_HOME": str(cache)})
    assert first.returncode in (0, 1) and json.loads(first.stdout)["devices"], first.stderr
    [built] = (cache / "envkit" / "probe").glob("*.pyz")
    before = built.stat()
    second = envkit(*args, env={"XDG_CACHE_HOME": str(cache)})
    assert second.returncode == first.returncode
    assert json.loads(second.stdout)["devices"] == json.loads(first.stdout)["devices"]
    assert list((cache / "envkit" / "probe").glob("*.pyz")) == [built]
    assert (built.stat().st_mtime_ns, built.stat().st_ino) == (before.st_mtime_ns, before.st_ino)


def test_doctor_with_an_unwritable_cache_still_checks_and_leaves_nothing(fake_env, tmp_path, this_machine):
    env = fake_env({"torch": {"gpus": [A100]}})
    not_a_directory = tmp_path / "cache-file"
    not_a_directory.write_text("")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = envkit("doctor", "--json", "--python", str(env.python),
                    env={"XDG_CACHE_HOME": str(not_a_directory), "TMPDIR": str(scratch), **this_machine([A100])})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["devices"][0]["name"] == A100["name"]
    assert list(scratch.iterdir()) == []
