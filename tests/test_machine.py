"""Machine profiles: the file contract, its errors, the --cuda/--gpu-arch overrides, and the detect round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import ProfileError
from envkit.machines.amd import AmdgpuDriver
from envkit.machines.overrides import apply_overrides, parse_overrides
from envkit.machines.profile import Gpu, MachineProfile, profile_from_dict, read_profile
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion, GlibcVersion, L4tVersion

PROFILES = Path(__file__).parent / "profiles"


def test_the_documented_contract_reads(tmp_path):
    path = tmp_path / "deepnine.yaml"
    path.write_text(
        "name: deepnine\ndriver_version: \"550.54.14\"\ncuda_driver: \"12.4\"\ngpus:\n"
        "  - name: NVIDIA GeForce RTX 2070\n    compute_capability: \"7.5\"\n    memory_mib: 8192\n"
    )
    profile = read_profile(path)
    assert profile.name == "deepnine"
    assert profile.driver_version == DriverVersion.parse("550.54.14")
    assert profile.cuda_driver == CudaVersion(12, 4)
    assert profile.gpus == (Gpu(0, "NVIDIA GeForce RTX 2070", ComputeCapability(7, 5), 8192, f"file {path}"),)
    assert profile.sources == {"driver_version": f"file {path}", "cuda_driver": f"file {path}", "gpus": f"file {path}"}


def test_unknown_compute_capability_from_detect_reads_back_as_unknown():
    data = {"cuda_driver": "12.4", "gpus": [{"name": "NVIDIA Future GPU", "compute_capability": None}]}
    [gpu] = profile_from_dict(data, "x").gpus
    assert gpu.compute_capability is None and gpu.name == "NVIDIA Future GPU"


def test_gpus_with_an_unknown_driver_cuda_read_back():
    # What detect prints for a driver older than every CUDA in cuda.yaml (say R390) with a K80.
    data = {"driver_version": "390.157", "cuda_driver": None,
            "gpus": [{"name": "Tesla K80", "compute_capability": "3.7"}]}
    profile = profile_from_dict(data, "x")
    assert profile.cuda_driver is None and len(profile.gpus) == 1


def test_no_driver_profile():
    profile = profile_from_dict({"cuda_driver": None, "gpus": []}, "x")
    assert profile.gpus == () and profile.cuda_driver is None and not profile.has_driver


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_detect_json_round_trips(path):
    profile = read_profile(path)
    again = profile_from_dict(json.loads(json.dumps(profile.to_dict())), "again")

    def facts(p: MachineProfile):
        gpus = [(g.index, g.name, g.compute_capability, g.memory_mib) for g in p.gpus]
        return gpus, p.cuda_driver, p.driver_version, p.name

    assert facts(again) == facts(profile)


MALFORMED = [
    ("[1, 2]", "expected a mapping"),
    ("cuda_driver: twelve\ngpus: []", "cuda_driver: 'twelve' is not a CUDA version"),
    ("cuda_driver: '12.4'\ngpus: {name: x}", "gpus: expected a list"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100}]", "gpus[0].compute_capability: missing"),
    ("cuda_driver: '12.4'\ngpus: [{compute_capability: '8.0'}]", "gpus[0].name: missing"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: 'ampere'}]", "gpus[0].compute_capability"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', memory_mib: lots}]", "memory_mib"),
    ("driver_version: five\ncuda_driver: '12.4'", "driver_version"),
    ("cuda_driver: [12, 4", "not valid YAML or JSON: "),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', index: -1}]", "gpus[0].index"),
    # No GPU has 16 TiB, no node a thousand GPUs: a corrupt file, not a machine to plan for.
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', memory_mib: 100000000000000000000}]",
     "gpus[0].memory_mib: expected a whole number of MiB up to 16777216"),
    ("cuda_driver: '12.4'\ngpus: [{name: A100, compute_capability: '8.0', index: 1024}]",
     "gpus[0].index: expected a whole number up to 1023"),
]


@pytest.mark.parametrize("text, words", MALFORMED)
def test_malformed_profiles_are_reported_with_the_field(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        read_profile(path)
    assert words in caught.value.message
    assert str(path) in caught.value.message
    assert caught.value.exit_code == 2


# --- unknown keys, duplicate keys, versions YAML reads as numbers ---------------------------------------------------

def refused(tmp_path: Path, text: str, name: str = "bad.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        read_profile(path)
    assert caught.value.exit_code == 2 and caught.value.message.startswith(f"machine profile {path}")
    return caught.value.message.removeprefix(f"machine profile {path}")


def test_a_misspelt_key_is_refused_not_read_as_a_machine_without_gpus(tmp_path):
    # `gpu:` for `gpus:` used to give a machine with no GPU (and CPU builds), exit 0.
    message = refused(tmp_path, 'cuda_driver: "12.8"\ngpu:\n  - {name: NVIDIA H100, compute_capability: "9.0"}\n')
    assert message == (": unknown key 'gpu' (did you mean 'gpus'?); the keys are: name, driver_version, cuda_driver, "
                       "libc, amdgpu, platform, l4t, gpus, sources, notes, hidden_gpus, schema_version")
    assert refused(tmp_path, 'cuda_driver: "12.8"\ngpus: []\nfoo: 1\n').startswith(": unknown key 'foo'; the keys")


def test_the_keys_an_unknown_key_is_told_are_the_keys_read(tmp_path):
    # hidden_gpus (what detect --json prints inside a job) is read: the list of keys and the guess say it too.
    message = refused(tmp_path, 'cuda_driver: "12.8"\ngpus: []\nhiden_gpus: []\n')
    assert message.startswith(": unknown key 'hiden_gpus' (did you mean 'hidden_gpus'?)")
    listed = message.split("the keys are: ")[1].split(", ")
    path = tmp_path / "every-key.json"
    from envkit.text.jsonout import versioned

    written = versioned(full_profile().seen_dict())  # every key `envkit detect --json` writes, each read back
    path.write_text(json.dumps(written))
    assert sorted(listed) == sorted(written) and read_profile(path).name == "deepnine"


@pytest.mark.parametrize("version, problem", [
    (2, "schema_version 2 is newer than this envkit's (1): it was written by a newer envkit; upgrade envkit here"),
    ("1", "schema_version: expected a whole number from 1, got '1'"),
    (True, "schema_version: expected a whole number from 1, got True"),
])
def test_a_profile_from_a_newer_envkit_is_refused_with_the_reason(tmp_path, version, problem):
    assert refused(tmp_path, json.dumps({"schema_version": version, "cuda_driver": "12.8", "gpus": []})) == (
        f": {problem}")


def test_an_unknown_key_of_a_gpu_is_refused_naming_the_gpu(tmp_path):
    message = refused(tmp_path, 'cuda_driver: "12.8"\ngpus:\n  - {name: A100, compute_capability: "8.0"}\n'
                                '  - {name: A100, compute_capabilty: "8.0"}\n')
    assert message == (": gpus[1]: unknown key 'compute_capabilty' (did you mean 'compute_capability'?); the keys "
                       "are: index, name, compute_capability, vendor, gfx, memory_mib, source")


def full_profile() -> MachineProfile:
    return MachineProfile(
        gpus=(Gpu(0, "Tesla V100", ComputeCapability(7, 0), 16384, "nvml"),
              Gpu(1, "NVIDIA Future GPU", None, None, "nvidia-smi")),
        cuda_driver=CudaVersion(12, 10), driver_version=DriverVersion.parse("580.65.06"), name="deepnine",
        sources={"driver_version": "nvml", "cuda_driver": "nvml", "gpus": "nvml", "libc": "confstr"},
        notes=("a note",), glibc=GlibcVersion(2, 28), amdgpu=AmdgpuDriver("6.12.12"), platform="linux-aarch64",
        l4t=L4tVersion(36, 4, 4))


def test_what_envkit_writes_reads_back(tmp_path):
    """Every profile envkit writes and reads again: detect --json (also what survey reads), a record's machine and
    target (to_dict), the site file (to_dict inside it); and what list/create/verify --json print for the machine
    (seen_dict) when nothing is hidden."""
    profile = full_profile()
    for data in (profile.to_dict(), profile.seen_dict()):
        path = tmp_path / "saved.json"
        path.write_text(json.dumps(data))
        again = read_profile(path)
        assert again.gpus == tuple(g._replace(source=f"file {path}") for g in profile.gpus)
        assert (again.cuda_driver, again.driver_version, again.name) == (CudaVersion(12, 10), profile.driver_version,
                                                                          "deepnine")
        assert (again.platform, again.l4t) == ("linux-aarch64", L4tVersion(36, 4, 4))  # issue 43


def test_hidden_gpus_read_back_as_the_gpus_that_were_seen_and_a_note_naming_the_others(tmp_path):
    # What `detect --json` (or `list --json`) prints inside a job whose CUDA_VISIBLE_DEVICES hides a GPU: the profile
    # is what that job saw; the hidden GPU is checked like any GPU, not counted, and named in a note.
    hidden = full_profile()._replace(gpus=full_profile().gpus[:1], hidden_gpus=full_profile().gpus[1:])
    path = tmp_path / "seen.json"
    path.write_text(json.dumps(hidden.seen_dict()))
    again = read_profile(path)
    assert [gpu.name for gpu in again.gpus] == ["Tesla V100"] and again.hidden_gpus == ()
    assert [note for note in again.notes if "CUDA_VISIBLE_DEVICES" in note] == [
        f"file {path}: 1 GPU(s) that CUDA_VISIBLE_DEVICES hid where it was printed are not counted "
        "(NVIDIA Future GPU): list them under 'gpus' to judge them too"]


@pytest.mark.parametrize("hidden, words", [
    ('{name: A100}', ": hidden_gpus: expected a list"),
    ('[{name: A100, compute_capability: 8.0}]', ": hidden_gpus[0].compute_capability"),
    ('[{name: A100, compute_capabilty: "8.0"}]', ": hidden_gpus[0]: unknown key 'compute_capabilty'"),
])
def test_hidden_gpus_are_checked_as_gpus_are(tmp_path, hidden, words):
    assert refused(tmp_path, f'cuda_driver: "12.8"\ngpus: []\nhidden_gpus: {hidden}\n').startswith(words)


@pytest.mark.parametrize("text, words", [
    ('gpus: []\nsources: [nvml]\n', ": sources: expected a mapping"),
    ('gpus: []\nsources: {gpus: 3}\n', ": sources: expected a mapping"),
    ('gpus: []\nnotes: a note\n', ": notes: expected a list of text"),
    ('gpus: [{name: A100, compute_capability: "8.0", source: 3}]\n', ": gpus[0].source: expected text"),
])
def test_what_detect_adds_must_have_detects_types(tmp_path, text, words):
    assert refused(tmp_path, text).startswith(words)


@pytest.mark.parametrize("text, words", [
    ('cuda_driver: "12.8"\ngpus: []\ncuda_driver: "11.0"\n',
     ": is not valid YAML or JSON: duplicate key 'cuda_driver' at line 3 (first at line 1)"),
    ('cuda_driver: "12.8"\ngpus:\n  - {name: A100, compute_capability: "8.0", compute_capability: "9.0"}\n',
     ": is not valid YAML or JSON: duplicate key 'compute_capability' at line 3, column 45 (first at column 18)"),
])
def test_a_key_given_twice_is_refused(tmp_path, text, words):
    assert refused(tmp_path, text).replace(" is not", ": is not", 1) == words


def test_a_key_given_twice_in_json_is_refused(tmp_path):
    # JSON's own parsers keep the last one too; profiles are read with the YAML loader, which refuses it.
    text = '{"cuda_driver": "12.8", "gpus": [], "gpus": 3}'
    message = refused(tmp_path, text, "bad.json")
    first, second = text.index('"gpus"') + 1, text.rindex('"gpus"') + 1  # columns count from 1
    assert message == (f" is not valid YAML or JSON: duplicate key 'gpus' at line 1, column {second} (first at column "
                       f"{first})")


@pytest.mark.parametrize("text, words", [
    ('cuda_driver: 12.10\ngpus: []\n',
     ': cuda_driver: 12.10 must be quoted ("12.10"): YAML reads 12.10 as the number 12.1'),
    ('cuda_driver: 12.4\ngpus: []\n',
     ': cuda_driver: 12.4 must be quoted ("12.4"): unquoted, YAML reads it as a number (and 12.10 as 12.1)'),
    ('driver_version: 550\ncuda_driver: "12.4"\n', ': driver_version: 550 must be quoted ("550")'),
    ('driver_version: 560.30\ncuda_driver: "12.4"\n',
     ': driver_version: 560.30 must be quoted ("560.30"): YAML reads 560.30 as the number 560.3'),
    ('cuda_driver: "12.8"\ngpus: [{name: H100, compute_capability: 9.0}]\n',
     ': gpus[0].compute_capability: 9.0 must be quoted ("9.0")'),
    ('cuda_driver: "12.8"\ngpus: [{name: H100, compute_capability: 9}]\n',
     ': gpus[0].compute_capability: 9 must be quoted ("9")'),
])
def test_a_version_written_as_a_number_must_be_quoted(tmp_path, text, words):
    assert refused(tmp_path, text).startswith(words)


@pytest.mark.parametrize("text, words", [
    # A profile named 3.10 (or a GPU named 1080) was "name: expected text, got 3.1" (what YAML made of it) or
    # "gpus[0].name: missing or not text".
    ('name: 3.10\ncuda_driver: "12.4"\n', ': name: 3.10 must be quoted ("3.10"): YAML reads 3.10 as the number 3.1'),
    ('name: 42\ncuda_driver: "12.4"\n', ': name: 42 must be quoted ("42"): unquoted, YAML reads it as a number'),
    ('name: yes\ncuda_driver: "12.4"\n', ": name: must be quoted: YAML reads an unquoted yes, no, on, off"),
    ('cuda_driver: "12.4"\ngpus: [{name: 1080, compute_capability: "6.1"}]\n',
     ': gpus[0].name: 1080 must be quoted ("1080"): unquoted, YAML reads it as a number'),
])
def test_a_name_yaml_reads_as_a_number_must_be_quoted(tmp_path, text, words):
    assert refused(tmp_path, text).startswith(words)


def test_a_version_written_as_a_number_in_json_must_be_quoted(tmp_path):
    message = refused(tmp_path, '{"cuda_driver": 12.10, "gpus": []}', "bad.json")
    assert message == ': cuda_driver: 12.10 must be quoted ("12.10"): YAML reads 12.10 as the number 12.1'


@pytest.mark.parametrize("written, how", [("010", "the octal number 8"), ("0x2000", "the hexadecimal number 8192"),
                                         ("8_192", "the number 8192")])
def test_a_number_not_written_in_plain_decimal_is_refused_not_read_as_yaml_1_1_reads_it(tmp_path, written, how):
    # PyYAML (YAML 1.1) read `index: 010` as GPU 8 and `memory_mib: 8_192` as 8192; JSON and YAML 1.2 do not.
    text = f'cuda_driver: "12.8"\ngpus:\n  - name: H100\n    compute_capability: "9.0"\n    memory_mib: {written}\n'
    assert refused(tmp_path, text) == (f" is not valid YAML or JSON: the number {written} at line 5, column 17: YAML "
                                       f"reads it as {how}; write numbers in plain decimal digits, or quote text "
                                       f'("{written}")')


def test_the_message_is_the_same_from_the_cache(tmp_path):
    # read_profile keeps the parsed text in the cache: the number's text as written must survive it.
    path = tmp_path / "bad.yaml"
    path.write_text("cuda_driver: 12.10\ngpus: []\n")
    messages = []
    for _ in range(2):
        with pytest.raises(ProfileError) as caught:
            read_profile(path, tmp_path / "cache")
        messages.append(caught.value.message)
    assert list((tmp_path / "cache" / "yaml").glob("*.pickle"))  # the second read came from there
    assert messages[0] == messages[1] and '12.10 must be quoted ("12.10")' in messages[1]


def test_quoted_versions_mean_what_they_say(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text('driver_version: "560.30"\ncuda_driver: "12.10"\ngpus: [{name: X, compute_capability: "12.1"}]\n')
    profile = read_profile(path)
    assert profile.cuda_driver == CudaVersion(12, 10) and str(profile.driver_version) == "560.30"
    assert profile.gpus[0].compute_capability == ComputeCapability(12, 1)


def test_profile_that_is_not_text(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00cuda")
    with pytest.raises(ProfileError, match="not UTF-8 text"):
        read_profile(path)


def test_missing_profile_file(tmp_path):
    with pytest.raises(ProfileError, match="cannot read machine profile") as caught:
        read_profile(tmp_path / "absent.yaml")
    assert "envkit detect --json > FILE" in caught.value.hint  # how to make one


def base() -> MachineProfile:
    return MachineProfile(
        gpus=(Gpu(0, "Tesla V100", ComputeCapability(7, 0), 16384, "nvml"),
              Gpu(1, "NVIDIA A100", ComputeCapability(8, 0), 40960, "nvml")),
        cuda_driver=CudaVersion(12, 2),
        driver_version=DriverVersion.parse("535.104.05"),
        sources={"driver_version": "nvml", "cuda_driver": "nvml", "gpus": "nvml"},
    )


def test_cuda_override_replaces_the_driver_cuda_and_forgets_its_version():
    profile = apply_overrides(base(), parse_overrides(cuda="11.8"))
    assert profile.cuda_driver == CudaVersion(11, 8)
    assert profile.driver_version is None
    assert profile.sources["cuda_driver"] == "--cuda option"
    assert "driver_version" not in profile.sources


def test_gpu_arch_override_with_matching_count_keeps_names():
    profile = apply_overrides(base(), parse_overrides(gpu_archs=["7.5", "9.0"]))
    assert [(g.name, g.compute_capability) for g in profile.gpus] == [
        ("Tesla V100", ComputeCapability(7, 5)), ("NVIDIA A100", ComputeCapability(9, 0))]
    assert profile.sources["gpus"] == "--gpu-arch option"


def test_gpu_arch_override_on_a_login_node_makes_gpus():
    login = MachineProfile()
    profile = apply_overrides(login, parse_overrides(cuda="12.4", gpu_archs=["8.0", "8.0", "sm_90"]))
    assert [g.compute_capability for g in profile.gpus] == [ComputeCapability(8, 0)] * 2 + [ComputeCapability(9, 0)]
    assert [g.index for g in profile.gpus] == [0, 1, 2]
    assert profile.cuda_driver == CudaVersion(12, 4)


def test_gpu_arch_describes_the_whole_machine_so_no_gpu_stays_hidden():
    hidden = base()._replace(gpus=(), hidden_gpus=base().gpus)  # as CUDA_VISIBLE_DEVICES= leaves it
    profile = apply_overrides(hidden, parse_overrides(gpu_archs=["8.0"]))
    assert [g.compute_capability for g in profile.gpus] == [ComputeCapability(8, 0)] and profile.hidden_gpus == ()


def test_gpu_arch_without_any_cuda_says_so():
    profile = apply_overrides(MachineProfile(), parse_overrides(gpu_archs=["8.0"]))
    assert any("--cuda" in note for note in profile.notes)


@pytest.mark.parametrize("cuda, archs, words", [("twelve", (), "--cuda"), (None, ("8",), "--gpu-arch")])
def test_bad_overrides_are_bad_input(cuda, archs, words):
    with pytest.raises(ProfileError, match=words):
        parse_overrides(cuda=cuda, gpu_archs=archs)
