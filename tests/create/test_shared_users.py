"""A site's shared environment between real Unix users (useradd, as root; removed afterwards): two admins of the
group that may write the shared directory, and a user.

The admin publishes from their own Python in their private home (mode 0700, as a pyenv install is), under umask 077,
with no module system set up: envkit makes the venv from a Python every user can run, sets every mode explicitly,
and says how to make the modulefiles loadable. The user lists it, runs in it, pastes the next steps the admin was
given, `module load`s it in a login shell of Lmod and of Environment Modules and finds its Python first on PATH,
checks it (the result is the user's), and is refused on publish, remove and write. The second admin replaces it and
publishes another name into the layout the first one made, and is told "busy", not "Permission denied", while the
first is publishing. A user who cannot reach the environment, or read its record, is told the path and whose it is.
Root never writes a modulefile through what a user planted in a sticky directory. The admin's replacement leaves a
process the user started in the old version running, with its files unchanged.

Another user than root is refused: the test is skipped, and under CI (CI=true) fails instead."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import PROFILES, PYTHON
from support import module_systems, unix_users
from support.next_steps import next_steps
from support.paused import wait_until_paused
from support.pypi_index import IndexServer

CREATE = ("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine",
          str(PROFILES / "rtx4090-cuda126.yaml"), "--shared", "--yes")


class Site:
    def __init__(self, root: Path, python: Path, private: Path, admin, admin2, user, shared: Path, configs: dict,
                 gid: int, server: IndexServer = None):
        self.root, self.python, self.private, self.shared = root, python, private, shared
        self.admin, self.admin2, self.user, self.configs, self.gid = admin, admin2, user, configs, gid
        self.server = server

    def python_of(self, who) -> Path:
        """The admin runs envkit on their own Python (in their 0700 home, first on their PATH, as pyenv puts it)."""
        return self.private if who is self.admin else self.python

    def env(self, who, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.python_of(who).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                "NO_PROXY": "127.0.0.1,localhost", "ENVKIT_CONFIG": str(self.configs[who.name]), **extra}

    def argv(self, who, *args: str, umask: str = "022") -> list[str]:
        return ["sh", "-c", f'umask {umask}; exec "$@"', "sh", str(self.python_of(who)), "-m", "envkit", *args]

    def envkit(self, who, *args: str, umask: str = "022", **extra: str) -> subprocess.CompletedProcess:
        return who.run(self.argv(who, *args, umask=umask), self.env(who, **extra), timeout=600)

    def login_shell(self, who, system: str, script: str):
        """``script`` in a login shell (`bash -l`) of ``who`` whose `module` is ``system``'s."""
        return who.run(["bash", "-l", "-c", script], {"ENVKIT_TEST_MODULES": system, "LANG": "C.UTF-8"})

    def record(self) -> dict:
        return json.loads((self.shared / "records" / "torch.json").read_text())


