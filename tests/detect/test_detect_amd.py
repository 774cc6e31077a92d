"""AMD GPUs found without ROCm: the KFD topology's real properties files (data/amd, sources in its README) in a fake
sysfs tree, the amdgpu driver, names and older kernels' targets from envs/rocm.yaml, and amd-smi / rocm-smi (real
outputs of both JSON forms, played by small scripts) as time-limited cross-checks. Bad input is said, and detection
goes on with what it knows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from detect_fakes import A100, FakeNvml
from support.amd_sysfs import AMD_DATA, CPU, MI25, MI210, MI300X, NAVI23, make_sysfs

from envkit.detect import detect_machine
from envkit.detect.amd import KFD, parse_properties, probe_amd
from envkit.detect.amd_smi import parse_amd_smi, parse_rocm_smi, smi_gfx
from envkit.machines.amd import AmdgpuDriver
from envkit.machines.profile import AMD_GPUS, AMDGPU, read_profile
from envkit.pick.render import profile_text
from envkit.versions import gfx_from_kfd

# file -> (gfx target, name from envs/rocm.yaml): read off each file and PLATFORMS.md by hand
KFD_FILES = {
    "kfd-props-mi300x-rocprofsdk.txt": ("gfx942", "AMD Instinct MI300X"),
    "kfd-props-mi350x-rocprofsdk.txt": ("gfx950", "AMD Instinct MI350X"),
    "kfd-props-rx9070-gfx1201-rocprofsdk.txt": ("gfx1201", "AMD Radeon RX 9070/9070 XT/9070 GRE"),
    "kfd-props-radeonvii-gfx906-rocprofsdk.txt": ("gfx906", "AMD Radeon VII"),
    "kfd-props-w7500-gfx1102-rocprofsdk.txt": ("gfx1102", "AMD Radeon PRO W7500"),
    "kfd-props-navi23-gfx1032-rocprofsdk.txt": ("gfx1032", "AMD Radeon RX 6650 XT / 6700S / 6800S"),
    "kfd-props-mi210-k8sdp.txt": ("gfx90a", "AMD Instinct MI210"),
    "kfd-props-mi300x-cpx-k8sdp.txt": ("gfx942", "AMD Instinct MI300X"),
    "kfd-props-mi308x-cpx-k8sdp.txt": ("gfx942", "AMD Instinct MI308X"),
    "kfd-props-mi25-vega10-k8sdp.txt": ("gfx900", "AMD Radeon Instinct MI25 (Vega 10)"),
}
NO_PROC = Path("/nonexistent-proc")


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """PATH without amd-smi or rocm-smi (and nothing else of the machine's)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


@pytest.fixture
def tool(monkeypatch, tmp_path):
    """tool(name, script body): an executable ``name`` first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")

    def make(name: str, body: str) -> Path:
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
        return path

    return make


@pytest.mark.parametrize("name", sorted(KFD_FILES))
def test_every_real_gpu_node_reads_as_its_target_and_name(tmp_path, tables, no_tools, name):
    profile = probe_amd(make_sysfs(tmp_path / "sys", [name]), tables.amd, NO_PROC)
    (gpu,) = profile.gpus
    assert (gpu.vendor, gpu.gfx, gpu.name, gpu.compute_capability) == ("amd", *KFD_FILES[name], None)
    assert gpu.source == f"{KFD} + envs/rocm.yaml"  # the name always comes from the table
    assert profile.sources[AMD_GPUS] == KFD


def test_the_kfd_encoding_of_targets():
    # major * 10000 + minor * 100 + stepping, minor and stepping in hex: a decimal reading gives gfx9010
    assert [gfx_from_kfd(v) for v in (90402, 90010, 110501, 100302, 90500, 120001)] == [
        "gfx942", "gfx90a", "gfx1151", "gfx1032", "gfx950", "gfx1201"]
    with pytest.raises(ValueError):
        gfx_from_kfd(0)  # the CPU node's


def test_cpu_nodes_are_no_gpus_and_a_machine_without_kfd_has_none_and_no_note(tmp_path, tables, no_tools):
    both_cpus = make_sysfs(tmp_path / "cpus", [], cpus=(CPU, "kfd-props-cpu-rocprofsdk.txt"))
    profile = probe_amd(both_cpus, tables.amd, NO_PROC)
    assert profile.gpus == () and profile.notes == ()
    nothing = probe_amd(tmp_path / "no-sys", tables.amd, NO_PROC)
    assert (nothing.gpus, nothing.notes, nothing.amdgpu, nothing.sources) == ((), (), None, {})


def test_a_node_of_eight_gpus_numbered_as_hip_numbers_them_with_the_packaged_driver(tmp_path, tables, no_tools):
    root = make_sysfs(tmp_path / "sys", [MI300X] * 8, cpus=(CPU, CPU))
    profile = probe_amd(root, tables.amd, NO_PROC)
    assert [(g.index, g.gfx) for g in profile.gpus] == [(i, "gfx942") for i in range(8)]
    assert profile.amdgpu == AmdgpuDriver("6.12.12") and profile.sources[AMDGPU] == "/sys/module/amdgpu/version"


def test_the_kernels_own_driver_is_known_by_the_kernels_release(tmp_path, tables, no_tools):
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "osrelease").write_text("6.8.0-45-generic\n")
    profile = probe_amd(make_sysfs(tmp_path / "sys", [MI210], amdgpu_version=None), tables.amd, proc)
    assert str(profile.amdgpu) == "kernel 6.8.0-45-generic" and not profile.amdgpu.packaged
    assert "osrelease" in profile.sources[AMDGPU]


def test_an_older_kernel_without_gfx_target_version_and_an_unknown_device_is_never_guessed(tmp_path, tables,
                                                                                              no_tools):
    root = make_sysfs(tmp_path / "sys", [MI25])
    props = root / "class/kfd/kfd/topology/nodes/1/properties"
    props.write_text(props.read_text().replace("device_id 26720", "device_id 4660"))  # 0x1234: in no table
    (gpu,) = probe_amd(root, tables.amd, NO_PROC).gpus
    profile = probe_amd(root, tables.amd, NO_PROC)
    assert (gpu.gfx, gpu.name) == (None, "AMD GPU (device 0x1234)")
    assert any("gives no gfx_target_version" in note and "--gpu-arch gfxNNNN" in note for note in profile.notes)


def test_a_target_the_tables_do_not_know_is_kept_and_said(tmp_path, tables, no_tools):
    root = make_sysfs(tmp_path / "sys", [MI300X])
    props = root / "class/kfd/kfd/topology/nodes/1/properties"
    props.write_text(props.read_text().replace("gfx_target_version 90402", "gfx_target_version 130000"))
    profile = probe_amd(root, tables.amd, NO_PROC)
    assert profile.gpus[0].gfx == "gfx1300"
    assert any("gfx1300 is not a target envs/rocm.yaml knows" in note for note in profile.notes)
    props.write_text(props.read_text().replace("gfx_target_version 130000", "gfx_target_version 999999"))
    profile = probe_amd(root, tables.amd, NO_PROC)
    assert profile.gpus[0].gfx is None
    assert any("gfx_target_version 999999 names no gfx target" in note for note in profile.notes)


def test_a_fifo_or_a_huge_file_in_place_of_properties_is_said_and_the_other_nodes_read(tmp_path, tables, no_tools):
    root = make_sysfs(tmp_path / "sys", [MI300X, MI210, MI210])
    nodes = root / "class/kfd/kfd/topology/nodes"
    (nodes / "2" / "properties").unlink()
    os.mkfifo(nodes / "2" / "properties")  # read without a writer would wait forever
    (nodes / "3" / "properties").write_bytes(b"simd_count 4\n" * 20000)
    started = time.monotonic()
    profile = probe_amd(root, tables.amd, NO_PROC)
    assert time.monotonic() - started < 5
    assert [gpu.gfx for gpu in profile.gpus] == ["gfx942"]
    notes = "\n".join(profile.notes)
    assert "nodes/2/properties: not a regular file: skipped" in notes
    assert "nodes/3/properties: over 64 KiB, not a KFD properties file: skipped" in notes


def test_properties_lines_that_are_not_a_name_and_a_number_are_ignored():
    assert parse_properties("simd_count 4\ngarbage\nname vega20\n\ngfx_target_version 90006\n") == {
        "simd_count": 4, "gfx_target_version": 90006}


# --- amd-smi and rocm-smi ---------------------------------------------------------------------------------------

def test_amd_smi_new_form_after_warning_lines_and_old_form_are_both_read():
    (new,) = parse_amd_smi((AMD_DATA / "amdsmi-static-rx7800xt-ajean-39-reduced.json").read_text())
    assert new == (0, "AMD Radeon RX 7800 XT", 0x747E, "gfx1101")
    (old,) = parse_amd_smi((AMD_DATA / "amdsmi-static-clock-mi355-rocprofiler-compute-836-reduced.json").read_text())
    assert old == (0, None, None, None)  # a bare list; asked for clocks only, so nothing of the asic
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_amd_smi((AMD_DATA / "amdsmi-static-rx7800xt-ajean-39-partial.txt").read_text())


def test_rocm_smi_forms_and_the_decimal_stepping_of_older_releases():
    (mi250x,) = parse_rocm_smi((AMD_DATA / "rocmsmi-productname-mi250x-rocm_smi_lib-159.json").read_text())
    assert mi250x == (0, "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", 0x7408, "gfx90a")  # "gfx9010"
    (rx,) = parse_rocm_smi((AMD_DATA / "rocmsmi-productname-use-mem-rx7900xt-marimo-9237.json").read_text())
    assert rx == (0, "Radeon RX 7900 XT", 0x744C, "gfx1100")
    assert [smi_gfx(v) for v in ("gfx942", "gfx9010", "gfx9012", "N/A", "gfx9016", None)] == [
        "gfx942", "gfx90a", "gfx90c", None, None, None]


def test_rocm_smi_gives_the_target_an_older_kernel_does_not(tmp_path, tables, tool):
    tool("rocm-smi", f"cat {AMD_DATA / 'rocmsmi-productname-mi250x-rocm_smi_lib-159.json'}")
    root = make_sysfs(tmp_path / "sys", [MI25])
    props = root / "class/kfd/kfd/topology/nodes/1/properties"
    props.write_text(props.read_text().replace("device_id 26720", "device_id 4660"))  # unknown to rocm.yaml
    (gpu,) = probe_amd(root, tables.amd, NO_PROC).gpus
    assert (gpu.gfx, gpu.name, gpu.source) == ("gfx90a", "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2",
                                               f"{KFD} + rocm-smi")


def test_a_disagreement_is_said_and_the_kfd_stands(tmp_path, tables, tool):
    tool("amd-smi", f"cat {AMD_DATA / 'amdsmi-static-rx7800xt-ajean-39-reduced.json'}")
    profile = probe_amd(make_sysfs(tmp_path / "sys", [MI300X]), tables.amd, NO_PROC)
    assert profile.gpus[0].gfx == "gfx942"
    assert "AMD GPU 0, AMD Instinct MI300X (gfx942): amd-smi says gfx1101; the KFD's gfx942 is taken" in profile.notes


@pytest.mark.parametrize("body, said", [
    (f"cat {AMD_DATA / 'amdsmi-static-rx7800xt-ajean-39-partial.txt'}", "amd-smi: output not understood: not valid "
                                                                        "JSON"),
    ("echo 'Segmentation fault' >&2; exit 139", "amd-smi: exited with status 139: Segmentation fault"),
    ("exec sleep 30", "amd-smi: timed out after 0.5 s"),
])
def test_amd_smi_that_hangs_fails_or_prints_garbage_is_said_and_detection_goes_on(tmp_path, tables, tool, body,
                                                                                   said):
    tool("amd-smi", body)
    started = time.monotonic()
    profile = probe_amd(make_sysfs(tmp_path / "sys", [MI210]), tables.amd, NO_PROC, timeout=0.5)
    assert time.monotonic() - started < 5
    assert [gpu.gfx for gpu in profile.gpus] == ["gfx90a"]
    assert any(note.startswith(said) for note in profile.notes), profile.notes


# --- the whole machine ------------------------------------------------------------------------------------------

def test_a_machine_with_nvidia_and_amd_gpus_is_described_as_both_and_reads_back(tmp_path, tables, no_tools):
    root = make_sysfs(tmp_path / "sys", [MI300X, NAVI23])
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=FakeNvml(gpus=(A100,)), proc_root=NO_PROC,
                             smi_command="no-nvidia-smi", amd_table=tables.amd, sys_root=root)
    assert [(g.vendor, g.index, g.arch) for g in profile.gpus] == [
        ("nvidia", 0, "sm_80"), ("amd", 0, "gfx942"), ("amd", 1, "gfx1032")]
    assert str(profile.cuda_driver) == "12.2" and str(profile.amdgpu) == "6.12.12"
    text = profile_text(profile)
    assert "GPUs (nvml):\n  GPU 0: NVIDIA A100-SXM4-40GB, compute capability 8.0 (sm_80), 40960 MiB" in text
    assert "AMD GPU driver (amdgpu): 6.12.12 (/sys/module/amdgpu/version)" in text
    assert "AMD GPUs (KFD topology):\n  AMD GPU 0: AMD Instinct MI300X, gfx942\n  AMD GPU 1: AMD Radeon RX 6650 XT" in text
    saved = tmp_path / "mixed.json"
    saved.write_text(json.dumps(profile.to_dict()))
    again = read_profile(saved)
    assert [(g.vendor, g.name, g.arch) for g in again.gpus] == [(g.vendor, g.name, g.arch) for g in profile.gpus]
    assert again.amdgpu == profile.amdgpu


def test_the_amd_probe_has_a_time_limit_whatever_sysfs_does(tmp_path, tables, no_tools, monkeypatch):
    import envkit.detect.amd as amd

    monkeypatch.setattr(amd, "_gpu_nodes", lambda *args: time.sleep(30))  # a hung filesystem
    started = time.monotonic()
    profile = detect_machine(tables.cuda, tables.gpu_names, nvml=FakeNvml(gpus=()), proc_root=NO_PROC,
                             smi_command="no-nvidia-smi", amd_table=tables.amd, sys_root=tmp_path, timeout=0.5)
    assert time.monotonic() - started < 5
    assert "AMD: timed out after 1 s" in profile.notes


# --- the commands -------------------------------------------------------------------------------------------------

def envkit(*args: str, sysfs: Path, path: str) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    env.update(ENVKIT_TEST_SYSFS=str(sysfs), PATH=path)
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_detect_and_list_on_an_amd_machine(tmp_path, no_tools):
    sysfs = make_sysfs(tmp_path / "sys", [MI300X] * 4, cpus=(CPU, CPU))
    done = envkit("detect", "--json", sysfs=sysfs, path=str(no_tools))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["amdgpu"] == "6.12.12" and data["sources"]["amd_gpus"] == KFD
    assert [(g["vendor"], g["gfx"], g["index"]) for g in data["gpus"]] == [("amd", "gfx942", i) for i in range(4)]
    assert all("compute_capability" not in g for g in data["gpus"])
    text = envkit("detect", sysfs=sysfs, path=str(no_tools)).stdout
    assert "No NVIDIA driver found.\n" in text and "  AMD GPU 3: AMD Instinct MI300X, gfx942" in text
    listed = envkit("list", "torch", sysfs=sysfs, path=str(no_tools))
    assert listed.returncode == 0 and "* torch-2.9-rocm6.4" in listed.stdout, listed.stdout + listed.stderr


def test_gpu_arch_states_a_target_detection_could_not_tell(tmp_path, no_tools):
    root = make_sysfs(tmp_path / "sys", [MI25])
    props = root / "class/kfd/kfd/topology/nodes/1/properties"
    props.write_text(props.read_text().replace("device_id 26720", "device_id 4660"))  # unknown: no target
    unknown = envkit("list", "torch", "--all", sysfs=root, path=str(no_tools)).stdout
    assert "gfx target unknown; pass --gpu-arch gfxNNNN" in unknown
    stated = envkit("list", "torch", "--gpu-arch", "gfx90a", sysfs=root, path=str(no_tools))
    assert stated.returncode == 0 and "* torch-2.9-rocm6.4" in stated.stdout, stated.stdout + stated.stderr
    bad = envkit("list", "torch", "--gpu-arch", "gfx9x9", sysfs=root, path=str(no_tools))
    assert bad.returncode == 2 and "--gpu-arch: 'gfx9x9' is not an AMD GPU target like 'gfx90a'" in bad.stderr
    assert "Traceback" not in bad.stderr
