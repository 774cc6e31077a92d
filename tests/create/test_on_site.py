"""A personal environment on top of the site's shared one (`envkit create --on site:torch --name mywork`), by one
user here (the admin who published it, as any user would): small, sees the site's packages, holds its build,
takes additions, runs and verifies; the site's environment is not touched; after a new version is published it keeps
running on its own, and `envkit envs` says so; once that version is removed it says so and refuses to run. The same
between two real Unix users: tests/create/test_shared_users.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from add_helpers import add_wheels, fingerprint, serve
from conftest import CU126, make_home
from support.pypi_index import IndexServer
from support.unix_users import public_directory


@pytest.fixture(scope="module")
def site(tmp_path_factory, torch_wheels):
    root = tmp_path_factory.mktemp("on-site")
    home = make_home(root / "home")
    with public_directory() as public, IndexServer() as server:  # (pytest's directories: nobody else could run it)
        shared = public / "shared"
        shared.mkdir(mode=0o755)
        os.chmod(shared, 0o755)
        home.env.update(ENVKIT_SHARED=str(shared), MODULEPATH=str(shared / "modulefiles"))
        serve(server, torch_wheels, add_wheels(tmp_path_factory.mktemp("add-wheels")), home)
        done = home.envkit("create", *CU126, "--shared", "--yes")
        assert done.returncode == 0, done.stderr
        yield home, shared


def _du(path: Path) -> int:
    seen, total = set(), 0
    for directory, _, files in os.walk(path):
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            if info.st_ino not in seen:
                seen.add(info.st_ino)
                total += info.st_blocks * 512
    return total


def test_a_personal_environment_stands_on_the_site_and_holds_its_build(site):
    home, shared = site
    published = json.loads((shared / "records" / "torch.json").read_text())
    site_prefix = Path(published["prefix"])
    before = fingerprint(site_prefix)
    done = home.envkit("create", "--on", "site:torch", "--name", "mywork", "--with", "anytorch", "--yes")
    assert done.returncode == 0, done.stderr
    prefix = home.prefix("mywork")
    assert _du(prefix) < 5 << 20  # a few hundred KB, not the site's environment again
    assert home.in_env("mywork", "import torch, anytorch; print(torch.__file__.startswith("
                       f"{str(site_prefix)!r}), anytorch.VERSION)") == "True 2.13.0+cu126"
    record = home.record("mywork")
    assert record["on"]["name"] == "site:torch" and record["on"]["prefix"] == str(site_prefix)
    assert record["held"][0] == "torch==2.13.0+cu126" and record["additions"] == ["anytorch"]
    assert record["build"] == "torch-2.13-cu126" and record["verify"]["ok"] is True
    refused = home.envkit("add", "mywork", "oldtorch")
    assert refused.returncode == 1 and "this environment is torch 2.13.0+cu126" in refused.stderr
    checked = home.envkit("verify", "mywork")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert fingerprint(site_prefix) == before  # the site's environment untouched
    listed = home.envkit("envs")
    assert "mywork: on site:torch" in listed.stdout and "its current version" in listed.stdout, listed.stdout


def test_after_a_new_version_it_keeps_its_own_and_says_when_that_is_removed(site):
    home, shared = site
    made = home.envkit("create", "--on", "site:torch", "--name", "older", "--yes")
    assert made.returncode == 0, made.stderr
    old = Path(home.record("older")["on"]["prefix"])
    republished = home.envkit("create", *CU126, "--shared", "--force", "--yes")
    assert republished.returncode == 0, republished.stderr
    assert json.loads((shared / "records" / "torch.json").read_text())["prefix"] != str(old)
    assert home.in_env("older", "import torch, os; print(os.path.dirname(torch.__file__))").startswith(str(old))
    listed = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    [entry] = [e for e in listed if e["name"] == "older"]
    assert entry["on"]["state"] == "replaced"
    version = old.name
    removed = home.envkit("remove", "site:torch", "--version", version, "--yes")
    assert removed.returncode == 0, removed.stderr
    refused = home.envkit("run", "older", "--", "python", "-c", "import torch")
    assert refused.returncode == 1, refused.stderr
    assert f"older stands on site:torch version {version}, which the site's admins have removed" in refused.stderr
    assert "removed" in home.envkit("envs").stdout
    again = home.envkit("create", "--on", "site:torch", "--name", "older", "--force", "--yes")
    assert again.returncode == 0, again.stderr
    assert home.in_env("older", "import torch; print(torch.__version__)") == "2.13.0+cu126"
