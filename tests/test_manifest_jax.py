"""envs/jax.yaml, row by row, against the sources quoted in its header, restated by hand: the JAX installation
guide (CUDA 12: SM >= 5.2, driver >= 525; CUDA 13: SM >= 7.5, driver >= 580), the jax wheels' Requires-Python and
extras on PyPI (jax-cuda13-plugin from 0.7.2; 0.6 the last line with Python 3.10; 0.11 dropped 3.11, 0.11.1 added
3.15), and compat-data's corrections of 2026-11-22 (0.12.0 exists)."""

from __future__ import annotations

import pytest

from envkit.versions import CudaVersion, DriverVersion

# release -> (Pythons, whether it has the CUDA 13 extra)
RELEASES = {
    "0.6": ("3.10-3.13", False),
    "0.9": ("3.11-3.14", True),
    "0.10": ("3.11-3.14", True),
    "0.11": ("3.12-3.15", True),
    "0.12": ("3.12-3.15", True),
}
# variant -> (the CUDA whose driver floor the docs give, the minimum SM as PTX: XLA compiles on the machine, what
# else the build installs). The CUDA 12 plugin asks for nvidia-cudnn-cu12>=9.8,<10.0, and cuDNN 9.11 dropped sm_50 to
# sm_70 (read from the nvidia-cudnn-cu12 wheels): below 9.11 the documented SM 5.2 holds (the plugin is built on 9.8).
PLUGINS = {"cu12": ("12.0", "5.2", ("nvidia-cudnn-cu12<9.11",)), "cu13": ("13.0", "7.5", ())}


def test_every_release_is_in_the_table(catalog):
    assert {str(b.version) for b in catalog.manifests["jax"].builds} == set(RELEASES)


@pytest.mark.parametrize("release", list(RELEASES))
def test_release_matches_its_sources(catalog, release):
    python, cuda13 = RELEASES[release]
    builds = {b.variant: b for b in catalog.manifests["jax"].builds if str(b.version) == release}
    assert set(builds) == {"cpu", "cu12"} | ({"cu13"} if cuda13 else set())
    for variant, build in builds.items():
        offered = [str(v) for v in catalog.tables.python.versions if build.python.contains(v)]
        assert f"{offered[0]}-{offered[-1]}" == python, build.id
        assert build.pip.index_url is None  # PyPI
        if variant == "cpu":
            assert build.pip.packages == (f"jax=={release}.*",) and build.cuda is None
            continue
        cuda, minimum, also = PLUGINS[variant]
        assert build.pip.packages == (f"jax[cuda{variant[2:]}]=={release}.*", *also)
        assert str(build.cuda) == cuda
        assert build.arch.sass == () and tuple(str(p) for p in build.arch.ptx) == (minimum,)


def test_the_plugins_driver_floors_are_the_documented_ones(catalog):
    """525 for CUDA 12, 580 for CUDA 13: what cuda.yaml gives for the CUDA the builds name."""
    table = catalog.tables.cuda
    assert DriverVersion.parse("525") <= table.min_driver[CudaVersion(12, 0)] < DriverVersion.parse("526")
    assert DriverVersion.parse("580") <= table.min_driver[CudaVersion(13, 0)] < DriverVersion.parse("581")


@pytest.mark.parametrize("release", ["0.11", "0.12"])
def test_the_cudnn_cap_still_meets_the_newer_plugins_floor(catalog, release):
    """[2026-11-26] The 0.11.1+ CUDA 12 plugins ask nvidia-cudnn-cu12>=9.10.2.21,<10.0: with the build's cap below
    9.11 (cuDNN 9.11 dropped sm_50-sm_70) the two still meet, at 9.10.x (9.10.2.21 holds sm_50 to sm_120)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    build = next(b for b in catalog.manifests["jax"].builds if str(b.version) == release and b.variant == "cu12")
    [cap] = [Requirement(p).specifier for p in build.pip.packages if p.startswith("nvidia-cudnn-cu12")]
    both = cap & SpecifierSet(">=9.10.2.21,<10.0")
    assert both.contains("9.10.2.21") and not both.contains("9.11.0.98") and not both.contains("9.8.0.87")