def _unavailable(reason: str):
    if module_systems.required(os.environ):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(pypi_server_module, torch_wheels, tmp_path_factory):
    problem = unix_users.why_not() or module_systems.install_lmod()
    if problem is not None:
        _unavailable(problem)
    modulecmd, problem = module_systems.modulecmd_tcl(tmp_path_factory.mktemp("environment-modules-site"))
    if problem is not None:
        _unavailable(problem)
    server: IndexServer = pypi_server_module
    server.add_index("/whl/cu126", torch_wheels["cu126"])
    server.add_index("/pypi/simple", torch_wheels["pypi"])
    tag = f"{os.getpid() % 100000}"
    admin_name, admin2_name, user_name, group = f"ekadm{tag}", f"ekad2{tag}", f"ekusr{tag}", f"ekadmins{tag}"
    with unix_users.public_directory() as root, \
            unix_users.users_and_group(root, [admin_name, admin2_name, user_name], group,
                                       [admin_name, admin2_name]) as made:
        admin, admin2, user = made[admin_name], made[admin2_name], made[user_name]
        # the modulecmd.tcl that was unpacked where only root reaches: a copy the users can read
        public_cmd = root / "modulecmd.tcl"
        public_cmd.write_bytes(Path(modulecmd).read_bytes())
        shared = root / "shared"
        shared.mkdir()
        os.chown(shared, 0, made["group"])
        os.chmod(shared, 0o2775)
        mirrors = {"https://download.pytorch.org/whl": f"{server.url}/whl",
                   "https://pypi.org/simple": f"{server.url}/pypi/simple"}
        configs = {}
        for who in (admin, admin2, user):
            data = {"mirrors": mirrors, "shared": str(shared)} if who is not user else {"shared": str(shared)}
            configs[who.name] = root / f"{who.name}.yaml"
            configs[who.name].write_text(json.dumps(data))
            os.chmod(configs[who.name], 0o644)
            profile = who.home / ".bash_profile"  # the user's login: Environment Modules' `module` when asked
            profile.write_text(
                'if [ "$ENVKIT_TEST_MODULES" = tcl ]; then\n'
                "  unset -f module ml 2>/dev/null; unset MODULEPATH LMOD_CMD\n"
                f'  module() {{ eval "$(tclsh {public_cmd} bash "$@")"; }}\n'
                "fi\n")
            os.chown(profile, who.uid, who.gid)
        try:
            python = unix_users.public_python(root, user)
            private = unix_users.private_python(admin, python)
        except RuntimeError as error:
            _unavailable(str(error))
        yield Site(root, python, private, admin, admin2, user, shared, configs, made["group"], server)


@pytest.fixture(scope="module")
def pypi_server_module():
    with IndexServer() as server:
        yield server


