"""Detection on aarch64 (issue 43): the platform from the CPU, and on a Jetson the L4T release, the board's GPU and
its JetPack, read from real outputs of GH200, GB10, Jetson AGX Orin and Thor machines (data/real/README.md names each
source). The Jetson's /etc and device tree are laid out under a temporary root, as detection reads them there."""

from __future__ import annotations

from pathlib import Path

import pytest
from detect_fakes import DATA, data, nvml_missing

from envkit.detect import detect_machine
from envkit.detect.jetson import board_name, parse_tegra_release, with_platform
from envkit.detect.smi import parse_header
from envkit.errors import BadInputError
from envkit.machines.profile import CUDA_DRIVER, GPUS, Gpu, MachineProfile
from envkit.pick.render import profile_text
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion, L4tVersion


def real(name: str) -> str:
    return data(f"real/{name}")


# banner -> (driver, CUDA, the GPU name the table shows)
BANNERS = {
    "smi/gh200-r570-warpik.txt": ("570.124.06", "12.8", "NVIDIA GH200 480GB"),
    "smi/gh200-r535-fasrc-slitvinovgrace.txt": ("535.154.05", "12.2", "NVIDIA GH200 480GB"),
    "smi/gb10-dgx-spark-r580-obrienlabs.txt": ("580.95.05", "13.0", "NVIDIA GB10"),
    "smi/jetson-agx-orin-jp62-warpik.txt": ("540.4.0", "12.6", "Orin (nvgpu)"),
    "smi/jetson-agx-thor-jp7-ayou129.txt": ("580.00", "13.0", "NVIDIA Thor"),
}


@pytest.mark.parametrize("name", list(BANNERS))
def test_the_banner_of_each_aarch64_machine(name, gpu_names):
    driver, cuda, gpu = BANNERS[name]
    header = parse_header(real(name))
    assert (str(header.driver_version), header.cuda_driver) == (driver, CudaVersion.parse(cuda))
    assert gpu in real(name)
    # every one of them is a GPU whose architecture the name table knows (Jetson boards included)
    assert gpu_names.lookup(gpu) == {"NVIDIA GH200 480GB": ComputeCapability(9, 0), "NVIDIA GB10":
                                     ComputeCapability(12, 1), "Orin (nvgpu)": ComputeCapability(8, 7),
                                     "NVIDIA Thor": ComputeCapability(11, 0)}[gpu]


@pytest.mark.parametrize("name, l4t", [
    ("tegra/nv_tegra_release-agx-orin-r36.4.3-warpik.txt", L4tVersion(36, 4, 3)),
    ("tegra/nv_tegra_release-tx2-r32.5.1-pokusew.txt", L4tVersion(32, 5, 1)),
    ("tegra/nv_tegra_release-r35.3.1-jetson-containers.txt", L4tVersion(35, 3, 1)),
])
def test_the_l4t_release_of_real_tegra_release_files(name, l4t):
    assert parse_tegra_release(real(name)) == l4t


@pytest.mark.parametrize("text", ["", "R36 (release), REVISION: 4.3\n", "# R36 (release), REVISION: four\n",
                                  "# Jetson Linux 36.4.3\n", "# R360 (release), REVISION: 4.3, GCID: 1\n"])
def test_a_malformed_tegra_release_says_what_its_first_line_is(text):
    with pytest.raises(ValueError) as caught:
        parse_tegra_release(text)
    assert "not '# R36 (release), REVISION: 4.4, ...'" in str(caught.value)


def test_board_names_from_device_tree_models():
    assert board_name(real("tegra/model-agx-orin-devkit.txt")) == "Jetson AGX Orin"
    assert board_name(real("tegra/model-orin-nano-super-senior-design.txt")) == "Jetson Orin Nano Super"


