"""Issue 43: picks on Grace (aarch64) superchips, the DGX Spark and Jetson boards, each rule pinned on the real
manifests of envs/ and the machine profiles of tests/profiles (each from a public capture, named in the file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import ProfileError
from envkit.machines.fleet import Machine, fleet_of
from envkit.machines.profile import MachineProfile, profile_from_dict
from envkit.pick.cpu_fallback import gpu_unused
from envkit.pick.fleet_resolve import resolve_fleet
from envkit.pick.resolve import resolve
from envkit.versions import L4tVersion
from tests.test_cli import PROFILES, assert_clean_error, envkit


def pick(catalog, manifest: str, profile: MachineProfile):
    return resolve(catalog.manifests[manifest], profile, catalog.tables)


def verdict(resolution, build_id: str):
    return next(c for c in resolution.candidates if c.build.id == build_id)


def test_tensorflow_on_a_gh200_is_the_cpu_build_that_installs_there(catalog, load_profile):
    """tensorflow-2.21-cu125 was the pick on GH200 and GB200; PyPI's aarch64 tensorflow has no CUDA. The CPU pick
    installs plain tensorflow there (tensorflow-cpu has no aarch64 wheel), and tensorflow-cpu on x86_64."""
    gh200 = load_profile("gh200-r570-cuda128")
    resolution = pick(catalog, "tensorflow", gh200)
    assert resolution.selected.build.id == "tensorflow-2.21-cpu"
    assert resolution.selected.build.pip.packages == ("tensorflow==2.21.*",)
    gpu = verdict(resolution, "tensorflow-2.21-cu125")
    assert not gpu.compatible and gpu.reasons == (
        "no aarch64 packages (linux-aarch64): TensorFlow's aarch64 wheels on PyPI carry no CUDA: they are CPU builds "
        "(tensorflow/tensorflow#121157); its CPU build installs there",)
    said = gpu_unused(resolution, gh200)
    assert said.startswith("no tensorflow GPU build in the manifests runs on an aarch64 machine with a driver for "
                           "CUDA 12.8 and sm_90") and "tensorflow-2.21-cu125, no aarch64 packages" in said
    x86 = pick(catalog, "tensorflow", gh200._replace(platform="linux-64"))
    assert x86.selected.build.id == "tensorflow-2.21-cu125"
    assert verdict(x86, "tensorflow-2.21-cpu").build.pip.packages == ("tensorflow-cpu==2.21.*",)


def test_the_dgx_spark_gets_cuda_13_torch_and_a_cpu_tensorflow_that_exists(catalog, load_profile):
    spark = load_profile("gb10-dgx-spark-cuda130")
    torch = pick(catalog, "torch", spark)
    assert torch.selected.build.id == "torch-2.15-cu130"
    assert "GPU 0, NVIDIA GB10 (sm_121): runs the build's sm_120 code" in torch.selected.reasons
    assert pick(catalog, "tensorflow", spark).selected.build.pip.packages == ("tensorflow==2.21.*",)


def test_aarch64_wheels_carry_their_own_gpu_code(catalog):
    """An aarch64 T4G machine (AWS g5g: Graviton2 and a T4G, sm_75): PyTorch's aarch64 cu126 wheels carry sm_80 and
    sm_90 only, so the same GPU that the x86_64 cu126 wheels run is refused there."""
    g5g = profile_from_dict({"platform": "linux-aarch64", "driver_version": "570.124.06", "cuda_driver": "12.8",
                             "gpus": [{"name": "NVIDIA T4G", "compute_capability": "7.5"}]}, "g5g")
    aarch64 = verdict(pick(catalog, "torch", g5g), "torch-2.14-cu126")
    assert not aarch64.compatible
    assert aarch64.reasons[0] == "GPU 0, NVIDIA T4G (sm_75): no kernels for sm_75: this build has sm_80 and newer"
    assert [str(a) for a in aarch64.build.arch.sass] == ["8.0", "9.0"] and aarch64.build.arch.ptx == ()
    x86 = verdict(pick(catalog, "torch", g5g._replace(platform="linux-64")), "torch-2.14-cu126")
    assert x86.compatible and "runs the build's sm_75 code" in x86.reasons[-1]


def test_torchvision_on_aarch64_cuda_indexes_is_a_plain_version(catalog, load_profile):
    candidate = verdict(pick(catalog, "torch", load_profile("gb200x4-cuda128")), "torch-2.10-cu128")
    assert candidate.compatible and candidate.build.pip.local_version == "cu128"
    assert candidate.build.pip.plain == ("torchvision", "torchaudio")
    assert candidate.build.unconfirmed.startswith("torchaudio's aarch64 wheel")  # the aarch64 view's own note


def test_gb200_gets_the_newest_build_with_blackwell_code_for_aarch64(catalog, load_profile):
    """The aarch64 cu126 wheels have no sm_100: torch 2.12-2.14 do not run on a GB200 on R570; 2.11's cu128 does."""
    resolution = pick(catalog, "torch", load_profile("gb200x4-cuda128"))
    assert resolution.selected.build.id == "torch-2.11-cu128"
    assert "no kernels for sm_100" in " ".join(verdict(resolution, "torch-2.14-cu126").reasons)


