"""The site file (envkit.site): where it is, the format and its errors, profile files beside it, writing it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import BadInputError, UnknownNameError
from envkit.machines.profile import read_profile
from envkit.site import (
    MAX_NODE_COUNT, Partition, SiteError, SiteNode, load_site, parse_partition_spec, partition_profiles, save_site,
    site_path, site_to_dict, slurm_node, unnamed_entry, with_partition,
)
from envkit.state.config import config_from_data
from envkit.state.userdirs import user_dirs
from envkit.versions import ComputeCapability, CudaVersion

PROFILES = Path(__file__).parent / "profiles"

A100_NODE = """\
      - node: a100-01
        count: 12
        profile:
          name: null
          driver_version: "535.104.05"
          cuda_driver: "12.2"
          gpus:
            - {name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0", memory_mib: 81920}
            - {name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0", memory_mib: 81920}
"""


def facts(data):
    """A site's dict without the ``sources`` of its profiles (they name the file each was read from)."""
    for partition in data["partitions"].values():
        for node in partition["nodes"]:
            if "profile" in node:
                node["profile"].pop("sources")
                for gpu in node["profile"]["gpus"]:
                    gpu.pop("source")
    return data


def write_site(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(body)
    return path


def example_site(tmp_path: Path) -> Path:
    (tmp_path / "v100-node.yaml").write_text((PROFILES / "v100x8-cuda130.yaml").read_text())
    return write_site(tmp_path, f"""\
version: 1
partitions:
  gpu-4-a100:
    surveyed: "2026-11-22T17:00:00Z"
    nodes:
{A100_NODE}    unreachable:
      - {{node: a100-07, reason: "timeout: the job did not start within 120 s (cancelled)"}}
  gpu-8-v100:
    surveyed: 2026-11-22T18:30:00+01:00
    nodes:
      - profile_file: v100-node.yaml
  broken-part:
    error: "partition is down"
""")


def test_the_documented_format_reads(tmp_path):
    site = load_site(example_site(tmp_path))
    assert list(site.partitions) == ["gpu-4-a100", "gpu-8-v100", "broken-part"]
    a100 = site.partitions["gpu-4-a100"]
    assert a100.surveyed == "2026-11-22T17:00:00Z"
    [node] = a100.nodes
    assert (node.node, node.count, node.profile_file) == ("a100-01", 12, None)
    assert node.profile.cuda_driver == CudaVersion(12, 2)
    assert [g.compute_capability for g in node.profile.gpus] == [ComputeCapability(8, 0)] * 2
    assert a100.unreachable == (("a100-07", "timeout: the job did not start within 120 s (cancelled)"),)
    assert a100.node_count == 12
    # An unquoted YAML timestamp with an offset is read and given in UTC.
    assert site.partitions["gpu-8-v100"].surveyed == "2026-11-22T17:30:00Z"
    assert site.partitions["broken-part"].error == "partition is down"
    assert site.partitions["broken-part"].nodes == ()


def test_profile_file_is_relative_to_the_site_file_not_the_working_directory(tmp_path, monkeypatch):
    path = example_site(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    [node] = load_site(path).partitions["gpu-8-v100"].nodes
    assert node.profile_file == "v100-node.yaml"
    expected = read_profile(tmp_path / "v100-node.yaml")
    assert node.profile.gpus == expected.gpus and node.profile.cuda_driver == expected.cuda_driver


def test_round_trip_through_save(tmp_path):
    path = example_site(tmp_path)
    site = load_site(path)
    copy = tmp_path / "copy.yaml"
    save_site(site, copy)
    again = load_site(copy)
    assert facts(site_to_dict(again)) == facts(site_to_dict(site))
    assert [p.nodes[0].profile.gpus[0].name for p in again.partitions.values() if p.nodes] == \
        ["NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"]
    # Saved beside the original, the profile file stays a reference.
    assert "profile_file: v100-node.yaml" in copy.read_text()


def test_a_copy_elsewhere_inlines_profile_files(tmp_path):
    site = load_site(example_site(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    save_site(site, other / "site.yaml")
    text = (other / "site.yaml").read_text()
    assert "profile_file" not in text
    assert facts(site_to_dict(load_site(other / "site.yaml"))) == facts(site_to_dict(site, inline_files=True))


def test_with_partition_replaces_one_and_keeps_the_others(tmp_path):
    path = example_site(tmp_path)
    site = load_site(path)
    v100 = site.partitions["gpu-8-v100"].nodes[0].profile
    new = Partition(name="gpu-4-a100", nodes=(SiteNode(node="a100-02", count=3, profile=v100),),
                    surveyed="2026-11-22T19:00:00Z")
    save_site(with_partition(site, new), path)
    after = load_site(path)
    assert list(after.partitions) == ["gpu-4-a100", "gpu-8-v100", "broken-part"]
    assert after.partitions["gpu-4-a100"].nodes[0].node == "a100-02"
    assert after.partitions["gpu-4-a100"].surveyed == "2026-11-22T19:00:00Z"
    assert after.partitions["gpu-8-v100"] == site.partitions["gpu-8-v100"]
    assert after.partitions["broken-part"] == site.partitions["broken-part"]
    assert not list(tmp_path.glob(".site.yaml.*"))  # the atomic writer's temporary file is gone


def test_partition_profiles_are_named(tmp_path):
    site = load_site(example_site(tmp_path))
    [a100] = partition_profiles(site, "gpu-4-a100")
    assert a100.name == "a100-01"  # no name in the profile: the Slurm node name
    [v100] = partition_profiles(site, "gpu-8-v100")
    assert v100.name == read_profile(tmp_path / "v100-node.yaml").name or v100.name == "v100-node"


HAND_WRITTEN = """\
version: 1
partitions:
  gpu:
    nodes:
      - node: a100-01
        count: 8
        profile: {name: a100-box, cuda_driver: "12.2", gpus: [{name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0"}]}
      - node: v100-01
        profile: {cuda_driver: "12.2", gpus: [{name: Tesla V100-SXM2-32GB, compute_capability: "7.0"}]}
"""


def test_partition_nodes_are_chosen_by_the_name_site_shows_or_by_their_slurm_node_name(tmp_path):
    # NAME:NODE (--partition) matched only the name `envkit site` shows (the profile's `name`): the site file's own
    # `node: a100-01` was "no node 'a100-01'".
    site = load_site(write_site(tmp_path, HAND_WRITTEN))
    for wanted in (("a100-01",), ("a100-box",)):
        assert [p.name for p in partition_profiles(site, "gpu", wanted)] == ["a100-box"]
    assert [p.name for p in partition_profiles(site, "gpu", ("v100-01", "a100-01"))] == ["a100-box", "v100-01"]
    with pytest.raises(UnknownNameError) as caught:
        partition_profiles(site, "gpu", ("a100-02",))
    assert caught.value.exit_code == 2
    assert caught.value.message == "partition 'gpu' has no node 'a100-02'; it has: a100-box (node a100-01), v100-01"


def test_a_node_name_that_is_one_entrys_name_and_anothers_slurm_node_is_refused_not_guessed(tmp_path):
    # Entry 1 is shown as 'v100-01' (its profile's name), entry 2 as 'v-box' on Slurm node v100-01: both were taken.
    crossed = HAND_WRITTEN.replace("profile: {name: a100-box,", "profile: {name: v100-01,").replace(
        'profile: {cuda_driver: "12.2", gpus: [{name: Tesla', 'profile: {name: v-box, cuda_driver: "12.2", '
                                                              'gpus: [{name: Tesla')
    site = load_site(write_site(tmp_path, crossed))
    for ask in (lambda: partition_profiles(site, "gpu", ("v100-01",)), lambda: slurm_node(site, "gpu", "v100-01")):
        with pytest.raises(BadInputError) as caught:
            ask()
        assert caught.value.exit_code == 2
        assert caught.value.message == ("partition 'gpu': 'v100-01' is the name of one node entry (node a100-01) "
                                        "and the Slurm node of another")
    assert [p.name for p in partition_profiles(site, "gpu", ("a100-01",))] == ["v100-01"]  # unambiguous: still read
    assert slurm_node(site, "gpu", "a100-01") == "a100-01"


def test_a_node_named_as_site_shows_it_reaches_srun_as_its_slurm_name(tmp_path):
    site = load_site(write_site(tmp_path, HAND_WRITTEN))
    assert slurm_node(site, "gpu", "a100-box") == "a100-01"
    assert [slurm_node(site, "gpu", name) for name in ("a100-01", "v100-01", "a100-05")] == [
        "a100-01", "v100-01", "a100-05"]  # a Slurm name, or one the site file does not know: as given
    assert slurm_node(site, "other", "a100-box") == "a100-box"


def test_unknown_partition_lists_those_there_are(tmp_path):
    site = load_site(example_site(tmp_path))
    with pytest.raises(UnknownNameError) as caught:
        partition_profiles(site, "gpu-2-h100")
    assert caught.value.exit_code == 2
    assert "'gpu-2-h100'" in caught.value.message
    assert "broken-part, gpu-4-a100, gpu-8-v100" in caught.value.message


def test_a_partition_without_nodes_says_why(tmp_path):
    site = load_site(example_site(tmp_path))
    with pytest.raises(BadInputError) as caught:
        partition_profiles(site, "broken-part")
    assert caught.value.exit_code == 2 and "partition is down" in caught.value.message


def test_missing_file_is_an_error_only_when_a_partition_is_asked_for(tmp_path):
    site = load_site(tmp_path / "nothing.yaml")
    assert site.missing and dict(site.partitions) == {}
    with pytest.raises(UnknownNameError) as caught:
        partition_profiles(site, "gpu")
    assert f"no site file at {tmp_path / 'nothing.yaml'}" in caught.value.message
    assert "envkit survey" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("version: 2\npartitions: {}\n", "version"),
        ("partitions: [a, b]\n", "partitions"),
        ("partitons: {}\n", "partitons"),
        ("partitions:\n  '-gpu': {nodes: []}\n", "partitions.-gpu"),
        ("partitions:\n  gpu: {nodez: []}\n", "partitions.gpu.nodez"),
        ("partitions:\n  gpu: {nodes: {a: 1}}\n", "partitions.gpu.nodes"),
        ("partitions:\n  gpu: {nodes: [{node: n1}]}\n", "partitions.gpu.nodes[0]"),
        ("partitions:\n  gpu: {nodes: [{count: 0, profile: {gpus: []}}]}\n", "partitions.gpu.nodes[0].count"),
        ("partitions:\n  gpu: {nodes: [{node: '--all', profile: {gpus: []}}]}\n", "partitions.gpu.nodes[0].node"),
        ("partitions:\n  gpu:\n    nodes:\n      - profile: {cuda_driver: '12.4', gpus: [{name: X}]}\n",
         "partitions.gpu.nodes[0].profile: gpus[0].compute_capability"),
        ("partitions:\n  gpu: {nodes: [{profile: {cuda_driver: banana}}]}\n",
         "partitions.gpu.nodes[0].profile: cuda_driver"),
        ("partitions:\n  gpu: {nodes: [{profile_file: missing.yaml}]}\n", "partitions.gpu.nodes[0].profile_file"),
        ("partitions:\n  gpu: {surveyed: yesterday, nodes: []}\n", "partitions.gpu.surveyed"),
        ("partitions:\n  gpu: {unreachable: [{node: n1}]}\n", "partitions.gpu.unreachable[0]"),
        ("partitions:\n  gpu: [\n", ""),
        ("- just\n- a list\n", ""),
        # Wrong types that used to read as "no partitions" or "0 nodes", exit 0.
        ("partitions: []\n", "partitions"),
        ("partitions:\n", "partitions"),
        ("version: 1\n", "partitions"),
        ("partitions:\n  gpu:\n", "partitions.gpu"),
        ("partitions: {gpu: []}\n", "partitions.gpu"),
        ("partitions: {gpu: {}}\n", "partitions.gpu.nodes"),
        ("partitions: {gpu: {nodes: null}}\n", "partitions.gpu.nodes"),
        ("partitions: {gpu: {surveyed: '2026-11-22T17:00:00Z'}}\n", "partitions.gpu.nodes"),
        ("version: true\npartitions: {}\n", "version"),
        ("version: 1.0\npartitions: {}\n", "version"),
        ("partitions:\n  gpu: {unreachable: [{node: n1, reason: down, why: x}]}\n",
         "partitions.gpu.unreachable[0].why"),
        # The inline profiles are machine profiles: no unknown key, no unquoted version.
        ("partitions:\n  gpu: {nodes: [{profile: {cuda_driver: '12.8', gpu: [{name: A100}]}}]}\n",
         "partitions.gpu.nodes[0].profile: unknown key 'gpu' (did you mean 'gpus'?); the keys are"),
        ("partitions:\n  gpu: {nodes: [{profile: {cuda_driver: 12.10}}]}\n",
         'partitions.gpu.nodes[0].profile: cuda_driver: 12.10 must be quoted ("12.10")'),
    ],
)
def test_a_broken_site_file_names_file_and_field(tmp_path, body, field):
    path = write_site(tmp_path, body)
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"site file {path}: ")
    assert f": {field}:" in caught.value.message if field else True
    assert caught.value.where.startswith(field.split(":")[0]) if field else caught.value.where == ""


@pytest.mark.parametrize("count", [10 ** 21, MAX_NODE_COUNT + 1])
def test_a_node_count_no_cluster_could_have_is_refused(tmp_path, count):
    # `count: 1000000000000000000000` used to read, and `envkit site` printed it as the partition's node count.
    path = write_site(tmp_path, "version: 1\npartitions:\n  gpu-a:\n    nodes:\n"
                                "      - {count: 1, profile: {gpus: []}}\n"
                                f"      - {{node: a1, count: {count}, profile: {{gpus: []}}}}\n")
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.exit_code == 2
    assert caught.value.message == (f"site file {path}: partitions.gpu-a.nodes[1].count: expected a whole number of "
                                    f"nodes from 1 to 1000000 (more than any cluster has), got {count}")
    most = write_site(tmp_path, path.read_text().replace(str(count), str(MAX_NODE_COUNT)))
    assert load_site(most).partitions["gpu-a"].node_count == MAX_NODE_COUNT + 1


@pytest.mark.parametrize("body", ["", "\n", "# only a comment\n", "---\n", "null\n"])
def test_an_empty_site_file_is_an_error_saying_what_one_holds(tmp_path, body):
    # It used to read as a site without partitions (`envkit site`: "No partitions in it.", exit 0). Nothing envkit
    # writes is empty (survey writes version and partitions, atomically): an empty file is a truncated copy or a
    # failed `> site.yaml`, and the partitions it should hold are missing.
    path = write_site(tmp_path, body)
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.message == f"site file {path}: is empty" and caught.value.exit_code == 2
    assert "partitions" in caught.value.hint and "envkit survey" in caught.value.hint


def test_a_key_given_twice_is_refused(tmp_path):
    path = write_site(tmp_path, "partitions:\n  gpu: {nodes: []}\n  gpu:\n    nodes: []\n")
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.message == (f"site file {path}: not valid YAML or JSON: duplicate key 'gpu' at line 3 (first "
                                    "at line 2)")


def test_a_site_that_says_it_has_no_partitions_or_a_partition_without_nodes_reads(tmp_path):
    assert dict(load_site(write_site(tmp_path, "version: 1\npartitions: {}\n")).partitions) == {}
    site = load_site(write_site(tmp_path, "partitions:\n  gpu: {nodes: []}\n  down: {error: 'partition is down'}\n"))
    assert [(p.name, p.nodes, p.error) for p in site.partitions.values()] == [("gpu", (), None),
                                                                              ("down", (), "partition is down")]


def test_what_survey_writes_for_a_partition_it_could_not_reach_reads_back(tmp_path):
    site = with_partition(load_site(tmp_path / "site.yaml"),
                          Partition(name="gpu", unreachable=(("n1", "timeout"),), error="no node could be surveyed"))
    save_site(site, tmp_path / "site.yaml")
    again = load_site(tmp_path / "site.yaml")
    assert again.partitions["gpu"].error == "no node could be surveyed" and again.partitions["gpu"].nodes == ()


def test_site_path_order(tmp_path):
    dirs = user_dirs({"HOME": str(tmp_path)})
    config = config_from_data({"site": "shared/site.yaml"}, tmp_path / "etc" / "config.yaml")
    assert site_path({"ENVKIT_SITE": str(tmp_path / "a.yaml")}, config, dirs) == tmp_path / "a.yaml"
    assert site_path({}, config, dirs) == tmp_path / "etc" / "shared" / "site.yaml"
    assert site_path({}, config_from_data({}, tmp_path / "c.yaml"), dirs) == tmp_path / ".config/envkit/site.yaml"
    with pytest.raises(BadInputError):
        site_path({"ENVKIT_SITE": " "}, config, dirs)


@pytest.mark.parametrize("value", ["", 3, "  "])
def test_config_site_key_must_be_a_path(tmp_path, value):
    from envkit.state.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        config_from_data({"site": value}, tmp_path / "config.yaml")
    assert "'site'" in caught.value.message and caught.value.exit_code == 2


def test_a_partition_spec_is_a_name_and_its_nodes():
    assert parse_partition_spec("gpu-4-a100") == ("gpu-4-a100", ())
    assert parse_partition_spec("gpu:a1,a2") == ("gpu", ("a1", "a2"))


@pytest.mark.parametrize("spec", ["", "gpu:", ":a1", "gpu:a1,,a2", "gpu:a1,", "-x", "gpu:-a1", "g p"])
def test_a_malformed_partition_spec_is_bad_input(spec):
    with pytest.raises(BadInputError, match="expected NAME or NAME:NODE"):
        parse_partition_spec(spec)


def test_a_site_file_that_cannot_be_written_is_an_error_naming_it(tmp_path):
    # An OSError here used to end a whole survey as an internal error.
    from envkit.errors import EnvkitError

    site = load_site(example_site(tmp_path))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(EnvkitError, match=f"cannot write the site file {blocked / 'site.yaml'}") as failed:
        save_site(site, blocked / "site.yaml")
    assert failed.value.exit_code == 1 and "$ENVKIT_SITE" in failed.value.hint


INLINE = '{cuda_driver: "12.2", gpus: [{name: V100, compute_capability: "7.0"}]}'


@pytest.mark.parametrize(("body", "field", "problem"), [
    # Each text field of a site file that YAML reads as a number (or true/false) when unquoted: refused saying so,
    # never with the number YAML made of it (node 3.10 was "got 3.1") nor "a partition name is ... digits" for 123.
    (f"partitions:\n  123: {{nodes: [{{profile: {INLINE}}}]}}\n", "partitions.123",
     '123 must be quoted ("123"): unquoted, YAML reads it as a number'),
    (f"partitions:\n  1.10: {{nodes: [{{profile: {INLINE}}}]}}\n", "partitions.1.10",
     '1.10 must be quoted ("1.10"): YAML reads 1.10 as the number 1.1'),
    (f"partitions:\n  gpu: {{nodes: [{{node: 3.10, profile: {INLINE}}}]}}\n", "partitions.gpu.nodes[0].node",
     '3.10 must be quoted ("3.10"): YAML reads 3.10 as the number 3.1'),
    (f"partitions:\n  gpu: {{nodes: [{{node: 42, profile: {INLINE}}}]}}\n", "partitions.gpu.nodes[0].node",
     '42 must be quoted ("42")'),
    (f"partitions:\n  gpu: {{nodes: [{{node: on, profile: {INLINE}}}]}}\n", "partitions.gpu.nodes[0].node",
     "must be quoted: YAML reads an unquoted yes, no, on, off, true or false as true/false"),
    ("partitions:\n  gpu: {nodes: [{profile_file: 2026}]}\n", "partitions.gpu.nodes[0].profile_file",
     '2026 must be quoted ("2026")'),
    (f"partitions:\n  gpu: {{nodes: [{{profile: {INLINE}}}], unreachable: [{{node: 17, reason: down}}]}}\n",
     "partitions.gpu.unreachable[0].node", '17 must be quoted ("17")'),
    (f"partitions:\n  gpu: {{nodes: [{{profile: {INLINE}}}], unreachable: [{{node: n17, reason: 404}}]}}\n",
     "partitions.gpu.unreachable[0].reason", '404 must be quoted ("404")'),
    (f"partitions:\n  gpu: {{nodes: [{{profile: {INLINE}}}], error: 503}}\n", "partitions.gpu.error",
     '503 must be quoted ("503")'),
    ("partitions:\n  gpu: {nodes: [{profile: {name: 2.10, gpus: []}}]}\n", "partitions.gpu.nodes[0].profile",
     'name: 2.10 must be quoted ("2.10"): YAML reads 2.10 as the number 2.1'),
])
def test_text_that_yaml_reads_as_a_number_must_be_quoted(tmp_path, body, field, problem):
    path = write_site(tmp_path, body)
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"site file {path}: {field}: {problem}")


def test_an_unquoted_day_is_read_as_the_same_day_quoted(tmp_path):
    # `surveyed: 2026-11-22` (YAML: a date) was "expected an ISO 8601 time ..., got datetime.date(2026, 11, 22)",
    # while "2026-11-22" quoted read as that day's midnight.
    for day in ("2026-11-22", '"2026-11-22"'):
        body = f"partitions:\n  gpu: {{surveyed: {day}, nodes: [{{profile: {INLINE}}}]}}\n"
        site = load_site(write_site(tmp_path, body))
        assert site.partitions["gpu"].surveyed == "2026-11-22T00:00:00Z"


DGX = '{name: dgx, cuda_driver: "12.2", gpus: [{name: A100, compute_capability: "8.0"}]}'
SHARED = f"""\
partitions:
  gpu:
    nodes:
      - {{node: a1, count: 4, profile: {DGX}}}
      - {{node: a2, count: 8, profile: {DGX}}}
      - {{node: k1, count: 2, profile: {DGX.replace('"12.2"', '"10.1"').replace('A100', 'K40').replace('8.0', '3.5')}}}
      - {{count: 3, profile_file: v100.yaml}}
      - {{profile_file: v100.yaml}}
      - {{node: solo, profile: {INLINE}}}
"""


def test_entries_that_share_a_name_are_told_apart(tmp_path):
    # Three entries whose profiles are all named 'dgx' (and two from one profile file) were one name: the fleet kept
    # the first of the same configuration (4 nodes, not 12) and named the next 'dgx (2)', which --partition refused.
    from envkit.site import machine_names, partition_nodes

    (tmp_path / "v100.yaml").write_text('name: v100-box\ncuda_driver: "12.2"\ngpus: []\n')
    site = load_site(write_site(tmp_path, SHARED))
    names = ["a1", "a2", "k1", "gpu#4", "gpu#5", "solo"]
    assert machine_names(site.partitions["gpu"]) == names
    assert [(p.name, count) for p, count in partition_nodes(site, "gpu")] == list(zip(names, [4, 8, 2, 3, 1, 1]))
    assert [p.name for p in partition_profiles(site, "gpu", ("k1", "gpu#5"))] == ["k1", "gpu#5"]


def test_an_entry_without_a_slurm_node_that_stands_for_several_is_refused_not_passed_to_slurm(tmp_path):
    # `job -p gpu:a100x4` put --nodelist=a100x4 in the script: the name of 16 nodes' configuration, which sbatch
    # refused (exit 1, in its own words) after envkit had said nothing.
    site = load_site(write_site(tmp_path, HAND_WRITTEN + """\
      - count: 16
        profile: {name: a100x4, cuda_driver: "12.2", gpus: [{name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0"}]}
      - profile: {name: a100-07, cuda_driver: "12.2", gpus: [{name: NVIDIA A100-SXM4-80GB, compute_capability: "8.0"}]}
"""))
    with pytest.raises(BadInputError) as caught:
        slurm_node(site, "gpu", "a100x4")
    assert caught.value.exit_code == 2
    assert caught.value.message == ("--partition gpu:a100x4: the site file's entry 'a100x4' has no `node:`, and "
                                    "stands for 16 nodes: its name is a configuration's, not a Slurm node's")
    assert caught.value.hint == (f"Add `node: NODE` to that entry in {site.path} (the Slurm name of one of its "
                                 "nodes), or give the partition alone: --partition gpu")
    assert slurm_node(site, "gpu", "a100-07") == "a100-07"  # one node, named after it (only Slurm can tell)
    assert [unnamed_entry(site, "gpu", name) for name in ("a100x4", "a100-07", "a100-box", "a100-01", "a100-99")] \
        == [True, True, False, False, False]
    assert [p.name for p in partition_profiles(site, "gpu", ("a100x4",))] == ["a100x4"]  # a fleet of it: as before


# The site file may name the site's shared directory (envkit.shared): the one file an admin keeps for everyone.

def test_the_site_file_names_the_shared_directory_and_survey_keeps_it(tmp_path):
    path = write_site(tmp_path, "version: 1\nshared: /opt//envkit/\npartitions: {}\n")
    site = load_site(path)
    assert site.shared == Path("/opt/envkit")
    v100 = read_profile(PROFILES / "v100x8-cuda130.yaml")
    save_site(with_partition(site, Partition(name="gpu", nodes=(SiteNode(node="n1", count=1, profile=v100),))), path)
    again = load_site(path)
    assert again.shared == Path("/opt/envkit") and list(again.partitions) == ["gpu"]
    assert list(site_to_dict(again)) == ["version", "shared", "partitions"]
    assert load_site(write_site(tmp_path, "version: 1\npartitions: {}\n")).shared is None
    assert "shared" not in site_to_dict(load_site(path.with_name("none.yaml")))


@pytest.mark.parametrize("value,problem", [
    ("opt/envkit", "must be an absolute path"),
    ("''", "expected a directory path"),
    ("[/opt]", "expected a directory path"),
    ("3", "must be quoted"),
])
def test_a_shared_directory_the_site_file_names_badly_is_refused(tmp_path, value, problem):
    path = write_site(tmp_path, f"version: 1\nshared: {value}\npartitions: {{}}\n")
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.exit_code == 2 and caught.value.where == "shared"
    assert problem in caught.value.message


def test_the_shared_directory_is_the_variable_then_the_config_then_the_site_file(tmp_path):
    from envkit.shared.find import shared_directory

    dirs = user_dirs({"HOME": str(tmp_path)})
    site = write_site(tmp_path, "version: 1\nshared: /from/site\npartitions: {}\n")
    config = tmp_path / "config.yaml"
    config.write_text("shared: /from/config\n")
    environ = {"HOME": str(tmp_path), "ENVKIT_SITE": str(site), "ENVKIT_CONFIG": str(config)}
    assert shared_directory({**environ, "ENVKIT_SHARED": "/from/variable"}, dirs) == Path("/from/variable")
    assert shared_directory(environ, dirs) == Path("/from/config")
    config.write_text("mirrors: {}\n")
    assert shared_directory(environ, dirs) == Path("/from/site")
    config.unlink()
    assert shared_directory({"HOME": str(tmp_path), "ENVKIT_SITE": str(site)}, dirs) == Path("/from/site")
    assert shared_directory({"HOME": str(tmp_path), "ENVKIT_SITE": str(tmp_path / "none.yaml")}, dirs) is None
    assert shared_directory({"HOME": str(tmp_path)}, dirs) is None  # no site file in the config directory


SURVEYED = """\
version: 1
partitions:
  part-a:
    surveyed: "2026-11-28T10:00:00Z"
    nodes:
      - node: gpu-a1
        count: 3
        members: [gpu-a1, gpu-a2, gpu-a3]
        profile: {name: gpu-a1, cuda_driver: "12.2", gpus: [{name: NVIDIA A100-SXM4-40GB, compute_capability: "8.0"}]}
      - node: gpu-v1
        count: 1
        profile: {name: gpu-v1, cuda_driver: "11.4", gpus: [{name: Tesla V100-SXM2-16GB, compute_capability: "7.0"}]}
"""


def test_every_node_of_a_configuration_survey_merged_is_named_by_its_own_name(tmp_path):
    # Survey keeps one node per configuration: gpu-a2, in sinfo and in part-a, was "no node 'gpu-a2'". The entry
    # lists the nodes it stands for (members), and P:NODE takes any of them, reaching srun as itself.
    site = load_site(write_site(tmp_path, SURVEYED))
    assert site.partitions["part-a"].nodes[0].members == ("gpu-a1", "gpu-a2", "gpu-a3")
    assert [p.name for p in partition_profiles(site, "part-a", ("gpu-a2",))] == ["gpu-a1"]  # its configuration
    assert [p.name for p in partition_profiles(site, "part-a", ("gpu-a3", "gpu-v1"))] == ["gpu-a1", "gpu-v1"]
    assert [slurm_node(site, "part-a", name) for name in ("gpu-a2", "gpu-a1", "gpu-v1")] == [
        "gpu-a2", "gpu-a1", "gpu-v1"]
    with pytest.raises(UnknownNameError):
        partition_profiles(site, "part-a", ("gpu-a4",))
    save_site(site, tmp_path / "again.yaml")
    assert load_site(tmp_path / "again.yaml").partitions["part-a"].nodes[0].members == ("gpu-a1", "gpu-a2", "gpu-a3")


@pytest.mark.parametrize("members, problem", [
    ("gpu-a1", "expected a list of node names"),
    ("[gpu-a1, -x]", "expected a node name"),
    ("[gpu-a1, gpu-a1]", "at most 3 node names (the entry's count), each once"),
    ("[a, b, c, d]", "at most 3 node names"),
])
def test_members_that_are_no_list_of_node_names_are_refused(tmp_path, members, problem):
    path = write_site(tmp_path, SURVEYED.replace("members: [gpu-a1, gpu-a2, gpu-a3]", f"members: {members}"))
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert caught.value.exit_code == 2 and "partitions.part-a.nodes[0].members" in caught.value.message
    assert problem in caught.value.message
