"""Resolution cases from public bug reports, each worked out by hand from shared/reference/compat-data.md (with its
corrections of 2026-11-22) before looking at envkit's answer: the pick, and the reason a wrong pick is refused."""

from __future__ import annotations

import pytest

from envkit.pick.resolve import resolve


@pytest.fixture
def judge(catalog, load_profile):
    def run(manifest: str, machine: str):
        resolution = resolve(catalog.manifests[manifest], load_profile(machine), catalog.tables)
        return resolution, {c.build.id: c for c in resolution.candidates}

    return run


def test_gtx_1080_ti_on_a_cuda_12_8_driver_gets_cu126_not_cu128(judge):
    """uv#14742: a driver-only picker chose cu128 for an R570 driver, and the wheel has no sm_61 code. The cu126
    line keeps Pascal (sm_60 code runs on sm_61); 2.15 has no cu126 build, so 2.14 cu126, natively (12.6 <= 12.8)."""
    resolution, builds = judge("torch", "gtx1080ti-cuda128")
    assert resolution.selected.build.id == "torch-2.14-cu126" and resolution.selected.native is True
    assert "runs the build's sm_60 code" in resolution.selected.reasons[1]
    refused = builds["torch-2.11-cu128"]
    assert not refused.compatible
    assert refused.reasons == ("GPU 0, NVIDIA GeForce GTX 1080 Ti (sm_61): no kernels for sm_61: this build has "
                               "sm_75 and newer",)
    assert builds["torch-2.15-cu130"].reasons[0] == "needs driver CUDA >= 13.0, the driver has 12.8"


def test_v100_on_a_580_driver_gets_cu126_not_cu130(judge):
    """A driver-only picker chose cu130 for an R580 driver (CUDA 13.0); CUDA 13 builds have no Volta code (the
    toolkit itself starts at sm_75). 2.15 is cu130/cu132 only: 2.14 cu126."""
    resolution, builds = judge("torch", "v100x8-cuda130")
    assert resolution.selected.build.id == "torch-2.14-cu126" and resolution.selected.native is True
    for build_id in ("torch-2.15-cu130", "torch-2.15-cu132", "torch-2.14-cu130"):
        assert not builds[build_id].compatible
        assert any("no kernels for sm_70: this build has sm_75 and newer" in r for r in builds[build_id].reasons)


def test_r470_driver_refuses_cu121_and_takes_cu118_through_minor_version_compatibility(judge):
    """vLLM#11623: "The NVIDIA driver on your system is too old (found version 11040)" from a cu121 wheel on R470.
    CUDA 12 builds need a CUDA 12 driver (no compatibility across majors); cu118 runs on 470.199.02 through CUDA 11
    minor-version compatibility (>= 450.80.02), from SASS: the A100 has sm_80 code in 2.7 cu118."""
    resolution, builds = judge("torch", "a100-r470-cuda114")
    assert builds["torch-2.5-cu121"].reasons == ("needs driver CUDA >= 12.1, the driver has 11.4",)
    assert resolution.selected.build.id == "torch-2.7-cu118" and resolution.selected.native is False
    assert "minor-version compatibility (driver 470.199.02, >= 450.80.02)" in resolution.selected.reasons[0]


def test_rtx_5070_ti_on_a_570_driver_gets_2_13_cu129(judge):
    """sm_120 on R570 (CUDA 12.8): every CUDA 13 build needs a newer driver, the cu126 line has no Blackwell code
    and no PTX; 2.11 is the newest release with a cu128 build (sm_120 SASS). Issue 30: 2.12 and 2.13 have cu129
    builds, which run on R570 through CUDA 12 minor-version compatibility from their sm_120 SASS; the newest release
    ranks first, so 2.13 cu129 instead of 2.11 cu128. Issue 46: 2.14 has no cu129 build (it was the pick here, and
    create failed). JAX: the CUDA 12 plugin (PTX from SM 5.2)."""
    resolution, builds = judge("torch", "rtx5070ti-cuda128")
    assert resolution.selected.build.id == "torch-2.13-cu129" and resolution.selected.native is False
    assert "torch-2.14-cu129" not in builds
    assert "minor-version compatibility" in resolution.selected.reasons[0]
    assert builds["torch-2.11-cu128"].compatible and builds["torch-2.11-cu128"].native is True
    assert builds["torch-2.11-cu129"].compatible and builds["torch-2.11-cu129"].native is False
    assert "no kernels for sm_120: this build has sm_50 to sm_90 and no PTX for newer GPUs" in \
        builds["torch-2.14-cu126"].reasons[0]
    assert builds["torch-2.15-cu130"].reasons == ("needs driver CUDA >= 13.0, the driver has 12.8",)
    jax, jax_builds = judge("jax", "rtx5070ti-cuda128")
    assert jax.selected.build.id == "jax-0.12-cu12"
    assert jax_builds["jax-0.12-cu13"].reasons[0] == "needs driver CUDA >= 13.0, the driver has 12.8"


