"""An environment made for other machines is checked against them: its record keeps the target, `verify NAME` on
this GPU-less machine never FAILs for GPUs it was never meant to see, and `verify NAME --machine F` updates the
record that `envkit envs` shows. Real create (local index, real uv), the real probe on the stand-in torch."""

from __future__ import annotations

import json
import shlex
import shutil

from conftest import CU126, PROFILES, PYTHON, Home
from support.pypi_index import IndexServer

ADA = str(PROFILES / "rtx4090-cuda126.yaml")


def test_verify_judges_against_the_recorded_target_and_updates_the_record(home: Home, torch_index: IndexServer):
    done = home.envkit("create", *CU126, "--yes")
    assert done.returncode == 0, done.stderr
    record = home.record("torch-cu126")
    assert record["target"]["machines"] == ["ada"]
    assert record["target"]["options"] == ["--machine", ADA]
    assert record["target"]["profiles"][0]["profile"]["cuda_driver"] == "12.6"

    # On this machine (no GPU): judged against ada, not here. Not a FAIL; the GPU part is said to need ada.
    checked = home.envkit("verify", "torch-cu126")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "FAIL" not in checked.stdout
    assert "can only be checked on the machines it is for (ada)" in checked.stdout
    assert home.record("torch-cu126")["target"] == record["target"]  # the target is kept
    data = json.loads(home.envkit("verify", "torch-cu126", "--json").stdout)
    assert data["machines"] == ["ada"] and data["probed_on_machine"] is False
    assert home.record("torch-cu126")["verify"]["on_target"] is False  # no real result yet: this one is kept

    # A real result (as a check on ada itself would record) is never replaced by one judged from profiles.
    path = home.data / "records" / "torch-cu126.json"
    real = json.loads(path.read_text())
    real["verify"] = {**real["verify"], "on_target": True, "time": "2026-01-01T00:00:00+00:00"}
    path.write_text(json.dumps(real))
    assert home.envkit("verify", "torch-cu126").returncode == 0
    assert home.record("torch-cu126")["verify"]["time"] == "2026-01-01T00:00:00+00:00"

    # For another machine: lab-07's driver (CUDA 11.2) cannot run a CUDA 12.6 build. A real FAIL, recorded.
    lab = str(PROFILES / "gtx1080ti-cuda112.yaml")
    failed = home.envkit("verify", "torch-cu126", "--machine", lab)
    assert failed.returncode == 1, failed.stdout
    after = home.record("torch-cu126")
    assert after["verify"]["ok"] is False and after["verify"]["machines"] == ["lab-07"]
    assert after["verify"]["on_target"] is False
    assert after["target"]["options"] == ["--machine", lab]
    envs = home.envkit("envs")
    assert "FAIL*" in envs.stdout and "judged from the profiles" in envs.stdout
    listed = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert listed[0]["verify"]["machines"] == ["lab-07"]
    # Judged against lab-07 again (the target now): the build it advises is created for lab-07 when pasted here.
    again = home.envkit("verify", "torch-cu126")
    [advice] = [line for line in again.stdout.splitlines() if line.startswith("To get a build that fits: ")]
    argv = shlex.split(advice.split(": ", 1)[1])
    assert argv[argv.index("--machine") + 1] == lab
    pasted = home.envkit(*argv[1:], "--name", "torch-lab", "--dry-run")
    assert pasted.returncode == 0, (argv, pasted.stderr)


def test_a_gone_environment_is_made_again_for_the_machines_it_was_for(home: Home, torch_index: IndexServer):
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    shutil.rmtree(home.prefix("torch-cu126"))
    gone = home.envkit("run", "torch-cu126", "--", "true")
    assert gone.returncode == 1 and "is gone from" in gone.stderr
    [remake] = [part for part in gone.stderr.split("`") if part.startswith("envkit create ")]
    argv = shlex.split(remake)
    assert argv[argv.index("--machine") + 1] == ADA  # here, without GPUs, the build would not be taken
    pasted = home.envkit(*argv[1:], "--dry-run", "--json")
    assert pasted.returncode == 0, (argv, pasted.stderr)
    assert json.loads(pasted.stdout)["build"] == "torch-2.13-cu126"