@pytest.fixture(scope="module")
def published(site: Site) -> Site:
    """site:torch, published by the admin from their private Python, under umask 077, with no module system."""
    if not (site.shared / "records" / "torch.json").exists():
        done = site.envkit(site.admin, *CREATE, umask="077")
        assert done.returncode == 0, done.stderr
        site.first_output = done.stdout + done.stderr
    return site


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_the_admin_publishes_and_the_user_uses_it_and_cannot_change_it(site: Site):
    refused = site.envkit(site.user, *CREATE)
    assert refused.returncode == 2 and "only an admin publishes" in refused.stderr, refused.stderr
    assert tree(site.shared) == []

    done = site.envkit(site.admin, *CREATE, umask="077")  # no MODULEPATH: no module system needed to publish
    assert done.returncode == 0, done.stderr
    site.first_output = done.stdout + done.stderr
    record = site.record()
    prefix = Path(record["prefix"])
    assert str(site.admin.home) not in (prefix / "pyvenv.cfg").read_text()  # not the admin's own Python
    assert f"To load it, put {site.shared / 'modulefiles'} on MODULEPATH" in done.stderr, done.stderr
    for directory in ("envs", "envs/torch", "records", "modulefiles", "modulefiles/envkit", "state"):
        info = (site.shared / directory).stat()
        assert info.st_mode & 0o7777 == 0o2775 and info.st_gid == site.gid, directory  # the admins', whatever umask

    listed = site.envkit(site.user, "envs")
    assert listed.returncode == 0 and "site:torch" in listed.stdout and site.admin.name in listed.stdout
    [entry] = json.loads(site.envkit(site.user, "envs", "--json").stdout)["environments"]
    assert entry["name"] == "site:torch" and entry["prefix"] == str(prefix) and entry["publisher"] == site.admin.name

    ran = site.envkit(site.user, "run", "site:torch", "--", "python", "-c",
                      "import torch, sys; print(sys.prefix); print(torch.__version__)")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(prefix), "2.13.0+cu126"]

    # every next step the admin was given, pasted by the user, works (the module line once `module use` is done,
    # as the admin was told)
    steps = next_steps(site.first_output)
    assert "envkit run site:torch -- python your_script.py" in steps and "module load envkit/torch" in steps
    script = site.user.home / "your_script.py"
    script.write_text("import sys, torch; print('ran in', sys.prefix)\n")
    os.chown(script, site.user.uid, site.user.gid)
    modulepath = str(site.shared / "modulefiles")
    envkit_cmd = f"envkit() {{ {site.python} -m envkit \"$@\"; }}; export ENVKIT_CONFIG={site.configs[site.user.name]}"
    for system in ("lmod", "tcl"):
        for step in steps:
            if step.startswith("envkit doctor"):
                continue  # (for the machine it is for)
            pasted = site.login_shell(site.user, system, f"cd && {envkit_cmd} && module use {modulepath} && {step}")
            assert pasted.returncode == 0, (system, step, pasted.stderr)

    doctor = f"{site.python} -m envkit doctor --json > doctor.json; test $? -le 1"  # the loaded one: PASS or FAIL
    for system in ("lmod", "tcl"):
        shell = site.login_shell(site.user, system, f"cd && module use {modulepath} && module load envkit/torch && "
                                 "command -v python && python -c 'import torch, sys; print(sys.prefix)' && "
                                 f"{doctor} && module unload envkit/torch && command -v python3")
        assert shell.returncode == 0, (system, shell.stderr)
        lines = shell.stdout.split()
        assert lines[:2] == [str(prefix / "bin" / "python"), str(prefix)], (system, shell.stdout)
        assert not lines[2].startswith(str(prefix)), (system, shell.stdout)
        report = json.loads((site.user.home / "doctor.json").read_text())
        assert report["version"] == "2.13.0+cu126" and report["python"]["executable"].startswith(str(prefix)), report

    checked = site.envkit(site.user, "verify", "site:torch", "--json")
    assert checked.returncode in (0, 1) and json.loads(checked.stdout)["installed_build"] == "torch-2.13-cu126"
    assert (site.user.home / ".local" / "share" / "envkit" / "shared-checks" / "torch.json").is_file()
    assert site.record() == record

    removed = site.envkit(site.user, "remove", "site:torch", "--yes")
    assert removed.returncode == 2 and "only its admins" in removed.stderr
    forced = site.envkit(site.user, *CREATE, "--force")
    assert forced.returncode == 2 and "only an admin publishes" in forced.stderr
    for target in (prefix / "bin" / "python", prefix / "new-file", site.shared / "records" / "torch.json"):
        wrote = site.user.run(["python3", "-c", f"open({str(target)!r}, 'a').write('x')"], {"PATH": "/usr/bin:/bin"})
        assert wrote.returncode != 0 and "Permission denied" in wrote.stderr
    assert prefix.is_dir() and site.record() == record


def test_the_venv_runs_on_a_python_every_user_can_run_not_the_admins_own(published: Site):
    prefix = Path(published.record()["prefix"])
    home = dict(line.split(" = ", 1) for line in (prefix / "pyvenv.cfg").read_text().splitlines() if " = " in line)
    assert not home["home"].startswith(str(published.admin.home)), home
    assert published.user.run([str(prefix / "bin" / "python"), "-c", "pass"], {"PATH": "/usr/bin:/bin"}).returncode == 0


@contextlib.contextmanager
def repointed(link: Path, target: Path) -> Iterator[None]:
    """``link`` pointing at ``target`` for the block (root's doing: as an envkit that built on the admin's own Python
    left it)."""
    before = os.readlink(link)
    link.unlink()
    link.symlink_to(target)
    try:
        yield
    finally:
        link.unlink()
        link.symlink_to(before)