@pytest.mark.parametrize("manifest, expected", [
    ("torch", "torch-1.8-cu101"),              # cu101's newest; sm_60 code
    ("tensorflow", "tensorflow-2.4.1-cu101"),  # Anaconda's tensorflow-gpu bundling cudatoolkit 10.1
    ("mxnet", "mxnet-1.9.1-cu101"),            # mxnet-cu101 (sm_60 SASS)
    ("jax", "jax-0.12-cpu"),                   # JAX's GPU plugins need a CUDA 12 driver
])
def test_slurm_node_with_a_cuda_10_1_driver(judge, manifest, expected):
    """A Slurm P100 node on R418 (CUDA 10.1): only builds bundling CUDA <= 10.1 run; CUDA 10 has no minor-version
    compatibility, so no 10.2 or 11.x build."""
    resolution, builds = judge(manifest, "slurm-p100-cuda101")
    assert resolution.selected.build.id == expected
    assert resolution.selected.native is (None if expected.endswith("cpu") else True)
    if manifest == "torch":
        assert builds["torch-1.12-cu102"].reasons[0] == "needs driver CUDA >= 10.2, the driver has 10.1"
        assert resolution.selected.python is not None and str(resolution.selected.python) == "3.9"


def test_k80_on_r470_gets_no_jax_gpu_build(judge):
    """JAX's CUDA 12 plugin needs SM >= 5.2 and a CUDA 12 driver: a K80 (sm_37) on R470 (CUDA 11.4) gets CPU JAX,
    and both reasons are said."""
    resolution, builds = judge("jax", "k80x2-cuda114")
    assert resolution.selected.build.id == "jax-0.12-cpu"
    assert builds["jax-0.12-cu12"].reasons == (
        "needs driver CUDA >= 12.0, the driver has 11.4; no driver for CUDA 12.0 drives sm_37: R470 (CUDA 11.4) is "
        "the last driver branch for Kepler",
        "GPUs 0-1, Tesla K80 (sm_37): no kernels for sm_37: this build has sm_52 and newer",
    )


def test_k80_torch_stops_at_2_3_because_of_the_bundled_cudnn(judge):
    """torch 2.4-2.7 cu118 still list sm_37, but bundle cuDNN 9.1, which needs compute capability 5.0: on a K80
    the newest build that runs is 2.3 cu118 (cuDNN 8.7), through CUDA 11 minor-version compatibility."""
    resolution, builds = judge("torch", "k80x2-cuda114")
    assert resolution.selected.build.id == "torch-2.3-cu118"
    assert builds["torch-2.7-cu118"].reasons == (
        "GPUs 0-1, Tesla K80 (sm_37): the build has code for this GPU, but the cuDNN 9.1 it bundles needs a GPU "
        "of compute capability 5.0 or newer",)


@pytest.mark.parametrize("manifest, expected", [
    ("jax", "jax-0.12-cu12"),                # the CUDA 13 plugin needs sm_75
    ("tensorflow", "tensorflow-2.21-cu125"),  # sm_70 SASS; asks for nvidia-cudnn-cu12>=9.3.0.75,<10.0
])
def test_v100_on_a_580_driver_gets_a_cudnn_that_still_has_volta_code(judge, manifest, expected):
    """immich#23110 and pytorch#172352: pip's newest nvidia-cudnn-cu12 (9.11 on) has no sm_50-sm_70 code (its
    libcudnn_cnn.so.9 holds sm_75 to sm_120; 9.10.2.21 still has sm_50 to sm_120), and jax[cuda12] and
    tensorflow[and-cuda] 2.20+ take the newest 9.x: on a V100 the pick must cap cuDNN below 9.11."""
    resolution, _ = judge(manifest, "v100x8-cuda130")
    assert resolution.selected.build.id == expected
    assert "nvidia-cudnn-cu12<9.11" in resolution.selected.build.pip.packages


