"""envs/tensorflow.yaml, row by row, against the sources quoted in its header, restated by hand: the pip wheels'
Requires-Python and and-cuda pins (PyPI), the GPU code read from the wheels (and HERMETIC_CUDA_COMPUTE_CAPABILITIES
for 2.18+), AnacondaRecipes/tensorflow_recipes for the legacy conda builds (TF_CUDA_COMPUTE_CAPABILITIES, cudatoolkit
and cudnn pins) and compat-data's corrections of 2026-11-22 (Anaconda 2.8.2/2.10.0 py3.7-3.10, 2.11.0 py3.8-3.10,
2.12.0 py3.8-3.11, all cudatoolkit 11.3 / cudnn 8.2)."""

from __future__ import annotations

import pytest

from envkit.versions import ComputeCapability

ANACONDA = ("https://repo.anaconda.com/pkgs/main",)
CONDA_CU10 = ("3.5", "5.2", "6.0", "6.1", "7.0", "7.5")  # the recipe's list for cudatoolkit 10.*
CONDA_CU11 = (*CONDA_CU10, "8.0")  # and for 11.*
PASCAL_TO_HOPPER = ("6.0", "7.0", "8.0", "8.9", "9.0")  # sm_60,sm_70,sm_80,sm_89,compute_90

# release -> (Pythons, variant, CUDA, SASS, PTX, how it installs: conda specs or the pip requirement)
GPU_BUILDS = {
    # Legacy conda: the 10.1 build claims no PTX (its cuDNN 7.6 has no Ampere support); before TF PR #55613 "x.y"
    # meant SASS + PTX for every entry (2.8.2), after it PTX for the highest entry only (2.10.0 on).
    "2.4.1": ("3.7-3.9", "cu101", "10.1", CONDA_CU10, (),
              ("tensorflow-gpu=2.4.1", "cudatoolkit=10.1", "cudnn=7.6")),
    "2.8.2": ("3.7-3.10", "cu113", "11.3", CONDA_CU11, CONDA_CU11,
              ("tensorflow=2.8.2=gpu_py*", "cudatoolkit=11.3", "cudnn=8.2")),
    "2.10.0": ("3.7-3.10", "cu113", "11.3", CONDA_CU11, ("8.0",),
               ("tensorflow=2.10.0=gpu_py*", "cudatoolkit=11.3", "cudnn=8.2")),
    "2.11.0": ("3.8-3.10", "cu113", "11.3", CONDA_CU11, ("8.0",),
               ("tensorflow=2.11.0=gpu_py*", "cudatoolkit=11.3", "cudnn=8.2")),
    "2.12.0": ("3.8-3.11", "cu113", "11.3", CONDA_CU11, ("8.0",),
               ("tensorflow=2.12.0=gpu_py*", "cudatoolkit=11.3", "cudnn=8.2")),
    # pip tensorflow[and-cuda]: 2.14 pins CUDA 11.8, 2.15 12.2, 2.16/2.17 12.3, 2.18+ 12.5.
    "2.14": ("3.9-3.11", "cu118", "11.8", ("3.5", "5.0", "6.0", "7.0", "7.5", "8.0"), ("8.0",), "2.14"),
    "2.15": ("3.9-3.11", "cu122", "12.2", ("5.0", "6.0", "7.0", "7.5", "8.0"), ("8.0",), "2.15"),
    "2.16": ("3.9-3.12", "cu123", "12.3", ("5.0", "6.0", "7.0", "8.0", "9.0"), ("9.0",), "2.16"),
    "2.17": ("3.9-3.12", "cu123", "12.3", PASCAL_TO_HOPPER, ("9.0",), "2.17"),
    "2.18": ("3.9-3.12", "cu125", "12.5", PASCAL_TO_HOPPER, ("9.0",), "2.18"),
    "2.19": ("3.9-3.12", "cu125", "12.5", PASCAL_TO_HOPPER, ("9.0",), "2.19"),
    "2.20": ("3.9-3.13", "cu125", "12.5", PASCAL_TO_HOPPER, ("9.0",), "2.20"),
    "2.21": ("3.10-3.13", "cu125", "12.5", PASCAL_TO_HOPPER, ("9.0",), "2.21"),
}
# 2.20 and 2.21 ask for nvidia-cudnn-cu12>=9.3.0.75,<10.0 (2.18/2.19 pin ==9.3.0.75), and cuDNN 9.11 dropped sm_50 to
# sm_70 (read from the nvidia-cudnn-cu12 wheels' libcudnn_cnn.so.9): their sm_60/sm_70 code needs cuDNN below 9.11.
CUDNN_CAPPED = {"2.20", "2.21"}
PIP_RELEASES = [release for release, row in GPU_BUILDS.items() if isinstance(row[5], str)]


def pythons(catalog, build) -> str:
    offered = [str(v) for v in catalog.tables.python.versions if build.python.contains(v)]
    return f"{offered[0]}-{offered[-1]}"


def test_every_release_is_in_the_table(catalog):
    assert {str(b.version) for b in catalog.manifests["tensorflow"].builds} == set(GPU_BUILDS)
    assert "2.22" not in GPU_BUILDS  # [2026-11-26] only 2.22.0rc0 is on PyPI: no build yet