def test_a_jetson_orin_gets_jetson_builds_and_cpu_where_there_is_none(catalog, load_profile):
    orin = load_profile("jetson-agx-orin-jp62")
    torch = pick(catalog, "torch", orin)
    assert torch.selected.build.id == "torch-2.8-jp6-cu126"
    generic = verdict(torch, "torch-2.15-cu130")
    assert generic.reasons == ("a generic aarch64 CUDA build: its CUDA libraries are for server ARM (SBSA), not for a "
                               "Jetson's integrated GPU under JetPack 6.2 (L4T 36.4.3); only builds made for Jetson "
                               "run there",)
    assert pick(catalog, "tensorflow", orin).selected.build.id == "tensorflow-2.16-jp61-cu126"
    for name in ("jax", "mxnet"):  # no Jetson build: the CPU one, with the reason
        resolution = pick(catalog, name, orin)
        assert not resolution.selected.build.is_gpu
        said = gpu_unused(resolution, orin)
        assert said.startswith(f"the manifest {name} has no build made for Jetson") or "no aarch64 packages" in said
        assert "a Jetson (L4T 36.4.3)" in said
    # never judged as a discrete GPU: nvidia-smi's 540.4.0 is JetPack's, not a desktop driver branch
    from envkit.pick.resolve import impossible_driver

    assert impossible_driver(orin, catalog.tables) == ()


def test_a_jetpack_older_than_the_builds_is_refused_and_a_jetpack_5_board_gets_its_own(catalog, load_profile):
    jp5 = load_profile("jetson-agx-orin-jp62")._replace(l4t=L4tVersion(35, 4, 1), cuda_driver=None,
                                                             driver_version=None)
    jp5 = jp5._replace(cuda_driver=catalog.tables.cuda.jetpack_for(jp5.l4t).cuda)
    torch = pick(catalog, "torch", jp5)
    assert torch.selected.build.id == "torch-2.1-jp512-cu114"
    assert verdict(torch, "torch-2.8-jp6-cu126").reasons == (
        "built for Jetsons of L4T >=36.4,<37; this one is JetPack 5.1.2 (L4T 35.4.1)",)


def test_thor_on_jetpack_7_runs_the_ordinary_aarch64_cuda_13_wheels(catalog, load_profile):
    thor = load_profile("jetson-agx-thor-jp7")
    torch = pick(catalog, "torch", thor)
    assert torch.selected.build.id == "torch-2.15-cu130"
    assert "no kernels for sm_110" in " ".join(verdict(torch, "torch-2.10-cu128").reasons)  # OpenRAL/openral#167
    assert "not the machine" not in " ".join(verdict(torch, "torch-2.8-jp6-cu126").reasons)
    assert verdict(torch, "torch-2.8-jp6-cu126").reasons == (
        "built for Jetsons of L4T >=36.4,<37; this one is JetPack 7.0 (L4T 38.2.0)",)


