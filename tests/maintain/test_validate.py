"""`manifests validate`: every problem of a manifests directory in one run, each with file, line, build and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInputError
from envkit.maintain.validate import validate_directory
from support.manifest_edits import edit, release


def build(data, version, variant):
    return next(b for b in release(data, version)["builds"] if b["variant"] == variant)


def _shipped_torch():
    from envkit.catalog import default_manifests_dir

    return yaml.safe_load((default_manifests_dir() / "torch.yaml").read_text())


SHIPPED_TORCH = _shipped_torch()


def at(version: str) -> str:
    """The field path of a torch release in the shipped torch.yaml: releases[i]."""
    return f"releases[{[r['version'] for r in SHIPPED_TORCH['releases']].index(version)}]"


def line_text(problem) -> str:
    return Path(problem.file).read_text().splitlines()[problem.line - 1]


def test_the_shipped_manifests_are_valid(envs_dir):
    validation = validate_directory(envs_dir)
    assert validation.problems == ()
    assert validation.ok and {"torch", "tensorflow", "jax", "mxnet"} <= set(validation.manifests)


# Each breakage the catalog tests know, put in a different build (or file) of one directory:
# (change to torch.yaml, expected build, expected field, words in the message, word on the reported line)
TORCH_BREAKAGES = [
    (lambda d: build(d, "2.14", "cu132").update(pyhton=">=3.8"), "torch-2.14-cu132", "pyhton", "unknown key",
     "pyhton"),
    (lambda d: build(d, "2.14", "cu130").update(cuda="12.7"), "torch-2.14-cu130", "cuda", "not in cuda.yaml",
     "12.7"),
    (lambda d: build(d, "2.13", "cu132").update(variant="gpu"), "torch-2.13-gpu", "variant", "'gpu'", "gpu"),
    (lambda d: build(d, "2.13", "cu130").update(variant="cu128"), "torch-2.13-cu128", "variant",
     "does not name CUDA 13.0", "cu128"),
    (lambda d: build(d, "2.13", "cpu").update(cuda="12.6"), "torch-2.13-cpu", "cuda", "cpu build", "12.6"),
    (lambda d: build(d, "2.12", "cu132").pop("arch"), "torch-2.12-cu132", "arch", "architecture list", "cu132"),
    (lambda d: build(d, "2.12", "cu130").update(arch="hopper-only"), "torch-2.12-cu130", "arch",
     "no arch set named 'hopper-only'", "hopper-only"),
    (lambda d: build(d, "2.12", "cu126").update(arch={"sass": ["7.x"]}), "torch-2.12-cu126", "arch.sass[0]",
     "compute capability", "7.x"),
    (lambda d: build(d, "2.11", "cu130").update(arch={"sass": ["3.7"]}), "torch-2.11-cu130", "arch",
     "cannot build for sm_37", "arch:"),
    (lambda d: build(d, "2.11", "cu128").update(pip={"index_url": "http://example.org/simple"}),
     "torch-2.11-cu128", "pip.index_url", "https", "http://example.org"),
    (lambda d: release(d, "2.10")["pip"].update(packages=["torch 2.10"]), "torch-2.10-cu130", "pip.packages[0]",
     "not a pip requirement", "torch 2.10"),
    (lambda d: release(d, "2.9").update(python="3.10+"), None, f"{at('2.9')}.python", "version range", "3.10+"),
    (lambda d: release(d, "2.8").update(python=">=4.0"), None, f"{at('2.8')}.python", "admits none", ">=4.0"),
    (lambda d: build(d, "2.7", "cu128").update(python="latest"), "torch-2.7-cu128", "python", "version range",
     "latest"),
    (lambda d: build(d, "2.6", "cu126").update(cuda=12.6), "torch-2.6-cu126", "cuda", "quote it", "12.6"),
    (lambda d: release(d, "2.5")["builds"].append(dict(build(d, "2.5", "cu124"))), None,
     f"{at('2.5')}.builds[{len(release(SHIPPED_TORCH, '2.5')['builds'])}].id",
     "duplicate build id 'torch-2.5-cu124'", "cu124"),
    (lambda d: release(d, "2.4").update(version=2.4), None, f"{at('2.4')}.version", "quote it ('2.4')", "2.4"),
    (lambda d: release(d, "2.3").update(python=""), None, f"{at('2.3')}.python", "empty", "python"),
    (lambda d: d.update(framework="caffe"), None, "framework", "'caffe'", "caffe"),
]


def test_every_problem_of_a_directory_in_one_run(envs_copy):
    for change, *_ in TORCH_BREAKAGES:
        edit(envs_copy, "torch.yaml", change)
    edit(envs_copy, "mxnet.yaml", lambda d: d.update(name="apache-mxnet"))
    edit(envs_copy, "tensorflow.yaml", lambda d: d.update(releases=[]))
    jax = envs_copy / "jax.yaml"
    lines = jax.read_text().splitlines()
    broken = lines.index('        cuda: "12.0"')  # the first build's
    lines[broken] = "  broken: [unclosed"
    jax.write_text("\n".join(lines) + "\n")

    validation = validate_directory(envs_copy)
    problems = validation.problems
    torch_file = str(envs_copy / "torch.yaml")
    for _, build_id, field, words, on_line in TORCH_BREAKAGES:
        found = [p for p in problems if p.file == torch_file and p.build == build_id and p.field == field
                 and words in p.message]
        assert len(found) == 1, (build_id, field, words, [str(p) for p in problems])
        assert on_line in line_text(found[0]), (str(found[0]), line_text(found[0]))
    mxnet = [p for p in problems if p.file.endswith("mxnet.yaml")]
    assert [(p.field, "file's name" in p.message, "apache-mxnet" in line_text(p)) for p in mxnet] == [
        ("name", True, True)]
    tensorflow = [p for p in problems if p.file.endswith("tensorflow.yaml")]
    assert [(p.field, p.message) for p in tensorflow] == [("releases", "missing or empty")]
    syntax = [p for p in problems if p.file.endswith("jax.yaml")]
    assert len(syntax) == 1 and "not valid YAML" in syntax[0].message and syntax[0].line == broken + 1
    # The builds that are fine still parsed: torch keeps most of its builds.
    assert len(validation.manifests["torch"].builds) >= 20
    assert not validation.ok


def test_every_problem_of_one_build_is_reported_not_only_its_first(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: build(d, "2.14", "cu126").update(
        pyhton=">=3.8", python="latest", cuda="12.7", notes=["not", "text"]))
    validation = validate_directory(envs_copy)
    problems = sorted((p.field, p.message) for p in validation.problems if p.build == "torch-2.14-cu126")
    assert [field for field, _ in problems] == ["cuda", "notes", "pyhton", "python"], problems
    assert "not in cuda.yaml" in dict(problems)["cuda"] and "version range" in dict(problems)["python"]
    assert "torch-2.14-cu126" not in {b.id for b in validation.manifests["torch"].builds}  # a broken build is left out


def test_broken_tables_are_all_reported_and_the_manifests_wait_for_them(envs_copy):
    path = envs_copy / "cuda.yaml"
    path.write_text(path.read_text().replace('"12.8": "570.26"', '12.8: "570.26"'))
    edit(envs_copy, "python.yaml", lambda d: d.update(default="2.7"))
    (envs_copy / "gpus.yaml").unlink()
    problems = validate_directory(envs_copy).problems
    by_file = {Path(p.file).name: p for p in problems}
    assert by_file["cuda.yaml"].field == "min_driver.12.8" and "quote it" in by_file["cuda.yaml"].message
    assert "12.8" in line_text(by_file["cuda.yaml"])
    assert by_file["python.yaml"].field == "default" and "default" in line_text(by_file["python.yaml"])
    assert "missing" in by_file["gpus.yaml"].message
    assert any("fix those first" in p.message for p in problems)
    assert not any(p.file.endswith("torch.yaml") for p in problems)


def test_the_note_that_the_manifests_wait_comes_after_the_tables_problems(envs_copy):
    edit(envs_copy, "python.yaml", lambda d: d.update(default="2.7"))
    problems = validate_directory(envs_copy).problems
    assert [(Path(p.file).name, "fix those first" in p.message) for p in problems] == [
        ("python.yaml", False), (envs_copy.name, True)]


def test_consistency_across_builds_manifests_and_tables(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.14").update(python=">=3.10,<3.17"))
    edit(envs_copy, "torch.yaml", lambda d: build(d, "2.13", "cpu").update(python=">=3.10"))
    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.12")["pip"].update(
        packages=["torch==2.12.*", "torchvision==0.26.*", "torchaudio==2.12.*"]))
    edit(envs_copy, "jax.yaml", lambda d: d["releases"][0]["builds"][1].update(id="torch-2.14-cpu"))
    # (12.5 below 12.4's driver: a row no driver branch row of cuda.yaml leans on, which would break the tables)
    edit(envs_copy, "cuda.yaml", lambda d: d["min_driver"].update({"12.5": "550.1"}))
    edit(envs_copy, "cuda.yaml", lambda d: d["minor_version_compatibility"].update({"14": "600"}))
    edit(envs_copy, "cuda.yaml", lambda d: d["min_compute_capability"].pop("10"))
    edit(envs_copy, "mxnet.yaml", lambda d: d["releases"][0]["builds"].__setitem__(
        0, {**d["releases"][0]["builds"][0], "variant": "cu100", "cuda": "10.0"}))
    problems = validate_directory(envs_copy).problems
    messages = {str(p) for p in problems}

    def one(words: str):
        found = [p for p in problems if words in p.message]
        assert len(found) == 1, (words, messages)
        return found[0]

    claims = one("claims Python 3.16")
    assert claims.field == f"{at('2.14')}.python" and claims.build is None and "<3.17" in line_text(claims)
    open_range = one("admits every Python from 3.16 up")
    assert open_range.build == "torch-2.13-cpu" and ">=3.10" in line_text(open_range)
    vision = one("'torchvision==0.26.*' does not pair with torch 2.12")
    assert "torchvision 0.27" in vision.message and "torchvision==0.26" in line_text(vision)
    audio = one("'torchaudio==2.12.*' does not pair")
    assert "torchaudio 2.11" in audio.message
    duplicate = one("also a build of jax.yaml")  # the manifests are read by name: jax first
    assert duplicate.file.endswith("torch.yaml") and duplicate.build == "torch-2.14-cpu"
    assert "cpu" in line_text(duplicate)
    order = one("older than CUDA 12.4's")
    assert order.field == "min_driver.12.5" and "550.1" in line_text(order)
    assert one("CUDA 14 has no row in min_driver").field == "minor_version_compatibility.14"
    unchecked = one("no row for CUDA 10")
    assert unchecked.file.endswith("cuda.yaml") and unchecked.field == "min_compute_capability"
    assert "mxnet-" in unchecked.message and "min_compute_capability" in line_text(unchecked)


def test_a_key_given_twice_is_reported_with_its_line(envs_copy):
    path = envs_copy / "mxnet.yaml"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("framework:"))
    lines.insert(at + 1, "framework: torch")
    path.write_text("\n".join(lines) + "\n")
    problems = validate_directory(envs_copy).problems
    assert [(Path(p.file).name, p.line) for p in problems] == [("mxnet.yaml", at + 2)]
    assert "duplicate key 'framework'" in problems[0].message


def test_a_bad_companions_rule_is_reported(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d["companions"]["torchvision"].append({"framework": "2.x", "major": 0}))
    problems = validate_directory(envs_copy).problems
    assert [p.field for p in problems] == ["companions.torchvision[2].framework"]


def test_a_missing_directory_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        validate_directory(tmp_path / "nope")


def test_a_broken_arch_set_is_one_problem_not_one_per_build_that_names_it(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d["arch_sets"]["maxwell-to-hopper"]["sass"].__setitem__(0, 5.0))
    validation = validate_directory(envs_copy)
    assert [(p.field, p.build) for p in validation.problems] == [("arch_sets.maxwell-to-hopper.sass[0]", None)], [
        str(p) for p in validation.problems]
    assert "quote it" in validation.problems[0].message
    # the other arch sets were read: the builds that name them are still checked and kept
    assert "torch-2.14-cu130" in {b.id for b in validation.manifests["torch"].builds}


def test_a_duplicate_build_id_says_which_build_has_it_first_and_what_to_do(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.14")["builds"].append(dict(build(d, "2.14", "cu126"))))
    problems = validate_directory(envs_copy).problems
    count = len(release(SHIPPED_TORCH, "2.14")["builds"])
    first = release(SHIPPED_TORCH, "2.14")["builds"].index(build(SHIPPED_TORCH, "2.14", "cu126"))
    assert [(p.field, p.message) for p in problems] == [
        (f"{at('2.14')}.builds[{count}].id", f"duplicate build id 'torch-2.14-cu126': {at('2.14')}.builds[{first}] "
                                              "has it too: give one of them an id of its own (id: NAME)")]


def test_a_typo_in_a_release_s_pip_settings_is_one_problem_not_one_per_build_that_inherits_them(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.14").__setitem__(
        "pip", {"pakages": release(d, "2.14")["pip"]["packages"]}))
    edit(envs_copy, "torch.yaml", lambda d: build(d, "2.13", "cu126").update(pip={"index_ur": "https://x.org"}))
    problems = validate_directory(envs_copy).problems
    assert [(p.build, p.field) for p in problems] == [(None, f"{at('2.14')}.pip.pakages"),
                                                       ("torch-2.13-cu126", "pip.index_ur")], [str(p) for p in problems]


# --- issue 30: companions' Python ranges --------------------------------------------------------------------------

def test_a_companion_pinned_for_a_python_it_has_no_wheel_for_is_reported_with_its_line(envs_copy):
    """torchaudio 2.11 has no cp315 wheel; torch 2.15 claims 3.15. Without the marker that leaves it out there, the
    pick for `--python 3.15` would not install: each 2.15 build that pins it is named, at the pin's line."""
    def drop_marker(data):
        packages = release(data, "2.15")["pip"]["packages"]
        packages[1] = packages[1].split(";")[0].strip()
    edit(envs_copy, "torch.yaml", drop_marker)
    problems = validate_directory(envs_copy).problems
    assert [(p.field, Path(p.file).name) for p in problems] == [(f"{at('2.15')}.pip.packages[1]", "torch.yaml")] * 2
    assert [p.message.split(", which ")[1].split(" claims")[0] for p in problems] == ["torch-2.15-cu130",
                                                                                       "torch-2.15-cpu"]
    assert problems[0].message.startswith("torchaudio 2.11 has no wheel for Python 3.15")
    assert "torchaudio" in line_text(problems[0])


