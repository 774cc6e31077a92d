"""`create` and `lock` resolve each manifest once for each configuration of their target: the plan takes the
resolution the target's pick made (a fleet's) instead of making it again, and plans exactly what it planned before.
The shipped manifests, real profiles, a real prepare (tools found on this machine); resolve is only counted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import envkit.create.prepare as prepare_module
import envkit.pick.fleet_resolve as fleet_resolve_module
from envkit.catalog import default_manifests_dir, load_tables
from envkit.catalog.load import load_manifest
from envkit.commands.options import TargetOptions
from envkit.commands.targets import build_for_target
from envkit.create.prepare import CreateRequest, pick_candidate, prepare
from envkit.lockfile.make import LockRequest
from envkit.machines.fleet import fleet_of, load_profiles, profile_key
from envkit.pick.resolve import Request, resolve
from envkit.state.config import load_config
from envkit.state.userdirs import user_dirs

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


@pytest.fixture
def counted(monkeypatch):
    """Every resolve that create's planning makes, by the profile's facts."""
    calls: list = []

    def counting(manifest, profile, tables, request=Request()):
        calls.append(profile_key(profile))
        return resolve(manifest, profile, tables, request)

    monkeypatch.setattr(fleet_resolve_module, "resolve", counting)
    monkeypatch.setattr(prepare_module, "resolve", counting)
    return calls


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "XDG_"))}
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                   XDG_CONFIG_HOME=str(tmp_path / "config"))
    return environ


def plan_for(machines: list[Path], home: dict[str, str], build: str | None = None):
    tables = load_tables(default_manifests_dir())
    manifest = load_manifest(default_manifests_dir() / "torch.yaml", tables)
    dirs = user_dirs(home)
    target = TargetOptions(machine=machines)
    fleet = fleet_of(load_profiles(machines, dirs.cache))
    chosen = build_for_target(manifest, fleet, tables, Request(), build, target, None)
    request = CreateRequest(build_id=chosen.build_id, backend="venv", prefix=Path(home["HOME"]) / "env")
    prepared = prepare(request, manifest, tables, chosen.profile, False, Request(), load_config(home, dirs), dirs,
                       home, resolution=chosen.resolution)
    again = prepare(request, manifest, tables, chosen.profile, False, Request(), load_config(home, dirs), dirs, home)
    return fleet, chosen, prepared.plan, again.plan


def test_a_fleet_is_resolved_once_per_configuration_and_planned_from_that(counted, home):
    machines = [PROFILES / "rtx4090-cuda126.yaml", PROFILES / "h100-cuda128.yaml"]
    fleet, chosen, plan, fresh = plan_for(machines, home)
    configs = [profile_key(c.profile) for c in fleet.configs()]
    assert len(configs) == 2
    assert chosen.resolution is not None and profile_key(chosen.profile) in configs
    # the pick and the plan together: each configuration once, then only the plan made without the resolution
    assert counted[:3] == configs + [profile_key(chosen.profile)]
    assert len(counted) == 3
    # the plan from the kept resolution is the plan a fresh resolve gives
    assert (plan.build.id, plan.python, plan.gpu_unused) == (fresh.build.id, fresh.python, fresh.gpu_unused)
    assert plan.build.id == chosen.build_id


def test_a_fleet_with_the_build_named_is_resolved_once_per_configuration(counted, home):
    machines = [PROFILES / "rtx4090-cuda126.yaml", PROFILES / "h100-cuda128.yaml"]
    _, chosen, plan, fresh = plan_for(machines, home, build="torch-2.13-cu126")
    assert len(counted) == 3  # two configurations, then the plan made again without the resolution
    assert plan.build.id == fresh.build.id == "torch-2.13-cu126"


def test_one_machine_is_resolved_once_by_the_plan(counted, home):
    _, chosen, plan, _ = plan_for([PROFILES / "rtx4090-cuda126.yaml"], home)
    assert chosen.resolution is None and chosen.build_id is None  # the plan resolves and picks
    assert len(counted) == 2  # once for each of the two plans made here
    assert plan.build.is_gpu


def test_the_pick_takes_a_resolution_given_and_makes_none(counted):
    tables = load_tables(default_manifests_dir())
    manifest = load_manifest(default_manifests_dir() / "torch.yaml", tables)
    profile = load_profiles([PROFILES / "h100-cuda128.yaml"], None)[0].profile
    made = resolve(manifest, profile, tables)  # (not counted: the real function, called here)
    candidate, used = pick_candidate(manifest, profile, tables, Request(), None, False, resolution=made)
    assert counted == [] and used is made and candidate == made.selected
    # lock's pick takes it the same way (envkit.lockfile.make passes LockRequest.resolution on)
    assert LockRequest(manifest, tables, profile, "t", False, Request(), resolution=made).resolution is made