@pytest.mark.parametrize("release", list(GPU_BUILDS))
def test_gpu_build_matches_its_sources(catalog, release):
    python, variant, cuda, sass, ptx, install = GPU_BUILDS[release]
    gpu = [b for b in catalog.manifests["tensorflow"].builds if str(b.version) == release and b.is_gpu
           and not b.is_jetson]  # (NVIDIA's Jetson build of 2.16: test_pick_platforms.py)
    assert len(gpu) == 1
    build = gpu[0]
    assert (pythons(catalog, build), build.variant, str(build.cuda)) == (python, variant, cuda)
    assert tuple(str(a) for a in build.arch.sass) == sass
    assert tuple(str(a) for a in build.arch.ptx) == ptx
    if variant == "cu113":  # [2026-11-26] cuDNN 8.2 (the legacy conda builds): Ampere and Ada, no Hopper or newer
        assert [(b.name, str(b.max_compute_capability)) for b in build.bundled] == [("cuDNN 8.2", "8.9")]
        assert "cuDNN 8.2's ceiling" in build.unconfirmed
    elif release in ("2.14", "2.15"):  # the same ceiling, inferred from #111958's cause; no report of their own
        assert [(b.name, str(b.max_compute_capability)) for b in build.bundled] == [
            ("XLA (PTX ISA 8.5 and older)", "10.3")]
        assert "inferred" in build.unconfirmed and "111958" in build.unconfirmed
    elif "9.0" in ptx:
        # [2026-11-26] 2.16-2.21 do not run on compute capability 12.x: tensorflow#89272, #97387, #99592, #101746,
        # #103531, #111958 ("PTX version 8.5 does not support target sm_120", from XLA), #112272. A ceiling on XLA;
        # sm_100/sm_103 unsourced (kept as before: their compute_90 PTX), and said so.
        assert [(b.name, str(b.max_compute_capability), b.min_compute_capability) for b in build.bundled] == [
            ("XLA (PTX ISA 8.5 and older)", "10.3", None)]
        assert "sm_100" in build.unconfirmed
    else:
        assert build.bundled == ()  # no bundled-library limit: the cuDNN each build installs covers its SASS
    if isinstance(install, tuple):  # a conda build: the Anaconda defaults channel, Python from conda as well
        assert build.conda.channels == ANACONDA and build.conda.packages == install
        assert build.pip is None
    else:
        assert build.conda is None
        capped = ("nvidia-cudnn-cu12<9.11",) if release in CUDNN_CAPPED else ()
        assert build.pip.packages == (f"tensorflow[and-cuda]=={install}.*", *capped)
        assert build.pip.index_url is None


@pytest.mark.parametrize("release", PIP_RELEASES)
def test_each_pip_release_has_a_tensorflow_cpu_build(catalog, release):
    cpu = [b for b in catalog.manifests["tensorflow"].builds if str(b.version) == release and not b.is_gpu]
    assert len(cpu) == 1
    assert cpu[0].pip.packages == (f"tensorflow-cpu=={release}.*",)
    assert pythons(catalog, cpu[0]) == GPU_BUILDS[release][0]


def test_the_legacy_conda_builds_have_no_cpu_twin(catalog):
    """The conda builds exist for old drivers; CPU users get the pip tensorflow-cpu builds."""
    legacy = {r for r, row in GPU_BUILDS.items() if isinstance(row[5], tuple)}
    assert not [b for b in catalog.manifests["tensorflow"].builds if str(b.version) in legacy and not b.is_gpu]


# What the Anaconda defaults channel could not be asked (no listing or binary read): each legacy build says so in
# `unconfirmed` (shown by `envkit list --all`), not only in a comment. release -> words its note must hold.
UNCONFIRMED = {
    "2.4.1": ("arch list", "3.0"),  # which recipe built it: an older build.sh also lists 3.0
    "2.8.2": ("Python 3.7 and 3.10", "PTX for every listed arch"),
    "2.10.0": ("PTX for 8.0 only",),
    "2.11.0": ("Pythons", "cudatoolkit 11.3", "cuDNN 8.2", "PTX for 8.0 only"),
    "2.12.0": ("Python 3.8-3.10", "cudatoolkit 11.3", "cuDNN 8.2", "PTX for 8.0 only"),
}


@pytest.mark.parametrize("release", list(GPU_BUILDS))
def test_what_could_not_be_confirmed_is_marked(catalog, release):
    builds = [b for b in catalog.manifests["tensorflow"].builds if str(b.version) == release and not b.is_jetson]
    for build in builds:
        if release in UNCONFIRMED:
            assert build.unconfirmed and all(words in build.unconfirmed for words in UNCONFIRMED[release]), build.id
        elif build.is_gpu and release in ("2.14", "2.15"):
            assert "sm_100" in build.unconfirmed, build.id
        elif build.is_gpu and build.arch.ptx == (ComputeCapability(9, 0),):  # 2.16-2.21: B200 unsourced
            assert build.unconfirmed.startswith("whether it runs on sm_100/sm_103 (B200, B300)"), build.id
        else:  # the pip releases: read from PyPI and the wheels themselves
            assert build.unconfirmed is None, build.id
