"""Resolution on the real manifests, machine by machine, and each rule on small synthetic builds."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envkit.catalog import ArchSet, Build, Catalog, Manifest, PipInstall
from envkit.errors import BadInputError
from envkit.machines.profile import Gpu, MachineProfile
from envkit.pick.resolve import Request, assess, choose_python, describe_arch, parse_python_request, rank, resolve
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


@pytest.fixture
def torch_on(catalog: Catalog, load_profile):
    def on(machine: str, **request):
        return resolve(catalog.manifests["torch"], load_profile(machine), catalog.tables, Request(**request))

    return on


def by_id(resolution):
    return {c.build.id: c for c in resolution.candidates}


# machine profile -> (selected torch build, whether the driver runs it natively). Worked out by hand from
# shared/reference/compat-data.md, not from envkit's output.
TORCH_SELECTIONS = [
    # 13.x builds have no sm_70; 2.14 cu126 has sm_70 and 12.6 <= 13.0.
    ("v100x8-cuda130", "torch-2.14-cu126", True),
    # cu126 through CUDA 12 minor-version compatibility (535 >= 525.60.13), SASS for both sm_70 and sm_80.
    ("v100-a100-cuda122", "torch-2.14-cu126", False),
    ("no-gpu", "torch-2.15-cpu", None),
    # 2.14 cu126 through CUDA 12 minor-version compatibility (2.14 has no cu129 build: issue 46).
    ("rtx2070-cuda124", "torch-2.14-cu126", False),
    # 11.2 driver: no CUDA 12 build; cu118 through CUDA 11 minor-version compat, sm_61 runs the sm_60 code.
    ("gtx1080ti-cuda112", "torch-2.7-cu118", False),
    ("h100-cuda128", "torch-2.14-cu126", True),
    # sm_120 on a 12.8 driver: 13.x needs a newer driver, cu126 has no Blackwell code; the newest cu128 is 2.11's,
    # but 2.13 has a cu129 build (issue 30; 2.14 has none, issue 46), run through CUDA 12 minor-version
    # compatibility from its sm_120 SASS.
    ("rtx5090-cuda128", "torch-2.13-cu129", False),
    # Same release natively (cu130) before through minor-version compatibility (cu132).
    ("b200-cuda130", "torch-2.15-cu130", True),
    # sm_37 lives only in the cu118 line (until 2.7), via CUDA 11 minor-version compat on R470; but 2.4-2.7 cu118
    # bundle cuDNN 9.1, which needs compute capability 5.0: 2.3 (cuDNN 8.7) is the K80's newest.
    ("k80x2-cuda114", "torch-2.3-cu118", False),
    # sm_89 runs the sm_86 code.
    ("rtx4090-cuda126", "torch-2.14-cu126", True),
    # 450.51.06 is below CUDA 11's minor-version floor: only builds for CUDA <= 11.0 run: the newest is 1.12 cu102,
    # whose sm_70 code runs on the T4 (sm_75).
    ("cuda110-old-r450", "torch-1.12-cu102", True),
    # The d2l course's 4x V100 on driver 418.67 (CUDA 10.1): cu101's newest, 1.8.1, has sm_70 code.
    ("d2l", "torch-1.8-cu101", True),
]


@pytest.mark.parametrize("machine, expected, native", TORCH_SELECTIONS)
def test_torch_selection(catalog, machine, expected, native, torch_on):
    resolution = torch_on(machine)
    assert resolution.selected is not None
    assert resolution.selected.build.id == expected
    assert resolution.selected.native is native


def test_eight_v100_on_cuda13_driver_never_get_cu130_or_torch_211_cu128(catalog, torch_on):
    resolution = torch_on("v100x8-cuda130")
    builds = by_id(resolution)
    for candidate in resolution.compatible:
        assert candidate.build.cuda is None or candidate.build.cuda.major < 13, candidate.build.id
    assert not builds["torch-2.11-cu128"].compatible
    assert builds["torch-2.10-cu128"].compatible  # 2.10 cu128 kept Volta
    reasons = builds["torch-2.11-cu128"].reasons
    assert reasons == ("GPUs 0-7, Tesla V100-SXM2-32GB (sm_70): no kernels for sm_70: this build has sm_75 and newer",)
    cu130 = builds["torch-2.14-cu130"]
    assert cu130.native is True  # the driver is fine; the GPUs are not covered
    assert any("sm_70" in r and "sm_75 and newer" in r for r in cu130.reasons)


def test_v100_plus_a100_names_only_the_uncovered_gpu(catalog, torch_on):
    builds = by_id(torch_on("v100-a100-cuda122"))
    reasons = builds["torch-2.11-cu128"].reasons
    assert len(reasons) == 1
    assert reasons[0].startswith("GPU 0, Tesla V100-PCIE-16GB (sm_70): no kernels")
    assert builds["torch-2.10-cu128"].compatible and builds["torch-2.10-cu128"].native is False
    # Different CUDA major: no minor-version compatibility across majors.
    assert builds["torch-2.14-cu130"].reasons[0] == "needs driver CUDA >= 13.0, the driver has 12.2"


def test_no_gpu_machine_gets_cpu_builds_and_gpu_builds_say_why_not(catalog, torch_on):
    resolution = torch_on("no-gpu")
    assert {c.build.variant for c in resolution.compatible} == {"cpu"}
    for candidate in resolution.incompatible:
        assert candidate.build.is_gpu
        needs = "an AMD GPU" if candidate.build.is_rocm else "an NVIDIA GPU"
        assert candidate.reasons == (f"needs {needs}; the machine has none",)


def test_gpu_builds_rank_before_every_cpu_build(catalog, torch_on):
    resolution = torch_on("gtx1080ti-cuda112")
    variants = [c.build.variant for c in resolution.compatible]
    first_cpu = variants.index("cpu")
    assert all(v == "cpu" for v in variants[first_cpu:])
    # The newest CPU build (2.15) ranks after the last GPU build (1.4 cu92, after cu101 and cu100 by CUDA).
    assert resolution.compatible[first_cpu - 1].build.id == "torch-1.4-cu92"
    assert resolution.compatible[first_cpu].build.id == "torch-2.15-cpu"


def test_driver_too_old_reason_states_both_versions(catalog, torch_on):
    builds = by_id(torch_on("gtx1080ti-cuda112"))
    assert builds["torch-2.14-cu126"].reasons[0] == "needs driver CUDA >= 12.6, the driver has 11.2"


def test_below_minor_version_floor_says_which_driver_is_needed(catalog, torch_on):
    builds = by_id(torch_on("cuda110-old-r450"))
    reason = builds["torch-2.7-cu118"].reasons[0]
    assert "minor-version compatibility needs driver >= 450.80.02, this one is 450.51.06" in reason


def test_python_request_narrows_to_builds_that_publish_it(catalog, torch_on):
    resolution = torch_on("no-gpu", python=Version("3.8"))
    assert resolution.selected.build.id == "torch-2.4-cpu"
    assert resolution.selected.python == Version("3.8")
    assert by_id(resolution)["torch-2.14-cpu"].reasons == ("publishes Python 3.10-3.14, not 3.8",)


def test_default_python_is_the_tables_default_or_the_closest_below(catalog, torch_on):
    builds = by_id(torch_on("no-gpu"))
    assert builds["torch-2.14-cpu"].python == Version("3.12")
    assert builds["torch-2.0-cpu"].python == Version("3.11")  # 2.0 publishes 3.8-3.11


@pytest.mark.parametrize("text", ["3", "3.12.1", "three", "2.7"])
def test_bad_python_requests_are_bad_input(catalog, text):
    with pytest.raises(BadInputError):
        parse_python_request(text, catalog.tables.python)


# --- the rules, on synthetic builds -----------------------------------------------------------------------------

def cc(text: str) -> ComputeCapability:
    return ComputeCapability.parse(text)


def gpu_build(cuda: str, sass=(), ptx=(), version="1.0", variant=None, python=">=3.8") -> Build:
    return Build(
        id=f"x-{version}-{variant or CudaVersion.parse(cuda).tag}",
        manifest="x",
        version=Version(version),
        variant=variant or CudaVersion.parse(cuda).tag,
        python=SpecifierSet(python),
        cuda=CudaVersion.parse(cuda),
        arch=ArchSet(sass=tuple(map(cc, sass)), ptx=tuple(map(cc, ptx))),
        pip=PipInstall(packages=("x",)),
    )


def machine(cuda: str, *archs: str, driver=None) -> MachineProfile:
    return MachineProfile(
        gpus=tuple(Gpu(i, f"GPU{i}", cc(a)) for i, a in enumerate(archs)),
        cuda_driver=CudaVersion.parse(cuda),
        driver_version=DriverVersion.parse(driver) if driver else None,
    )


@pytest.mark.parametrize(
    "sass, ptx, gpu, covered",
    [
        (["8.0"], [], "8.6", True),  # same major, lower minor
        (["8.6"], [], "8.0", False),  # same major, higher minor: no
        (["7.5"], [], "8.0", False),  # SASS never crosses majors
        ([], ["7.5"], "9.0", True),  # PTX JIT for any newer GPU
        ([], ["9.0"], "8.6", False),  # but not for an older one
        (["6.0"], [], "6.1", True),  # GTX 1080 Ti runs sm_60
        (["10.0"], [], "10.3", True),  # B300 runs sm_100
        (["12.0"], [], "10.0", False),
    ],
)
def test_kernel_coverage_rule(catalog, sass, ptx, gpu, covered):
    # (a driver for CUDA 13.0: every GPU here, B300 included, is on a driver that drives it)
    candidate = assess(gpu_build("12.6", sass, ptx), machine("13.0", gpu), catalog.tables)
    assert candidate.compatible is covered


def test_every_gpu_must_be_covered(catalog):
    build = gpu_build("12.6", ["8.0", "9.0"])
    assert assess(build, machine("12.6", "8.0", "9.0"), catalog.tables).compatible
    candidate = assess(build, machine("12.6", "8.0", "7.0", "9.0"), catalog.tables)
    assert not candidate.compatible
    assert candidate.reasons == ("GPU 1, GPU1 (sm_70): no kernels for sm_70: this build has sm_80 and newer",)


def test_minor_version_compatibility_runs_sass_but_not_newer_ptx(catalog):
    build = gpu_build("12.8", sass=["8.0"], ptx=["9.0"])
    on_sass = assess(build, machine("12.4", "8.0", driver="550.54.14"), catalog.tables)
    assert on_sass.compatible and on_sass.native is False
    on_ptx = assess(build, machine("12.4", "9.0", driver="550.54.14"), catalog.tables)
    assert not on_ptx.compatible
    assert "cannot JIT-compile" in on_ptx.reasons[0]
    # A driver too old for the build at all: the driver is the reason, not the PTX (a new driver would JIT it).
    too_old = assess(build, machine("11.8", "9.0", driver="520.61.05"), catalog.tables)
    assert not too_old.compatible
    assert len(too_old.reasons) == 1 and "needs driver CUDA >= 12.8" in too_old.reasons[0]
    natively = assess(build, machine("12.8", "9.0", driver="570.86.15"), catalog.tables)
    assert natively.compatible and natively.native is True


def test_minor_version_compatibility_needs_the_floor_driver(catalog):
    build = gpu_build("11.8", sass=["7.5"])
    assert assess(build, machine("11.0", "7.5", driver="450.80.02"), catalog.tables).compatible
    assert not assess(build, machine("11.0", "7.5", driver="450.51.05"), catalog.tables).compatible


def test_unknown_driver_version_uses_the_table_as_a_lower_bound(catalog):
    # Every driver that reports CUDA 12.4 is >= 550.54.14 >= 525.60.13: compatible.
    assert assess(gpu_build("12.8", sass=["8.0"]), machine("12.4", "8.0"), catalog.tables).compatible
    # A driver reporting 11.0 may be 450.51.05, below CUDA 11's floor 450.80.02: not provably compatible.
    candidate = assess(gpu_build("11.8", sass=["8.0"]), machine("11.0", "8.0"), catalog.tables)
    assert not candidate.compatible
    assert "driver version is unknown" in candidate.reasons[0]


def test_a_driver_reporting_a_cuda_no_toolkit_has_is_bounded_by_the_toolkit_below(catalog):
    # R565 drivers (565.57.01) report CUDA 12.7; there was no 12.7 toolkit. Such a driver is >= 12.6's 560.28.03 (and
    # so >= CUDA 12's floor 525.60.13), not >= 12.8's 570.26, which 565.57.01 is below.
    candidate = assess(gpu_build("12.8", sass=["8.0"]), machine("12.7", "8.0"), catalog.tables)
    assert candidate.compatible and candidate.native is False
    assert "any driver for CUDA 12.7 is >= 560.28.03, >= 525.60.13" in candidate.reasons[0]


def test_no_minor_version_compatibility_for_cuda_10(catalog):
    candidate = assess(gpu_build("10.2", sass=["7.0"]), machine("10.1", "7.0", driver="418.87.00"), catalog.tables)
    assert candidate.reasons == ("needs driver CUDA >= 10.2, the driver has 10.1",)


def test_unknown_compute_capability_is_not_guessed(catalog):
    profile = MachineProfile(gpus=(Gpu(0, "Mystery GPU", None),), cuda_driver=CudaVersion(12, 6))
    candidate = assess(gpu_build("12.6", ["8.0"]), profile, catalog.tables)
    assert not candidate.compatible
    assert "compute capability unknown; pass --gpu-arch X.Y" in candidate.reasons[0]


def test_ranking_newest_version_then_native_then_newest_cuda(catalog):
    builds = [
        gpu_build("12.8", ["8.0"], version="2.0"),
        gpu_build("12.4", ["8.0"], version="2.0"),
        gpu_build("12.9", ["8.0"], version="2.0"),
        gpu_build("12.4", ["8.0"], version="1.0"),
        gpu_build("12.6", ["9.0"], version="3.0"),  # incompatible: no kernels for sm_80
    ]
    host = machine("12.6", "8.0", driver="560.35.03")
    ranked = rank([assess(b, host, catalog.tables) for b in builds], has_gpus=True)
    assert [c.build.id for c in ranked] == ["x-2.0-cu124", "x-2.0-cu129", "x-2.0-cu128", "x-1.0-cu124",
                                            "x-3.0-cu126"]
    assert [c.native for c in ranked[:4]] == [True, False, False, True]


def test_describe_arch_speaks_to_the_missing_gpu():
    arch = ArchSet(sass=(cc("5.0"), cc("9.0")))
    assert describe_arch(arch, cc("3.7")) == "sm_50 and newer"
    assert describe_arch(arch, cc("10.0")) == "sm_50 to sm_90 and no PTX for newer GPUs"
    assert describe_arch(ArchSet(sass=(cc("7.5"),), ptx=(cc("12.0"),))) == "sm_75 and PTX compute_120"


def test_choose_python():
    versions = [Version(v) for v in ("3.9", "3.10", "3.11")]
    assert choose_python(versions, Version("3.10")) == Version("3.10")
    assert choose_python(versions, Version("3.12")) == Version("3.11")
    assert choose_python(versions, Version("3.8")) == Version("3.9")


def test_resolution_of_an_empty_compatible_set_selects_nothing(catalog):
    manifest = Manifest(name="x", summary="x", framework="torch", path="x.yaml",
                        builds=(gpu_build("13.0", ["7.5"]),))
    assert resolve(manifest, machine("12.4", "7.5"), catalog.tables).selected is None


# (machine, manifest) -> selected build, worked out by hand from the manifests' sources.
OTHER_SELECTIONS = [
    # CUDA 10.1 has no minor-version compatibility: only builds bundling CUDA <= 10.1 run.
    ("gtx1080ti-cuda101", "tensorflow", "tensorflow-2.4.1-cu101"),
    ("gtx1080ti-cuda101", "mxnet", "mxnet-1.9.1-cu101"),
    ("gtx1080ti-cuda101", "jax", "jax-0.12-cpu"),
    # pip tensorflow[and-cuda] 2.14 (CUDA 11.8) through CUDA 11 minor-version compat beats the older conda builds.
    ("gtx1080ti-cuda112", "tensorflow", "tensorflow-2.14-cu118"),
    ("gtx1080ti-cuda112", "mxnet", "mxnet-1.9.1-cu112"),
    # JAX's CUDA 13 plugin needs sm_75 or newer: V100 gets the CUDA 12 one.
    ("v100x8-cuda130", "jax", "jax-0.12-cu12"),
    ("v100x8-cuda130", "tensorflow", "tensorflow-2.21-cu125"),
    ("b200-cuda130", "jax", "jax-0.12-cu13"),
    # MXNet has no Hopper code and no PTX: CPU only.
    ("h100-cuda128", "mxnet", "mxnet-1.9.1-cpu"),
    ("h100-cuda128", "jax", "jax-0.12-cu12"),
    ("no-gpu", "tensorflow", "tensorflow-2.21-cpu"),
    ("no-gpu", "mxnet", "mxnet-1.9.1-cpu"),
]


@pytest.mark.parametrize("machine_name, manifest, expected", OTHER_SELECTIONS)
def test_other_framework_selection(catalog, load_profile, machine_name, manifest, expected):
    resolution = resolve(catalog.manifests[manifest], load_profile(machine_name), catalog.tables)
    assert resolution.selected is not None and resolution.selected.build.id == expected


def test_legacy_tensorflow_is_a_conda_build_with_its_cudatoolkit(catalog, load_profile):
    selected = resolve(catalog.manifests["tensorflow"], load_profile("gtx1080ti-cuda101"), catalog.tables).selected
    assert selected.build.conda is not None and selected.build.pip is None
    assert "cudatoolkit=10.1" in selected.build.conda.packages
    assert selected.python == Version("3.9")  # the newest the build publishes below the default 3.12


def test_tensorflow_jit_on_blackwell_is_said(catalog, load_profile):
    # On a B200 (sm_100): not on an RTX 5090 (sm_120), where XLA's PTX ISA stops TF 2.16-2.21 (issue 30,
    # tests/test_resolve_reports.py); whether sm_100 runs them is unsourced, and kept as before.
    selected = resolve(catalog.manifests["tensorflow"], load_profile("b200-cuda130"), catalog.tables).selected
    assert any("compiles the build's compute_90 PTX for it at first start" in reason for reason in selected.reasons)


def test_retired_mxnet_says_why_hopper_gets_no_gpu_build(catalog, load_profile):
    manifest = catalog.manifests["mxnet"]
    assert manifest.retired and "Attic" in manifest.retired
    builds = {c.build.id: c for c in resolve(manifest, load_profile("h100-cuda128"), catalog.tables).candidates}
    assert builds["mxnet-1.9.1-cu112"].reasons == (
        "GPU 0, NVIDIA H100 80GB HBM3 (sm_90): no kernels for sm_90: this build has sm_50 to sm_86 and no PTX for "
        "newer GPUs",
    )


def test_unknown_driver_cuda_asks_for_cuda_rather_than_saying_no_driver(catalog):
    profile = MachineProfile(gpus=(Gpu(0, "Tesla K80", cc("3.7")),), driver_version=DriverVersion.parse("390.157"))
    candidate = assess(gpu_build("11.8", ["3.7"]), profile, catalog.tables)
    assert not candidate.compatible
    assert "driver CUDA is unknown (pass --cuda X.Y" in candidate.reasons[0]
