"""Fleets: loading several profiles, a build fits only when it fits every machine, groups when none does.

The expectations are worked out by hand from the CUDA rules (docs in envkit/pick/resolve.py) and the builds' GPU code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import envkit.pick.fleet_resolve as fleet_resolve
from envkit.catalog import ArchSet, Build, Manifest, PipInstall
from envkit.errors import ProfileError
from envkit.machines.fleet import Fleet, Machine, fleet_of, load_profiles, named
from envkit.machines.profile import profile_from_dict
from envkit.pick.fleet_resolve import resolve_fleet
from envkit.versions import ComputeCapability, CudaVersion

PROFILES = Path(__file__).parent / "profiles"


def profile(name, cuda, driver, *archs, gpu="GPU"):
    return profile_from_dict({"name": name, "cuda_driver": cuda, "driver_version": driver,
                              "gpus": [{"name": f"{gpu} {a}", "compute_capability": a} for a in archs]}, name)


def fleet(*profiles) -> Fleet:
    return fleet_of([named(p, "unnamed") for p in profiles])


DEEPNINE = profile("deepnine", "12.4", "550.54.14", "7.5", "7.5", gpu="NVIDIA GeForce RTX 2070")
DEEPTEN = profile("deepten", "11.2", "460.32.03", "6.1", gpu="NVIDIA GeForce GTX 1080")


def test_lab_pair_one_torch_build_for_both(catalog):
    # deepten's driver (460.32.03, CUDA 11.2) runs 11.x builds through minor-version compatibility (>= 450.80.02),
    # SASS only; its GTX 1080 (sm_61) has SASS in the cu118 builds. deepnine (12.4, sm_75) runs those natively.
    # No 12.x build runs on deepten. So: the newest cu118 torch, for both.
    result = resolve_fleet(catalog.manifests["torch"], fleet(DEEPNINE, DEEPTEN), catalog.tables)
    assert result.selected.build.id == "torch-2.7-cu118"
    assert result.selected.native is False  # deepten runs it through minor-version compatibility
    assert result.groups == ()
    assert result.fails_on["torch-2.14-cu126"] == ("deepten",)
    [candidate] = [c for c in result.resolution.candidates if c.build.id == "torch-2.14-cu126"]
    assert candidate.reasons == ("deepten: needs driver CUDA >= 12.6, the driver has 11.2",)
    # Each machine alone would pick something newer for deepnine: the fleet costs it.
    from envkit.pick.resolve import resolve

    alone = resolve(catalog.manifests["torch"], DEEPNINE, catalog.tables)
    assert alone.selected.build.version > result.selected.build.version


def test_lab_pair_jax_has_no_common_gpu_build_and_groups(catalog):
    # JAX's GPU builds are CUDA 12 and 13 only: none runs on deepten's CUDA 11.2 driver. deepnine gets the newest
    # cu12 build; deepten is a group of its own with the CPU build.
    result = resolve_fleet(catalog.manifests["jax"], fleet(DEEPNINE, DEEPTEN), catalog.tables)
    assert not result.selected.build.is_gpu
    groups = [(g.machines, g.selected.build.id) for g in result.groups]
    newest_cu12 = max((b for b in catalog.manifests["jax"].builds if b.variant == "cu12"), key=lambda b: b.version)
    assert groups == [(("deepnine",), newest_cu12.id), (("deepten",), result.selected.build.id)]


# A small manifest, so the set cover can be worked out on paper.
def build(version, cuda, *sass):
    return Build(id=f"x-{version}-{CudaVersion.parse(cuda).tag}", manifest="x", version=Version(version),
                 variant=CudaVersion.parse(cuda).tag, python=SpecifierSet(">=3.8"), cuda=CudaVersion.parse(cuda),
                 arch=ArchSet(sass=tuple(ComputeCapability.parse(s) for s in sass)), pip=PipInstall(packages=("x",)))


CPU = Build(id="x-3.0-cpu", manifest="x", version=Version("3.0"), variant="cpu", python=SpecifierSet(">=3.8"),
            pip=PipInstall(packages=("x",)))
A = build("3.0", "12.8", "7.5", "8.0", "9.0")  # fits H100 and A100 (not V100: no sm_70; not K80)
B = build("2.0", "11.8", "3.7", "5.0", "6.0", "7.0", "7.5", "8.0")  # fits A100 and V100 (K80's driver is 10.2)
C = build("1.0", "10.2", "3.7", "5.0", "6.0", "7.0")  # fits V100 and K80
SMALL = Manifest(name="x", summary="x", framework="torch", builds=(A, B, C, CPU), path="x.yaml")
H100 = profile("h100", "12.8", "570.86.10", "9.0")
A100 = profile("a100", "12.8", "570.86.10", "8.0")
A100_TWIN = profile("a100-twin", "12.8", "570.86.10", "8.0")
V100 = profile("v100", "11.8", "520.61.05", "7.0")
K80 = profile("k80", "10.2", "440.33.01", "3.7")
LOGIN = profile_from_dict({"name": "login", "cuda_driver": None, "gpus": []}, "login")


def test_fewest_groups_is_a_minimum_cover_not_the_greedy_one(catalog):
    # Sets: A = {h100, a100}, B = {a100, v100}, C = {v100, k80}. Taking the newest build first (A, then B, then C)
    # makes 3 groups; the minimum is 2: A for h100 + a100, C for v100 + k80.
    result = resolve_fleet(SMALL, fleet(H100, A100, V100, K80), catalog.tables)
    assert result.selected.build.id == "x-3.0-cpu"  # no GPU build fits all four
    assert [(g.machines, g.selected.build.id) for g in result.groups] == [
        (("h100", "a100"), "x-3.0-cu128"),
        (("v100", "k80"), "x-1.0-cu102"),
    ]
    assert result.fails_on["x-3.0-cu128"] == ("v100", "k80")
    assert result.fails_on["x-2.0-cu118"] == ("h100", "k80")


def test_a_group_gets_the_newest_build_fitting_all_its_machines(catalog):
    # Without H100: A = {a100} lies inside B = {a100, v100}; C = {v100, k80}. The cover is B + C (B first, its
    # build is newer), v100 goes to the first set holding it; k80 alone then gets the newest build fitting it: C.
    result = resolve_fleet(SMALL, fleet(A100, V100, K80), catalog.tables)
    assert [(g.machines, g.selected.build.id) for g in result.groups] == [
        (("a100", "v100"), "x-2.0-cu118"),
        (("k80",), "x-1.0-cu102"),
    ]


def test_a_machine_no_gpu_build_fits_is_a_group_with_its_best_build(catalog):
    old = profile("kepler", "9.0", "384.111", "3.0")  # no build has sm_30, and its driver is too old for all
    result = resolve_fleet(SMALL, fleet(H100, A100, old), catalog.tables)
    assert [(g.machines, g.selected.build.id) for g in result.groups] == [
        (("h100", "a100"), "x-3.0-cu128"),
        (("kepler",), "x-3.0-cpu"),
    ]


def test_the_machines_no_gpu_build_fits_are_one_group_with_the_cpu_build(catalog):
    # Two machines no GPU build fits (no sm_30 anywhere; a driver too old for every build) share the CPU build: one
    # environment serves both, where a group each made two environments of one build under one default name.
    kepler = profile("kepler", "9.0", "384.111", "3.0")
    old = profile("old", "9.0", "384.111", "6.1")
    result = resolve_fleet(SMALL, fleet(H100, kepler, A100, old), catalog.tables)
    assert [(g.machines, g.selected.build.id) for g in result.groups] == [
        (("h100", "a100"), "x-3.0-cu128"),
        (("kepler", "old"), "x-3.0-cpu"),
    ]


def test_duplicate_profiles_are_judged_once(catalog, monkeypatch):
    calls = []
    real = fleet_resolve.resolve
    monkeypatch.setattr(fleet_resolve, "resolve", lambda *a, **k: calls.append(a[1].name) or real(*a, **k))
    many = fleet(H100, A100, A100_TWIN, *[profile(f"a100-{i:03}", "12.8", "570.86.10", "8.0") for i in range(50)])
    result = resolve_fleet(SMALL, many, catalog.tables)
    assert calls == ["h100", "a100"]  # 53 machines, 2 configurations
    assert result.selected.build.id == "x-3.0-cu128"
    assert len(result.machines) == 53


def test_the_same_file_twice_is_one_machine_but_two_names_are_two():
    same = fleet_of([named(A100, "f"), named(A100, "f")])
    assert same.names == ("a100",)
    twins = fleet(A100, A100_TWIN)
    assert twins.names == ("a100", "a100-twin") and len(twins.configs()) == 1
    clash = fleet_of([Machine("n1", A100, "one.yaml"), Machine("n1", V100, "two.yaml")])
    assert clash.names == ("n1", "n1 (two.yaml)")


def test_a_site_node_keeps_its_name_when_a_profile_file_shares_it():
    # `--machine k40-01.json --partition gpu` where the partition has a node k40-01 of another configuration: the
    # node became 'k40-01 (2)', and the group command `--partition 'gpu:k40-01 (2)'` was refused when pasted.
    clash = fleet_of([Machine("k40-01", A100, "k40-01.json"), Machine("k40-01", V100)])
    assert clash.names == ("k40-01 (k40-01.json)", "k40-01")
    assert clash.machines[0].profile.name == "k40-01 (k40-01.json)"
    # The same machine from a profile file and the site file: one machine, the 3 nodes the site file counts.
    same = fleet_of([Machine("k40-01", A100, "k40-01.json"), Machine("k40-01", A100, None, nodes=3)])
    assert same.machines == (Machine("k40-01", A100, "k40-01.json", nodes=3),) and same.node_count == 3


def test_a_gpu_less_login_node_does_not_veto_gpu_builds(catalog):
    # Decision: a machine without GPUs beside GPU machines is a front-end: the environment is for the GPU machines,
    # and a CUDA build runs on the CPU there. It is named as CPU-only, and never grouped.
    result = resolve_fleet(SMALL, fleet(H100, A100, LOGIN), catalog.tables)
    assert result.selected.build.id == "x-3.0-cu128"
    assert result.cpu_only == ("login",)
    assert "login: no GPU: the environment runs there on the CPU only" in result.selected.reasons
    assert "x-3.0-cu128" not in result.fails_on


def test_a_fleet_of_gpu_less_machines_gets_a_cpu_build(catalog):
    other = profile_from_dict({"name": "login2", "cuda_driver": None, "gpus": []}, "x")
    result = resolve_fleet(SMALL, fleet(LOGIN, other), catalog.tables)
    assert result.selected.build.id == "x-3.0-cpu"
    assert result.groups == () and result.cpu_only == ()
    assert result.fails_on["x-3.0-cu128"] == ("login", "login2")


def test_heterogeneous_partition_a100_and_v100_nodes(catalog):
    # Nodes with A100s and nodes with V100s, same driver: the build must carry sm_70 and sm_80 code. That is the
    # same question as one machine holding both GPUs (tests/profiles/v100-a100-cuda122.yaml), so the answer is too.
    both = profile_from_dict({**(_load("v100-a100-cuda122")), "name": "mixed"}, "x")
    a100_node = profile_from_dict({**_load("v100-a100-cuda122"), "name": "a100-01",
                                   "gpus": [g for g in _load("v100-a100-cuda122")["gpus"] if "A100" in g["name"]]},
                                  "a")
    v100_node = profile_from_dict({**_load("v100-a100-cuda122"), "name": "v100-01",
                                   "gpus": [g for g in _load("v100-a100-cuda122")["gpus"] if "V100" in g["name"]]},
                                  "v")
    assert {str(g.compute_capability) for g in a100_node.gpus} == {"8.0"}
    assert {str(g.compute_capability) for g in v100_node.gpus} == {"7.0"}
    from envkit.pick.resolve import resolve

    result = resolve_fleet(catalog.manifests["torch"], fleet(a100_node, v100_node), catalog.tables)
    single = resolve(catalog.manifests["torch"], both, catalog.tables)
    assert result.selected.build.id == single.selected.build.id
    assert result.selected.build.is_gpu and result.groups == ()
    # A build with no Volta code fails on the V100 nodes only.
    no_volta = [b.id for b in catalog.manifests["torch"].builds if b.variant == "cu130"]
    assert no_volta and all(result.fails_on[b] == ("v100-01",) for b in no_volta
                            if "a100-01" not in result.fails_on[b])


def _load(name):
    import yaml

    return yaml.safe_load((PROFILES / f"{name}.yaml").read_text())


def test_one_configuration_is_the_single_machine_answer(catalog):
    from envkit.pick.resolve import resolve

    result = resolve_fleet(catalog.manifests["torch"], fleet(DEEPNINE), catalog.tables)
    assert result.resolution == resolve(catalog.manifests["torch"], DEEPNINE, catalog.tables)


# --- loading -----------------------------------------------------------------------------------------------------

def test_directory_of_profiles_names_machines(tmp_path):
    (tmp_path / "b-node.yaml").write_text("cuda_driver: '12.4'\ngpus: []\n")
    (tmp_path / "a.json").write_text('{"name": "deepnine", "cuda_driver": "12.4", "gpus": []}')
    (tmp_path / "notes.txt").write_text("not a profile")
    machines = load_profiles([tmp_path], tmp_path / "cache")
    assert [m.name for m in machines] == ["deepnine", "b-node"]
    assert machines[1].file == str(tmp_path / "b-node.yaml")
    # Warm: the same answer from the cache; a changed file is read again.
    assert load_profiles([tmp_path], tmp_path / "cache") == machines
    (tmp_path / "b-node.yaml").write_text("name: renamed\ncuda_driver: '12.4'\ngpus: []\n")
    assert [m.name for m in load_profiles([tmp_path], tmp_path / "cache")] == ["deepnine", "renamed"]


def test_a_directory_named_another_way_gives_its_files_as_named_then(tmp_path):
    # The commands envkit prints name the profile files: from the cache too, as the directory was named this time
    # (another working directory, a link), never as it was the first time.
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "node.yaml").write_text("cuda_driver: '12.4'\ngpus: []\n")
    (tmp_path / "link").symlink_to(lab)
    assert [m.file for m in load_profiles([lab], tmp_path / "cache")] == [str(lab / "node.yaml")]
    again = load_profiles([tmp_path / "link"], tmp_path / "cache")
    assert [m.file for m in again] == [str(tmp_path / "link" / "node.yaml")]
    assert again[0].profile.sources["cuda_driver"] == f"file {tmp_path / 'link' / 'node.yaml'}"


def test_a_broken_profile_in_a_directory_names_the_file(tmp_path):
    (tmp_path / "good.yaml").write_text("cuda_driver: '12.4'\ngpus: []\n")
    (tmp_path / "bad.yaml").write_text("cuda_driver: banana\n")
    with pytest.raises(ProfileError) as caught:
        load_profiles([tmp_path], tmp_path / "cache")
    assert caught.value.exit_code == 2 and str(tmp_path / "bad.yaml") in caught.value.message


def test_an_empty_directory_is_an_error(tmp_path):
    with pytest.raises(ProfileError) as caught:
        load_profiles([tmp_path])
    assert caught.value.exit_code == 2 and "holds no machine profiles" in caught.value.message


def test_memory_and_names_do_not_split_a_configuration():
    one = profile_from_dict({"name": "n1", "cuda_driver": "12.2", "driver_version": "535.104.05",
                             "gpus": [{"name": "NVIDIA A100", "compute_capability": "8.0", "memory_mib": 81920}]}, "a")
    two = profile_from_dict({"name": "n2", "cuda_driver": "12.2", "driver_version": "535.104.05",
                             "gpus": [{"name": "NVIDIA A100", "compute_capability": "8.0", "memory_mib": 81559}]}, "b")
    other_driver = profile_from_dict({"name": "n3", "cuda_driver": "12.2", "driver_version": "535.54.03",
                                      "gpus": [{"name": "NVIDIA A100", "compute_capability": "8.0"}]}, "c")
    assert [c.names for c in fleet(one, two, other_driver).configs()] == [("n1", "n2"), ("n3",)]


def test_many_sets_fall_back_to_the_greedy_cover():
    from envkit.pick.fleet_resolve import EXACT_LIMIT, _cover

    sets = [frozenset({i}) for i in range(EXACT_LIMIT + 4)] + [frozenset({0, 1, 2})]
    cover = _cover(sets, frozenset(range(EXACT_LIMIT + 4)))
    assert frozenset().union(*cover) == frozenset(range(EXACT_LIMIT + 4))
    assert cover[0] == frozenset({0, 1, 2}) and len(cover) == EXACT_LIMIT + 2


# --- the target a record keeps -----------------------------------------------------------------------------------

def test_a_recorded_target_reads_back_and_knows_its_machines():
    from envkit.machines.target import matching, target_dict, target_fleet
    from envkit.slurm.job_context import apply_job_context, job_context

    lab = fleet(DEEPNINE, DEEPTEN, profile("deepnine-2", "12.4", "550.54.14", "7.5", "7.5",
                                           gpu="NVIDIA GeForce RTX 2070"))
    stored = target_dict(lab, ["--machine", "/lab"])
    assert stored["machines"] == ["deepnine", "deepten", "deepnine-2"] and len(stored["profiles"]) == 2
    back = target_fleet(stored, "record x")
    assert back.names == ("deepnine", "deepnine-2", "deepten")
    assert [c.names for c in back.configs()] == [("deepnine", "deepnine-2"), ("deepten",)]
    # This machine is one of them when its facts are theirs (detected here: another name, its own sources).
    here = profile_from_dict({**DEEPTEN.to_dict(), "name": None}, "detected")
    assert matching(back, here).name == "deepten"
    login = profile_from_dict({"cuda_driver": None, "gpus": []}, "detected")
    assert matching(back, login) is None
    # With its GPUs hidden by CUDA_VISIBLE_DEVICES, it is still deepten (and the check says they are hidden).
    hidden = apply_job_context(here, job_context({"CUDA_VISIBLE_DEVICES": ""}))
    assert hidden.gpus == () and matching(back, hidden).name == "deepten"


@pytest.mark.parametrize("damaged", [{}, {"profiles": [{"machines": ["a"]}]}, {"profiles": "x"},
                                     {"profiles": [{"machines": [1], "profile": {"gpus": []}}]},
                                     {"profiles": [{"machines": ["a"], "profile": {"cuda_driver": "x"}}]},
                                     {"profiles": []}])
def test_a_damaged_target_is_a_clear_error(damaged):
    from envkit.errors import BadInputError
    from envkit.machines.target import target_fleet

    with pytest.raises(BadInputError) as caught:
        target_fleet(damaged, "the record of torch-x")
    assert caught.value.exit_code == 2 and "the record of torch-x" in caught.value.message


def test_a_fleet_is_planned_on_its_gpu_machine_whose_driver_supports_the_lowest_cuda():
    login = profile("login", None, None)  # no GPU: it does not decide the CUDA a conda solve must hold for
    assert fleet(DEEPNINE).planning_profile() == fleet(DEEPNINE).single
    assert fleet(DEEPNINE, login, DEEPTEN).planning_profile().name == "deepten"  # CUDA 11.2 below deepnine's 12.4
    assert fleet(login, profile("login2", None, None)).planning_profile().name == "login"  # none has GPUs