def test_a_user_who_cannot_reach_it_or_read_its_record_is_told_where_and_whose(published: Site):
    prefix = Path(published.record()["prefix"])
    with repointed(prefix / "bin" / "python", published.private):  # a venv on the admin's own Python
        for args in (("run", "site:torch", "--", "python", "-V"), ("verify", "site:torch")):
            done = published.envkit(published.user, *args)
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
            assert f"site:torch is out of your reach: you cannot enter the directory {published.admin.home} " \
                   f"({published.admin.name}'s" in done.stderr, done.stderr
            assert "ask its admins" in done.stderr and "envkit remove" not in done.stderr
    record = published.shared / "records" / "torch.json"
    os.chmod(record, 0o600)  # (the admin's file)
    try:
        done = published.envkit(published.user, "run", "site:torch", "--", "python", "-V")
    finally:
        os.chmod(record, 0o644)
    assert done.returncode == 1, done.stderr
    assert f"(the site's record of site:torch, {published.admin.name}'s)" in done.stderr, done.stderr
    assert "ask the site's admins" in done.stderr and "envkit remove torch" not in done.stderr


def test_a_second_admin_of_the_group_replaces_it_publishes_another_and_is_told_busy(published: Site):
    first = Path(published.record()["prefix"])
    replaced = published.envkit(published.admin2, *CREATE, "--force", "--no-verify")
    assert replaced.returncode == 0, replaced.stderr
    second = Path(published.record()["prefix"])
    assert second != first and second.stat().st_uid == published.admin2.uid and first.is_dir()
    other = published.envkit(published.admin2, *CREATE, "--name", "torch2", "--no-verify")
    assert other.returncode == 0, other.stderr
    assert (published.shared / "records" / "torch2.json").stat().st_uid == published.admin2.uid
    lock = published.shared / "state" / "locks" / "publish-torch.lock"
    assert lock.stat().st_gid == published.gid and lock.stat().st_mode & 0o777 == 0o664
    marker = published.admin.home / "paused"  # (where the admin may write)
    holder = published.admin.popen(published.argv(published.admin, *CREATE, "--force", "--no-verify"),
                                   published.env(published.admin, ENVKIT_TEST_PAUSE_AT="stamped",
                                                 ENVKIT_TEST_PAUSE_FILE=str(marker)))
    try:
        wait_until_paused(holder, marker, "stamped")
        busy = published.envkit(published.admin2, *CREATE, "--force", "--no-verify")
        assert busy.returncode == 1, busy.stderr
        assert "another envkit run is working on a publication of site:torch" in busy.stderr, busy.stderr
        assert "Permission denied" not in busy.stderr
        marker.unlink()
        out, err = holder.communicate(timeout=300)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    assert holder.returncode == 0, err
    assert Path(published.record()["prefix"]) not in (first, second)