def test_an_unknown_jetpack_gets_no_gpu_build(catalog, load_profile):
    old = load_profile("jetson-agx-orin-jp62")._replace(l4t=L4tVersion(32, 5, 1))
    torch = pick(catalog, "torch", old)
    assert not torch.selected.build.is_gpu
    assert any("L4T 32.5.1 is a JetPack envkit does not know" in r for r in verdict(torch, "torch-2.15-cu130").reasons)


def test_jetson_builds_are_refused_on_any_other_machine(catalog, load_profile):
    for name in ("h100-cuda128", "gh200-r570-cuda128"):
        candidate = verdict(pick(catalog, "torch", load_profile(name)), "torch-2.8-jp6-cu126")
        assert candidate.reasons == ("a Jetson build (for L4T >=36.4,<37): the machine is not a Jetson (its profile "
                                     "has no l4t)",)


def test_x86_only_builds_say_so_on_aarch64(catalog, load_profile):
    candidate = verdict(pick(catalog, "torch", load_profile("gh200-r570-cuda128")), "torch-2.7-cu128")
    assert candidate.reasons == ("no aarch64 packages (linux-aarch64): the build has packages for linux-64 only",)


def test_a_fleet_of_two_platforms_splits_by_platform(catalog, load_profile):
    """An x86_64 H100 node and a Grace partition: one environment's packages are for one platform, so even where a
    build has packages for both (torch 2.14 cu126), the fleet gets one group per platform."""
    machines = [Machine("h100", load_profile("h100-cuda128")), Machine("gh200", load_profile("gh200-r570-cuda128")),
                Machine("gh200b", load_profile("gh200-r570-cuda128"))]
    result = resolve_fleet(catalog.manifests["torch"], fleet_of(machines), catalog.tables)
    assert result.platforms == ("linux-64", "linux-aarch64") and result.split and result.selected is None
    assert [(g.machines, g.selected.build.id) for g in result.groups] == [
        (("h100",), "torch-2.14-cu126"), (("gh200", "gh200b"), "torch-2.14-cu126")]
    reasons = verdict(result.resolution, "torch-2.14-cu126").reasons
    assert reasons[0] == ("one environment's packages are built for one platform, and these machines are of linux-64 "
                          "(h100) and linux-aarch64 (gh200, gh200b)")
    assert reasons[1:] == ("h100: fits (linux-64)", "gh200, gh200b: fits (linux-aarch64)")
    tf = resolve_fleet(catalog.manifests["tensorflow"], fleet_of(machines), catalog.tables)
    assert [g.selected.build.id for g in tf.groups] == ["tensorflow-2.21-cu125", "tensorflow-2.21-cpu"]


def test_list_of_a_mixed_fleet_says_why_it_splits_and_how_to_make_each(tmp_path):
    done = envkit("list", "torch", "--machine", str(PROFILES / "h100-cuda128.yaml"), "--machine",
                  str(PROFILES / "gh200-r570-cuda128.yaml"))
    assert done.returncode == 0, done.stderr
    assert ("The machines are of 2 platforms (linux-64, linux-aarch64), and one environment's packages are for one: "
            "one environment per group:") in done.stdout
    assert "gh200: linux-aarch64, driver 570.124.06" in done.stdout
    made = (f"envkit create torch --build torch-2.14-cu126 --name torch-gh200 --machine "
            f"{PROFILES}/gh200-r570-cuda128.yaml")
    assert made in done.stdout