def test_a_companion_range_that_excludes_every_python_of_its_release_is_reported(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d["companions"]["torchaudio"][0].update(python=">=3.16"))
    problems = validate_directory(envs_copy).problems
    assert problems and all("publishes Python >=3.16, none of the Pythons" in p.message for p in problems)
    assert {p.message.split("none of the Pythons ")[1].split(" claims")[0] for p in problems} >= {
        "torch-2.14-cu130", "torch-2.11-cu126"}


def test_a_companion_python_range_that_is_not_one_is_named(envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: d["companions"]["torchaudio"][0].update(python="3.15+"))
    problems = validate_directory(envs_copy).problems
    assert [p.field for p in problems] == ["companions.torchaudio[0].python"]


def test_manifests_validate_exits_2_on_a_companion_without_a_wheel(envs_copy, tmp_path):
    import subprocess
    import sys

    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.15")["pip"].update(
        packages=["torch==2.15.*", "torchaudio==2.11.*"]))
    done = subprocess.run([sys.executable, "-m", "envkit", "manifests", "validate", str(envs_copy)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "torch.yaml:" in done.stdout and "field 'releases[0].pip.packages[1]': torchaudio 2.11 has no wheel" \
        in done.stdout


def test_the_marker_validate_suggests_leaves_out_the_pythons_that_lack_the_companion(envs_copy):
    """A companion missing at the bottom of a build's range gets the marker that keeps the top, not '<'."""
    edit(envs_copy, "torch.yaml", lambda d: d["companions"]["torchaudio"][0].update(python=">=3.12,<3.16"))
    messages = [p.message for p in validate_directory(envs_copy).problems if "torch-2.14-cu130" in p.message]
    assert messages == ["torchaudio 2.11 has no wheel for Python 3.10, 3.11, which torch-2.14-cu130 claims: leave it "
                        "out there with an environment marker ('torchaudio==2.11.* ; python_version >= \"3.12\"', "
                        "and say so in the build's notes) or narrow the build's python"]
