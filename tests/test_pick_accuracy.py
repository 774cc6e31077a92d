"""Issue 46: the picks envkit got wrong against its peers' data, each rule pinned. A build only reported is never
picked over a confirmed one (torch 2.14 cu129 did not exist and was the pick on every Blackwell R570/R575 machine);
a machine's C library refuses builds whose wheels need a newer glibc; a GPU on a driver older than its generation's
first branch is an impossible profile; a bundled library's own driver floor refuses a build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envkit.catalog import load_catalog
from envkit.create.prepare import pick_candidate
from envkit.errors import ManifestError, ProfileError
from envkit.machines.fleet import Machine, distinct
from envkit.machines.profile import MachineProfile, profile_from_dict
from envkit.pick.render import listing_json, manifest_block
from envkit.pick.resolve import Request, impossible_driver, passed_over, resolve
from envkit.versions import CudaVersion, GlibcVersion
from tests.test_cli import PROFILES, envkit

HEAD = """\
name: demo
summary: a test manifest
framework: torch
releases:
"""


def release(version: str, builds: str, extra: str = "") -> str:
    return f'  - version: "{version}"\n    python: ">=3.10,<3.15"\n{extra}    builds:\n{builds}'


def gpu(variant: str, cuda: str, extra: str = "") -> str:
    return (f'      - {{variant: {variant}, cuda: "{cuda}", arch: {{sass: ["8.0", "9.0", "12.0"]}}, '
            f'pip: {{packages: ["torch==1.0.*"]}}{extra}}}\n')


@pytest.fixture
def demo(envs_dir: Path, tmp_path: Path):
    """A manifests directory of the shipped tables and a demo manifest written from its releases."""
    directory = tmp_path / "envs"
    directory.mkdir()
    for table in ("cuda.yaml", "python.yaml", "gpus.yaml"):
        shutil.copy(envs_dir / table, directory / table)

    def write(*releases: str):
        (directory / "demo.yaml").write_text(HEAD + "".join(releases), encoding="utf-8")
        return load_catalog(directory, ["demo"])

    write.directory = directory
    return write


def machine(gpus=(("NVIDIA A100", "8.0"),), driver="580.95.05", cuda="13.0", libc=None) -> MachineProfile:
    data = {"driver_version": driver, "cuda_driver": cuda,
            "gpus": [{"name": name, "compute_capability": cc} for name, cc in gpus]}
    if libc:
        data["libc"] = libc
    return profile_from_dict(data, "test")


def by_id(resolution):
    return {c.build.id: c for c in resolution.candidates}


# --- a build only reported ---------------------------------------------------------------------------------------

def test_an_unconfirmed_build_is_never_picked_over_a_confirmed_one_unless_named(demo):
    catalog = demo(release("2.0", gpu("cu130", "13.0", ', unconfirmed: "reported installed, not listed"')),
                   release("1.0", gpu("cu126", "12.6")))
    manifest = catalog.manifests["demo"]
    resolution = resolve(manifest, machine(), catalog.tables)
    assert resolution.selected.build.id == "demo-1.0-cu126"
    assert by_id(resolution)["demo-2.0-cu130"].compatible  # listed, it fits: only the pick passes it over
    assert passed_over(resolution).build.id == "demo-2.0-cu130"
    text = manifest_block(resolution, machine(), show_all=False, target_args="--machine m.yaml")
    assert ("demo-2.0-cu130 fits too and would rank first, but a build the manifest could not confirm is not picked "
            "over one it could (unconfirmed: reported installed, not listed); `envkit create demo --build "
            "demo-2.0-cu130 --machine m.yaml` installs it anyway.") in text
    assert listing_json(machine(), [resolution])["manifests"][0]["passed_over"] == {
        "build": "demo-2.0-cu130", "unconfirmed": "reported installed, not listed"}
    # --build names it: create installs it
    chosen, _ = pick_candidate(manifest, machine(), catalog.tables, Request(), "demo-2.0-cu130", on_target=True)
    assert chosen.build.id == "demo-2.0-cu130"
    # Alone (no confirmed build), it is the pick, and nothing is passed over.
    only = demo(release("2.0", gpu("cu130", "13.0", ', unconfirmed: "reported"')))
    lone = resolve(only.manifests["demo"], machine(), only.tables)
    assert lone.selected.build.id == "demo-2.0-cu130" and passed_over(lone) is None


def test_no_phantom_torch_2_14_cu129_and_blackwell_on_r570_or_r575_gets_2_13_cu129(catalog, load_profile):
    torch = catalog.manifests["torch"]
    assert "torch-2.14-cu129" not in {b.id for b in torch.builds}
    for driver, cuda in (("570.133.07", "12.8"), ("575.57.08", "12.9")):
        for name, cc in (("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA B200", "10.0")):
            picked = resolve(torch, machine(((name, cc),), driver, cuda), catalog.tables).selected
            assert picked.build.id == "torch-2.13-cu129" and picked.build.unconfirmed is None, (name, driver)


@pytest.mark.parametrize("profile", sorted(p.stem for p in PROFILES.glob("*.yaml")))
def test_no_shipped_pick_is_unconfirmed_where_a_confirmed_build_fits(catalog, load_profile, profile):
    """The rule on the real manifests, for every profile the tests keep: a pick with an `unconfirmed` note only where
    no confirmed build of the same kind (GPU or CPU) fits."""
    for manifest in catalog.manifests.values():
        resolution = resolve(manifest, load_profile(profile), catalog.tables)
        picked = resolution.selected
        if picked is None or picked.build.unconfirmed is None:
            continue
        assert not [c.build.id for c in resolution.compatible
                    if c.build.unconfirmed is None and c.build.is_gpu == picked.build.is_gpu], (manifest.name, picked)


# --- the C library -----------------------------------------------------------------------------------------------

def test_glibc_2_17_gets_a_torch_that_installs_there(catalog):
    a100 = machine(driver="535.104.05", cuda="12.2", libc="glibc 2.17")
    resolution = resolve(catalog.manifests["torch"], a100, catalog.tables)
    # 2.6 is the newest release that installs (its cu126 build is manylinux_2_28 too): cu118, which the driver runs
    # natively, before cu124 (minor-version compatibility)
    assert resolution.selected.build.id == "torch-2.6-cu118"
    builds = by_id(resolution)
    assert ("needs glibc 2.28 or newer (its wheels are manylinux_2_28); the machine has glibc 2.17"
            in builds["torch-2.14-cu126"].reasons)
    assert "needs glibc 2.28 or newer" in builds["torch-2.6-cu126"].reasons[-1]
    assert not builds["torch-2.14-cpu"].compatible  # the CPU wheels too
    # The same machine with glibc 2.28, or not known: the newest, as before.
    for libc in ("glibc 2.28", None):
        picked = resolve(catalog.manifests["torch"], machine(driver="535.104.05", cuda="12.2", libc=libc),
                         catalog.tables).selected
        assert picked.build.id == "torch-2.14-cu126", libc
    tensorflow = resolve(catalog.manifests["tensorflow"], a100, catalog.tables)
    assert tensorflow.selected.build.id == "tensorflow-2.20-cu125"  # 2.21 is manylinux_2_27


def test_a_glibc_floor_is_data_and_a_bad_one_names_file_build_and_field(demo):
    catalog = demo(release("1.0", gpu("cu126", "12.6"), extra='    glibc: "2.28"\n'),
                   release("0.9", gpu("cu126", "12.6", ', glibc: "2.17"'), extra='    glibc: "2.28"\n'))
    builds = {b.id: b for b in catalog.manifests["demo"].builds}
    assert builds["demo-1.0-cu126"].glibc == GlibcVersion(2, 28)
    assert builds["demo-0.9-cu126"].glibc == GlibcVersion(2, 17)  # the build's own wins
    with pytest.raises(ManifestError) as caught:
        demo(release("1.0", gpu("cu126", "12.6"), extra='    glibc: "2_28"\n'))
    error = caught.value
    assert (error.build, error.field) == ("demo-1.0-cu126", "releases[0].glibc") and "'2.28'" in error.problem


def test_the_profile_carries_the_c_library_and_a_bad_one_is_refused():
    profile = profile_from_dict({"cuda_driver": "12.4", "libc": "glibc 2.17", "gpus": []}, "p.yaml")
    assert profile.glibc == GlibcVersion(2, 17) and profile.sources["libc"] == "file p.yaml"
    assert profile_from_dict(profile.to_dict(), "again").glibc == GlibcVersion(2, 17)
    assert "libc" not in MachineProfile().to_dict()  # unknown: not written (an older envkit reads the file)
    for bad in ("musl 1.2", "glibc", 2.17, "glibc 2.x"):
        with pytest.raises(ProfileError) as caught:
            profile_from_dict({"cuda_driver": "12.4", "libc": bad, "gpus": []}, "p.yaml")
        assert caught.value.message.startswith("machine profile p.yaml: libc: ")
    # Two nodes that differ only in their C library are two configurations of a fleet.
    configs = distinct([Machine("old", machine(libc="glibc 2.17")), Machine("new", machine(libc="glibc 2.28")),
                        Machine("new2", machine(libc="glibc 2.28"))])
    assert [config.names for config in configs] == [("old",), ("new", "new2")]


def test_detection_reads_the_c_library_and_says_a_wsl2_driver_is_windows(tmp_path):
    from envkit.detect.system import with_system

    nvidia = machine(driver="576.02", cuda="12.9")
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "osrelease").write_text("5.15.167.4-microsoft-standard-WSL2\n")
    seen = with_system(nvidia, tmp_path, lambda: "glibc 2.39")
    assert seen.glibc == GlibcVersion(2, 39) and seen.libc == "glibc 2.39"
    assert seen.sources["driver_version"] == "file test, the Windows driver, seen through WSL2"
    assert any(note.startswith("WSL2: driver 576.02 is the Windows driver's number") for note in seen.notes)
    (tmp_path / "sys" / "kernel" / "osrelease").write_text("6.1.0-27-amd64\n")
    musl = with_system(nvidia, tmp_path, lambda: None)
    assert musl.glibc is None and "libc" not in musl.sources and musl.sources == nvidia.sources
    assert musl.notes[-1].startswith("C library: not glibc, or it did not say")


def test_detect_and_survey_carry_the_c_library():
    """`envkit detect --json` on this machine (Debian: glibc) writes `libc`, and a node's survey reads it back."""
    from envkit.slurm.client import StepResult
    from envkit.slurm.survey import profile_from_step

    result = envkit("detect", "--json")
    assert result.returncode == 0, result.stderr
    detected = json.loads(result.stdout)
    assert detected["libc"].startswith("glibc 2.")
    node = {**detected, "name": "n1"}
    profile, why = profile_from_step(StepResult(True, 0, json.dumps(node), "", "j"), "n1", 5)
    assert why is None and profile.libc == detected["libc"]


