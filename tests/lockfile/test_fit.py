"""What a lock's target needs of a machine: CEP 46's __cuda_arch taken from the profile and honoured by a real solve
of py-rattler 0.28, and the virtual-package reasons create --from-lock refuses a lock with."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.conda_channel import build_package, index_channel

from envkit.backends.conda_engine import CondaSolveRequest, solve
from envkit.errors import InstallError
from envkit.lockfile.fit import LockDoesNotFit, raise_unless_fits, virtual_reasons
from envkit.lockfile.make import cuda_arch
from envkit.lockfile.model import PLATFORM, LockedPackage, LockFile
from envkit.machines.profile import Gpu, MachineProfile
from envkit.versions import ComputeCapability, CudaVersion

SHA = hashlib.sha256(b"x").hexdigest()
MD5 = hashlib.md5(b"x").hexdigest()


def profile(*capabilities: str | None, cuda: str | None = "12.4") -> MachineProfile:
    gpus = tuple(Gpu(i, f"GPU {i}", ComputeCapability.parse(cc) if cc else None) for i, cc in enumerate(capabilities))
    return MachineProfile(gpus=gpus, cuda_driver=CudaVersion.parse(cuda) if cuda else None)


def test_cuda_arch_is_the_lowest_compute_capability_of_all_gpus():
    assert cuda_arch(profile("8.0", "7.0", "9.0")) == "7.0"
    assert cuda_arch(profile("12.0", "8.6")) == "8.6"  # compared as versions, not as text
    assert cuda_arch(profile()) is None  # no GPU: no __cuda_arch
    assert cuda_arch(profile("8.0", None)) is None  # one GPU unknown: nothing holds for all of them


@pytest.fixture(scope="module")
def arch_channel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("arch-channel")
    build_package(root, "fp8-kernels", "1.0", depends=("__cuda_arch >=8.9", "__cuda >=12.0"))
    index_channel(root)
    return root


@pytest.mark.parametrize("gpus, solvable", [(("8.9", "9.0"), True), (("9.0", "8.0"), False)])
def test_py_rattler_solves_with_the_targets_cuda_arch(arch_channel: Path, tmp_path: Path, gpus, solvable):
    virtual = (("__cuda", "12.4"), ("__cuda_arch", cuda_arch(profile(*gpus))))
    request = CondaSolveRequest(channels=(arch_channel.as_uri(),), specs=("fp8-kernels",), virtual_packages=virtual)
    if solvable:
        assert [r.name.normalized for r in solve(request, tmp_path)] == ["fp8-kernels"]
    else:
        with pytest.raises(InstallError, match="__cuda_arch"):
            solve(request, tmp_path)


def lock_needing(*depends: tuple[str, str]) -> LockFile:
    return LockFile(packages=(LockedPackage("fp8-kernels", "1.0", "conda", PLATFORM,
                                            "https://c/linux-64/fp8-kernels-1.0-0.tar.bz2", SHA, MD5, build="0",
                                            dependencies=depends),))


def test_virtual_reasons_name_what_the_target_lacks():
    lock = lock_needing(("__cuda", ">=12.0"), ("__cuda_arch", ">=8.9"), ("__glibc", ">=2.17"))
    fits = {"__cuda": ("12.4", "0"), "__cuda_arch": ("9.0", "0"), "__glibc": ("2.36", "0")}
    assert virtual_reasons(lock, fits) == []
    old = {"__cuda": ("11.8", "0"), "__cuda_arch": ("8.0", "0"), "__glibc": ("2.36", "0")}
    assert virtual_reasons(lock, old) == [
        "fp8-kernels 1.0 needs __cuda >=12.0, but the target has __cuda=11.8",
        "fp8-kernels 1.0 needs __cuda_arch >=8.9, but the target has __cuda_arch=8.0"]
    reasons = virtual_reasons(lock, {"__glibc": ("2.36", "0")})
    assert "fp8-kernels 1.0 needs __cuda >=12.0, but the target has no __cuda (no NVIDIA driver)" in reasons
    with pytest.raises(LockDoesNotFit) as error:
        raise_unless_fits(reasons, "this machine", "fp8-1.0")
    assert error.value.exit_code == 1 and "the lock of fp8-1.0 does not fit this machine" in error.value.message


@pytest.mark.parametrize("made_for, said", [
    ("this machine", "(the machine it was locked on)"),
    ("this machine with --cuda 12.4", "(the machine it was locked on with --cuda 12.4)"),  # was: "(this machine ...)"
    ("partition gpu-a100", "(partition gpu-a100)"),
])
def test_a_refused_lock_says_where_it_fits_in_words_true_on_this_machine(made_for, said):
    with pytest.raises(LockDoesNotFit) as error:
        raise_unless_fits(["needs driver CUDA >= 12.6, the driver has 11.2"], "profile old", "x-1.0",
                          "envkit lock x -o x-old.conda-lock.yml --machine old.yaml", made_for)
    assert f"install this one where it fits {said}: there" in error.value.hint