def root_of(tmp_path: Path, release: str | None = None, model: str | None = None) -> Path:
    """A directory laid out as / is on the machine: etc/nv_tegra_release and proc/device-tree/model."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "proc" / "device-tree").mkdir(parents=True)
    if release is not None:
        (root / "etc" / "nv_tegra_release").write_text(real(release))
    if model is not None:
        (root / "proc" / "device-tree" / "model").write_bytes((DATA / "real" / model).read_bytes())
    return root


def test_x86_64_is_linux_64_and_never_a_jetson(tables, tmp_path):
    root = root_of(tmp_path, "tegra/nv_tegra_release-agx-orin-r36.4.3-warpik.txt")  # (read only on aarch64)
    profile = with_platform(MachineProfile(), tables.cuda, tables.gpu_names, root, machine="x86_64")
    assert (profile.platform, profile.l4t, profile.sources["platform"]) == ("linux-64", None, "uname -m (x86_64)")
    assert "platform" not in profile.to_dict() and "Platform:" not in profile_text(profile)


def test_a_gh200_is_aarch64_and_no_jetson(tables, make_smi, no_proc, tmp_path):
    uname = real("tegra/uname-gh200-warpik.txt").split()
    smi = make_smi(query="../real/smi/query-gh200-r570-from-banner.txt", header="../real/smi/gh200-r570-warpik.txt")
    found = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc,
                           smi_command=smi.command)
    profile = with_platform(found, tables.cuda, tables.gpu_names, root_of(tmp_path), machine=uname[-2])
    assert (profile.platform, profile.l4t, profile.cuda_driver) == ("linux-aarch64", None, CudaVersion(12, 8))
    assert profile.to_dict()["platform"] == "linux-aarch64" and "l4t" not in profile.to_dict()
    assert "Platform: linux-aarch64 (aarch64) (uname -m (aarch64))" in profile_text(profile)


def test_a_jetson_agx_orin_is_judged_by_its_board_and_jetpack(tables, make_smi, no_proc, tmp_path):
    """nvidia-smi's "Orin (nvgpu)" on 540.4.0 becomes the board's integrated GPU, named after the board, with the
    L4T release from /etc/nv_tegra_release and its JetPack."""
    smi = make_smi(query="../real/smi/query-jetson-orin-from-banner.txt",
                   header="../real/smi/jetson-agx-orin-jp62-warpik.txt")
    found = detect_machine(tables.cuda, tables.gpu_names, nvml=nvml_missing(), proc_root=no_proc,
                           smi_command=smi.command)
    assert [g.name for g in found.gpus] == ["Orin (nvgpu)"]
    root = root_of(tmp_path, "tegra/nv_tegra_release-agx-orin-r36.4.3-warpik.txt", "tegra/model-agx-orin-devkit.txt")
    uname = real("tegra/uname-jetson-agx-orin-warpik.txt").split()
    profile = with_platform(found, tables.cuda, tables.gpu_names, root, machine=uname[-2])
    assert (profile.platform, profile.l4t) == ("linux-aarch64", L4tVersion(36, 4, 3))
    [gpu] = profile.gpus
    assert (gpu.name, gpu.compute_capability, gpu.memory_mib) == ("Jetson AGX Orin", ComputeCapability(8, 7), None)
    assert gpu.source.endswith("/proc/device-tree/model")
    assert (profile.cuda_driver, profile.driver_version) == (CudaVersion(12, 6), DriverVersion.parse("540.4.0"))
    text = profile_text(profile)
    assert "Jetson AGX Orin, JetPack 6.2 (L4T 36.4.3): its GPU is the board's integrated one" in text
    assert "Jetson, Linux for Tegra 36.4.3 (/etc/nv_tegra_release)" in text
    assert profile.to_dict()["l4t"] == "36.4.3"


def test_a_jetpack_5_board_without_nvidia_smi_gets_its_gpu_from_the_device_tree(tables, tmp_path):
    root = root_of(tmp_path, "tegra/nv_tegra_release-r35.3.1-jetson-containers.txt",
                   "tegra/model-orin-nano-super-senior-design.txt")
    profile = with_platform(MachineProfile(), tables.cuda, tables.gpu_names, root, machine="aarch64")
    assert profile.gpus == (Gpu(0, "Jetson Orin Nano Super", ComputeCapability(8, 7), None,
                                "/proc/device-tree/model + envs/gpus.yaml"),)
    assert profile.sources[GPUS] == "/proc/device-tree/model"
    # the CUDA its JetPack ships, said to come from there
    assert profile.cuda_driver == CudaVersion(11, 4)
    assert profile.sources[CUDA_DRIVER] == "L4T 35.3.1 + envs/cuda.yaml (JetPack 5.1.1)"


def test_a_later_l4t_patch_counts_as_its_jetpack_line_and_an_old_one_is_unknown(tables, tmp_path):
    later = tables.cuda.jetpack_for(L4tVersion(36, 4, 7))
    assert later.jetpack == "6.2.1" and later.describe(L4tVersion(36, 4, 7)) == "JetPack 6.2.1 or newer (L4T 36.4.7)"
    root = root_of(tmp_path, "tegra/nv_tegra_release-tx2-r32.5.1-pokusew.txt", "tegra/model-agx-orin-devkit.txt")
    profile = with_platform(MachineProfile(), tables.cuda, tables.gpu_names, root, machine="aarch64")
    assert profile.l4t == L4tVersion(32, 5, 1) and profile.cuda_driver is None
    assert any("L4T 32.5.1, a JetPack cuda.yaml does not list" in note for note in profile.notes)


def test_a_malformed_tegra_release_is_bad_input_naming_the_file(tables, tmp_path):
    root = root_of(tmp_path)
    (root / "etc" / "nv_tegra_release").write_text("# Jetson Linux, who knows\n")
    with pytest.raises(BadInputError) as caught:
        with_platform(MachineProfile(), tables.cuda, tables.gpu_names, root, machine="aarch64")
    assert caught.value.message.startswith("/etc/nv_tegra_release: its first line is '# Jetson Linux, who knows'")
    assert "Linux for Tegra release cannot be read" in caught.value.message


@pytest.mark.parametrize("cpu", ["ppc64le", "s390x", "riscv64"])
def test_a_cpu_envkit_makes_nothing_for_is_bad_input(tables, tmp_path, cpu):
    with pytest.raises(BadInputError) as caught:
        with_platform(MachineProfile(), tables.cuda, tables.gpu_names, root_of(tmp_path), machine=cpu)
    assert caught.value.message == (f"this machine's CPU is {cpu}: envkit makes environments for linux-64 (x86_64) "
                                    "and linux-aarch64 (aarch64) only")
