"""`envkit create --shared` by an admin (the test's own user, root or not: the shared directory is theirs), and what
every user then does with it: `envkit envs`, `run site:NAME`, `verify site:NAME`, `module`, `remove` refused; and
the bad input that publishes nothing. The same with two real Unix users and real module systems:
tests/create/test_shared_users.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from conftest import CU126, Home
from support.next_steps import next_steps
from support.pypi_index import IndexServer
from support.unix_users import public_directory


@pytest.fixture
def site(home: Home) -> Iterator[Path]:
    """The shared directory, where every user can reach it (pytest's own directories are private to the user
    running the tests, and a publication there is refused: nobody else could run it)."""
    with public_directory() as public:
        root = public / "shared"
        root.mkdir(mode=0o755)
        os.chmod(root, 0o755)
        home.env["ENVKIT_SHARED"] = str(root)
        home.env["MODULEPATH"] = str(root / "modulefiles")
        yield root


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def published(home: Home, torch_index: IndexServer, site: Path) -> Home:
    done = home.envkit("create", *CU126, "--shared", "--yes")
    assert done.returncode == 0, done.stderr
    assert "published site:torch" in done.stderr
    return home


def test_publish_makes_a_version_the_stable_name_a_record_and_modulefiles(published: Home, site: Path):
    [version] = [p.name for p in (site / "envs" / "torch").iterdir() if p.name != "current"]
    assert version.startswith("2.13-cu126-") and version.endswith("Z")
    assert os.readlink(site / "envs" / "torch" / "current") == version
    record = json.loads((site / "records" / "torch.json").read_text())
    assert record["prefix"] == str(site / "envs" / "torch" / version)
    assert record["extra"]["shared"]["version"] == version and record["extra"]["shared"]["publisher"]
    tcl = (site / "modulefiles" / "envkit" / "torch").read_text()
    lua = (site / "modulefiles" / "envkit" / "torch.lua").read_text()
    assert tcl.startswith("#%Module") and f'set bin "{record["prefix"]}/bin"' in tcl  # the version's, not current
    assert 'family("envkit")' in lua and f'local bin = "{record["prefix"]}/bin"' in lua
    # readable by everyone, writable by none but its owner
    for path in (site / "envs" / "torch" / version).rglob("*"):
        mode = path.lstat().st_mode
        if not path.is_symlink():
            assert mode & 0o004 and not mode & 0o022, path
    # the run's own journal, records and mark are gone; the lock of the name's publications stays
    assert tree(site / "state") == ["locks", "locks/publish-torch.lock", "runs", "runs/torch"]
    for directory in ("envs", "envs/torch", "records", "modulefiles", "modulefiles/envkit", "state"):
        assert (site / directory).stat().st_mode & 0o7777 == 0o755, directory
    assert published.record("torch") is None  # nothing in the admin's own records


def test_every_user_lists_runs_and_checks_it_by_its_site_name(published: Home, site: Path):
    listed = published.envkit("envs")
    assert listed.returncode == 0 and "Shared by the site" in listed.stdout and "site:torch" in listed.stdout
    [entry] = [e for e in json.loads(published.envkit("envs", "--json").stdout)["environments"] if e.get("shared")]
    assert entry["name"] == "site:torch" and entry["prefix"].startswith(str(site / "envs" / "torch"))
    assert entry["module"] == "envkit/torch" and entry["state"] == "ready"
    done = published.envkit("run", "site:torch", "--", "python", "-c",
                            "import os, torch, sys; print(os.environ['VIRTUAL_ENV'] == sys.prefix, torch.__file__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "True" and done.stdout.split()[1].startswith(entry["prefix"])
    checked = published.envkit("verify", "site:torch", "--json")
    assert checked.returncode in (0, 1) and json.loads(checked.stdout)["installed_build"] == "torch-2.13-cu126"
    mine = json.loads((published.data / "shared-checks" / "torch.json").read_text())
    assert mine["prefix"] == entry["prefix"] and "ok" in mine["verify"]
    again = [e for e in json.loads(published.envkit("envs", "--json").stdout)["environments"] if e.get("shared")][0]
    assert again["your_check"] == mine["verify"]
    # the test's user owns the shared directory, so it is an admin: its check is the site's last check too
    shared = json.loads((site / "records" / "torch.json").read_text())
    assert shared["verify"] == mine["verify"] and shared["prefix"] == entry["prefix"]
    assert f"Last check: {'PASS' if mine['verify']['ok'] else 'FAIL'} {mine['verify']['time']}" in \
        (site / "modulefiles" / "envkit" / "torch").read_text()


def test_a_users_own_environment_of_the_same_name_is_never_shadowed(published: Home, site: Path):
    done = published.envkit("create", *CU126, "--name", "torch", "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    own = published.envkit("run", "torch", "--", "python", "-c", "import sys; print(sys.prefix)").stdout.strip()
    shared = published.envkit("run", "site:torch", "--", "python", "-c", "import sys; print(sys.prefix)").stdout
    assert own == str(published.prefix("torch")) and shared.strip().startswith(str(site))
    names = [e["name"] for e in json.loads(published.envkit("envs", "--json").stdout)["environments"]]
    assert names == ["torch", "site:torch"]


def test_replacing_keeps_the_old_version_until_it_is_removed_explicitly(published: Home, site: Path):
    old = json.loads((site / "records" / "torch.json").read_text())["prefix"]
    refused = published.envkit("create", *CU126, "--shared", "--yes")
    assert refused.returncode == 2 and "already publishes site:torch" in refused.stderr
    done = published.envkit("create", *CU126, "--shared", "--yes", "--force")
    assert done.returncode == 0, done.stderr
    new = json.loads((site / "records" / "torch.json").read_text())["prefix"]
    assert new != old and Path(old, "bin", "python").exists()
    assert os.readlink(site / "envs" / "torch" / "current") == Path(new).name
    current = published.envkit("remove", "site:torch", "--version", Path(new).name, "--yes")
    assert current.returncode == 2 and "current version" in current.stderr
    unknown = published.envkit("remove", "site:torch", "--version", "../../etc", "--yes")
    assert unknown.returncode == 2 and "has no version" in unknown.stderr
    asked = published.envkit("remove", "site:torch", "--version", Path(old).name)  # no terminal to ask on
    assert asked.returncode == 2 and "--yes" in asked.stderr and Path(old).exists()
    gone = published.envkit("remove", "site:torch", "--version", Path(old).name, "--yes")
    assert gone.returncode == 0, gone.stderr
    assert not Path(old).exists() and Path(new, "bin", "python").exists()
    assert published.envkit("remove", "site:torch", "--yes").returncode == 2


def test_module_prints_or_writes_a_modulefile_and_makes_its_directory(published: Home, tmp_path: Path):
    lua = published.envkit("module", "site:torch", "--lmod")
    assert lua.returncode == 0 and 'family("envkit")' in lua.stdout and "whatis(\"CUDA: 12.6\")" in lua.stdout
    mine = tmp_path / "my modules $HOME" / "not yet"  # made, with its parent, by -o
    done = published.envkit("module", "site:torch", "--tcl", "-o", str(mine), env={"MODULEPATH": "/nowhere"})
    assert done.returncode == 0, done.stderr
    assert (mine / "envkit" / "torch").read_text().startswith("#%Module")
    assert (mine / "envkit" / "torch").stat().st_mode & 0o777 == 0o644
    # not on $MODULEPATH: said once, with the line that makes it loadable
    assert [line.startswith("To load it") for line in done.stdout.splitlines()] == [False, True], done.stdout
    assert f"module use '{mine}'" in done.stdout and "/etc/lmod/modulespath" in done.stdout
    again = published.envkit("module", "site:torch", "--lmod", "-o", str(mine), env={"MODULEPATH": f"/x:{mine}"})
    assert again.returncode == 0 and "module use" not in again.stdout and (mine / "envkit" / "torch.lua").exists()
    (tmp_path / "file").write_text("")
    refused = published.envkit("module", "site:torch", "-o", str(tmp_path / "file"))
    assert refused.returncode == 2 and "is not a directory" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize("case", ["missing", "everyone-writes", "no-such-group", "prefix", "jupyter",
                                  "not-a-directory", "planted-link", "tcl-quote"])
def test_bad_shared_input_is_one_line_exit_2_and_writes_nothing(home: Home, torch_index: IndexServer, site: Path,
                                                                 case: str):
    env = {}
    args = ["create", *CU126, "--shared", "--yes", "--no-verify"]
    if case == "missing":
        env["ENVKIT_SHARED"] = str(site / "nowhere")
    elif case == "everyone-writes":
        os.chmod(site, 0o777)
    elif case == "planted-link":  # refused before anything is built, and nothing written where it points
        (site / "modulefiles").mkdir()
        (site / "modulefiles" / "envkit").symlink_to(site.parent / "victim")
    elif case == "tcl-quote":
        quoted = site.parent / 'shared "quoted"'
        quoted.mkdir(mode=0o755)
        env["ENVKIT_SHARED"] = str(quoted)
    elif case == "prefix":
        args += ["--prefix", str(site / "elsewhere")]
    elif case == "jupyter":
        args.append("--jupyter")
    elif case == "not-a-directory":
        env["ENVKIT_SHARED"] = str(site / "file")
        (site / "file").write_text("")
    else:
        args += ["--group", "no-such-group-here"]
    done = home.envkit(*args, env=env)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) <= 2, done.stderr  # the error, and a hint
    assert done.stderr.startswith("envkit: error: ") and "Traceback" not in done.stderr
    left = {"not-a-directory": ["file"], "planted-link": ["modulefiles", "modulefiles/envkit"]}.get(case, [])
    assert tree(site) == left and not (site.parent / "victim").exists()
    assert "published" not in done.stderr


def test_the_site_file_alone_can_name_the_shared_directory(home: Home, torch_index: IndexServer, site: Path,
                                                            tmp_path: Path):
    """No $ENVKIT_SHARED and no config: the site file every user reads names it (and the variable still wins)."""
    del home.env["ENVKIT_SHARED"]
    site_file = tmp_path / "site.yaml"
    site_file.write_text(f"version: 1\nshared: {site}\npartitions: {{}}\n")
    home.env["ENVKIT_SITE"] = str(site_file)
    done = home.envkit("create", *CU126, "--shared", "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert (site / "records" / "torch.json").exists() and (site / "modulefiles" / "envkit" / "torch").exists()
    listed = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert [e["shared_dir"] for e in listed if e.get("shared")] == [str(site)]
    shown = home.envkit("site")
    assert shown.returncode == 0 and f"Shared environments: {site}" in shown.stdout
    assert json.loads(home.envkit("site", "--json").stdout)["shared"] == str(site)
    other = tmp_path / "other"
    other.mkdir(mode=0o755)
    elsewhere = home.envkit("envs", "--json", env={"ENVKIT_SHARED": str(other)})
    assert not [e for e in json.loads(elsewhere.stdout)["environments"] if e.get("shared")]
    site_file.write_text("version: 1\nshared: relative/dir\npartitions: {}\n")
    broken = home.envkit("envs")
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert f"site file {site_file}: shared: 'relative/dir' must be an absolute path" in broken.stderr


def test_a_group_only_environment_is_readable_by_that_group_alone(home: Home, torch_index: IndexServer, site: Path):
    import grp

    group = grp.getgrgid(os.getegid())
    done = home.envkit("create", *CU126, "--shared", "--yes", "--no-verify", "--group", group.gr_name)
    assert done.returncode == 0, done.stderr
    record = json.loads((site / "records" / "torch.json").read_text())
    prefix = Path(record["prefix"])
    assert record["extra"]["shared"]["group"] == group.gr_name
    assert (site / "records" / "torch.json").stat().st_mode & 0o777 == 0o640
    assert prefix.stat().st_mode & 0o7777 == 0o2750
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            info = path.lstat()
            assert info.st_gid == group.gr_gid and not info.st_mode & 0o007, path
            assert not path.is_dir() or info.st_mode & 0o2000, path


def test_export_of_a_shared_environment_locks_it_as_installed(published: Home, tmp_path: Path):
    out = tmp_path / "torch.conda-lock.yml"
    done = published.envkit("export", "site:torch", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "torch" in out.read_text() and "2.13.0+cu126" in out.read_text()


def test_a_replacement_that_fails_its_check_is_not_published(published: Home, torch_index: IndexServer, site: Path,
                                                             tmp_path: Path):
    from test_create_pip import torch_that_does_not_import

    before = (site / "records" / "torch.json").read_text()
    modulefile = (site / "modulefiles" / "envkit" / "torch.lua").read_text()
    versions = sorted(p.name for p in (site / "envs" / "torch").iterdir())
    torch_index.add_index("/broken/whl/cu126", torch_that_does_not_import(tmp_path / "w"))
    published.write_config({"https://download.pytorch.org/whl": f"{torch_index.url}/broken/whl"})
    failed = published.envkit("create", *CU126, "--shared", "--yes", "--force")
    assert failed.returncode == 1 and "not published" in failed.stderr, failed.stderr
    assert (site / "records" / "torch.json").read_text() == before
    assert (site / "modulefiles" / "envkit" / "torch.lua").read_text() == modulefile
    assert sorted(p.name for p in (site / "envs" / "torch").iterdir()) == versions


def test_a_dry_run_of_a_publication_shows_the_version_and_writes_nothing(home: Home, torch_index: IndexServer,
                                                                         site: Path):
    done = home.envkit("create", *CU126, "--shared", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert str(site / "envs" / "torch" / "2.13-cu126-") in done.stdout
    assert tree(site) == []


def test_a_publication_of_a_name_another_admin_is_publishing_is_refused(home: Home, torch_index: IndexServer,
                                                                        site: Path):
    from envkit.create.lock import name_lock

    with name_lock(site / "state" / "locks", "publish-torch"):  # held as a running publication holds it
        done = home.envkit("create", *CU126, "--shared", "--yes", "--no-verify")
    assert done.returncode == 1, done.stderr
    assert "another envkit run is working on a publication of site:torch" in done.stderr, done.stderr
    assert not list((site / "envs" / "torch").iterdir()) and not list((site / "records").iterdir())


@pytest.mark.parametrize("check", ["checked", "not-checked"])
def test_every_next_step_a_publication_prints_names_site_name_and_works_when_pasted(home: Home,
                                                                                      torch_index: IndexServer,
                                                                                      site: Path, check: str):
    done = home.envkit("create", *CU126, "--shared", "--yes", *(["--no-verify"] if check == "not-checked" else []))
    assert done.returncode == 0, done.stderr
    steps = next_steps(done.stdout + done.stderr)
    assert "envkit run site:torch -- python your_script.py" in steps and "module load envkit/torch" in steps
    assert ("envkit verify site:torch" in steps) == (check == "not-checked"), steps
    checked = home.envkit("verify", "site:torch")  # made for another machine: it says where to check it
    assert checked.returncode in (0, 1) and "run `envkit verify site:torch` there" in checked.stdout, checked.stdout
    steps += next_steps(checked.stdout)
    assert not any(step.split()[:3] in (["envkit", "run", "torch"], ["envkit", "verify", "torch"]) for step in steps)
    (home.root / "your_script.py").write_text("import sys, torch; print('ran in', sys.prefix)\n")
    for step in steps:
        if step.startswith("module "):  # (with a module system: tests/create/test_shared_users.py)
            continue
        pasted = subprocess.run(["bash", "-c", step], capture_output=True, text=True, env=home.env, cwd=home.root,
                                timeout=300)
        # on the machine it is for, the check's; here (no GPU) a FAIL is a check that ran
        assert pasted.returncode == 0 or (step.startswith(("envkit doctor", "envkit verify")) and
                                          pasted.returncode == 1 and "no environment" not in pasted.stderr), \
            (step, pasted.stderr)
        if step.startswith("envkit run"):
            assert pasted.stdout.startswith(f"ran in {site / 'envs' / 'torch'}"), pasted.stdout


@pytest.mark.parametrize("kind", ["venv", "conda"])
def test_the_lines_for_a_partition_and_a_conda_environment_name_the_site_name(kind: str):
    """(Run for real on the tests' Slurm: tests/slurm/test_shared_job.py runs `envkit job site:NAME`.)"""
    from types import SimpleNamespace

    from envkit.create.render import outcome_text
    from envkit.state.records import Record

    prefix = Path("/opt/envkit/envs/torch/2.13-cu126-20261127T010855Z")
    record = Record(name="torch", prefix=str(prefix), kind=kind, backend="rattler", manifest="torch",
                    build="torch-2.13-cu126", python="3.11", created="2026-11-27T01:08:55+00:00", machine={},
                    on_target=False, target={"options": ["--partition", "gpu-a100:node1"]},
                    extra={"shared": {"version": prefix.name, "publisher": "alice"}})
    plan = SimpleNamespace(name="torch", prefix=prefix, in_conda_envs=False, unchecked="--no-verify")
    prepared = SimpleNamespace(plan=plan, context=SimpleNamespace(tools=SimpleNamespace(conda=None)))
    steps = next_steps(outcome_text(prepared, SimpleNamespace(record=record, report=None, replaced=None,
                                                              kept=True)))
    assert "envkit verify site:torch" in steps and "envkit run site:torch -- python your_script.py" in steps
    assert "envkit verify site:torch --partition gpu-a100:node1" in steps
    assert "envkit job site:torch -p gpu-a100 -- python your_script.py" in steps
    assert all("site:torch" in step or step.startswith(("module load envkit/torch", "source ")) for step in steps)


def test_a_site_environment_gone_from_its_directory_is_its_admins_to_publish_again(published: Home, site: Path):
    """The user's own `torch` is there too: no hint about site:torch names a command that acts on it."""
    import shlex

    done = published.envkit("create", *CU126, "--name", "torch", "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    prefix = Path(json.loads((site / "records" / "torch.json").read_text())["prefix"])
    prefix.rename(prefix.with_name("moved-away"))
    gone = published.envkit("run", "site:torch", "--", "python", "-V")
    assert gone.returncode == 1 and f"environment site:torch is gone from {prefix}" in gone.stderr, gone.stderr
    assert "ask its admins" in gone.stderr and "envkit remove" not in gone.stderr
    [republish] = [step for step in next_steps(gone.stderr) if step.startswith("envkit create")]
    assert shlex.split(republish)[-2:] == ["--shared", "--force"]
    again = published.envkit(*shlex.split(republish)[1:], "--yes")
    assert again.returncode == 0, again.stderr  # pasted by an admin (the test's user), it publishes it again
    assert published.envkit("run", "site:torch", "--", "python", "-V").returncode == 0
    assert published.prefix("torch").is_dir()  # the user's own, untouched


def test_a_version_other_users_could_not_reach_is_not_published(home: Home, torch_index: IndexServer,
                                                                 tmp_path: Path):
    """A shared directory under pytest's own (mode 0700): every directory to the prefix is proved enterable before
    anything names the version, and the refusal names the one that is not, with its owner and mode."""
    import pwd

    private = tmp_path.parents[1]  # /tmp/pytest-of-USER, which only its user enters
    assert private.stat().st_mode & 0o777 == 0o700
    root = tmp_path / "shared"
    root.mkdir(mode=0o755)
    done = home.envkit("create", *CU126, "--shared", "--yes", "--no-verify", env={"ENVKIT_SHARED": str(root)})
    assert done.returncode == 1, done.stderr
    owner = pwd.getpwuid(os.geteuid()).pw_name
    assert f"site:torch is not published: other users cannot enter the directory {private} ({owner}'s" in \
        done.stderr and "mode 0700" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "published site:torch" not in done.stderr
    assert not (root / "records" / "torch.json").exists() and os.listdir(root / "envs" / "torch") == []
    assert not (root / "modulefiles" / "envkit" / "torch").exists()
