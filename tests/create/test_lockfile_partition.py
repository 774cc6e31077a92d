"""`envkit lock --partition` and `create --from-lock --partition`: a lock for every node of a partition of the site
file, solved with the lowest __cuda and __cuda_arch among them, and refused on a partition it does not fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import LEGACY_BUILD, Home, conda_mirrors

from envkit.lockfile import model
from envkit.lockfile.format import read_lock

from test_create_conda import leftovers, no_conda

SITE = """\
version: 1
partitions:
  course:
    nodes:
      - node: course-01
        profile: {driver_version: "418.87.00", cuda_driver: "10.1",
                  gpus: [{name: GeForce GTX 1080 Ti, compute_capability: "6.1"}]}
      - node: course-02
        count: 3
        profile: {driver_version: "440.33.01", cuda_driver: "10.2",
                  gpus: [{name: Tesla P100-PCIE-16GB, compute_capability: "6.0"}]}
  old:
    nodes:
      - node: old-01
        profile: {driver_version: "410.48", cuda_driver: "10.0",
                  gpus: [{name: GeForce GTX 1080 Ti, compute_capability: "6.1"}]}
      - node: course-01
        profile: {driver_version: "418.87.00", cuda_driver: "10.1",
                  gpus: [{name: GeForce GTX 1080 Ti, compute_capability: "6.1"}]}
"""


@pytest.fixture
def site_home(home: Home, legacy_channel: Path) -> Home:
    home.write_config(conda_mirrors(legacy_channel))
    site = home.root / "site.yaml"
    site.write_text(SITE)
    home.env["ENVKIT_SITE"] = str(site)
    return home


def test_a_partition_lock_fits_every_node_and_installs_there(site_home: Home, conda_manifests: Path):
    home = site_home
    lock = home.root / "course.yml"
    done = home.envkit("lock", *LEGACY_BUILD, "--partition", "course", "--manifests", str(conda_manifests),
                       "-o", str(lock))
    assert done.returncode == 0, done.stderr
    facts = read_lock(lock).custom
    assert facts[model.TARGET] == "partition course"
    assert facts[model.CUDA_DRIVER] == "10.1" and facts[model.CUDA_ARCH] == "6.0"  # the lowest of each
    made = home.envkit("create", "--from-lock", str(lock), "--name", "course-tf", "--partition", "course",
                       "--manifests", str(conda_manifests), "--yes", env=no_conda(home))
    assert made.returncode == 0, made.stderr + made.stdout
    record = home.record("course-tf")
    assert sorted(record["target"]["machines"]) == ["course-01", "course-02"]


def test_a_lock_is_refused_on_a_partition_with_a_node_it_does_not_fit(site_home: Home, conda_manifests: Path):
    home = site_home
    lock = home.root / "course.yml"
    assert home.envkit("lock", *LEGACY_BUILD, "--partition", "course", "--manifests", str(conda_manifests),
                       "-o", str(lock)).returncode == 0
    done = home.envkit("create", "--from-lock", str(lock), "--name", "old-tf", "--partition", "old",
                       "--manifests", str(conda_manifests), "--yes", env=no_conda(home))
    assert done.returncode == 1, done.stderr
    assert "does not fit partition old" in done.stderr
    # Each reason after the node it is about, never about "this machine" (the login node envkit runs on).
    assert "old-01: tensorflow-gpu 2.4.1 needs __cuda >=10.1, but it has __cuda=10.0" in done.stderr
    assert "old-01: needs driver CUDA >= 10.1, the driver has 10.0" in done.stderr and "this machine" not in done.stderr
    assert "course-01:" not in done.stderr  # the node it fits is not a reason
    assert leftovers(home) == []
