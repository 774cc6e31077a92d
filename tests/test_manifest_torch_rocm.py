"""envs/torch.yaml's ROCm builds against their sources restated by hand (the [rocm] notes of torch.yaml): which ROCm
each release published, the gfx targets each wheel prints, and what could not be read from a build's own wheels."""

from __future__ import annotations

import pytest

ROCM6_0 = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100")
# 2.9.1+rocm6.4's torch.cuda.get_arch_list(), as a public report printed it
ROCM6_3 = (*ROCM6_0, "gfx1101", "gfx1102", "gfx1200", "gfx1201")
# 2.13.0+rocm7.2 and 2.14.0+rocm7.2, as public reports printed them (in that order)
ROCM7 = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1102",
         "gfx1103", "gfx1200", "gfx1201", "gfx1150", "gfx1151")

# release -> {variant: (ROCm, gfx targets, the build's own list read (and the variant sourced))}
ROCM_RELEASES = {
    "2.14": {"rocm7.2": ("7.2", ROCM7, True)},
    "2.13": {"rocm7.2": ("7.2", ROCM7, True), "rocm7.1": ("7.1", ROCM7, False)},
    "2.12": {"rocm7.2": ("7.2", ROCM7, False), "rocm7.1": ("7.1", ROCM7, False)},
    "2.11": {"rocm7.2": ("7.2", ROCM7, False), "rocm7.1": ("7.1", ROCM7, False)},
    "2.10": {"rocm7.1": ("7.1", ROCM7, False), "rocm7.0": ("7.0", ROCM7, False)},
    "2.9": {"rocm6.4": ("6.4", ROCM6_3, True), "rocm6.3": ("6.3", ROCM6_3, False)},
    "2.8": {"rocm6.4": ("6.4", ROCM6_3, False), "rocm6.3": ("6.3", ROCM6_3, False)},
    "2.7": {"rocm6.3": ("6.3", ROCM6_3, False), "rocm6.2.4": ("6.2", ROCM6_0, False)},
    "2.6": {"rocm6.2.4": ("6.2", ROCM6_0, True), "rocm6.1": ("6.1", ROCM6_0, False)},
    "2.5": {"rocm6.2": ("6.2", ROCM6_0, True), "rocm6.1": ("6.1", ROCM6_0, False)},
    "2.4": {"rocm6.1": ("6.1", ROCM6_0, True), "rocm6.0": ("6.0", ROCM6_0, False)},
}


def rocm_builds(catalog):
    return [b for b in catalog.manifests["torch"].builds if b.is_rocm]


def test_every_rocm_build_and_no_other(catalog):
    assert {(str(b.version), b.variant) for b in rocm_builds(catalog)} == {
        (release, variant) for release, variants in ROCM_RELEASES.items() for variant in variants}


@pytest.mark.parametrize("release", sorted(ROCM_RELEASES, key=lambda r: tuple(map(int, r.split(".")))))
def test_rocm_release_matches_its_sources(catalog, release):
    for build in (b for b in rocm_builds(catalog) if str(b.version) == release):
        rocm, gfx, own = ROCM_RELEASES[release][build.variant]
        assert (str(build.rocm), build.gfx) == (rocm, gfx), build.id
        assert (build.cuda, build.arch) == (None, None) and build.runtime == f"ROCm {rocm}"
        assert (build.unconfirmed is None) == own, build.id
        assert build.pip.index_url == f"https://download.pytorch.org/whl/{build.variant}"
        assert build.pip.local_version == build.variant  # 2.9.1+rocm6.4: a CUDA or CPU wheel of the same version fails
        packages = build.pip.packages
        assert packages[0] == f"torch=={release}.*" and packages[1].startswith("torchvision==0.")
        # torchaudio 2.11 (the line of 2.11 and later) was not seen on a ROCm index
        assert any(p.startswith("torchaudio") for p in packages) == (int(release.split(".")[1]) <= 10), build.id


def test_the_rocm_windows_of_the_driver_table_name_every_release_a_build_bundles(catalog):
    supported = {str(r) for releases in catalog.tables.amd.user_space.values() for r in releases}
    assert {str(b.rocm) for b in rocm_builds(catalog)} <= supported
