"""The schema's guards on what reaches an installer (conda specs, pip requirements, URLs), duplicate YAML keys, and
the fields added for issue 10: bundled-library floors, find-links pages and unconfirmed facts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.catalog import load_catalog
from envkit.catalog.entries import conda_spec_problem, pip_requirement_problem
from envkit.errors import ManifestError
from envkit.machines.profile import Gpu, MachineProfile
from envkit.pick.resolve import assess
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

REPO = Path(__file__).resolve().parents[1]

HEAD = """\
name: demo
summary: a test manifest
framework: torch
releases:
  - version: "1.0"
    python: ">=3.8,<3.16"
    builds:
"""


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A manifests directory with envs/'s tables and no manifest yet."""
    directory = tmp_path / "envs"
    directory.mkdir()
    for table in ("cuda.yaml", "python.yaml", "gpus.yaml"):
        shutil.copy(REPO / "envs" / table, directory / table)
    return directory


def load_demo(directory: Path, builds: str):
    (directory / "demo.yaml").write_text(HEAD + builds, encoding="utf-8")
    return load_catalog(directory, ["demo"]).manifests["demo"]


def refused(directory: Path, builds: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_demo(directory, builds)
    return caught.value


def conda_build(spec: str) -> str:
    return f"""\
      - variant: cu101
        cuda: "10.1"
        arch: {{sass: ["7.0"]}}
        conda: {{channels: ["https://repo.anaconda.com/pkgs/main"], packages: ["cudatoolkit=10.1", {spec!r}]}}
"""


def pip_build(requirement: str) -> str:
    return f"""\
      - variant: cpu
        pip: {{packages: ["torch==1.0.*", {requirement!r}]}}
"""


# --- what reaches an installer's argv -----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    "--channel=http://evil.example/ch",     # an option
    "-c",                                   # an option that takes the next spec as its channel
    "--override-channels",
    "http://evil.example/ch::pkg",          # a channel in the spec: bypasses --override-channels and https
    "conda-forge::numpy",
    "conda-forge/linux-64::numpy",          # channel and subdir
    "numpy[channel=conda-forge]",
    "numpy[subdir=linux-64]",
    "numpy[url=https://evil.example/numpy-1-0.conda]",
    "https://evil.example/ch/linux-64/pkg-1-0.tar.bz2",   # a URL spec
    "file:///tmp/pkg-1-0.conda",
    "./pkg-1-0.conda",
    "numpy[fn=numpy-1.0-0.conda]",
    "numpy >=1.0 ; rm -rf ~",               # not a match spec at all
])
def test_conda_entries_that_name_a_source_or_an_option_break_the_manifest(manifests, spec):
    error = refused(manifests, conda_build(spec))
    assert error.build == "demo-1.0-cu101" and error.field == "conda.packages[1]"
    assert repr(spec) in error.problem and error.exit_code == 2
    assert str(manifests / "demo.yaml") in error.message


@pytest.mark.parametrize("spec", ["cudnn=7.6", "tensorflow=2.10.0=gpu_py*", "python >=3.8,<3.9", "nccl",
                                  "numpy 1.2 py_0", "cudatoolkit>=10.1,<10.2"])
def test_plain_conda_match_specs_are_accepted(spec):
    assert conda_spec_problem(spec) is None


@pytest.mark.parametrize("requirement", [
    "torch @ https://evil.example/torch-1.0-py3-none-any.whl",   # a direct URL
    "-i https://evil.example/simple",                           # an option
    "--index-url=https://evil.example/simple",
    "--extra-index-url",
    "git+https://evil.example/torch.git",
    "torch==1.0; --find-links /tmp",
])
def test_pip_entries_with_a_url_or_an_option_break_the_manifest(manifests, requirement):
    error = refused(manifests, pip_build(requirement))
    assert error.build == "demo-1.0-cpu" and error.field == "pip.packages[1]"
    assert repr(requirement) in error.problem


@pytest.mark.parametrize("requirement", ["torch==1.8.1+cu101", "tensorflow[and-cuda]==2.14.*", "numpy<1.24",
                                         "jax[cuda12]==0.6.*", "pkg>=1; python_version<'3.9'"])
def test_pep_508_requirements_are_accepted(requirement):
    assert pip_requirement_problem(requirement) is None


