"""`envkit job FILE` of an image, submitted by a real second Unix user through a real Slurm (the cluster and the user
of test_shared_job_users.py): the job mounts the image with squashfuse as that user (no root; /dev/fuse, 0600 on
this machine, is opened to the user's group for the module and restored after), runs the command inside it and
unmounts; a job cancelled mid-run leaves nothing mounted; a partition whose nodes the image does not fit is refused
before anything is submitted. Another user than root is refused: skipped, and under CI a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import make_torch_env, wait_done
from test_shared_job_users import A100_PROFILE, Public, public  # noqa: F401 (a fixture)

from support import squashfs

V100_PROFILE = ('{driver_version: "470.82.01", cuda_driver: "11.4", gpus: ['
                '{name: Tesla V100-SXM2-16GB, compute_capability: "7.0", memory_mib: 16384}]}')
SHOW = "import json, os, sys, torch; print(json.dumps([sys.prefix, torch.__file__, os.getuid()]))"
WAIT = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(300)"


@pytest.fixture(scope="module")
def packed(public: Public, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """torch packed by root for ROOT/sw/torch (a directory every user may make entries in), the site file naming
    an A100 partition and a V100 one, /dev/fuse open to the user's group. Yields (the image, its mount point)."""
    squashfs.ensure_installed()
    admin = tmp_path_factory.mktemp("image-admin")
    env = {"HOME": str(admin), "XDG_DATA_HOME": str(admin / "data"), "XDG_CACHE_HOME": str(admin / "cache"),
           "XDG_CONFIG_HOME": str(admin / "config"), "PATH": os.environ["PATH"]}
    make_torch_env(admin / "envs" / "torch", env, name="torch", python=str(public.python))
    (public.root / "sw").mkdir(mode=0o1777)
    os.chmod(public.root / "sw", 0o1777)
    image, mount = public.root / "torch.sqfs", public.root / "sw" / "torch"
    done = subprocess.run([sys.executable, "-m", "envkit", "pack", "torch", "-o", str(image), "--relocate",
                           str(mount)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for path in (image, Path(f"{image}.fit.json")):
        os.chmod(path, 0o644)
    (public.root / "site.yaml").write_text(
        f"version: 1\npartitions:\n  part-a:\n    nodes:\n      - {{node: gpu-a1, count: 2, profile: {A100_PROFILE}}}\n"
        f"  part-v:\n    nodes:\n      - {{node: gpu-v1, count: 1, profile: {V100_PROFILE}}}\n")
    os.chmod(public.root / "site.yaml", 0o644)
    fuse = os.stat("/dev/fuse")
    os.chown("/dev/fuse", -1, public.user.gid)
    os.chmod("/dev/fuse", 0o660)
    try:
        yield image, mount
    finally:
        os.chown("/dev/fuse", -1, fuse.st_gid)
        os.chmod("/dev/fuse", fuse.st_mode & 0o7777)


def _mounted(mount: Path) -> bool:
    return str(mount) in squashfs.squashfuse_mounts()


def test_a_user_runs_a_job_from_an_image_mounted_on_the_node_and_unmounted_after(public: Public, packed):  # noqa: F811
    image, mount = packed
    done = public.envkit("job", str(image), "--partition", "part-a", "--gpus", "1", "--submit", "--", "python",
                         "-c", SHOW)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(public, job, timeout=120)
    out = public.user.home / f"slurm-{job}.out"
    prefix, torch_file, uid = json.loads(out.read_text().strip().splitlines()[-1])
    assert Path(prefix) == mount and torch_file.startswith(str(mount)) and uid == public.user.uid != os.geteuid()
    assert not _mounted(mount) and not mount.exists()


def test_a_partition_the_image_does_not_fit_is_refused_before_submitting(public: Public, packed):  # noqa: F811
    image, _ = packed
    done = public.envkit("job", str(image), "--partition", "part-v", "--submit", "--", "python", "-V")
    assert done.returncode == 1, done.stderr
    assert "would not run on partition part-v" in done.stderr and "Traceback" not in done.stderr
    listed = public.cluster.query(["squeue", "-h", "-u", public.user.name, "-o", "%i"])
    assert listed.stdout.split() == []


def test_a_job_cancelled_mid_run_leaves_nothing_mounted(public: Public, packed):  # noqa: F811
    image, mount = packed
    flag = public.user.home / "running"
    done = public.envkit("job", str(image), "--partition", "part-a", "--gpus", "1", "--submit", "--", "python",
                         "-c", WAIT, str(flag))
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert time.monotonic() < deadline, (public.user.home / f"slurm-{job}.out").read_text()
        time.sleep(0.1)
    assert _mounted(mount)
    cancelled = public.cluster.query(["scancel", job])
    assert cancelled.returncode == 0, cancelled.stderr
    wait_done(public, job, timeout=60)
    deadline = time.monotonic() + 30
    while _mounted(mount) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _mounted(mount)
