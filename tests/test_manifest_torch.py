"""envs/torch.yaml, row by row, against its sources restated by hand (not derived from the manifest):
shared/reference/compat-data.md and its corrections of 2026-11-22, PyPI as checked on 2026-11-22, and the
TORCH_CUDA_ARCH_LIST of the pytorch/builder release branches for 1.x."""

from __future__ import annotations

import pytest

from envkit.versions import ComputeCapability

STABLE = "https://download.pytorch.org/whl/torch_stable.html"

# release -> (Pythons, CUDA variants, patch pinned before 2.0 (None: a release line), torchvision, torchaudio).
# 2.x: compat-data's PyTorch table with the corrections (2.15 added: cu130/cu132 only, Python 3.11-3.15; 2.13/2.14
# stop at 3.14; 2.2/2.3 reach 3.12, 2.5 3.13; cu129 for 2.9-2.11, and for 2.12 and 2.13 as built on request
# (pytorch/pytorch#185269, #187834), not for 2.14 (issue 46: cu129 stops at 2.13.0). 1.x: the "previous versions"
# variants and
# pairings; Pythons: 1.4-1.6 3.6-3.8, 1.7-1.10 3.6-3.9, 1.11-1.12 3.7-3.10, 1.13 3.7-3.11.
TORCH_RELEASES = {
    "1.4": ("3.6-3.8", {"cu92", "cu100", "cu101"}, "1.4.0", "0.5.0", "0.4.0"),
    "1.5": ("3.6-3.8", {"cu92", "cu101", "cu102"}, "1.5.1", "0.6.1", "0.5.1"),
    "1.6": ("3.6-3.8", {"cu92", "cu101", "cu102"}, "1.6.0", "0.7.0", "0.6.0"),
    "1.7": ("3.6-3.9", {"cu92", "cu101", "cu102", "cu110"}, "1.7.1", "0.8.2", "0.7.2"),
    "1.8": ("3.6-3.9", {"cu101", "cu102", "cu111"}, "1.8.1", "0.9.1", "0.8.1"),
    "1.9": ("3.6-3.9", {"cu102", "cu111"}, "1.9.1", "0.10.1", "0.9.1"),
    "1.10": ("3.6-3.9", {"cu102", "cu111", "cu113"}, "1.10.2", "0.11.3", "0.10.2"),
    "1.11": ("3.7-3.10", {"cu102", "cu113", "cu115"}, "1.11.0", "0.12.0", "0.11.0"),
    "1.12": ("3.7-3.10", {"cu102", "cu113", "cu116"}, "1.12.1", "0.13.1", "0.12.1"),
    "1.13": ("3.7-3.11", {"cu116", "cu117"}, "1.13.1", "0.14.1", "0.13.1"),
    "2.0": ("3.8-3.11", {"cu117", "cu118", "cpu"}, None, "0.15", "2.0"),
    "2.1": ("3.8-3.11", {"cu118", "cu121", "cpu"}, None, "0.16", "2.1"),
    "2.2": ("3.8-3.12", {"cu118", "cu121", "cpu"}, None, "0.17", "2.2"),
    "2.3": ("3.8-3.12", {"cu118", "cu121", "cpu"}, None, "0.18", "2.3"),
    "2.4": ("3.8-3.12", {"cu118", "cu121", "cu124", "cpu"}, None, "0.19", "2.4"),
    "2.5": ("3.9-3.13", {"cu118", "cu121", "cu124", "cpu"}, None, "0.20", "2.5"),
    "2.6": ("3.9-3.13", {"cu118", "cu124", "cu126", "cpu"}, None, "0.21", "2.6"),
    "2.7": ("3.9-3.13", {"cu118", "cu126", "cu128", "cpu"}, None, "0.22", "2.7"),
    "2.8": ("3.9-3.13", {"cu126", "cu128", "cu129", "cpu"}, None, "0.23", "2.8"),
    "2.9": ("3.10-3.14", {"cu126", "cu128", "cu129", "cu130", "cpu"}, None, "0.24", "2.9"),
    "2.10": ("3.10-3.14", {"cu126", "cu128", "cu129", "cu130", "cpu"}, None, "0.25", "2.10"),
    "2.11": ("3.10-3.14", {"cu126", "cu128", "cu129", "cu130", "cpu"}, None, "0.26", "2.11"),
    "2.12": ("3.10-3.14", {"cu126", "cu129", "cu130", "cu132", "cpu"}, None, "0.27", "2.11"),
    "2.13": ("3.10-3.14", {"cu126", "cu129", "cu130", "cu132", "cpu"}, None, "0.28", "2.11"),
    "2.14": ("3.10-3.14", {"cu126", "cu130", "cu132", "cpu"}, None, "0.29", "2.11"),
    "2.15": ("3.11-3.15", {"cu130", "cu132", "cpu"}, None, None, "2.11"),  # no torchvision 0.30 on PyPI
}
# The builds PyPI serves without a local version (PyTorch's page installed these variants from PyPI).
FROM_PYPI = {("1.4", "cu101"), ("1.5", "cu102"), ("1.6", "cu102"), ("1.7", "cu102"), ("1.8", "cu102"),
             ("1.9", "cu102")}

