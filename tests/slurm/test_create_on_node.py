"""create --partition P --verify-on-node, end to end: made on the login node (no GPU) from a local index for the
partition's nodes, then checked on a node of the partition through srun."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from slurm_helpers import A100, envkit, user_env

from support.fixtures import pypi_server  # noqa: F401 (a fixture)
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _torch_files() -> dict[str, str]:
    return stand_in_files("torch", {"torch": {"version": "2.13.0+cu126", "cuda": "12.6", "gpus": [A100, A100]}})


def test_create_for_a_partition_then_verify_on_its_node(slurm_site, pypi_server, tmp_path):  # noqa: F811
    wheels = tmp_path / "wheels"
    cu126 = [build_wheel(wheels, "torch", "2.13.0+cu126", files=_torch_files()),
             build_wheel(wheels, "torchvision", "0.28.0+cu126", requires=["torch==2.13.0"],
                         files=stand_in_files("torchvision")),
             build_wheel(wheels, "torchaudio", "2.11.0+cu126", requires=["torch==2.13.0"],
                         files=stand_in_files("torchaudio"))]
    pypi_server.add_index("/whl/cu126", cu126)
    pypi_server.add_index("/pypi/simple", [])
    config = tmp_path / "envkit.yaml"
    config.write_text(json.dumps({"mirrors": {"https://download.pytorch.org/whl": f"{pypi_server.url}/whl",
                                              "https://pypi.org/simple": f"{pypi_server.url}/pypi/simple"}}))
    env = user_env(slurm_site, tmp_path, ENVKIT_CONFIG=str(config), NO_PROXY="127.0.0.1,localhost")
    surveyed = envkit("survey", "-p", "part-a", env=env)
    assert surveyed.returncode == 0, surveyed.stderr
    done = envkit("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--partition", "part-a",
                  "--name", "torch-a", "--yes", "--verify-on-node", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "running the check on a node of part-a" in done.stderr
    assert "inside Slurm job" in done.stderr
    record = json.loads((Path(env["XDG_DATA_HOME"]) / "envkit" / "records" / "torch-a.json").read_text())
    assert record["verify"]["ok"] is True
    assert record["verify"]["node"] in ("gpu-a1", "gpu-a2") and record["verify"]["partition"] == "part-a"
    assert slurm_site.cluster.jobs() == []