@pytest.mark.parametrize("platform, said", [
    ("linux-ppc64le", "'linux-ppc64le' is not a platform envkit makes environments for; it knows linux-64 (x86_64) "
                      "and linux-aarch64 (aarch64)"),
    ("osx-arm64", "'osx-arm64' is not a platform envkit makes environments for: envkit makes Linux environments, for "
                  "linux-64 (x86_64) and linux-aarch64 (aarch64)"),
])
def test_a_profile_of_an_unknown_platform_is_exit_2_saying_which_are_supported(tmp_path, platform, said):
    path = tmp_path / "m.yaml"
    path.write_text(f"platform: {platform}\ncuda_driver: '12.8'\ngpus: []\n")
    done = envkit("list", "torch", "--machine", str(path))
    assert_clean_error(done, 2, f"machine profile {path}: platform: {said}")


def test_l4t_without_aarch64_is_exit_2(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("l4t: '36.4.4'\ncuda_driver: '12.6'\ngpus: []\n")
    done = envkit("list", "torch", "--machine", str(path))
    assert_clean_error(done, 2, "l4t '36.4.4' names a Jetson's Linux for Tegra release, and every Jetson is aarch64: "
                                "add 'platform: linux-aarch64' (the profile says linux-64)")


@pytest.mark.parametrize("l4t, said", [(36.4, "36.4 must be quoted"), ("R36.4", "is not a Linux for Tegra release")])
def test_a_malformed_l4t_is_refused(l4t, said):
    with pytest.raises(ProfileError) as caught:
        profile_from_dict({"platform": "linux-aarch64", "l4t": l4t, "gpus": []}, "p")
    assert said in caught.value.message and caught.value.message.startswith("machine profile p: l4t: ")


# The Jetson builds, as their sources give them (envs/torch.yaml [jetson], envs/tensorflow.yaml [arm]):
# id -> (where from, packages, Python, L4T range, CUDA, GPU code)
JETSON = {
    "torch-2.8-jp6-cu126": ("index https://pypi.jetson-ai-lab.io/jp6/cu126", ("torch==2.8.0", "torchvision==0.23.0"),
                            "3.10", ">=36.4,<37", "12.6", ("8.7",)),
    "torch-2.5-jp61-cu126": ("links https://developer.download.nvidia.com/compute/redist/jp/v61/pytorch/",
                             ("torch==2.5.0a0+872d972e41.nv24.08.17622132",), "3.10", ">=36.4,<37", "12.6", ("8.7",)),
    "torch-2.1-jp512-cu114": ("links https://developer.download.nvidia.com/compute/redist/jp/v512/pytorch/",
                              ("torch==2.1.0a0+41361538.nv23.06",), "3.8", ">=35.4.1,<36", "11.4", ("7.2", "8.7")),
    "tensorflow-2.16-jp61-cu126": ("links https://developer.download.nvidia.com/compute/redist/jp/v61/tensorflow/",
                                   ("tensorflow==2.16.1+nv24.08",), "3.10", ">=36.4,<37", "12.6", ("8.7",)),
}


def test_the_jetson_builds_are_as_their_sources_say(catalog):
    found = {b.id: b for m in catalog.manifests.values() for b in m.builds if b.is_jetson}
    assert set(found) == set(JETSON)
    for build_id, (source, packages, python, l4t, cuda, sass) in JETSON.items():
        build = found[build_id]
        kind, url = source.split()
        assert (build.pip.index_url if kind == "index" else build.pip.find_links) == url, build_id
        if kind == "links":  # NVIDIA's wheels beside PyPI's dependencies
            assert build.pip.index_url is None, build_id
        assert build.pip.packages == packages and build.platforms == ("linux-aarch64",) and build.l4t == l4t
        assert [str(v) for v in catalog.tables.python.versions if build.python.contains(v)] == [python], build_id
        assert (str(build.cuda), tuple(str(a) for a in build.arch.sass), build.arch.ptx) == (cuda, sass, ())