def test_the_site_file_keeps_each_nodes_c_library(tmp_path):
    from envkit.site.model import Partition, Site, SiteNode
    from envkit.site.read import site_from_dict
    from envkit.site.write import site_to_dict

    site = Site(path=tmp_path / "site.yaml", partitions={"gpu": Partition("gpu", (
        SiteNode("a1", 2, machine(libc="glibc 2.17")), SiteNode("a2", 1, machine())))})
    again = site_from_dict(json.loads(json.dumps(site_to_dict(site))), tmp_path / "site.yaml")
    assert [node.profile.libc for node in again.partitions["gpu"].nodes] == ["glibc 2.17", None]


# --- a GPU on a driver older than its first branch ---------------------------------------------------------------

def test_an_rtx_5090_on_r525_is_an_impossible_profile_and_no_gpu_build_is_picked(catalog):
    profile = machine((("NVIDIA GeForce RTX 5090", "12.0"),), driver="525.60.13", cuda="12.0")
    resolution = resolve(catalog.manifests["torch"], profile, catalog.tables)
    assert resolution.selected.build.id == "torch-2.15-cpu"
    reason = ("GPU 0, NVIDIA GeForce RTX 5090 (sm_120) cannot be on driver 525.60.13: R570 (CUDA 12.8) is the first "
              "driver branch for Blackwell (B200, GB200, RTX 50xx, RTX PRO Blackwell), and no older driver drives it; "
              "the profile describes no real machine (hand-written, or stale?)")
    assert by_id(resolution)["torch-2.7-cu128"].reasons == (reason,)  # minor-version compat let it through before
    assert impossible_driver(profile, catalog.tables) == (reason,)
    # Known only by its CUDA (--cuda 12.4 --gpu-arch 12.0): no driver for CUDA 12.4 drives it either.
    by_cuda = MachineProfile(gpus=profile.gpus, cuda_driver=CudaVersion(12, 4))
    assert "cannot be on a driver for CUDA 12.4" in impossible_driver(by_cuda, catalog.tables)[0]
    # On its first branch it is a real machine.
    real = machine((("NVIDIA GeForce RTX 5090", "12.0"),), driver="570.133.07", cuda="12.8")
    assert impossible_driver(real, catalog.tables) == ()