KEPLER_TO_VOLTA = ("3.7", "5.0", "6.0", "7.0")
KEPLER_TO_AMPERE = ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6")
MAXWELL_TO_HOPPER = ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")
TURING_TO_BLACKWELL = ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")
VOLTA_TO_BLACKWELL = ("7.0", *TURING_TO_BLACKWELL)


def torch_arch(release: str, variant: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(SASS, PTX) of a release's variant, from the sources."""
    major, minor = (int(part) for part in release.split("."))
    if major == 1:
        if minor <= 5:  # builder main, early 2020: "3.7+PTX;5.0" then 6.0;6.1;7.0 (9.2) and 7.5 (10.x)
            return ("3.7", "5.0", "6.0", "6.1", "7.0") + (("7.5",) if variant != "cu92" else ()), ("3.7",)
        if minor == 6:  # builder main, 2020-07: 3.7;5.0;6.0;7.0, 10.2 adds 7.5
            return KEPLER_TO_VOLTA + (("7.5",) if variant == "cu102" else ()), ()
        if minor == 7:  # builder main, 2020-12: 10.x adds 7.5, 11.0 adds 7.5 and 8.0
            extra = {"cu92": (), "cu101": ("7.5",), "cu102": ("7.5",), "cu110": ("7.5", "8.0")}[variant]
            return KEPLER_TO_VOLTA + extra, ()
        # release branches 1.8-1.13: 10.x the base list, 11.1 and newer add 7.5, 8.0, 8.6
        return (KEPLER_TO_VOLTA if variant.startswith("cu10") else KEPLER_TO_AMPERE), ()
    if variant in ("cu116", "cu117"):
        return KEPLER_TO_AMPERE, ()
    if variant == "cu118":
        return (*KEPLER_TO_AMPERE, "9.0"), ()
    if variant in ("cu121", "cu124", "cu126"):
        return MAXWELL_TO_HOPPER, ()
    if variant in ("cu128", "cu129"):  # cu129: as the release's cu128, no PTX claimed (RELEASE.md's is nightlies')
        if minor == 7:
            return TURING_TO_BLACKWELL, ("12.0",)  # compute_120 PTX, removed in 2.8 (#157516)
        return (TURING_TO_BLACKWELL if minor >= 11 else VOLTA_TO_BLACKWELL), ()  # 2.12-2.14 cu129: as 2.11's
    # cu130/cu132 release wheels: no PTX (#175567, #188914), except 2.13.0 (12.0+PTX by accident)
    return TURING_TO_BLACKWELL, (("12.0",) if minor == 13 else ())


def builds_of(catalog, release: str):
    """The release's CUDA and CPU builds from PyTorch's own indexes (its Jetson builds, from NVIDIA's:
    test_pick_platforms.py; its ROCm builds: test_manifest_torch_rocm.py)."""
    return [b for b in catalog.manifests["torch"].builds
            if str(b.version) == release and not b.is_jetson and not b.is_rocm]


def test_every_release_from_1_4_to_2_15(catalog):
    assert {str(b.version) for b in catalog.manifests["torch"].builds} == set(TORCH_RELEASES)


@pytest.mark.parametrize("release", sorted(TORCH_RELEASES, key=lambda r: tuple(map(int, r.split(".")))))
def test_torch_release_matches_its_sources(catalog, release):
    pythons, variants, patch, torchvision, torchaudio = TORCH_RELEASES[release]
    builds = builds_of(catalog, release)
    assert {b.variant for b in builds} == variants
    first, last = pythons.split("-")
    for build in builds:
        offered = [str(v) for v in catalog.tables.python.versions if build.python.contains(v)]
        pypi = (release, build.variant) in FROM_PYPI
        # PyPI's 1.5-1.9 wheels start at cp37 (checked 2026-11-22); the PyTorch index's at cp36.
        expected_first = "3.7" if pypi and release != "1.4" else first
        assert (offered[0], offered[-1]) == (expected_first, last), build.id
        packages = build.pip.packages
        if patch is None:  # 2.x: release lines from the variant's index
            assert build.pip.index_url == f"https://download.pytorch.org/whl/{build.variant}"
            assert build.pip.find_links is None
            expected = [f"torch=={release}.*"]
            if torchvision:  # 2.15 has none yet
                expected.append(f"torchvision=={torchvision}.*")
            if build.variant != "cu132":  # torchaudio is unconfirmed on the stable cu132 index: left out there
                # [cp315] torchaudio 2.11 has no cp315 wheel (pip index versions, 2026-11-26; pytorch/test-infra
                # #8214, #8241): 2.15, which claims 3.15, leaves it out there with a marker
                marker = ' ; python_version < "3.15"' if release == "2.15" else ""
                expected.append(f"torchaudio=={torchaudio}.*{marker}")
            assert list(packages) == expected, build.id
        else:
            local = "" if pypi else f"+{build.variant}"
            assert packages == (f"torch=={patch}{local}", f"torchvision=={torchvision}{local}",
                                f"torchaudio=={torchaudio}"), build.id
            where = (build.pip.index_url, build.pip.find_links)
            if pypi:
                assert where == (None, None), build.id  # the default index: PyPI
            elif release == "1.10":
                assert where == (None, f"https://download.pytorch.org/whl/{build.variant}/torch_stable.html")
            elif int(release.split(".")[1]) >= 11:
                assert where == (f"https://download.pytorch.org/whl/{build.variant}", None), build.id
            else:
                assert where == (None, STABLE), build.id
            assert build.unconfirmed and "download.pytorch.org" in build.unconfirmed
        if build.variant == "cpu":
            assert build.cuda is None and build.arch is None
            continue
        assert build.cuda.tag == build.variant
        sass, ptx = torch_arch(release, build.variant)
        assert tuple(str(a) for a in build.arch.sass) == sass, build.id
        assert tuple(str(a) for a in build.arch.ptx) == ptx, build.id
        # cuDNN 9.1 (CC 5.0 and newer) in the 2.4-2.7 cu118 wheels, whose kernels still list sm_37
        cudnn9 = build.variant == "cu118" and release in ("2.4", "2.5", "2.6", "2.7")
        assert build.min_compute_capability == (ComputeCapability(5, 0) if cudnn9 else None), build.id
        # [cudnn7] (2026-11-26) cuDNN 7.6 in the 1.4/1.5 wheels serves Kepler to Turing only (NVIDIA cuDNN 7.6
        # support matrix; CUDNN_STATUS_EXECUTION_FAILED on RTX 30xx: VinAIResearch/CPM#9): their compute_37 PTX
        # does not reach Ampere or newer.
        cudnn7 = release in ("1.4", "1.5")
        assert build.max_compute_capability == (ComputeCapability(7, 5) if cudnn7 else None), build.id
        if cudnn7:
            assert [b.name for b in build.bundled] == ["cuDNN 7.6"]


def test_what_could_not_be_confirmed_is_marked(catalog):
    builds = {b.id: b for b in catalog.manifests["torch"].builds}
    for build_id in ("torch-2.14-cu132", "torch-2.13-cu132", "torch-2.12-cu132"):
        assert "torchaudio" in builds[build_id].unconfirmed
    assert "cu132 index" in builds["torch-2.15-cu132"].unconfirmed
    assert "main branch" in builds["torch-1.4-cu92"].unconfirmed
    assert builds["torch-2.14-cu126"].unconfirmed is None


def test_what_sources_settled_is_no_longer_unconfirmed(catalog):
    """Issue 46: 2.12.1+cu129 and 2.13.0+cu129 are reported installed and running from whl/cu129 (and PyTorch's
    release manager built them: pytorch/pytorch#185269, #187834), 2.15.0+cu130 too; the pre-2.13 release wheels
    carry no PTX (#188914), which is what the cu129 and cu130 builds of 2.8-2.12 claim."""
    builds = {b.id: b for b in catalog.manifests["torch"].builds}
    settled = ["torch-2.15-cu130", "torch-2.9-cu130", "torch-2.10-cu130",
               *(f"torch-{release}-cu129" for release in ("2.8", "2.9", "2.10", "2.11", "2.12", "2.13"))]
    assert {build_id: builds[build_id].unconfirmed for build_id in settled} == dict.fromkeys(settled)
    assert not any(build.arch.ptx for build_id, build in builds.items()
                   if build_id in settled or build_id == "torch-2.12-cu130")


def test_the_newest_build_per_old_cuda_variant(catalog):
    """compat-data's "newest per variant" list, from PyTorch's previous-versions page."""
    newest = {}
    for build in catalog.manifests["torch"].builds:
        if build.variant != "cpu":
            newest[build.variant] = max(newest.get(build.variant, build.version), build.version)
    expected = {"cu92": "1.7", "cu100": "1.4", "cu101": "1.8", "cu102": "1.12", "cu110": "1.7", "cu111": "1.10",
                "cu113": "1.12", "cu115": "1.11", "cu116": "1.13"}
    assert {v: str(newest[v]) for v in expected} == expected


def test_companions_say_which_pythons_their_lines_publish(envs_dir):
    """[cp315] torchaudio 2.11 publishes cp310-cp314: the companions rule says so, for validate to check the pins."""
    import yaml

    data = yaml.safe_load((envs_dir / "torch.yaml").read_text())
    assert data["companions"]["torchaudio"][0] == {"framework": ">=2.11", "version": "2.11",
                                                   "python": ">=3.10,<3.15"}