def test_list_all_on_the_d2l_machine_picks_1_8_1_cu101_and_shows_what_is_unconfirmed(tmp_path):
    """The issue's acceptance check, through the command line: a GPU build (no CPU fallback warning), the doubt
    about the PyTorch index shown to admins in `--all` and carried in the JSON."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    profile = str(Path(__file__).parent / "profiles" / "d2l.yaml")
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d"),
           "XDG_CACHE_HOME": str(tmp_path / "k"), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}

    def envkit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", "list", "torch", "--machine", profile, *args],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)

    data = json.loads(envkit("--json").stdout)["manifests"][0]
    assert data["selected"] == "torch-1.8-cu101" and data["gpu_unused"] is None
    build = next(b for b in data["builds"] if b["id"] == "torch-1.8-cu101")
    assert build["python"] == "3.9" and "download.pytorch.org" in build["unconfirmed"]
    text = envkit("--all").stdout
    assert "* torch-1.8-cu101" in text
    assert "unconfirmed: the +cuXXX wheels on download.pytorch.org" in text
    assert "unconfirmed:" not in envkit().stdout  # the everyday view stays short


# --- issue 30: reports of 2026-11-26 -------------------------------------------------------------------------------

def gpu_profile(name, cuda, driver, capability, gpu):
    from envkit.machines.profile import profile_from_dict

    return profile_from_dict({"name": name, "cuda_driver": cuda, "driver_version": driver,
                              "gpus": [{"name": gpu, "compute_capability": capability}]}, name)


RTX3090_R550 = ("rtx3090", "12.4", "550.54.14", "8.6", "NVIDIA GeForce RTX 3090")


@pytest.mark.parametrize("build_id", ["torch-1.4-cu101", "torch-1.4-cu100", "torch-1.5-cu102", "torch-1.5-cu101"])
def test_torch_1_4_and_1_5_do_not_jit_onto_an_rtx_3090(catalog, build_id):
    """VinAIResearch/CPM#9, zzhang1987/Factor-Graph-Neural-Network#4, niuchuangnn/SPICE#26: CUDA 10 builds on an
    RTX 30xx fail with CUDNN_STATUS_EXECUTION_FAILED. torch 1.4/1.5 carry compute_37 PTX, which the R550 driver
    could JIT for sm_86, but their cuDNN 7.6 supports compute capability 3.0-7.5 (NVIDIA's cuDNN 7.6 support
    matrix): refused, with the library as the reason."""
    from envkit.pick.resolve import assess

    build = next(b for b in catalog.manifests["torch"].builds if b.id == build_id)
    verdict = assess(build, gpu_profile(*RTX3090_R550), catalog.tables)
    assert not verdict.compatible
    assert verdict.reasons == ("GPU 0, NVIDIA GeForce RTX 3090 (sm_86): cuDNN 7.6, bundled by this build, has no "
                               "support for sm_86 (it serves compute capability 7.5 and older)",)


def test_a_k80_and_an_rtx_3090_no_longer_share_torch_1_5_through_jit(catalog):
    """The consequence: a K80 on R418 (CUDA 10.1) and an RTX 3090 on R550. Before, torch 1.5 cu101 fitted both
    (sm_37 SASS for the K80, compute_37 PTX JIT-compiled for the 3090). Its cuDNN 7.6 has no Ampere support, so
    no GPU build fits both: the K80 gets cu101's newest, 1.8.1 (sm_37 SASS, cuDNN 7.6 within its range), the 3090
    the newest build for its driver, 2.14 cu126 (sm_86 SASS, through CUDA 12 minor-version compatibility, before
    the unconfirmed cu129 that would run the same way; the CUDA 13 builds need a newer driver)."""
    from envkit.machines.fleet import fleet_of, named
    from envkit.pick.fleet_resolve import resolve_fleet

    k80 = gpu_profile("k80-r418", "10.1", "418.87.01", "3.7", "Tesla K80")
    machines = fleet_of([named(k80, "k80-r418"), named(gpu_profile(*RTX3090_R550), "rtx3090")])
    result = resolve_fleet(catalog.manifests["torch"], machines, catalog.tables)
    assert not result.selected.build.is_gpu
    assert {g.machines: g.selected.build.id for g in result.groups} == {
        ("k80-r418",): "torch-1.8-cu101", ("rtx3090",): "torch-2.14-cu126"}
    assert result.fails_on["torch-1.5-cu101"] == ("rtx3090",)


@pytest.mark.parametrize("release", ["2.16", "2.17", "2.18", "2.19", "2.20", "2.21"])
def test_tensorflow_2_16_to_2_21_do_not_run_on_an_rtx_5090(judge, release):
    """tensorflow/tensorflow#89272, #97387, #99592, #101746, #103531, #111958, #112272: the pip builds fail on sm_120;
    #111958: XLA says "PTX version 8.5 does not support target sm_120". On an RTX 5090 (R570, CUDA 12.8) each is
    refused with XLA as the reason, though their compute_90 PTX would JIT. 2.14/2.15 (compute_80 PTX) carry the
    same ceiling on the same cause (inferred, marked unconfirmed), so they do not take the newer ones' place, and the
    legacy conda builds have no Blackwell code: the pick is the newest tensorflow-cpu, with the GPU unused."""
    resolution, builds = judge("tensorflow", "rtx5090-cuda128")
    assert resolution.selected.build.id == "tensorflow-2.21-cpu"
    assert builds[f"tensorflow-{release}-cu12{'3' if release in ('2.16', '2.17') else '5'}"].reasons == (
        "GPU 0, NVIDIA GeForce RTX 5090 (sm_120): XLA (PTX ISA 8.5 and older), bundled by this build, has no support "
        "for sm_120 (it serves compute capability 10.3 and older)",)


def test_tensorflow_on_a_b200_is_kept_and_marked_unconfirmed(judge):
    """Whether TF 2.16-2.21 run on sm_100 is unsourced: B200 keeps the former judgement (compute_90 PTX, JIT) and the
    pick carries the doubt for `list --all`."""
    resolution, _ = judge("tensorflow", "b200-cuda130")
    assert resolution.selected.build.id == "tensorflow-2.21-cu125"
    assert "compute_90 PTX" in resolution.selected.reasons[-1]
    assert "sm_100" in resolution.selected.build.unconfirmed


def test_python_3_15_picks_torch_2_15_and_its_install_leaves_torchaudio_out(catalog, load_profile):
    """torch 2.15 claims 3.11-3.15, its cu130/cpu builds pin torchaudio 2.11, which has no cp315 wheel (`pip index
    versions torchaudio --python-version 3.15 --only-binary=:all:` finds none; pytorch/test-infra#8214, #8241).
    With --python 3.15 on an H100 with R580 (CUDA 13.0), the pick is 2.15 cu130 (native; cu132 would need minor-
    version compatibility), and what pip is given installs there: torchaudio's marker leaves it out on 3.15 only."""
    from packaging.requirements import Requirement

    from envkit.pick.resolve import parse_python_request

    request = parse_python_request("3.15", catalog.tables.python)
    resolution = resolve(catalog.manifests["torch"], load_profile("h100-cuda130"), catalog.tables, request)
    selected = resolution.selected
    assert selected.build.id == "torch-2.15-cu130" and str(selected.python) == "3.15"

    def installed(python):
        return [Requirement(p).name for p in selected.build.pip.packages
                if Requirement(p).marker is None or Requirement(p).marker.evaluate({"python_version": python})]

    assert installed("3.15") == ["torch"]
    assert installed("3.14") == ["torch", "torchaudio"]
    assert "no torchaudio either" in selected.build.notes


def test_an_r610_rtx_2080_super_read_through_nvidia_smi_gets_a_cuda_13_build(catalog):
    """utkuozdemir/nvidia_gpu_exporter's R610 capture (tests/detect/data/real/): the banner says "KMD Version:
    610.57.04" and "CUDA UMD Version: 13.3", which the fallback parser missed before. Read right, CUDA 13.3 runs
    torch 2.15 cu130 and cu132 natively, the 2080 SUPER (sm_75) from its sm_75 SASS; cu130 first: the cu132 build
    of 2.15 is `unconfirmed` (only PyPI's default build was seen), 2.15.0+cu130 is reported running (issue 46), and
    a confirmed build ranks before an unconfirmed one. Without the CUDA (the old parser), every GPU build was
    refused."""
    from pathlib import Path

    from envkit.detect.smi import parse_header
    from envkit.machines.profile import Gpu, MachineProfile
    from envkit.versions import ComputeCapability

    real = Path(__file__).parent / "detect" / "data" / "real" / "smi"
    header = parse_header((real / "exporter-geforce-rtx-2080-super-r610.57.04.txt").read_text())
    profile = MachineProfile(gpus=(Gpu(0, "NVIDIA GeForce RTX 2080 SUPER", ComputeCapability(7, 5)),),
                             cuda_driver=header.cuda_driver, driver_version=header.driver_version)
    resolution = resolve(catalog.manifests["torch"], profile, catalog.tables)
    assert resolution.selected.build.id == "torch-2.15-cu130" and resolution.selected.native is True
    assert next(c for c in resolution.candidates if c.build.id == "torch-2.15-cu132").compatible
    # /proc alone (driver 610.57.04, no CUDA): 13.3 from cuda.yaml's new row, the same pick
    assert catalog.tables.cuda.cuda_for_driver(header.driver_version) == header.cuda_driver


def test_a_pascal_gpu_on_its_last_driver_and_a_profile_that_claims_a_newer_one(catalog):
    """NixOS/nixos-hardware#1880: the 595 driver "will ignore this GPU" (Pascal): R580 is the last for Maxwell,
    Pascal and Volta. A GTX 1080 on 580.95.05 (CUDA 13.0) gets torch 2.14 cu126 (sm_60 code; 2.15 is cu130/cu132
    only, sm_75 and newer). The same GPU in a hand-written profile on 595.45.04 is warned about."""
    from envkit.machines.profile import profile_from_dict
    from envkit.pick.resolve import impossible_driver

    def gtx1080(driver, cuda):
        return profile_from_dict({"name": "pascal", "driver_version": driver, "cuda_driver": cuda,
                                  "gpus": [{"name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1"}]}, "p")

    resolution = resolve(catalog.manifests["torch"], gtx1080("580.95.05", "13.0"), catalog.tables)
    assert resolution.selected.build.id == "torch-2.14-cu126"
    assert impossible_driver(gtx1080("580.95.05", "13.0"), catalog.tables) == ()
    [warning] = impossible_driver(gtx1080("595.45.04", "13.2"), catalog.tables)
    assert "R580 (CUDA 13.0) is the last driver branch for Maxwell, Pascal and Volta" in warning


def test_a_gtx_960m_laptop_known_only_by_its_name_gets_cu126(catalog):
    """A GeForce GTX 960M (notebook Maxwell, 5.0: NVIDIA's list), seen through /proc (a name, no compute
    capability), on R550 (CUDA 12.4). Before issue 30 its name matched no key ("GTX 960" is a whole word only), so
    every GPU build was refused as of unknown compute capability. Now 5.0: torch 2.14 cu126 (sm_50 SASS) through
    CUDA 12 minor-version compatibility; cu129 has no sm_50."""
    from envkit.detect.sources import gpu_from_name
    from envkit.machines.profile import MachineProfile
    from envkit.versions import CudaVersion, DriverVersion

    gpu = gpu_from_name(0, "NVIDIA GeForce GTX 960M", catalog.tables.gpu_names, "/proc/driver/nvidia/gpus")
    assert str(gpu.compute_capability) == "5.0"
    profile = MachineProfile(gpus=(gpu,), cuda_driver=CudaVersion(12, 4), driver_version=DriverVersion.parse("550.54.14"))
    resolution = resolve(catalog.manifests["torch"], profile, catalog.tables)
    assert resolution.selected.build.id == "torch-2.14-cu126" and resolution.selected.native is False
