"""The user's packages in the same run as the build (`create --with`, `-r`), and what the record knows of them:
`envkit envs` (text and --json) shows them, `envkit export` locks them pinned to where they came from (the default
index) so that `create --from-lock` rebuilds the whole working environment, and `envkit verify` still judges the
build."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from add_helpers import installed_versions, lab
from conftest import CU126
from support.pypi_index import uv_binary


@pytest.fixture(scope="module")
def made(tmp_path_factory, torch_wheels):
    with lab(tmp_path_factory, torch_wheels, "add-record", create=False) as pair:
        yield pair


def test_create_with_installs_the_build_and_the_users_packages_in_one_run(made):
    home, server = made
    seen = len(server.requests)
    done = home.envkit("create", *CU126, "--name", "withs", "--with", "anytorch,small>=0.5,<1", "--yes")
    assert done.returncode == 0, done.stderr
    prefix = home.prefix("withs")
    versions = installed_versions(prefix)
    assert versions["torch"] == "2.13.0+cu126" and versions["anytorch"] == "1.0" and versions["small"] == "0.5"
    assert not any(p.startswith("/whl/") and "confusable" in p for p in server.requests[seen:])
    record = home.record("withs")
    assert record["additions"] == ["anytorch", "small>=0.5,<1"] and record["verify"]["ok"] is True
    assert record["added"] == {"anytorch": "1.0", "confusable": "1.0", "small": "0.5"}
    listed = home.envkit("envs")
    assert "torch-2.13-cu126 +2" in listed.stdout, listed.stdout
    [entry] = [e for e in json.loads(home.envkit("envs", "--json").stdout)["environments"] if e["name"] == "withs"]
    assert entry["additions"] == ["anytorch", "small>=0.5,<1"] and entry["held"][0] == "torch==2.13.0+cu126"


def test_create_with_a_package_that_cannot_live_with_the_build_makes_nothing(made, tmp_path):
    home, _ = made
    listed = tmp_path / "requirements.txt"
    listed.write_text("small\noldtorch\n")
    done = home.envkit("create", *CU126, "--name", "clash", "-r", str(listed), "--yes")
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("envkit: error:")]
    assert len(errors) == 1 and "oldtorch needs torch==2.7.0" in errors[0] and "nothing was made" in errors[0]
    assert not home.prefix("clash").exists() and home.record("clash") is None
    hint = shlex.split(done.stderr.split("`")[1])
    assert hint[:5] == ["envkit", "create", "torch", "--build", "torch-2.7-cu126"] and hint[-2:] == [
        "--with", "small,oldtorch"], hint


def test_export_and_lock_env_take_the_additions_and_from_lock_rebuilds_the_whole_environment(made, tmp_path):
    home, server = made
    created = home.envkit("create", *CU126, "--name", "work", "--yes")
    assert created.returncode == 0, created.stderr
    added = home.envkit("add", "work", "anytorch", "newfl")
    assert added.returncode == 0, added.stderr
    lock = tmp_path / "work.conda-lock.yml"
    exported = home.envkit("export", "work", "-o", str(lock), "--json")
    assert exported.returncode == 0, exported.stderr
    packages = {p["name"]: p for p in json.loads(exported.stdout)["packages"]}
    assert packages["anytorch"]["url"].startswith("https://pypi.org/simple/anytorch/")
    assert packages["filelock"]["version"] == "3.30.0" and "pypi.org" in packages["filelock"]["url"]
    assert packages["torch"]["url"].startswith("https://download.pytorch.org/whl/cu126/")
    assert json.loads(exported.stdout)["metadata"]["envkit.additions"] == "anytorch\nnewfl"
    rebuilt = home.envkit("create", "--from-lock", str(lock), "--name", "copy", "--machine",
                          CU126[CU126.index("--machine") + 1], "--yes")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert installed_versions(home.prefix("copy")) == installed_versions(home.prefix("work"))
    assert home.record("copy")["additions"] == ["anytorch", "newfl"]
    # envkit lock ENV: the build locked anew for the machines it was made for, with the additions as installed
    locked = tmp_path / "work-anew.conda-lock.yml"
    anew = home.envkit("lock", "work", "-o", str(locked), "--json")
    assert anew.returncode == 0, anew.stderr
    fresh = {p["name"]: p for p in json.loads(anew.stdout)["packages"]}
    assert fresh["torch"]["version"] == "2.13.0+cu126" and fresh["anytorch"]["url"].startswith("https://pypi.org/")
    assert fresh["filelock"]["version"] == "3.30.0" and [p["name"] for p in json.loads(anew.stdout)["packages"]
                                                         ].count("filelock") == 1
    assert json.loads(anew.stdout)["metadata"]["envkit.additions"] == "anytorch\nnewfl"
    again = home.envkit("create", "--from-lock", str(locked), "--name", "anew", "--machine",
                        CU126[CU126.index("--machine") + 1], "--yes")
    assert again.returncode == 0, again.stderr
    assert installed_versions(home.prefix("anew")) == installed_versions(home.prefix("work"))


def test_verify_still_judges_the_build(made):
    home, server = made
    created = home.envkit("create", *CU126, "--name", "judged", "--with", "anytorch", "--yes")
    assert created.returncode == 0, created.stderr
    checked = home.envkit("verify", "judged", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["ok"] is True and report["version"] == "2.13.0+cu126"
    # torch replaced outside envkit (uv pointed at the environment's Python, which reads no constraint): the
    # check judges the build and fails
    prefix = home.prefix("judged")
    replaced = subprocess.run([uv_binary(), "pip", "install", "--python", str(prefix / "bin" / "python"), "--no-deps",
                               "--index-url", f"{server.url}/pypi/simple", "torch==2.13.1"],
                              capture_output=True, text=True, env=home.env)
    assert replaced.returncode == 0, replaced.stderr
    again = home.envkit("verify", "judged")
    assert again.returncode == 1 and "2.13.1" in again.stdout, again.stdout


def test_create_with_on_the_pick_shows_the_packages_held_in_the_plan(made):
    home, _ = made
    profile = CU126[CU126.index("--machine") + 1]
    planned = home.envkit("create", "torch", "--python", CU126[CU126.index("--python") + 1], "--machine", profile,
                          "--with", "anytorch", "--dry-run")  # no --build: the pick, made after --with is read
    assert planned.returncode == 0, planned.stderr
    assert "Pip:         anytorch  (your packages)" in planned.stdout
    assert "held:      the build, as installed by the step before" in planned.stdout
