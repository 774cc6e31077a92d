"""envkit site --builds: every partition's pick from every manifest at a glance, the same picks that `envkit list
--partition P` (and `--machine` for one configuration) makes, through the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_cli import PROFILES, assert_clean_error, envkit

SITE = """version: 1
partitions:
  volta:
    nodes:
      - {node: v1, count: 4, profile_file: v100x8-cuda130.yaml}
  mixed:
    nodes:
      - {node: k1, profile_file: k80x2-cuda114.yaml}
      - {node: b1, count: 2, profile_file: rtx5090-cuda128.yaml}
  login:
    nodes:
      - {node: front, profile_file: no-gpu.yaml}
"""


@pytest.fixture
def site(tmp_path: Path) -> dict:
    for name in ("v100x8-cuda130.yaml", "k80x2-cuda114.yaml", "rtx5090-cuda128.yaml", "no-gpu.yaml"):
        shutil.copy(PROFILES / name, tmp_path / name)
    (tmp_path / "site.yaml").write_text(SITE)
    return {"ENVKIT_SITE": str(tmp_path / "site.yaml"), "HOME": str(tmp_path / "home")}


def listed(env: dict, *target: str) -> dict:
    result = envkit("list", "--json", *target, env=env)
    assert result.returncode == 0, result.stderr
    return {m["name"]: m for m in json.loads(result.stdout)["manifests"]}


def test_each_partition_gets_the_pick_that_list_makes_for_it(site):
    result = envkit("site", "--builds", "--json", env=site)
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    rows = {(row["partition"], tuple(row["machines"])): row for row in table["partitions"]}
    assert set(table["manifests"]) >= {"torch", "tensorflow", "jax", "mxnet"}
    for partition in ("volta", "login"):
        expected = listed(site, "--partition", partition)
        row = rows[(partition, ())]
        for name in table["manifests"]:
            assert row["builds"][name]["build"] == expected[name]["selected"], (partition, name)
    assert rows[("volta", ())]["nodes"] == 4 and rows[("volta", ())]["cuda_driver"] == "13.0"
    # CUDA 13 builds carry no Volta code: the V100 partition's torch is a cu126 build, a GPU one
    assert rows[("volta", ())]["builds"]["torch"]["build"].endswith("-cu126")
    assert rows[("volta", ())]["builds"]["torch"]["gpu"] is True


def test_a_partition_of_several_configurations_shows_each_and_is_split_where_list_splits_it(site):
    table = json.loads(envkit("site", "--builds", "--json", env=site).stdout)
    rows = {(row["partition"], tuple(row["machines"])): row for row in table["partitions"]}
    whole = rows[("mixed", ())]
    assert whole["nodes"] == 3 and whole["gpus"] == "2 configurations"
    expected = listed(site, "--partition", "mixed")
    for name in table["manifests"]:
        groups = len(expected[name].get("groups") or [])
        if groups > 1:
            assert whole["builds"][name] == {"build": None, "gpu": False, "reason": (
                f"no build runs on every configuration: split into {groups} groups (envkit create ... --partition "
                "P prints one command per group)")}, name
        else:
            assert whole["builds"][name]["build"] == expected[name]["selected"], name
    for machines, profile in ((("kepler",), "k80x2-cuda114.yaml"), (("blackwell-desk",), "rtx5090-cuda128.yaml")):
        row = rows[("mixed", machines)]
        mine = listed(site, "--machine", str(PROFILES / profile))
        assert row["nodes"] == (1 if machines == ("kepler",) else 2)
        for name in table["manifests"]:
            assert row["builds"][name]["build"] == mine[name]["selected"], (machines, name)


def test_the_text_table_puts_partitions_down_and_manifests_across_with_reasons_on_request(site):
    plain = envkit("site", "--builds", env=site)
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[1].split()[:5] == ["PARTITION", "NODES", "GPUS", "CUDA", "JAX"]
    volta = next(line for line in lines if line.startswith("volta "))
    torch = listed(site, "--partition", "volta")["torch"]["selected"]
    assert torch in volta.split()
    login = next(line for line in lines if line.startswith("login "))
    assert "CPU (" in login  # no GPU there: CPU builds, marked as such
    assert lines[-1] == "CPU, split and none cells have reasons: envkit site --builds --reasons"
    why = envkit("site", "--builds", "--reasons", env=site)
    # the login node has no GPU: no reason is owed for its CPU builds; a GPU node's CPU pick has one
    assert why.returncode == 0 and why.stdout.startswith(plain.stdout.split("\n\nCPU, split")[0] + "\n\n")
    assert "login, torch" not in why.stdout


def test_reasons_without_builds_is_a_usage_error(site):
    assert_clean_error(envkit("site", "--reasons", env=site), 2, "--reasons goes with --builds")


def test_without_a_site_file_it_says_how_to_get_one(tmp_path):
    result = envkit("site", "--builds", env={"ENVKIT_SITE": str(tmp_path / "none.yaml"), "HOME": str(tmp_path)})
    assert result.returncode == 0 and "No site file at" in result.stdout and "envkit survey" in result.stdout


def test_a_partition_of_x86_64_and_grace_nodes_shows_both_picks(tmp_path):
    """Issue 43: a partition of an H100 node and GH200 nodes is split by platform; each configuration's row shows its
    own pick (TensorFlow's GPU build on x86_64, its CPU build, plain tensorflow, on Grace)."""
    for name in ("h100-cuda128.yaml", "gh200-r570-cuda128.yaml"):
        shutil.copy(PROFILES / name, tmp_path / name)
    (tmp_path / "site.yaml").write_text("version: 1\npartitions:\n  hopper:\n    nodes:\n"
                                        "      - {node: h1, count: 2, profile_file: h100-cuda128.yaml}\n"
                                        "      - {node: gh1, count: 8, profile_file: gh200-r570-cuda128.yaml}\n")
    env = {"ENVKIT_SITE": str(tmp_path / "site.yaml"), "HOME": str(tmp_path / "home")}
    result = envkit("site", "--builds", "--json", env=env)
    assert result.returncode == 0, result.stderr
    rows = {tuple(row["machines"]): row for row in json.loads(result.stdout)["partitions"]}
    whole = rows[()]
    assert whole["platform"] == "linux-64, linux-aarch64" and whole["builds"]["torch"]["build"] is None
    assert "the nodes are of 2 platforms (linux-64, linux-aarch64), split into 2 groups" in \
        whole["builds"]["torch"]["reason"]
    [x86] = [row for key, row in rows.items() if key and row["platform"] == "linux-64"]
    [grace] = [row for key, row in rows.items() if key and row["platform"] == "linux-aarch64"]
    assert (x86["builds"]["tensorflow"]["build"], x86["builds"]["tensorflow"]["gpu"]) == ("tensorflow-2.21-cu125",
                                                                                          True)
    assert (grace["builds"]["tensorflow"]["build"], grace["builds"]["tensorflow"]["gpu"]) == ("tensorflow-2.21-cpu",
                                                                                              False)
    assert "TensorFlow's aarch64 wheels on PyPI carry no CUDA" in grace["builds"]["tensorflow"]["reason"]
    assert grace["gpus"] == "NVIDIA GH200 480GB (sm_90), linux-aarch64" and grace["nodes"] == 8
    text = envkit("site", "--builds", env=env)
    assert text.returncode == 0 and "NVIDIA GH200 480GB (sm_90), linux-aarch64" in text.stdout
    assert "CPU (tensorflow-2.21-cpu)" in text.stdout and "tensorflow-2.21-cu125" in text.stdout
