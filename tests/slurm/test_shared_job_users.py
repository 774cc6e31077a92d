"""`envkit job site:NAME` submitted by a real second Unix user (useradd, as root; removed afterwards) through a real
Slurm: the job runs as that user (its uid, its home, its output file), inside the version the admin published, and
leaves nothing in the user's own records. The user finds the shared directory through the site file the admin
keeps (its `shared:` key), as on a cluster where no module or config names it.

The session's cluster lives in pytest's directories, which only the user running the tests can reach; this one is
started for the module under a directory every user can reach (its munge socket, slurm.conf, stand-in NVML).
Another user than root is refused: the test is skipped, and under CI (ENVKIT_TEST_REQUIRE_SLURM=1) fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from slurm_helpers import make_torch_env, wait_done

from envkit.shared.layout import SharedLayout
from envkit.shared.publish import make_layout, publish
from envkit.state import records
from envkit.state.userdirs import user_dirs
from support import fake_nvml, unix_users
from support.slurm_cluster import SlurmCluster, slurm_required

VERSION = "2.14-cu126-20261127T000000Z"
SHOW = "import json, os, sys; print(json.dumps([sys.argv[1:], sys.prefix, os.getuid(), os.getcwd()]))"
A100_PROFILE = ('{driver_version: "535.129.03", cuda_driver: "12.2", gpus: ['
                '{name: NVIDIA A100-SXM4-40GB, compute_capability: "8.0", memory_mib: 40960}, '
                '{name: NVIDIA A100-SXM4-40GB, compute_capability: "8.0", memory_mib: 40960}]}')


def _unavailable(reason: str):
    if slurm_required(os.environ):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class Public:
    def __init__(self, root: Path, cluster: SlurmCluster, user: unix_users.User, python: Path, env: dict):
        self.root, self.cluster, self.user, self.python, self.env = root, cluster, user, python, env

    def envkit(self, *args: str) -> subprocess.CompletedProcess:
        return self.user.run([str(self.python), "-m", "envkit", *args], self.env, timeout=180, cwd=self.user.home)


@pytest.fixture(scope="module")
def public(slurm) -> Public:  # (`slurm`: the session's cluster, whose fixture installs Slurm where it is missing)
    problem = unix_users.why_not()
    if problem is not None:
        _unavailable(problem)
    tag = f"{os.getpid() % 100000}"
    with unix_users.public_directory() as root, \
            unix_users.users_and_group(root, [f"ekjob{tag}"], f"ekjobs{tag}", []) as made:
        user = made[f"ekjob{tag}"]
        lib = fake_nvml.build_library(root / "nvml-lib")
        shutil.copytree(slurm.root / "nvml-nodes", root / "nvml-nodes")  # what each node's stand-in NVML answers
        try:
            python = unix_users.public_python(root, user)
        except RuntimeError as error:
            _unavailable(str(error))
        cluster = SlurmCluster(root / "cluster")
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.chdir(root)
                cluster.start()
            subprocess.run(["chmod", "-R", "a+rX", str(root / "nvml-lib"), str(root / "nvml-nodes")], check=True)
            env = {"PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "SLURM_CONF": str(cluster.conf), "LD_LIBRARY_PATH": str(lib.parent),
                   "FAKE_NVML_DIR": str(root / "nvml-nodes"), "ENVKIT_SITE": str(root / "site.yaml")}
            yield Public(root, cluster, user, python, env)
        finally:
            cluster.cancel_all()
            cluster.stop()


def test_a_second_user_runs_a_job_of_the_shared_environment_as_themself(public: Public, tmp_path: Path):
    layout = SharedLayout(public.root / "shared")
    layout.root.mkdir(mode=0o755)
    make_layout(layout, "torch")
    admin = {"HOME": str(tmp_path / "admin"), "XDG_DATA_HOME": str(tmp_path / "admin-data")}
    prefix = make_torch_env(layout.prefix("torch", VERSION), admin, name="torch", python=str(public.python))
    publish(layout, records.load(user_dirs(admin).records, "torch"), VERSION, None, "admin")
    (public.root / "site.yaml").write_text(  # the admin's site file names the shared directory for everyone
        f"version: 1\nshared: {layout.root}\npartitions:\n  part-a:\n    nodes:\n"
        f"      - {{node: gpu-a1, count: 2, profile: {A100_PROFILE}}}\n")
    os.chmod(public.root / "site.yaml", 0o644)

    listed = public.envkit("envs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [e["name"] for e in json.loads(listed.stdout)["environments"] if e.get("shared")] == ["site:torch"]
    done = public.envkit("job", "site:torch", "--partition", "part-a", "--gpus", "1", "--submit", "--", "python",
                         "-c", SHOW, "a b")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(public, job, timeout=90)  # (it asks public.cluster)
    out = public.user.home / f"slurm-{job}.out"
    assert out.stat().st_uid == public.user.uid  # written by the job, as the user
    argv, ran_in, uid, cwd = json.loads(out.read_text().strip().splitlines()[-1])
    assert argv == ["a b"] and Path(ran_in) == prefix
    assert uid == public.user.uid != os.geteuid() and Path(cwd) == public.user.home
    accounting = public.cluster.query(["squeue", "-h", "-t", "all", "-j", job, "-o", "%u"])
    assert accounting.stdout.split() == [public.user.name]
    assert not (public.user.home / ".local" / "share" / "envkit" / "records" / "torch.json").exists()
    unknown = public.envkit("job", "site:jax", "--partition", "part-a", "--print", "--", "python")
    assert unknown.returncode == 2 and "publishes no environment named 'site:jax'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
