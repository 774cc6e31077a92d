"""The platforms of a build in a manifest (issue 43): read, and every mistake one sentence naming file, build and
field, exit 2 (envs/README.md documents the keys)."""

from __future__ import annotations

import pytest

from envkit.errors import ManifestError
from tests.test_cli import assert_clean_error, envkit
from tests.test_pick_accuracy import demo  # noqa: F401 (a fixture: the manifests directory)
from tests.test_pick_accuracy import release

GPU = ('{variant: cu126, cuda: "12.6", arch: {sass: ["8.0", "9.0"]}, '
       'pip: {packages: ["torch==2.0.*", "torchvision==0.15.*"]}')


@pytest.fixture
def made(demo):  # noqa: F811 (the fixture imported above)
    """The demo manifest (test_pick_accuracy's manifests directory) of a release 2.0 of these builds."""
    def write(release_extra: str, *builds: str):
        return demo(release("2.0", "".join(f"      - {build}\n" for build in builds), release_extra)).manifests["demo"]

    write.directory = demo.directory
    return write


def test_platforms_default_to_linux_64_and_a_release_sets_them_for_its_builds(made):
    [plain] = made("", GPU + "}").builds
    assert (plain.platforms, plain.per_platform, plain.absent, plain.l4t) == (("linux-64",), (), (), None)
    builds = made("    platforms: [linux-64, linux-aarch64]\n    absent: {linux-aarch64: why not}\n",
                  GPU + "}", GPU.replace("cu126", "cpu").replace(', cuda: "12.6", arch: {sass: ["8.0", "9.0"]}', "")
                  + ", platforms: [linux-64]}").builds
    assert builds[0].platforms == ("linux-64", "linux-aarch64") and builds[0].absent == ()  # it has aarch64
    assert builds[1].platforms == ("linux-64",) and builds[1].absent_reason("linux-aarch64") == "why not"


def test_what_differs_on_a_platform_is_the_build_as_it_is_there(made):
    [build] = made("", GPU + ", platforms: {linux-64: {}, linux-aarch64: {arch: {sass: ['9.0']}, unconfirmed: u, "
                   "pip: {plain: [torchvision]}}}}").builds
    arm = build.on("linux-aarch64")
    assert [str(a) for a in arm.arch.sass] == ["9.0"] and arm.unconfirmed == "u" and arm.pip.plain == ("torchvision",)
    assert build.on("linux-64") is build and [str(a) for a in build.arch.sass] == ["8.0", "9.0"]
    assert arm.pip.packages == build.pip.packages  # merged over the build's own


@pytest.mark.parametrize("build, field, said", [
    (GPU + ", platforms: [linux-64, linux-aarch64, linux-64]}", "platforms[2]",
     "names linux-64 twice: a build lists each platform it has packages for once"),
    (GPU + ", platforms: [linux-ppc64le]}", "platforms[0]",
     "'linux-ppc64le' is not a platform envkit makes environments for; it knows linux-64 (x86_64) and "
     "linux-aarch64 (aarch64)"),
    (GPU + ", platforms: {osx-arm64: {}}}", "platforms.osx-arm64", "envkit makes Linux environments"),
    (GPU + ", platforms: []}", "platforms", "names no platform"),
    (GPU + ", platforms: [linux-64], absent: {linux-64: x}}", "absent.linux-64",
     "linux-64 is one of the build's platforms: it has packages there"),
    (GPU + ", l4t: '>=36.4'}", "l4t", "a Jetson build (l4t) has packages for linux-aarch64 only, and this one lists "
                                      "linux-64: set 'platforms: [linux-aarch64]'"),
    (GPU + ", platforms: [linux-aarch64], l4t: 'JetPack 6'}", "l4t", "is not a range of L4T releases"),
    (GPU + ", platforms: {linux-aarch64: {pip: {plain: [torchaudio]}}}}", "platforms.linux-aarch64.pip.plain[0]",
     "'torchaudio' is not one of the build's packages (torch, torchvision)"),
    (GPU + ", platforms: {linux-aarch64: {arch: {sass: ['3.7']}}}}", "platforms.linux-aarch64.arch",
     "CUDA 12.x cannot build for sm_37"),
    (GPU + ", platforms: {linux-aarch64: {cuda: '12.8'}}}", "platforms.linux-aarch64.cuda", "unknown key"),
])
def test_a_mistake_names_the_build_and_field(made, build, field, said):
    with pytest.raises(ManifestError) as caught:
        made("", build)
    assert caught.value.build == "demo-2.0-cu126" and caught.value.field == field and caught.value.exit_code == 2
    assert said in caught.value.problem, caught.value.problem


def test_a_platform_named_twice_in_a_mapping_is_the_yaml_s_own_error(made):
    with pytest.raises(ManifestError) as caught:
        made("", GPU + ", platforms: {linux-64: {}, linux-64: {}}}")
    assert "linux-64" in str(caught.value) and "twice" in str(caught.value)


def test_manifests_validate_says_it_in_one_sentence_exit_2(made):
    with pytest.raises(ManifestError):
        made("", GPU + ", platforms: [linux-aarch64, linux-aarch64]}")
    done = envkit("manifests", "validate", str(made.directory))
    assert done.returncode == 2, done
    assert "build demo-2.0-cu126, field 'platforms[1]': names linux-aarch64 twice" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    listed = envkit("list", "demo", "--manifests", str(made.directory))
    assert_clean_error(listed, 2, "names linux-aarch64 twice")