def test_a_broken_entry_is_exit_2_from_the_command_line_naming_file_build_and_entry(manifests, tmp_path):
    (manifests / "demo.yaml").write_text(HEAD + conda_build("--channel=http://evil.example/ch"), encoding="utf-8")
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "c"), "XDG_DATA_HOME": str(home / "d"),
           "XDG_CACHE_HOME": str(home / "k"), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "envkit", "list", "demo", "--manifests", str(manifests),
                           "--machine", str(REPO / "tests" / "profiles" / "d2l.yaml")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "demo.yaml" in done.stderr and "build demo-1.0-cu101" in done.stderr
    assert "conda.packages[1]" in done.stderr and "--channel=http://evil.example/ch" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("key, url, words", [
    ("index_url", "http://example.org/simple", "https"),
    ("find_links", "http://example.org/torch_stable.html", "https"),
    ("find_links", "https://user:secret@example.org/links.html", "credentials"),
    ("find_links", "https://example.org/links.html?x=1", "query"),
    ("index_url", "--index-url=https://example.org", "https"),
])
def test_index_and_find_links_urls_are_plain_upstream_https(manifests, key, url, words):
    error = refused(manifests, f"""\
      - variant: cpu
        pip: {{{key}: {url!r}, packages: ["torch==1.0.*"]}}
""")
    assert error.field == f"pip.{key}" and words in error.problem


def test_find_links_takes_the_variant_and_null_unsets_an_inherited_index(manifests):
    manifest = load_demo(manifests, """\
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["7.0"]}
        pip:
          index_url: null
          find_links: "https://download.pytorch.org/whl/{variant}/torch_stable.html"
          packages: ["torch==1.0.0+cu101"]
""")
    pip = manifest.builds[0].pip
    assert pip.index_url is None  # the default index (PyPI or its mirror)
    assert pip.find_links == "https://download.pytorch.org/whl/cu101/torch_stable.html"


@pytest.mark.parametrize("key, template, words", [
    ("index_url", "https://x.org/whl/{nope}", "unknown placeholder {nope}"),
    ("index_url", "https://x.org/whl/{variant", "a brace that opens or closes no placeholder"),
    ("index_url", "https://x.org/whl/variant}", "a brace that opens or closes no placeholder"),
    ("index_url", "https://x.org/{0}", "unknown placeholder {0}"),
    ("index_url", "https://x.org/{variant.__class__}", "unknown placeholder {variant.__class__}"),
    ("index_url", "https://x.org/{{variant}}", "unknown placeholder {}"),
    ("find_links", "https://x.org/{variant}/{nope}.html", "unknown placeholder {nope}"),
    ("local_version", "{variant.upper}", "unknown placeholder {variant.upper}"),
])
def test_a_url_template_has_no_placeholder_but_variant(manifests, key, template, words):
    error = refused(manifests, f"""\
      - variant: cu101
        cuda: "10.1"
        arch: {{sass: ["7.0"]}}
        pip: {{{key}: {template!r}, packages: ["torch==1.0.0"]}}
""")
    assert error.build == "demo-1.0-cu101" and error.field == f"pip.{key}"
    assert words in error.problem and "the only placeholder is {variant}" in error.problem


def test_the_variant_placeholder_is_filled_in_where_it_is_written(manifests):
    manifest = load_demo(manifests, """\
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["7.0"]}
        pip: {index_url: "https://x.org/{variant}/simple", local_version: "{variant}", packages: ["torch==1.0.*"]}
""")
    pip = manifest.builds[0].pip
    assert pip.index_url == "https://x.org/cu101/simple" and pip.local_version == "cu101"


@pytest.mark.parametrize("channel", ["https://conda.example/{variant}", "https://conda.example/a|b"])
def test_a_channel_url_holds_no_braces_or_other_characters_urls_never_hold(manifests, channel):
    error = refused(manifests, conda_build("cudnn=7.6").replace('"https://repo.anaconda.com/pkgs/main"',
                                                                repr(channel)))
    assert error.field == "conda.channels[0]" and "RFC 3986" in error.problem


@pytest.mark.parametrize("builds, field", [
    (pip_build("x").replace("'x'", "5"), "pip.packages[1]"),
    (conda_build("x").replace("'x'", "7"), "conda.packages[1]"),
])
def test_a_number_is_not_a_package(manifests, builds, field):
    error = refused(manifests, builds)
    assert error.field == field and "expected text, got the number" in error.problem


