"""PEP 751 lock files: `envkit create --from-lock pylock.toml` installs what applies to the target (markers, default
dependency groups, the project's own directory left out with a note), `envkit export --format pylock` writes one
that pip, uv and PDM read and that envkit installs again; the real pylock.toml files of public projects select as
their markers say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from conftest import PYTHON, Home
from envkit.lockfile.format import LockFileError
from envkit.lockfile.model import PLATFORM, PYTHON as PYTHON_FACT, LockedPackage, LockFile
from envkit.lockfile.pep751 import dump_pylock, parse_pylock, read_pylock
from support.pypi_index import IndexServer
from support.wheels import build_wheel, sha256_of

REAL = Path(__file__).resolve().parent / "data" / "pylock"  # real files of public projects: README.md there


def real(name: str):
    return parse_pylock((REAL / name).read_text(encoding="utf-8"), name)


def names(read) -> set[str]:
    return {p.name for p in read.lock.packages}


def test_uv_exports_project_is_left_out_and_its_windows_only_packages_are_not_selected():
    pylock = real("uv-export-comfy-cli.pylock.toml")
    read = read_pylock(pylock, "comfy", "3.12")
    assert read.left_out[0].startswith("comfy-cli (the directory .: a project, not a locked file")
    marked = {str(p.name): str(p.marker) for p in pylock.packages if p.marker is not None}
    windows = {name for name, marker in marked.items() if "win32" in marker and "!=" not in marker}
    assert windows and not windows & names(read)  # e.g. colorama on Windows only
    assert all(p.url.endswith(".whl") and len(p.sha256) == 64 for p in read.lock.packages)


def test_pdm_locks_default_group_is_installed_and_its_other_groups_are_not():
    pylock = real("pdm-ldlite.pylock.toml")
    assert list(pylock.default_groups) == ["default"]
    grouped = {str(p.name) for p in pylock.packages if p.marker is not None and "dependency_groups" in str(p.marker)
               and '"default"' not in str(p.marker)}
    read = read_pylock(pylock, "pdm", "3.12")
    assert grouped and not grouped & names(read)


def test_the_spec_example_requires_its_python_and_a_wheel_for_the_target():
    pylock = real("pep751-example-packaging.pylock.toml")
    with pytest.raises(LockFileError, match=r"requires Python ==3\.12\.\*, not 3\.11"):
        read_pylock(pylock, "spec", "3.11")
    assert names(read_pylock(pylock, "spec", "3.12"))


def test_what_envkit_writes_reads_back_the_same():
    lock = LockFile(packages=(
        LockedPackage("Alpha_Pkg", "1.0", "pip", PLATFORM, "http://127.0.0.1:1/simple/alpha/alpha_pkg-1.0-py3-none-any.whl",
                      "a" * 64),
        LockedPackage("beta", "2.0+cu126", "pip", PLATFORM, "https://download.pytorch.org/whl/cu126/beta-2.0%2Bcu126-py3-none-any.whl",
                      "b" * 64)), custom={PYTHON_FACT: "3.12", "envkit.manifest": "torch", "envkit.build": "x"})
    text = dump_pylock(lock, "pylock.toml")
    read = read_pylock(parse_pylock(text, "again"), "again", "3.12")
    assert {(p.name, p.version, p.url, p.sha256) for p in read.lock.packages} == {
        ("alpha-pkg", "1.0", lock.packages[0].url, "a" * 64), ("beta", "2.0+cu126", lock.packages[1].url, "b" * 64)}
    assert read.lock.fact("envkit.manifest") == "torch" and read.lock.fact(PYTHON_FACT) == "3.12"
    with pytest.raises(LockFileError, match="requires Python ==3.12.*"):
        read_pylock(parse_pylock(text, "again"), "again", "3.11")
    conda = LockFile(packages=(LockedPackage("python", "3.12.1", "conda", PLATFORM, "https://x/python.conda", "c" * 64,
                                             md5="d" * 32),))
    with pytest.raises(LockFileError, match="has 1 conda packages: a pylock.toml holds pip packages only"):
        dump_pylock(conda, "pylock.toml")


@pytest.mark.parametrize("text, message", [
    ("lock-version = [", "is not valid TOML"),
    ('lock-version = "2.0"\ncreated-by = "x"\npackages = []\n', "pylock version 2.0 is not supported"),
    ('lock-version = "1.0"\npackages = [{version = "1"}]\n', "is not a valid pylock.toml"),
])
def test_a_broken_pylock_is_one_error(text, message):
    with pytest.raises(LockFileError, match=message):
        parse_pylock(text, "bad")


@pytest.fixture
def index(pypi_server: IndexServer, tmp_path: Path) -> dict:
    wheels = {name: build_wheel(tmp_path / "wheels", name, "1.0", files={f"{name}/__init__.py": f"NAME = {name!r}\n"})
              for name in ("alpha", "winonly", "linter")}
    base = pypi_server.add_index("/simple", wheels.values())
    return {name: (f"{base}{name}/{path.name}", sha256_of(path)) for name, path in wheels.items()}


def pylock_text(index: dict) -> str:
    def wheel(name: str) -> str:
        url, sha = index[name]
        return f'wheels = [{{ url = "{url}", hashes = {{ sha256 = "{sha}" }} }}]'

    return f'''lock-version = "1.0"
created-by = "a test"
requires-python = ">=3.10"
dependency-groups = ["default", "lint"]
default-groups = ["default"]

[[packages]]
name = "alpha"
version = "1.0"
marker = '"default" in dependency_groups'
{wheel("alpha")}

[[packages]]
name = "winonly"
version = "1.0"
marker = "sys_platform == 'win32'"
{wheel("winonly")}

[[packages]]
name = "linter"
version = "1.0"
marker = '"lint" in dependency_groups'
{wheel("linter")}

[[packages]]
name = "myproj"
directory = {{ path = ".", editable = true }}
'''


def installed(home: Home, name: str) -> set[str]:
    code = "import importlib.metadata as m, json; print(json.dumps(sorted(d.metadata['Name'] for d in m.distributions())))"
    return set(json.loads(home.in_env(name, code)))


def test_create_from_a_pylock_installs_what_applies_and_export_writes_it_back(home: Home, index: dict):
    lock = home.root / "pylock.toml"
    lock.write_text(pylock_text(index), encoding="utf-8")
    made = home.envkit("create", "--from-lock", str(lock), "--name", "p1", "--python", PYTHON, "--yes")
    assert made.returncode == 0, made.stderr + made.stdout
    assert "left out myproj (the directory .: a project" in made.stderr
    assert {"alpha"} <= installed(home, "p1") and not {"winonly", "linter", "myproj"} & installed(home, "p1")
    assert home.in_env("p1", "import alpha; print(alpha.NAME)") == "alpha"
    exported = home.root / "out" / "pylock.p1.toml"
    exported.parent.mkdir()
    done = home.envkit("export", "p1", "--format", "pylock", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    back = Pylock.from_dict(__import__("tomllib").loads(exported.read_text()))  # packaging's own reader
    assert [(str(p.name), str(p.version), p.wheels[0].url) for p in back.packages] == [
        ("alpha", "1.0", index["alpha"][0])]
    assert str(back.requires_python) == f"=={PYTHON}.*" and back.tool["envkit"]["python"] == PYTHON
    again = home.envkit("create", "--from-lock", str(exported), "--yes")  # pylock.p1.toml installs as p1: taken
    assert again.returncode == 1 and "environment 'p1' already exists" in again.stderr, again.stderr
    elsewhere = home.envkit("create", "--from-lock", str(exported), "--name", "p2", "--yes")
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert installed(home, "p2") == installed(home, "p1")


def test_pylock_options_that_do_not_fit_are_refused(home: Home, index: dict):
    lock = home.root / "pylock.toml"
    lock.write_text(pylock_text(index), encoding="utf-8")
    old = home.envkit("create", "--from-lock", str(lock), "--name", "p3", "--python", "3.9", "--yes")
    assert old.returncode == 2 and "requires Python >=3.10, not 3.9" in old.stderr and "Traceback" not in old.stderr
    assert not home.prefix("p3").exists()
    made = home.envkit("create", "--from-lock", str(lock), "--name", "p4", "--python", PYTHON, "--yes")
    assert made.returncode == 0, made.stderr
    bad_name = home.envkit("export", "p4", "--format", "pylock", "-o", str(home.root / "p4.toml"))
    assert bad_name.returncode == 2 and "PEP 751 names lock files pylock.toml or pylock.NAME.toml" in bad_name.stderr
    unknown = home.envkit("export", "p4", "--format", "wheel-list")
    assert unknown.returncode == 2 and "'wheel-list' is not one of conda-lock, pylock" in unknown.stderr


@pytest.mark.parametrize("name", ["pylock.toml", "pylock.dev.toml", "pylock.a.b.toml", "pylock.toml.bak",
                                  "mylock.toml", "pylock..toml", "pylock.-x.toml"])
def test_a_pylock_is_named_as_packaging_says(name):
    from packaging.pylock import is_valid_pylock_path

    from envkit.lockfile.pep751 import is_pylock

    assert is_pylock(Path(name)) is is_valid_pylock_path(Path(name))