def test_an_old_record_without_target_is_for_the_machine_it_was_made_on(home: Home, torch_index: IndexServer):
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    path = home.data / "records" / "torch-cu126.json"
    old = json.loads(path.read_text())
    del old["target"]
    path.write_text(json.dumps(old))
    listed = home.envkit("envs", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["environments"][0]["target"] is None
    # Judged against this machine, which has no GPU, as before targets were recorded: no crash, a clear verdict.
    checked = home.envkit("verify", "torch-cu126")
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr
    assert "can only be checked on the machines it is for" not in checked.stdout


def test_create_for_a_fleet_without_a_common_gpu_build_prints_commands_that_work(home: Home, tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "deepnine.yaml").write_text((PROFILES / "rtx2070-cuda124.yaml").read_text())
    (lab / "deepten.yaml").write_text('name: deepten\ndriver_version: "460.32.03"\ncuda_driver: "11.2"\n'
                                      'gpus:\n  - {name: NVIDIA GeForce GTX 1080, compute_capability: "6.1"}\n')
    refused = home.envkit("create", "jax", "--machine", str(lab), "--python", PYTHON, "--yes")
    assert refused.returncode == 2, refused.stdout
    assert "no GPU build of jax fits all 2 machines" in refused.stderr
    assert not (home.data / "envs").exists()
    commands = [line.strip() for line in refused.stderr.splitlines() if line.strip().startswith("envkit create")]
    assert len(commands) == 2
    names = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[:3] == ["envkit", "create", "jax"]
        assert argv[argv.index("--python") + 1] == PYTHON  # what chose the builds travels with them
        ran = home.envkit(*argv[1:], "--dry-run", "--json")
        assert ran.returncode == 0, (command, ran.stderr)
        plan = json.loads(ran.stdout)
        names.append(plan["target"]["machines"])
        assert plan["build"] == argv[argv.index("--build") + 1]
    assert names == [["deepnine"], ["deepten"]]


def test_a_job_refused_on_a_partition_suggests_a_create_from_the_same_manifests(home: Home, torch_index: IndexServer,
                                                                                 tmp_path):
    from envkit.catalog import default_manifests_dir

    manifests = tmp_path / "lab manifests"  # an admin's directory, whose torch manifest is named lab-torch
    shutil.copytree(default_manifests_dir(), manifests, ignore=shutil.ignore_patterns("__*", "*.md"))
    (manifests / "lab-torch.yaml").write_text((manifests / "torch.yaml").read_text().replace(
        "\nname: torch\n", "\nname: lab-torch\n", 1))
    (manifests / "torch.yaml").unlink()
    made = home.envkit("create", "lab-torch", "--build", "lab-torch-2.13-cu126", "--python", PYTHON, "--machine", ADA,
                       "--manifests", str(manifests), "--yes", "--no-verify")
    assert made.returncode == 0, made.stderr
    site = tmp_path / "site.yaml"
    site.write_text(f"version: 1\npartitions:\n  old:\n    nodes:\n"
                    f"      - profile_file: {PROFILES / 'gtx1080ti-cuda112.yaml'}\n")
    refused = home.envkit("job", "lab-torch-cu126", "-p", "old", "--manifests", str(manifests), "--", "true",
                          env={"ENVKIT_SITE": str(site)})
    assert refused.returncode == 1 and "would not run on partition old" in refused.stderr, refused.stderr
    argv = shlex.split(refused.stderr.split("Create one for it: ", 1)[1])
    pasted = home.envkit(*argv[1:], "--dry-run", env={"ENVKIT_SITE": str(site)})
    assert pasted.returncode == 0, (argv, pasted.stderr)


def test_an_environment_made_for_a_partition_says_how_its_nodes_are_reached(home: Home, torch_index: IndexServer,
                                                                            tmp_path):
    # From a login node, `envkit run` reaches none of the partition's GPUs: the next steps name verify and job too.
    site = tmp_path / "site.yaml"
    site.write_text(f"version: 1\npartitions:\n  gpu-ada:\n    nodes:\n      - profile_file: {ADA}\n")
    made = home.envkit("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--partition",
                       "gpu-ada", "--yes", "--no-verify", env={"ENVKIT_SITE": str(site)})
    assert made.returncode == 0, made.stderr
    [verify] = [line for line in made.stdout.splitlines() if line.startswith("  Check a node: ")]
    [job] = [line for line in made.stdout.splitlines() if line.startswith("  Or as a job:  ")]
    assert shlex.split(verify.split(": ", 1)[1]) == ["envkit", "verify", "torch-cu126", "--partition", "gpu-ada"]
    argv = shlex.split(job.split(":  ", 1)[1])
    assert argv == ["envkit", "job", "torch-cu126", "-p", "gpu-ada", "--", "python", "your_script.py"]
    pasted = home.envkit(*argv[1:3], "--print", *argv[3:], env={"ENVKIT_SITE": str(site)})  # the script, here
    assert pasted.returncode == 0 and "#SBATCH --partition=gpu-ada" in pasted.stdout + pasted.stderr, pasted.stderr
    plain = home.envkit("create", *CU126, "--name", "torch-here", "--yes", "--no-verify")
    assert plain.returncode == 0 and "Check a node" not in plain.stdout and "as a job" not in plain.stdout