def test_envkit_list_warns_about_an_impossible_profile(tmp_path):
    path = tmp_path / "stale.yaml"
    path.write_text('driver_version: "525.60.13"\ncuda_driver: "12.0"\n'
                    'gpus: [{name: NVIDIA GeForce RTX 5090, compute_capability: "12.0"}]\n')
    result = envkit("list", "torch", "--machine", str(path))
    assert result.returncode == 0, result.stderr
    assert ("Warning: GPU 0, NVIDIA GeForce RTX 5090 (sm_120) cannot be on driver 525.60.13: R570 (CUDA 12.8) is the "
            "first driver branch") in result.stdout
    assert "  * torch-2.15-cpu" in result.stdout


# --- a bundled library's driver floor ----------------------------------------------------------------------------

def test_a_bundled_cudnn_driver_floor_refuses_the_build_on_an_older_driver(demo):
    cudnn = ', bundled: [{name: "cuDNN 9.26", min_driver: "615.71.09"}]'
    catalog = demo(release("2.0", gpu("cu130", "13.0", cudnn)), release("1.0", gpu("cu130", "13.0")))
    manifest = catalog.manifests["demo"]
    r580 = resolve(manifest, machine(driver="580.95.05", cuda="13.0"), catalog.tables)
    assert r580.selected.build.id == "demo-1.0-cu130"
    assert by_id(r580)["demo-2.0-cu130"].reasons == (
        "cuDNN 9.26, bundled by this build, needs driver 615.71.09 or newer; this one is 580.95.05",)
    r615 = resolve(manifest, machine(driver="615.71.09", cuda="13.4"), catalog.tables)
    assert r615.selected.build.id == "demo-2.0-cu130"
    # Only the driver's CUDA known (--cuda): the lowest driver for CUDA 13.3 is 610.43.02, below the floor.
    unknown = MachineProfile(gpus=machine().gpus, cuda_driver=CudaVersion(13, 3))
    reason = by_id(resolve(manifest, unknown, catalog.tables))["demo-2.0-cu130"].reasons[0]
    assert reason == ("cuDNN 9.26, bundled by this build, needs driver 615.71.09 or newer, and the machine's driver "
                      "version is unknown (drivers for CUDA 13.3 start at 610.43.02)")


def test_a_bundled_driver_floor_alone_is_an_entry_and_a_bad_one_names_its_field(demo):
    catalog = demo(release("1.0", gpu("cu118", "11.8", ', bundled: [{name: "cuDNN 9.1", min_driver: "450.80.02"}]')))
    [library] = catalog.manifests["demo"].builds[0].bundled
    assert str(library.min_driver) == "450.80.02" and library.min_compute_capability is None
    with pytest.raises(ManifestError) as caught:
        demo(release("1.0", gpu("cu118", "11.8", ', bundled: [{name: "cuDNN 9.1", min_driver: "latest"}]')))
    assert (caught.value.build, caught.value.field) == ("demo-1.0-cu118", "bundled[0].min_driver")
