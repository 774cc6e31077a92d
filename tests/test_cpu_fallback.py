"""Never a silent CPU build on a GPU machine: `list` and the plan say so first, and `create` without a terminal stops.

The K80 (sm_37) on a 470 driver (CUDA 11.4) has no JAX GPU build: the plugins need CUDA 12 and sm_52 or newer.
"""

from __future__ import annotations

import json
from pathlib import Path

from envkit.pick.cpu_fallback import gpu_unused
from envkit.pick.resolve import resolve

from tests.test_cli import PROFILES, envkit

K80 = str(PROFILES / "k80x2-cuda114.yaml")


def test_the_reason_names_the_machine_and_the_closest_gpu_build(catalog, load_profile):
    resolution = resolve(catalog.manifests["jax"], load_profile("k80x2-cuda114"), catalog.tables)
    assert not resolution.selected.build.is_gpu
    reason = gpu_unused(resolution, load_profile("k80x2-cuda114"))
    assert reason is not None
    assert "CUDA 11.4" in reason and "sm_37" in reason
    # The closest GPU build is the CUDA 12 plugin (oldest CUDA), and the reason says what it needs.
    assert "-cu12," in reason and "needs driver CUDA >= 12.0" in reason


def test_no_warning_when_the_gpus_are_used_or_absent(catalog, load_profile):
    on_gpus = resolve(catalog.manifests["jax"], load_profile("h100-cuda128"), catalog.tables)
    assert on_gpus.selected.build.is_gpu and gpu_unused(on_gpus, load_profile("h100-cuda128")) is None
    no_gpu = resolve(catalog.manifests["jax"], load_profile("no-gpu"), catalog.tables)
    assert gpu_unused(no_gpu, load_profile("no-gpu")) is None


def test_gpus_hidden_by_cuda_visible_devices_are_not_a_machine_without_gpus(catalog, load_profile):
    # On an H100 whose GPU CUDA_VISIBLE_DEVICES= hides, the pick is a CPU build: said, not silent.
    from envkit.slurm.job_context import apply_job_context, job_context

    hidden = apply_job_context(load_profile("h100-cuda128"), job_context({"CUDA_VISIBLE_DEVICES": ""}))
    assert hidden.gpus == () and len(hidden.hidden_gpus) == 1
    resolution = resolve(catalog.manifests["torch"], hidden, catalog.tables)
    assert not resolution.selected.build.is_gpu
    assert gpu_unused(resolution, hidden) == (
        "CUDA_VISIBLE_DEVICES hides the machine's GPU, so it is judged as having none and the pick is a CPU build: "
        "unset the variable or set it to the GPUs to use (in a Slurm job: ask for GPUs) to have them judged")


def test_create_where_cuda_visible_devices_hides_the_gpus_says_so_and_stops_without_a_terminal(tmp_path: Path,
                                                                                                   this_machine):
    a100 = {"name": "NVIDIA A100-SXM4-80GB", "capability": [8, 0], "memory": 85899345920}
    env = {**this_machine([a100]), "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    dry = envkit("create", "torch", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Warning:     CUDA_VISIBLE_DEVICES hides the machine's GPU, so it is judged as")
    plan = json.loads(envkit("create", "torch", "--dry-run", "--json", env=env).stdout)
    assert plan["machine"]["gpus"] == [] and [g["name"] for g in plan["machine"]["hidden_gpus"]] == [a100["name"]]
    listing = json.loads(envkit("list", "torch", "--json", env=env).stdout)
    for machine in (listing["machine"], *listing["machines"]):  # the one judged, and the fleet's form of it
        assert machine["gpus"] == [] and [g["name"] for g in machine["hidden_gpus"]] == [a100["name"]]
    refused = envkit("create", "torch", env=env)
    assert refused.returncode == 2 and "--cpu" in refused.stderr, refused.stderr
    assert not (tmp_path / "data").exists()  # nothing made


def test_list_says_it_first_in_text_and_json():
    text = envkit("list", "jax", "--machine", K80)
    assert text.returncode == 0, text.stderr
    block = text.stdout.split("\n\n")[1].splitlines()
    assert block[1].startswith("  Warning: no jax GPU build in the manifests runs on")
    # The suggested command judges the same machine when pasted.
    assert f"`envkit list jax --all --machine {K80}` says why." in text.stdout
    data = json.loads(envkit("list", "jax", "--json", "--machine", K80).stdout)
    [jax] = data["manifests"]
    assert jax["selected"].endswith("-cpu")
    assert "needs driver CUDA >= 12.0" in jax["gpu_unused"]["reason"]
    h100 = json.loads(envkit("list", "jax", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml")).stdout)
    assert h100["manifests"][0]["gpu_unused"] is None


def test_create_without_a_terminal_needs_cpu_or_build(tmp_path: Path):
    home = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_CONFIG_HOME": str(tmp_path / "config")}
    dry = envkit("create", "jax", "--machine", K80, "--dry-run", env=home)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Warning:     no jax GPU build in the manifests runs on")
    plan = json.loads(envkit("create", "jax", "--machine", K80, "--dry-run", "--json", env=home).stdout)
    assert "sm_37" in plan["gpu_unused"]["reason"]
    refused = envkit("create", "jax", "--machine", K80, env=home)
    assert refused.returncode == 2
    assert refused.stderr.startswith("envkit: error: not creating a CPU build on a machine with GPUs")
    assert f"--machine {K80}" in refused.stderr and "--cpu" in refused.stderr
    assert not (tmp_path / "data" / "envkit" / "envs").exists() or not any((tmp_path / "data" / "envkit" / "envs").iterdir())
    # Asking for the CPU build by id is consent: the plan carries no warning.
    by_id = json.loads(envkit("create", "jax", "--machine", K80, "--dry-run", "--json", "--build",
                              plan["build"], env=home).stdout)
    assert by_id["gpu_unused"] is None


def test_on_a_gpu_newer_than_every_build_the_closest_is_the_newest(catalog, load_profile):
    """MXNet (retired) on an H100: the driver runs every build, none has sm_90 code; the closest is the newest
    variant (cu112, sm_50 to sm_86), not the oldest."""
    profile = load_profile("h100-cuda128")
    resolution = resolve(catalog.manifests["mxnet"], profile, catalog.tables)
    reason = gpu_unused(resolution, profile)
    assert reason is not None and "the closest, mxnet-1.9.1-cu112," in reason
    assert "no kernels for sm_90" in reason


def test_a_fleet_that_gets_one_cpu_environment_is_warned_as_one_machine_is(tmp_path: Path):
    twin = tmp_path / "k80-twin.yaml"
    twin.write_text(Path(K80).read_text().replace("name: kepler", "name: kepler-twin"))
    fleet = ("--machine", K80, "--machine", str(twin))
    text = envkit("list", "jax", *fleet)
    assert text.returncode == 0, text.stderr
    assert "  Warning: no jax GPU build in the manifests runs on a driver for CUDA 11.4" in text.stdout
    [jax] = json.loads(envkit("list", "jax", "--json", *fleet).stdout)["manifests"]
    assert jax["selected"].endswith("-cpu") and "needs driver CUDA >= 12.0" in jax["gpu_unused"]["reason"]
