"""The main job, end to end with the real thing: `envkit create torch` installs the real PyTorch CPU wheel through the
real envs/torch.yaml and a mirror, checks it with the real probe, and the environment imports it; `envkit add` then
adds a package that needs torch, torch held to the byte, and `envkit verify` still passes on the build.

The wheel and its dependencies are the ones this machine keeps on disk (pip's find-links, /opt/pypi), served by a
local index at the mirror; only torchvision and torchaudio are stand-ins (no CPU wheels of them are at hand).
"""

from __future__ import annotations

from pathlib import Path

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


def test_envkit_create_torch_installs_the_real_cpu_wheel_and_it_runs(home: Home, real_torch_index: IndexServer,
                                                                   tmp_path):
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
    assert record["held"][0].startswith("torch==2.13.0+cpu")

    # envkit add: a package that needs any torch (and a newer filelock than the build's index gave), torch held
    prefix = home.prefix("torch-cpu")
    site = next(prefix.glob("lib/python*/site-packages"))
    torch_record = next(site.glob("torch-*.dist-info")) / "RECORD"
    files = [site / line.split(",")[0] for line in torch_record.read_text().splitlines() if line]
    stats = {str(path): (path.stat().st_ino, path.stat().st_mtime_ns) for path in files if path.is_file()}
    addon = build_wheel(tmp_path / "pypi", "torchaddon", "1.0", requires=["torch>=2.0", "filelock>=3.0"],
                        files={"torchaddon.py": "import torch\n\ndef twice(x):\n    return torch.as_tensor(x) * 2\n"})
    real_torch_index.add_index("/pypi/simple", [addon, *local_distribution_files(["filelock"])])
    added = home.envkit("add", "torch-cpu", "torchaddon", timeout=600)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "The framework's check: PASS (torch 2.13.0+cpu)" in added.stdout
    assert home.in_env("torch-cpu", "import torchaddon; print(torchaddon.twice([1, 2]).tolist())") == "[2, 4]"
    assert {p: (Path(p).stat().st_ino, Path(p).stat().st_mtime_ns) for p in stats} == stats  # not one file rewritten
    checked = home.envkit("verify", "torch-cpu", timeout=600)
    assert checked.returncode == 0 and "PASS" in checked.stdout, checked.stdout + checked.stderr
    assert home.record("torch-cpu")["additions"] == ["torchaddon"]
