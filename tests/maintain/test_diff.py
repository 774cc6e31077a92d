"""`manifests diff` on two directories that differ by a whole manifest: removed is not 'nothing fits'."""

from __future__ import annotations

import shutil
from pathlib import Path

from envkit.catalog import load_catalog
from envkit.machines.fleet import Fleet, load_profiles
from envkit.maintain.diff import diff_target, render_diff

PROFILES = Path(__file__).resolve().parents[1] / "profiles"


def test_a_manifest_the_edit_removes_or_adds_is_said_so_not_nothing_fits(envs_copy, tmp_path):
    fewer = tmp_path / "fewer"
    shutil.copytree(envs_copy, fewer)
    (fewer / "mxnet.yaml").unlink()
    [machine] = load_profiles([PROFILES / "gtx1080ti-cuda101.yaml"], tmp_path / "cache")
    fleet = Fleet((machine,))

    removed = diff_target(machine.name, "machine", fleet, load_catalog(envs_copy), load_catalog(fewer))
    mxnet = next(m for m in removed.manifests if m.manifest == "mxnet")
    assert (mxnet.in_old, mxnet.in_new, mxnet.after, mxnet.changed) == (True, False, None, True)
    assert mxnet.to_dict()["in_new"] is False
    lines: list[str] = []
    render_diff([removed], lines.append)
    assert f"  mxnet: {mxnet.before} -> no mxnet.yaml" in lines, lines

    added = diff_target(machine.name, "machine", fleet, load_catalog(fewer), load_catalog(envs_copy))
    lines = []
    render_diff([added], lines.append)
    assert f"  mxnet: no mxnet.yaml -> {mxnet.before}" in lines, lines