def test_root_never_writes_a_modulefile_through_what_a_user_planted(published: Site, tmp_path: Path):
    sticky = published.root / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    victim = published.root / "victim"
    victim.mkdir()
    env = {**os.environ, "ENVKIT_SHARED": str(published.shared), "HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}

    def root_writes(directory: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", "module", "site:torch", "-o", str(directory)],
                              capture_output=True, text=True, env=env, timeout=120)

    plant = [["ln", "-s", str(victim), str(sticky / "envkit")], ["mkdir", str(sticky / "envkit")],
             ["ln", "-s", str(victim), str(sticky / "mods")]]
    for argv, target in zip(plant, (sticky, sticky, sticky / "mods")):
        assert published.user.run(argv, {"PATH": "/usr/bin:/bin"}).returncode == 0
        done = root_writes(target)
        planted = sticky / ("mods" if target.name == "mods" else "envkit")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{planted} is a" in done.stderr and f"of {published.user.name}'s in {sticky}, which everyone may " \
               "write" in done.stderr, done.stderr
        assert list(victim.iterdir()) == []
        assert published.user.run(["rm", "-rf", str(planted)], {"PATH": "/usr/bin:/bin"}).returncode == 0
    done = root_writes(sticky)  # nothing planted: root's own directory, which the user cannot change
    assert done.returncode == 0, done.stderr
    assert (sticky / "envkit").stat().st_uid == 0 and (sticky / "envkit").stat().st_mode & 0o777 == 0o755
    assert (sticky / "envkit" / "torch").read_text().startswith("#%Module") and list(victim.iterdir()) == []
    shutil.rmtree(sticky / "envkit")


def test_a_replacement_leaves_a_running_process_of_the_old_version_running(published: Site):
    old = Path(published.record()["prefix"])
    before = digest(old)
    go = published.root / "go"
    code = ("import os, sys, time\nprint(sys.prefix, flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
            "import torch\nprint(torch.__file__, flush=True)\n")
    process = published.user.popen([str(published.python), "-m", "envkit", "run", "site:torch", "--", "python",
                                    "-c", code], published.env(published.user))
    try:
        assert process.stdout.readline().strip() == str(old)
        replaced = published.envkit(published.admin, *CREATE, "--force")
        assert replaced.returncode == 0, replaced.stderr
        new = Path(published.record()["prefix"])
        assert new != old and os.readlink(published.shared / "envs" / "torch" / "current") == new.name
        go.write_text("")
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.strip().startswith(str(old))  # torch imported from the old version, after the replacement
    assert digest(old) == before
    ran = published.envkit(published.user, "run", "site:torch", "--", "python", "-c", "import sys; print(sys.prefix)")
    assert ran.stdout.strip() == str(new)


def test_a_user_stands_a_personal_environment_on_the_site_and_keeps_it_across_a_replacement(site: Site):
    """issue 42 item 5: the user's own small environment on the admin's site:labtorch, with a package of their own,
    the site's environment untouched; after the admin publishes a new version the user's keeps running on its
    own, and `envkit envs` says it was replaced."""
    from support.wheels import build_wheel

    modulepath = str(site.shared / "modulefiles")
    published = site.envkit(site.admin, *CREATE, "--name", "labtorch", MODULEPATH=modulepath)
    assert published.returncode == 0, published.stderr
    old = Path(json.loads((site.shared / "records" / "labtorch.json").read_text())["prefix"])
    before = digest(old)
    wheels = site.root / "user-wheels"
    small = build_wheel(wheels, "small", "1.0", files={"small.py": "ANSWER = 42\n"})
    for path in (wheels, small):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    server = site.server
    server.add_index("/pypi/simple", [small])
    config = site.root / f"{site.user.name}-mirrors.yaml"
    config.write_text(json.dumps({"shared": str(site.shared),
                                  "mirrors": {"https://pypi.org/simple": f"{server.url}/pypi/simple"}}))
    os.chmod(config, 0o644)
    mine = {"ENVKIT_CONFIG": str(config)}
    made = site.envkit(site.user, "create", "--on", "site:labtorch", "--name", "mywork", "--with", "small", "--yes",
                       **mine)
    assert made.returncode == 0, made.stderr
    code = "import torch, small, os; print(os.path.dirname(torch.__file__), small.ANSWER)"
    ran = site.envkit(site.user, "run", "mywork", "--", "python", "-c", code, **mine)
    assert ran.returncode == 0 and ran.stdout.split() == [str(old / "lib" / f"python{PYTHON}" / "site-packages" /
                                                            "torch"), "42"], ran.stdout + ran.stderr
    prefix = site.user.home / ".local" / "share" / "envkit" / "envs" / "mywork"
    assert all(os.stat(p).st_uid == site.user.uid for p in [prefix, *prefix.rglob("*")] if not p.is_symlink())
    assert digest(old) == before  # the site's environment: not one byte changed by the user's

    replaced = site.envkit(site.admin, *CREATE, "--name", "labtorch", "--force", MODULEPATH=modulepath)
    assert replaced.returncode == 0, replaced.stderr
    ran = site.envkit(site.user, "run", "mywork", "--", "python", "-c", code, **mine)
    assert ran.returncode == 0 and ran.stdout.split()[0].startswith(str(old)), ran.stdout + ran.stderr
    [entry] = [e for e in json.loads(site.envkit(site.user, "envs", "--json", **mine).stdout)["environments"]
               if e["name"] == "mywork"]
    assert entry["on"]["state"] == "replaced" and entry["on"]["prefix"] == str(old)
