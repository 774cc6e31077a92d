"""Fleets and the site file on the command line: list --machine DIR / repeated / --partition, envkit site, and
their bad input. Real subprocesses, real manifests."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from test_cli import PROFILES, assert_clean_error, envkit

DEEPTEN = 'name: deepten\ndriver_version: "460.32.03"\ncuda_driver: "11.2"\n' \
          'gpus:\n  - {name: NVIDIA GeForce GTX 1080, compute_capability: "6.1", memory_mib: 8192}\n'


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    directory = tmp_path / "lab"
    directory.mkdir()
    (directory / "deepnine.yaml").write_text((PROFILES / "rtx2070-cuda124.yaml").read_text())
    (directory / "deepten.yaml").write_text(DEEPTEN)
    return directory


@pytest.fixture
def site(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "v100-node.yaml").write_text((PROFILES / "v100x8-cuda130.yaml").read_text())
    path = tmp_path / "site.yaml"
    path.write_text("""\
version: 1
partitions:
  gpu-mixed:
    surveyed: "2026-11-22T17:00:00Z"
    nodes:
      - node: a100-01
        count: 12
        profile: {driver_version: "535.104.05", cuda_driver: "12.2",
                  gpus: [{name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0"}]}
      - node: v100-01
        count: 4
        profile: {driver_version: "535.104.05", cuda_driver: "12.2",
                  gpus: [{name: Tesla V100-SXM2-32GB, compute_capability: "7.0"}]}
    unreachable:
      - {node: a100-07, reason: "timeout: the job did not start within 120 s (cancelled)"}
  gpu-8-v100:
    nodes:
      - profile_file: v100-node.yaml
""")
    return {"ENVKIT_SITE": str(path), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_list_a_directory_json_names_machines_and_where_builds_fail(lab):
    result = envkit("list", "torch", "jax", "--json", "--machine", str(lab))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "machine" not in data
    assert [m["name"] for m in data["machines"]] == ["deepnine", "deepten"]
    torch, jax = data["manifests"]
    assert torch["selected"] == "torch-2.7-cu118" and torch["groups"] == []
    cu126 = next(b for b in torch["builds"] if b["id"] == "torch-2.14-cu126")
    assert cu126["fails_on"] == ["deepten"] and cu126["reasons"] == [
        "deepten: needs driver CUDA >= 12.6, the driver has 11.2"]
    assert next(b for b in torch["builds"] if b["id"] == "torch-2.7-cu118")["fails_on"] == []
    assert [g["machines"] for g in jax["groups"]] == [["deepnine"], ["deepten"]]
    assert jax["groups"][1]["selected"] == jax["selected"]  # deepten: the CPU build


def test_list_repeated_machine_is_the_same_fleet_and_one_machine_keeps_machine(lab):
    repeated = envkit("list", "torch", "--json", "--machine", str(lab / "deepnine.yaml"),
                      "--machine", str(lab / "deepten.yaml"))
    directory = envkit("list", "torch", "--json", "--machine", str(lab))
    assert json.loads(repeated.stdout)["manifests"] == json.loads(directory.stdout)["manifests"]
    one = json.loads(envkit("list", "torch", "--json", "--machine", str(lab / "deepnine.yaml")).stdout)
    assert one["machine"]["name"] == "deepnine" and [m["name"] for m in one["machines"]] == ["deepnine"]


def test_list_text_shows_the_groups_with_commands_that_work(lab):
    result = envkit("list", "jax", "--machine", str(lab))
    assert result.returncode == 0, result.stderr
    assert "Machines: 2 (2 distinct configurations)" in result.stdout
    assert "No GPU build of jax fits every machine; one environment per group:" in result.stdout
    commands = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("envkit create")]
    assert len(commands) == 2
    for command in commands:
        dry = envkit(*shlex.split(command)[1:], "--dry-run")
        assert dry.returncode == 0, (command, dry.stderr)


def test_list_for_a_fleet_no_build_fits_any_machine_of_says_so_plainly(lab):
    result = envkit("list", "jax", "--python", "3.9", "--machine", str(lab))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"  No build of jax fits any of the machines: `envkit list jax --all --machine {lab} --python 3.9` says why.")
    assert "per group" not in result.stdout and "no build fits:" not in result.stdout


def test_a_group_named_after_a_machine_with_dots_gets_a_name_create_takes(lab):
    (lab / "deepnine.yaml").write_text((PROFILES / "rtx2070-cuda124.yaml").read_text().replace(
        "name: ", "name: deep..nine #", 1))
    result = envkit("list", "jax", "--machine", str(lab))
    commands = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("envkit create")]
    assert "deep..nine" in result.stdout and len(commands) == 2
    for command in commands:
        dry = envkit(*shlex.split(command)[1:], "--dry-run")
        assert dry.returncode == 0, (command, dry.stderr)


def test_lock_for_a_fleet_without_a_common_gpu_build_prints_lock_commands(lab):
    refused = envkit("lock", "jax", "--machine", str(lab))
    assert refused.returncode == 2 and "makes no single lock for them" in refused.stderr, refused.stderr
    commands = [shlex.split(line) for line in refused.stderr.splitlines() if line.strip().startswith("envkit ")]
    assert len(commands) == 2 and all(argv[:3] == ["envkit", "lock", "jax"] for argv in commands)
    assert len({argv[argv.index("-o") + 1] for argv in commands}) == 2  # one lock file per group
    assert all("--name" not in argv and "--cpu" not in argv for argv in commands)  # create's options, not lock's


def test_create_for_a_fleet_that_no_build_fits_says_so_without_empty_commands(lab):
    refused = envkit("create", "mxnet", "--python", "3.13", "--machine", str(lab), "--dry-run")
    assert_clean_error(refused, 1, "no build of mxnet fits every machine", "envkit list mxnet --all")
    assert "Create them with" not in refused.stderr

def test_duplicate_profiles_are_one_configuration(lab, tmp_path):
    many = tmp_path / "many"
    many.mkdir()
    for i in range(20):
        (many / f"node{i:02}.yaml").write_text(DEEPTEN.replace("name: deepten\n", ""))
    data = json.loads(envkit("list", "torch", "--json", "--machine", str(many)).stdout)
    assert [m["name"] for m in data["machines"]] == [f"node{i:02}" for i in range(20)]
    text = envkit("list", "torch", "--machine", str(many)).stdout
    assert "Machines: 20 (1 distinct configuration)" in text and "node00, node01, node02 and 17 more" in text


def test_a_gpu_less_login_node_in_a_fleet(lab):
    (lab / "login.yaml").write_text("name: login\ncuda_driver: null\ngpus: []\n")
    data = json.loads(envkit("list", "torch", "--json", "--machine", str(lab)).stdout)
    [torch] = data["manifests"]
    assert torch["selected"] == "torch-2.7-cu118" and torch["cpu_only"] == ["login"]


def test_a_broken_profile_in_a_directory_is_named(lab):
    (lab / "broken.yaml").write_text("cuda_driver: [12\n")
    assert_clean_error(envkit("list", "torch", "--machine", str(lab)), 2, str(lab / "broken.yaml"))


def test_an_empty_directory(tmp_path):
    assert_clean_error(envkit("list", "torch", "--machine", str(tmp_path)), 2, "holds no machine profiles")


def test_overrides_describe_one_machine(lab):
    assert_clean_error(envkit("list", "torch", "--machine", str(lab), "--cuda", "12.4"), 2, "describe one machine")


def test_partition_resolves_its_nodes(site):
    # A100 (sm_80) and V100 (sm_70) nodes on CUDA 12.2: one build must carry both.
    data = json.loads(envkit("list", "torch", "--json", "--partition", "gpu-mixed", env=site).stdout)
    assert [m["name"] for m in data["machines"]] == ["a100-01", "v100-01"]
    [torch] = data["manifests"]
    both = json.loads(envkit("list", "torch", "--json", "--machine", str(PROFILES / "v100-a100-cuda122.yaml")).stdout)
    assert torch["selected"] == both["manifests"][0]["selected"] and torch["groups"] == []
    only = json.loads(envkit("list", "torch", "--json", "--partition", "gpu-mixed:v100-01", env=site).stdout)
    assert only["machine"]["name"] == "v100-01"
    assert_clean_error(envkit("list", "torch", "--partition", "gpu-mixed:h100-01", env=site), 2,
                       "no node 'h100-01'", "a100-01, v100-01")


def test_a_malformed_partition_is_refused_before_the_site_file_is_read(site):
    # "gpu-mixed:" once stood for the whole partition and was printed back in the next-step command.
    for spec in ("gpu-mixed:", "gpu-mixed:a100-01,", "-x", ""):
        assert_clean_error(envkit("list", "torch", "--partition", spec, env=site), 2, "expected NAME or NAME:NODE")


def test_a_repeated_partition_is_refused_not_cut_to_the_last_one(site):
    for command in (("list", "torch"), ("create", "torch", "--dry-run"), ("doctor",)):
        done = envkit(*command, "--partition", "gpu-mixed", "--partition", "gpu-8-v100", env=site)
        assert done.returncode == 2 and "give it once" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
    one = json.loads(envkit("list", "torch", "--json", "--partition", "gpu-8-v100", env=site).stdout)
    assert one["machine"]["name"] == "v100x8"


def test_p_is_short_for_partition_in_every_command_that_resolves(site):
    # `envkit job -p P` and `envkit survey -p P` took it; list, create, lock, doctor and verify did not.
    long = envkit("list", "torch", "--json", "--partition", "gpu-mixed", env=site)
    short = envkit("list", "torch", "--json", "-p", "gpu-mixed", env=site)
    assert short.returncode == 0 and short.stdout == long.stdout, short.stderr
    planned = envkit("create", "torch", "--dry-run", "-p", "gpu-mixed:v100-01", env=site)
    assert planned.returncode == 0 and "v100-01" in planned.stdout, planned.stderr
    for command in (("lock", "torch"), ("doctor",), ("verify", "torch-x")):
        assert re.search(r"--partition\s+-p\s", envkit(*command, "--help").stdout), command  # (typer's columns)


def test_unknown_partition_lists_those_there_are(site):
    assert_clean_error(envkit("list", "torch", "--partition", "gpu-4-a100", env=site), 2,
                       "unknown partition 'gpu-4-a100'", "gpu-8-v100, gpu-mixed")


def test_no_site_file_and_a_partition(tmp_path):
    env = {"ENVKIT_SITE": str(tmp_path / "none.yaml")}
    assert_clean_error(envkit("list", "torch", "--partition", "gpu", env=env), 2, "there is no site file at")
    shown = envkit("site", env=env)
    assert shown.returncode == 0 and f"No site file at {tmp_path / 'none.yaml'}" in shown.stdout


def test_a_broken_site_file_names_file_and_field(site):
    path = Path(site["ENVKIT_SITE"])
    path.write_text("version: 1\npartitions:\n  gpu:\n    nodes:\n      - {count: two, profile: {gpus: []}}\n")
    for args in (("site",), ("list", "torch", "--partition", "gpu")):
        assert_clean_error(envkit(*args, env=site), 2, f"site file {path}", "partitions.gpu.nodes[0].count")


def test_site_shows_partitions_nodes_and_when_surveyed(site):
    text = envkit("site", env=site)
    assert text.returncode == 0, text.stderr
    assert "gpu-mixed: 16 nodes, 2 configurations; surveyed 2026-11-22T17:00:00Z" in text.stdout
    assert "a100-01 (12 nodes): driver 535.104.05, CUDA 12.2; NVIDIA A100-SXM4-80GB (sm_80)" in text.stdout
    assert "unreachable: a100-07: timeout" in text.stdout
    assert "gpu-8-v100: 1 node, 1 configuration; not surveyed (written by hand)" in text.stdout
    data = json.loads(envkit("site", "--json", env=site).stdout)
    assert data["site"] == site["ENVKIT_SITE"] and data["exists"] is True
    mixed = data["partitions"][0]
    assert mixed["name"] == "gpu-mixed" and mixed["surveyed"] == "2026-11-22T17:00:00Z"
    assert [(c["machines"], c["nodes"], c["gpus"]) for c in mixed["configurations"]] == [
        (["a100-01"], 12, "NVIDIA A100-SXM4-80GB (sm_80)"), (["v100-01"], 4, "Tesla V100-SXM2-32GB (sm_70)")]
    assert data["partitions"][1]["nodes"][0]["profile_file"] == "v100-node.yaml"


def test_a_partition_survey_could_not_reach_is_not_called_written_by_hand(site):
    # What survey writes for a new partition it could not survey (an error, no time) was shown as written by hand.
    path = Path(site["ENVKIT_SITE"])
    path.write_text(path.read_text() + "  closed:\n    nodes: []\n    error: partition is down\n")
    text = envkit("site", env=site)
    assert text.returncode == 0, text.stderr
    assert "closed: 0 nodes, 0 configurations; not surveyed (the survey failed)" in text.stdout
    assert "  error: partition is down" in text.stdout
    assert "gpu-8-v100: 1 node, 1 configuration; not surveyed (written by hand)" in text.stdout


def test_the_site_key_of_the_config(site, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"site: {site['ENVKIT_SITE']}\n")
    data = json.loads(envkit("site", "--json", env={"ENVKIT_CONFIG": str(config)}).stdout)
    assert data["site"] == site["ENVKIT_SITE"] and len(data["partitions"]) == 2


def test_a_partition_counts_its_nodes_not_its_entries(site):
    # "Machines: 2" for a partition whose site file says 12 + 4 nodes: the entries (configurations) were counted.
    text = envkit("list", "torch", "--partition", "gpu-mixed", env=site)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("Machines: 16 nodes (2 distinct configurations)\n  a100-01 (12 nodes): driver")
    assert "\n  v100-01 (4 nodes): driver" in text.stdout
    data = json.loads(envkit("list", "torch", "--json", "--partition", "gpu-mixed", env=site).stdout)
    assert [(m["name"], m["nodes"]) for m in data["machines"]] == [("a100-01", 12), ("v100-01", 4)]
    planned = envkit("create", "torch", "--dry-run", "--build", "torch-2.7-cu118", "--partition", "gpu-mixed", env=site)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.startswith("Machines:    16 nodes: a100-01, v100-01 (the build fits every one)\n")
    plain = envkit("list", "torch", "--machine", str(PROFILES / "rtx2070-cuda124.yaml"),
                   "--machine", str(PROFILES / "k80x2-cuda114.yaml"))
    assert plain.stdout.startswith("Machines: 2 (2 distinct configurations)\n  "), plain.stdout  # a profile: one


SHARED_NAMES = """\
version: 1
partitions:
  gpu:
    nodes:
      - {node: a1, count: 4, profile: {name: dgx, cuda_driver: "12.2", gpus: [{name: A100, compute_capability: "8.0"}]}}
      - {node: a2, count: 8, profile: {name: dgx, cuda_driver: "12.2", gpus: [{name: A100, compute_capability: "8.0"}]}}
      - {node: k1, count: 2, profile: {name: dgx, cuda_driver: "10.1", gpus: [{name: K40, compute_capability: "3.5"}]}}
"""


def test_entries_sharing_a_profile_name_are_counted_and_named_apart(site):
    # Three entries whose profiles say `name: dgx`: site counted 4 nodes for a1 + a2 (12), list dropped a2 and named
    # k1 'dgx (2)', and create printed `--partition 'gpu:dgx (2)'`, which --partition refuses.
    Path(site["ENVKIT_SITE"]).write_text(SHARED_NAMES)
    shown = envkit("site", env=site)
    assert shown.returncode == 0, shown.stderr
    assert "gpu: 14 nodes, 2 configurations" in shown.stdout and "\n  a1, a2 (12 nodes): CUDA 12.2" in shown.stdout
    listed = envkit("list", "torch", "--partition", "gpu", env=site)
    assert listed.stdout.startswith("Machines: 14 nodes (2 distinct configurations)\n  a1, a2 (12 nodes): CUDA 12.2")
    refused = envkit("create", "torch", "--dry-run", "--partition", "gpu", env=site)
    assert refused.returncode == 2 and "no GPU build of torch fits all 14 nodes" in refused.stderr, refused.stderr
    commands = [line.strip() for line in refused.stderr.splitlines() if line.strip().startswith("envkit create")]
    assert [shlex.split(c)[-2:] for c in commands] == [["--partition", "gpu:a1,a2"], ["--partition", "gpu:k1"]]
    for command in commands:
        planned = envkit(*shlex.split(command)[1:], "--dry-run", env=site)
        assert planned.returncode == 0, planned.stderr
