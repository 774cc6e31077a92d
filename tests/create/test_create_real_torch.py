"""The main job, end to end with the real thing: `envkit create torch` installs the real PyTorch CPU wheel through the
real envs/torch.yaml and a mirror, checks it with the real probe, and the environment imports it.

The wheel and its dependencies are the ones this machine keeps on disk (pip's find-links, /opt/pypi), served by a
local index at the mirror; only torchvision and torchaudio are stand-ins (no CPU wheels of them are at hand).
"""

from __future__ import annotations

import pytest

from conftest import PROFILES, PYTHON, Home
from support.local_wheels import (
    MissingDistributionError,
    find_torch_cpu_wheel,
    local_distribution_files,
    torch_cpu_dependencies,
)
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

pytestmark = pytest.mark.real_torch


@pytest.fixture
def real_torch_index(pypi_server: IndexServer, home: Home, tmp_path) -> IndexServer:
    wheel = find_torch_cpu_wheel()
    if wheel is None:
        pytest.skip("no PyTorch CPU wheel for this Python on this machine (pip's find-links /opt/wheels)")
    try:
        dependencies = local_distribution_files(torch_cpu_dependencies(wheel))
    except MissingDistributionError as error:
        pytest.skip(f"a dependency of the PyTorch CPU wheel is not on this machine: {error}")
    version = wheel.name.split("-")[1]  # 2.13.0+cpu
    assert version.startswith("2.13.0"), "envs/torch.yaml's torch-2.13-cpu pins torch==2.13.*"
    # No CPU torchvision or torchaudio is at hand: stand-ins whose operations run on the real torch (the check runs
    # them, as it runs every companion a build installs)
    stand_ins = [build_wheel(tmp_path / "wheels", name, version, requires=["torch==2.13.0"],
                             files=stand_in_files(name))
                 for name, version in (("torchvision", "0.28.0+cpu"), ("torchaudio", "2.11.0+cpu"))]
    pypi_server.add_index("/whl/cpu", [wheel, *dependencies, *stand_ins])
    home.mirror_to(pypi_server)
    return pypi_server


def test_envkit_create_torch_installs_the_real_cpu_wheel_and_it_runs(home: Home, real_torch_index: IndexServer):
    done = home.envkit("create", "torch", "--build", "torch-2.13-cpu", "--python", PYTHON, "--yes",
                       "--machine", str(PROFILES / "no-gpu.yaml"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    code = "import torch; print(torch.__version__, torch.version.cuda, (torch.ones(2, 2) @ torch.ones(2, 2)).sum().item())"
    assert home.in_env("torch-cpu", code) == "2.13.0+cpu None 8.0"
    assert any(path.startswith("/whl/cpu/torch/torch-2.13.0") for path in real_torch_index.fetched_files())
    record = home.record("torch-cpu")
    assert record["verify"]["ok"] is True and record["verify"]["version"] == "2.13.0+cpu"
    assert not home.sudo_log.exists()
