"""envs/mxnet.yaml, row by row, against the sources quoted in its header, restated by hand: PyPI's mxnet-cuXXX
1.9.1 wheels, MXNET_CUDA_ARCH of apache/mxnet's CD configs (linux_cu102.cmake "3.0;5.0;6.0;7.0;7.5",
linux_cu112.cmake "5.0;6.0;7.0;8.0;8.6"; cu101 = cu102's list, cu110 5.0 6.0 7.0 8.0; SASS only), the libraries
libmxnet.so needs (from conda-forge), numpy<1.24, Pythons 3.7-3.11, and the Apache Attic retirement."""

from __future__ import annotations

import pytest

CONDA_FORGE = ("https://conda.anaconda.org/conda-forge",)
# variant -> (CUDA, SASS, the cudatoolkit and cudnn specs that libmxnet.so's DT_NEEDED call for)
GPU_BUILDS = {
    "cu112": ("11.2", ("5.0", "6.0", "7.0", "8.0", "8.6"), ("cudatoolkit=11.2", "cudnn=8.1")),
    "cu110": ("11.0", ("5.0", "6.0", "7.0", "8.0"), ("cudatoolkit=11.0", "cudnn=8.0")),
    "cu102": ("10.2", ("3.0", "5.0", "6.0", "7.0", "7.5"), ("cudatoolkit=10.2", "cudnn=8")),
    "cu101": ("10.1", ("3.0", "5.0", "6.0", "7.0", "7.5"), ("cudatoolkit=10.1", "cudnn=7.6")),
}


@pytest.fixture
def mxnet(catalog):
    return catalog.manifests["mxnet"]


def test_retired_and_only_1_9_1(mxnet):
    assert mxnet.retired and "Attic" in mxnet.retired
    assert {str(b.version) for b in mxnet.builds} == {"1.9.1"}
    assert {b.variant for b in mxnet.builds} == {*GPU_BUILDS, "cpu"}


@pytest.mark.parametrize("variant", list(GPU_BUILDS))
def test_gpu_build_matches_its_sources(catalog, mxnet, variant):
    cuda, sass, conda = GPU_BUILDS[variant]
    build = next(b for b in mxnet.builds if b.variant == variant)
    assert str(build.cuda) == cuda
    assert tuple(str(a) for a in build.arch.sass) == sass and build.arch.ptx == ()  # SASS only: no JIT
    assert build.conda.channels == CONDA_FORGE
    assert build.conda.packages == (*conda, "nccl")
    assert build.pip.packages == (f"mxnet-{variant}==1.9.1", "numpy<1.24") and build.pip.index_url is None
    offered = [str(v) for v in catalog.tables.python.versions if build.python.contains(v)]
    assert (offered[0], offered[-1]) == ("3.7", "3.11")


@pytest.mark.parametrize("variant", list(GPU_BUILDS))
def test_what_could_not_be_confirmed_is_marked(mxnet, variant):
    """conda-forge could not be queried: that its cudnn and nccl builds fit the cudatoolkit is in `unconfirmed`
    (shown by `envkit list --all`), except cu112's cudnn 8.1 (TF's pip guide named that pair)."""
    build = next(b for b in mxnet.builds if b.variant == variant)
    cuda = GPU_BUILDS[variant][0]
    assert build.unconfirmed and "nccl" in build.unconfirmed and f"cudatoolkit {cuda}" in build.unconfirmed
    assert ("cudnn" in build.unconfirmed) == (variant != "cu112")


def test_cpu_build(mxnet):
    build = next(b for b in mxnet.builds if b.variant == "cpu")
    assert build.pip.packages == ("mxnet==1.9.1", "numpy<1.24") and build.conda is None
    assert build.unconfirmed is None  # nothing from conda-forge
