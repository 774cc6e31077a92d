"""A site's shared environment between two real Unix users (useradd, as root; removed afterwards): the admin (a
member of the group that may write the shared directory) publishes it, the user lists it, runs in it, `module
load`s it in a login shell of Lmod and of Environment Modules and finds its Python first on PATH, checks it (the
result is the user's), and is refused on publish, remove and write; the admin's replacement leaves a process the
user started in the old version running, with its files unchanged.

Another user than root is refused: the test is skipped, and under CI (CI=true) fails instead."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from conftest import PROFILES, PYTHON
from support import module_systems, unix_users
from support.pypi_index import IndexServer

CREATE = ("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine",
          str(PROFILES / "rtx4090-cuda126.yaml"), "--shared", "--yes")


class Site:
    def __init__(self, root: Path, python: Path, admin, user, shared: Path, configs: dict, modulecmd: Path,
                 server: IndexServer = None):
        self.root, self.python, self.admin, self.user, self.shared = root, python, admin, user, shared
        self.configs, self.modulecmd, self.server = configs, modulecmd, server

    def env(self, who, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.python.parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                "NO_PROXY": "127.0.0.1,localhost", "ENVKIT_CONFIG": str(self.configs[who.name]), **extra}

    def envkit(self, who, *args: str, **extra: str):
        return who.run([str(self.python), "-m", "envkit", *args], self.env(who, **extra), timeout=600)

    def login_shell(self, who, system: str, script: str):
        """``script`` in a login shell (`bash -l`) of ``who`` whose `module` is ``system``'s."""
        return who.run(["bash", "-l", "-c", script], {"ENVKIT_TEST_MODULES": system, "LANG": "C.UTF-8"})


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
    admin_name, user_name, group = f"ekadm{tag}", f"ekusr{tag}", f"ekadmins{tag}"
    with unix_users.public_directory() as root, \
            unix_users.users_and_group(root, [admin_name, user_name], group, [admin_name]) as made:
        admin, user = made[admin_name], made[user_name]
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
        for who, data in ((admin, {"mirrors": mirrors, "shared": str(shared)}), (user, {"shared": str(shared)})):
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
        except RuntimeError as error:
            _unavailable(str(error))
        yield Site(root, python, admin, user, shared, configs, public_cmd, server)


@pytest.fixture(scope="module")
def pypi_server_module():
    with IndexServer() as server:
        yield server


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_the_admin_publishes_and_the_user_uses_it_and_cannot_change_it(site: Site):
    modulepath = str(site.shared / "modulefiles")
    refused = site.envkit(site.user, *CREATE, MODULEPATH=modulepath)
    assert refused.returncode == 2 and "only an admin publishes" in refused.stderr, refused.stderr
    assert tree(site.shared) == []

    done = site.envkit(site.admin, *CREATE, MODULEPATH=modulepath)
    assert done.returncode == 0, done.stderr
    record = json.loads((site.shared / "records" / "torch.json").read_text())
    prefix = Path(record["prefix"])

    listed = site.envkit(site.user, "envs")
    assert listed.returncode == 0 and "site:torch" in listed.stdout and site.admin.name in listed.stdout
    [entry] = json.loads(site.envkit(site.user, "envs", "--json").stdout)["environments"]
    assert entry["name"] == "site:torch" and entry["prefix"] == str(prefix) and entry["publisher"] == site.admin.name

    ran = site.envkit(site.user, "run", "site:torch", "--", "python", "-c",
                      "import torch, sys; print(sys.prefix); print(torch.__version__)")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(prefix), "2.13.0+cu126"]

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
    assert json.loads((site.shared / "records" / "torch.json").read_text()) == record

    removed = site.envkit(site.user, "remove", "site:torch", "--yes")
    assert removed.returncode == 2 and "only its admins" in removed.stderr
    forced = site.envkit(site.user, *CREATE, "--force", MODULEPATH=modulepath)
    assert forced.returncode == 2 and "only an admin publishes" in forced.stderr
    for target in (prefix / "bin" / "python", prefix / "new-file", site.shared / "records" / "torch.json"):
        wrote = site.user.run(["python3", "-c", f"open({str(target)!r}, 'a').write('x')"], {"PATH": "/usr/bin:/bin"})
        assert wrote.returncode != 0 and "Permission denied" in wrote.stderr
    assert prefix.is_dir() and json.loads((site.shared / "records" / "torch.json").read_text()) == record


def test_a_replacement_leaves_a_running_process_of_the_old_version_running(site: Site):
    modulepath = str(site.shared / "modulefiles")
    if not (site.shared / "records" / "torch.json").exists():
        assert site.envkit(site.admin, *CREATE, MODULEPATH=modulepath).returncode == 0
    old = Path(json.loads((site.shared / "records" / "torch.json").read_text())["prefix"])
    before = digest(old)
    go = site.root / "go"
    code = ("import os, sys, time\nprint(sys.prefix, flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
            "import torch\nprint(torch.__file__, flush=True)\n")
    process = site.user.popen([str(site.python), "-m", "envkit", "run", "site:torch", "--", "python", "-c", code],
                              site.env(site.user))
    try:
        assert process.stdout.readline().strip() == str(old)
        replaced = site.envkit(site.admin, *CREATE, "--force", MODULEPATH=modulepath)
        assert replaced.returncode == 0, replaced.stderr
        new = Path(json.loads((site.shared / "records" / "torch.json").read_text())["prefix"])
        assert new != old and os.readlink(site.shared / "envs" / "torch" / "current") == new.name
        go.write_text("")
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.strip().startswith(str(old))  # torch imported from the old version, after the replacement
    assert digest(old) == before
    ran = site.envkit(site.user, "run", "site:torch", "--", "python", "-c", "import sys; print(sys.prefix)")
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
