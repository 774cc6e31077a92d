"""A personal environment on top of the site's shared one (`envkit create --on site:torch --name mywork`, issue 42)
on the cluster: `envkit job mywork` and `envkit shell mywork` run on a node of the tests' Slurm inside the personal
environment, whose Python sees the site version's packages (their files under the site's prefix, not copied). Made
here and run there by the same user; between two real Unix users: tests/create/test_shared_users.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from slurm_helpers import envkit, make_torch_env, user_env, wait_done
from test_shell import drive

from envkit.shared.layout import SharedLayout
from envkit.shared.publish import make_layout, publish
from envkit.state import records
from envkit.state.userdirs import user_dirs
from support.unix_users import public_directory

VERSION = "2.14-cu126-20261127T000000Z"
SHOW = "import json, sys, torch; print(json.dumps([sys.prefix, torch.__file__]))"


def test_a_personal_environment_runs_as_a_job_and_a_shell_on_a_node_with_the_sites_packages(slurm_site,
                                                                                          cluster_user, tmp_path):
    env, _ = cluster_user
    with public_directory() as public:  # a site directory every user (and slurmd's job) can reach
        layout = SharedLayout(public / "shared")
        layout.root.mkdir(mode=0o755)
        os.chmod(layout.root, 0o755)
        make_layout(layout, "torch")
        admin = user_env(slurm_site, tmp_path / "admin")
        site_prefix = make_torch_env(layout.prefix("torch", VERSION), admin, name="torch")
        publish(layout, records.load(user_dirs(admin).records, "torch"), VERSION, None, "admin")
        mine = {**env, "ENVKIT_SHARED": str(layout.root)}
        made = envkit("create", "--on", "site:torch", "--name", "mywork", "--yes", "--no-verify", env=mine,
                      cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        prefix = Path(records.load(user_dirs(mine).records, "mywork").prefix)

        done = envkit("job", "mywork", "--partition", "part-a", "--gpus", "1", "--submit", "--", "python", "-c",
                      SHOW, env=mine, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip()
        wait_done(slurm_site, job)
        ran_in, torch_file = json.loads((tmp_path / f"slurm-{job}.out").read_text().strip().splitlines()[-1])
        assert Path(ran_in) == prefix and Path(torch_file).is_relative_to(site_prefix), (ran_in, torch_file)

        argv = [sys.executable, "-m", "envkit", "shell", "mywork", "-p", "part-a", "--gpus", "1", "--time", "5"]
        code, text = drive(argv, {**mine, "SHELL": "/bin/sh"},
                           ["python -c \"import sys, torch; print('IN', sys.prefix, 'TORCH', torch.__file__)\"",
                            "exit"])
        assert code == 0, text
        assert f"IN {prefix} TORCH {site_prefix}" in text, text
        assert slurm_site.cluster.jobs() == []
