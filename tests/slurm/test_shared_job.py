"""`envkit job site:NAME`: a job of the site's shared environment, submitted for real through the local Slurm, runs
the command inside the published version (its prefix, not a copy), and refuses a name the site does not publish.
(Submitted by a second real Unix user: test_shared_job_users.py; between two real Unix users without Slurm:
tests/create/test_shared_users.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

from slurm_helpers import envkit, make_torch_env, user_env, wait_done

from envkit.shared.layout import SharedLayout
from envkit.shared.publish import make_layout, publish
from envkit.state import records
from envkit.state.userdirs import user_dirs

SHOW = "import json, sys; print(json.dumps([sys.argv[1:], sys.prefix]))"


def test_a_job_of_a_shared_environment_runs_inside_its_published_version(slurm_site, cluster_user, tmp_path):
    env, _ = cluster_user
    layout = SharedLayout(tmp_path / "shared")
    layout.root.mkdir(mode=0o755)
    make_layout(layout, "torch")
    admin = user_env(slurm_site, tmp_path / "admin")  # the admin's own records hold nothing of it afterwards
    prefix = make_torch_env(layout.prefix("torch", "2.14-cu126-20261127T000000Z"), admin, name="torch")
    made = records.load(user_dirs(admin).records, "torch")
    publish(layout, made, "2.14-cu126-20261127T000000Z", None, "admin")
    shared_env = {**env, "ENVKIT_SHARED": str(layout.root)}
    done = envkit("job", "site:torch", "--partition", "part-a", "--gpus", "1", "--submit", "--", "python", "-c",
                  SHOW, "a b", env=shared_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    wait_done(slurm_site, job)
    argv, ran_in = json.loads((tmp_path / f"slurm-{job}.out").read_text().strip().splitlines()[-1])
    assert argv == ["a b"] and Path(ran_in) == prefix
    unknown = envkit("job", "site:jax", "--partition", "part-a", "--print", "--", "python", env=shared_env)
    assert unknown.returncode == 2 and "publishes no environment named 'site:jax'" in unknown.stderr
    assert "site:torch" in unknown.stderr
    assert not os.path.lexists(user_dirs(env).records / "torch.json")
