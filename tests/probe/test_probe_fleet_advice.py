"""The build a failed check advises for an environment made for a fleet (create plans it on one machine, the one
with the lowest driver CUDA): picked for every machine, or one per group, each command working when pasted. It used
to be picked for the planning machine alone while the command named the whole fleet: `envkit create torch --build
torch-2.3-cu118 --machine fleet2` for a K80 and a B200 machine, which create refuses ("does not fit every machine")."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from probe_helpers import PROFILES, base_environ, envkit

from envkit.catalog import default_manifests_dir, load_tables
from envkit.catalog.load import load_manifest
from envkit.commands.options import TargetOptions
from envkit.commands.targets import group_command
from envkit.machines.fleet import fleet_of, load_profiles
from envkit.probe.builds import FleetTarget, next_step
from envkit.probe.check import check_against
from envkit.probe.render import report_json, report_text
from envkit.probe.runner import ProbeOptions


@pytest.fixture(scope="module")
def tables():
    return load_tables(default_manifests_dir())


def manifest(name, tables):
    return load_manifest(default_manifests_dir() / f"{name}.yaml", tables)


def fleet_dir(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def fleet_target(directory: Path, tmp_path: Path):
    target = TargetOptions(machine=[directory])
    fleet = fleet_of(load_profiles([directory], tmp_path / "cache"))
    return fleet, FleetTarget(fleet, lambda name, group: group_command(fleet, target, name, group))


def pasted(command: str) -> dict:
    """The command run as a user pastes it, as a dry run: accepted, with the plan it prints."""
    argv = shlex.split(command)
    assert argv[:2] == ["envkit", "create"], command
    done = envkit(*argv[1:], "--dry-run", "--json")
    assert done.returncode == 0, (command, done.stderr)
    return json.loads(done.stdout)


def test_a_failed_check_for_a_fleet_advises_a_build_for_every_machine_that_works_when_pasted(fake_env, tmp_path,
                                                                                            tables):
    # (Until issue 30 a K80 and a B200 shared torch 1.5 through its compute_37 PTX; its cuDNN 7.6 serves nothing
    # after Turing, so they split now. Here: a V100 + A100 node on R535 (CUDA 12.2) alone gets 2.14 cu126, which has
    # no sm_120; with an RTX 5090 on R570, both get 2.10 cu128 (sm_70 to sm_120).)
    fleet2 = fleet_dir(tmp_path / "fleet2", {name: (PROFILES / name).read_text()
                                             for name in ("v100-a100-cuda122.yaml", "rtx5090-cuda128.yaml")})
    fleet, for_fleet = fleet_target(fleet2, tmp_path)
    planned = fleet.planning_profile()
    assert planned.name == "mixed"  # create checks the environment against the V100 + A100 machine
    torch = manifest("torch", tables)
    cpu = next(build for build in torch.builds if build.id == "torch-2.13-cpu")  # what was made: it fits both
    env = fake_env({"torch": {"version": "2.13.0+cpu", "cuda": None, "import_error": "missing-library"}})
    [report] = check_against(env.python, ProbeOptions(framework="torch"), [(planned, False)], base_environ(),
                             manifest_for=lambda _: torch, tables=tables, expected=cpu,
                             machine_args=[("--machine", str(fleet2))], fleet=for_fleet)
    assert not report.ok
    step = report.next_step
    assert shlex.split(step.command)[-2:] == ["--machine", str(fleet2)] and step.others == ()
    assert set(step.machines) == {"mixed", "blackwell-desk"}
    plan = pasted(step.command)
    assert plan["build"] == step.build.id and sorted(plan["target"]["machines"]) == ["blackwell-desk", "mixed"]
    # Without the fleet, the build picked for the V100 + A100 machine alone does not fit the RTX 5090 one.
    alone = next_step(torch, planned, tables, ("--machine", str(fleet2)))
    assert alone.build.id != step.build.id
    refused = envkit(*shlex.split(alone.command)[1:], "--dry-run")
    assert refused.returncode == 1 and "does not fit every machine: blackwell-desk" in refused.stderr
    # The report says it, in text and JSON, with the machines it is for.
    assert f"fits every machine (blackwell-desk, mixed): `{step.command}`" in report_text(report)
    assert report_json(report)["next"]["commands"] == [step.command]


def test_a_fleet_no_build_fits_gets_one_command_per_group_the_machine_judged_first(tmp_path, tables):
    lab = fleet_dir(tmp_path / "lab", {
        "deepnine.yaml": (PROFILES / "rtx2070-cuda124.yaml").read_text(),
        "deepten.yaml": 'name: deepten\ndriver_version: "460.32.03"\ncuda_driver: "11.2"\n'
                        'gpus:\n  - {name: NVIDIA GeForce GTX 1080, compute_capability: "6.1"}\n',
    })
    fleet, for_fleet = fleet_target(lab, tmp_path)
    jax = manifest("jax", tables)
    for judged in ("deepten", "deepnine"):
        profile = next(c.profile for c in fleet.configs() if c.names == (judged,))
        step = next_step(jax, profile, tables, ("--machine", str(lab)), for_fleet)
        commands = [step.command, *step.others]
        assert len(commands) == 2 and step.machines == (judged,)
        plans = [pasted(command) for command in commands]
        assert [p["target"]["machines"] for p in plans][0] == [judged]
        assert sorted(name for p in plans for name in p["target"]["machines"]) == ["deepnine", "deepten"]
        assert plans[0]["build"] == step.build.id
        assert len({p["name"] for p in plans}) == 2  # both can be made: their names differ