def test_a_manifest_name_is_letters_digits_and_a_few_marks(manifests):
    (manifests / "demo;x.yaml").write_text(HEAD.replace("name: demo", "name: demo;x") + pip_build("numpy"),
                                          encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        load_catalog(manifests, ["demo;x"])
    assert caught.value.problem.startswith("'demo;x.yaml' cannot name a manifest: a manifest's file name is letters, "
                                           "digits")  # the file's name is what is wrong: its name: only follows it


def test_a_file_whose_name_cannot_name_a_manifest_is_one_problem_not_one_per_build(envs_copy):
    from envkit.maintain.validate import validate_directory

    (envs_copy / "torch.yaml").rename(envs_copy / "torch copy.yaml")  # a file manager's copy, left in the directory
    problems = validate_directory(envs_copy).problems
    assert [(Path(p.file).name, p.build, p.field) for p in problems] == [("torch copy.yaml", None, None)], [
        str(p) for p in problems]
    assert "rename the file, or move it out of the manifests directory" in problems[0].message


# --- duplicate keys -----------------------------------------------------------------------------------------------

def test_a_duplicated_key_in_a_manifest_is_refused_with_its_line(manifests):
    text = HEAD + """\
      - variant: cpu
        python: ">=3.8,<3.16"
        pip: {packages: ["torch==1.0.*"]}
        python: ">=3.9,<3.16"
"""
    (manifests / "demo.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        load_catalog(manifests, ["demo"])
    error = caught.value
    assert error.path == str(manifests / "demo.yaml")
    line = text.splitlines().index('        python: ">=3.9,<3.16"') + 1
    assert f"duplicate key 'python' at line {line}" in error.problem
    assert "first at line" in error.problem


def test_a_duplicated_key_in_a_table_is_refused(manifests):
    path = manifests / "cuda.yaml"
    path.write_text(path.read_text().replace('  "12.8": "570.26"\n', '  "12.8": "570.26"\n  "12.8": "575.0"\n'))
    with pytest.raises(ManifestError) as caught:
        load_catalog(manifests, [])
    assert caught.value.path.endswith("cuda.yaml") and "duplicate key '12.8'" in caught.value.problem


def test_merge_keys_and_anchors_are_not_duplicates(manifests):
    manifest = load_demo(manifests, """\
      - variant: cpu
        pip: &base {packages: ["torch==1.0.*"], index_url: "https://example.org/simple"}
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["7.0"]}
        pip:
          <<: *base
          index_url: "https://example.org/cu101"
""")
    assert [b.pip.index_url for b in manifest.builds] == ["https://example.org/simple", "https://example.org/cu101"]


# --- bundled libraries --------------------------------------------------------------------------------------------

BUNDLED = """\
      - variant: cu118
        cuda: "11.8"
        arch: {sass: ["3.7", "5.0", "8.0"]}
        bundled: [{name: "cuDNN 9.1", min_compute_capability: "5.0"}]
        pip: {packages: ["torch==1.0.*"]}
"""


def profile(capability: str) -> MachineProfile:
    """A machine of one GPU on R580 (CUDA 13.0): newer than Blackwell's first branch, so no GPU of these tests makes
    the profile impossible (a Kepler on it is past its last branch, which is only warned about)."""
    return MachineProfile(name="m", driver_version=DriverVersion.parse("580.95.05"), cuda_driver=CudaVersion(13, 0),
                          gpus=(Gpu(index=0, name="GPU", compute_capability=ComputeCapability.parse(capability)),))


def test_a_bundled_library_floor_keeps_older_gpus_out_even_with_kernels_for_them(manifests, catalog):
    build = load_demo(manifests, BUNDLED).builds[0]
    assert build.min_compute_capability == ComputeCapability(5, 0)
    k80 = assess(build, profile("3.7"), catalog.tables)
    assert not k80.compatible
    assert k80.reasons[-1].endswith("the build has code for this GPU, but the cuDNN 9.1 it bundles needs a GPU of "
                                    "compute capability 5.0 or newer")
    assert assess(build, profile("5.2"), catalog.tables).compatible
    assert assess(build, profile("8.6"), catalog.tables).compatible


def test_a_release_can_set_the_floor_for_its_builds_and_a_cpu_build_cannot_bundle(manifests):
    text = HEAD.replace('    builds:\n', '    bundled: [{name: "cuDNN 9.1", min_compute_capability: "5.0"}]\n'
                        '    builds:\n')
    (manifests / "demo.yaml").write_text(text + BUNDLED.replace("        bundled: [{name: \"cuDNN 9.1\", "
                                                                "min_compute_capability: \"5.0\"}]\n", ""))
    assert load_catalog(manifests, ["demo"]).manifests["demo"].builds[0].min_compute_capability.major == 5
    error = refused(manifests, """\
      - variant: cpu
        bundled: [{name: "cuDNN 9.1", min_compute_capability: "5.0"}]
        pip: {packages: ["torch==1.0.*"]}
""")
    assert error.field == "bundled" and "GPU build" in error.problem


@pytest.mark.parametrize("bundled, field", [
    ('[{name: "cuDNN 9.1", min_compute_capability: "five"}]', "bundled[0].min_compute_capability"),
    ('[{name: "cuDNN 9.1"}]', "bundled[0].min_compute_capability"),
    ('[{name: "cuDNN 9.1", min_compute_capability: "5.0", max: "9.0"}]', "bundled[0].max"),
    ('"cuDNN 9.1"', "bundled"),
])
def test_broken_bundled_entries_name_their_field(manifests, bundled, field):
    error = refused(manifests, BUNDLED.replace(
        '[{name: "cuDNN 9.1", min_compute_capability: "5.0"}]', bundled))
    assert error.build == "demo-1.0-cu118" and error.field == field


def test_unconfirmed_is_kept_from_the_build_or_its_release(manifests):
    text = HEAD.replace('    builds:\n', '    unconfirmed: "the index listing"\n    builds:\n')
    (manifests / "demo.yaml").write_text(text + """\
      - variant: cpu
        pip: {packages: ["torch==1.0.*"]}
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["7.0"]}
        unconfirmed: "the arch list"
        pip: {packages: ["torch==1.0.*"]}
""")
    builds = load_catalog(manifests, ["demo"]).manifests["demo"].builds
    assert [b.unconfirmed for b in builds] == ["the index listing", "the arch list"]


def test_every_catalog_module_stays_under_450_lines():
    for path in (REPO / "envkit" / "catalog").glob("*.py"):
        assert len(path.read_text().splitlines()) < 450, path.name


# --- bundled libraries: ceilings (issue 30) ----------------------------------------------------------------------

CEILING = """\
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["3.7", "5.0", "7.5"], ptx: ["3.7"]}
        bundled: [{name: "cuDNN 7.6", max_compute_capability: "7.5"}]
        pip: {packages: ["torch==1.0.*"]}
"""


def test_a_bundled_library_ceiling_refuses_the_jit_path_with_the_library_as_the_reason(manifests, catalog):
    """cuDNN 7.6 serves Kepler to Turing: the build's compute_37 PTX would JIT on an RTX 5090, but its cuDNN would
    not run there."""
    build = load_demo(manifests, CEILING).builds[0]
    assert build.max_compute_capability == ComputeCapability(7, 5) and build.min_compute_capability is None
    blackwell = assess(build, profile("12.0"), catalog.tables)
    assert not blackwell.compatible
    assert blackwell.reasons[-1].endswith("cuDNN 7.6, bundled by this build, has no support for sm_120 (it serves "
                                          "compute capability 7.5 and older)")
    assert assess(build, profile("7.5"), catalog.tables).compatible  # its own SASS, within the ceiling
    assert assess(build, profile("6.1"), catalog.tables).compatible  # sm_50 SASS
    without = load_demo(manifests, CEILING.replace(
        '        bundled: [{name: "cuDNN 7.6", max_compute_capability: "7.5"}]\n', "")).builds[0]
    assert assess(without, profile("12.0"), catalog.tables).compatible  # the PTX alone would have let it through


def test_a_floor_and_a_ceiling_together(manifests, catalog):
    build = load_demo(manifests, CEILING.replace(
        'max_compute_capability: "7.5"', 'min_compute_capability: "5.0", max_compute_capability: "7.5"')).builds[0]
    verdicts = {cc: assess(build, profile(cc), catalog.tables).compatible for cc in ("3.7", "5.2", "7.5", "8.0")}
    assert verdicts == {"3.7": False, "5.2": True, "7.5": True, "8.0": False}


@pytest.mark.parametrize("bundled, field, words", [
    ('[{name: "cuDNN 7.6", min_compute_capability: "8.0", max_compute_capability: "7.5"}]',
     "bundled[0].max_compute_capability", "below the library's own floor"),
    ('[{name: "cuDNN 7.6", max_compute_capability: "7.5"}, {name: "cuDNN 9.1", min_compute_capability: "8.0"}]',
     "bundled[0].max_compute_capability", "no GPU runs this build"),
    ('[{name: "cuDNN 7.6", max_compute_capability: "sm75"}]', "bundled[0].max_compute_capability", ""),
    ('[{name: "cuDNN 7.6"}]', "bundled[0].min_compute_capability", "max_compute_capability"),
])
def test_a_ceiling_that_cannot_be_is_refused_naming_its_field(manifests, bundled, field, words):
    error = refused(manifests, CEILING.replace('[{name: "cuDNN 7.6", max_compute_capability: "7.5"}]', bundled))
    assert error.build == "demo-1.0-cu101" and error.field == field and words in error.problem


def test_manifests_validate_names_file_line_build_and_field_of_a_ceiling_below_its_floor(manifests):
    (manifests / "demo.yaml").write_text(HEAD + CEILING.replace(
        'max_compute_capability: "7.5"', 'min_compute_capability: "8.0", max_compute_capability: "7.5"'))
    done = subprocess.run([sys.executable, "-m", "envkit", "manifests", "validate", str(manifests)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"{manifests / 'demo.yaml'}:11: build demo-1.0-cu101, field 'bundled[0].max_compute_capability': 7.5 is "
            "below the library's own floor, 8.0") in done.stdout
    assert "Traceback" not in done.stderr
