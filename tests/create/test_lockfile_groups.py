"""`envkit lock` for a fleet that needs one lock per group, walked as a user walks it: every command envkit prints is
pasted as it is, and the environments the group locks make are the ones `envkit create` would make per group."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import PROFILES, Home, conda_mirrors, fake_tensorflow_files
from support.pypi_index import IndexServer
from support.wheels import build_wheel

from test_create_conda import no_conda
from test_lockfile_flow import OLD_01


@pytest.fixture
def fleet_home(home: Home, legacy_channel: Path, pypi_server: IndexServer, tmp_path: Path) -> Home:
    """The stand-in TensorFlow's conda channel and a PyPI with its CPU build's wheel, and three machines: one the
    legacy GPU build fits (course-01), one whose driver is too old for it (old-01), one whose GPU it has no code for
    (ada). The last two are one group, with the CPU build."""
    wheel = build_wheel(tmp_path / "wheels", "tensorflow-cpu", "2.15.0",
                        files=fake_tensorflow_files("2.15.0", None))
    pypi_server.add_index("/pypi/simple", [wheel])
    home.write_config(conda_mirrors(legacy_channel, pypi_server))
    fleet = home.root / "fleet"
    fleet.mkdir()
    (fleet / "course-01.yaml").write_text((PROFILES / "gtx1080ti-cuda101.yaml").read_text())
    (fleet / "old-01.yaml").write_text(OLD_01)
    (fleet / "ada.yaml").write_text((PROFILES / "rtx4090-cuda126.yaml").read_text())
    return home


def printed(text: str, start: str) -> list[list[str]]:
    """The commands in ``text`` whose line starts with ``start`` (after the indent or a "label: "), as argv."""
    lines = [line.split(": ", 1)[1] if line.startswith("Install it with: ") else line.strip()
             for line in text.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(start)]


def test_each_group_lock_installs_as_the_environment_create_makes_for_that_group(fleet_home: Home,
                                                                                 conda_manifests: Path):
    home = fleet_home
    fleet = ["--machine", str(home.root / "fleet"), "--manifests", str(conda_manifests)]
    listed = home.envkit("list", "tensorflow", *fleet)
    assert listed.returncode == 0, listed.stderr
    create_names = {argv[argv.index("--machine") + 1]: argv[argv.index("--name") + 1]
                    for argv in printed(listed.stdout, "envkit create ")}
    # course-01's GPU build; the CPU build for old-01 and ada, which no GPU build fits (one group, not one each)
    assert len(create_names) == 2 and len(set(create_names.values())) == 2
    refused = home.envkit("lock", "tensorflow", *fleet)
    assert refused.returncode == 2 and "one per group" in refused.stderr, refused.stderr
    locks = printed(refused.stderr, "envkit lock ")
    assert sorted(argv[argv.index("--build") + 1] for argv in locks) == ["tensorflow-2.15-cpu",
                                                                         "tensorflow-2.4.1-cu101"]
    for argv in locks:
        done = home.envkit(*argv[1:])
        assert done.returncode == 0, (argv, done.stderr)
        [install] = printed(done.stdout, "envkit create --from-lock ")
        machine = argv[argv.index("--machine") + 1]
        # The name `envkit create` gives this group's environment, and the group's machine: ready to paste.
        assert install[install.index("--name") + 1] == create_names[machine]
        assert install[install.index("--machine") + 1] == machine
        made = home.envkit(*install[1:], "--yes", env=no_conda(home))
        assert made.returncode == 0, (install, made.stderr + made.stdout)
        record = home.record(create_names[machine])
        assert record is not None and record["build"] == argv[argv.index("--build") + 1]


def test_a_lock_refused_on_a_profile_says_how_to_lock_for_it_and_that_works_as_pasted(fleet_home: Home,
                                                                                       conda_manifests: Path):
    home = fleet_home
    manifests = ["--manifests", str(conda_manifests)]
    course = home.envkit("lock", "tensorflow", "--machine", str(home.root / "fleet" / "course-01.yaml"), *manifests)
    assert course.returncode == 0, course.stderr
    old = str(home.root / "fleet" / "old-01.yaml")
    refused = home.envkit("create", "--from-lock", "conda-lock.yml", "--machine", old, *manifests, "--yes",
                          env=no_conda(home))
    assert refused.returncode == 1 and "does not fit profile old-01" in refused.stderr, refused.stderr
    remake = shlex.split(refused.stderr.split("Make a lock for it (`", 1)[1].split("`", 1)[0])
    done = home.envkit(*remake[1:])
    assert done.returncode == 0, (remake, done.stderr)
    # A CPU build for a machine with GPUs: said, about that machine (not the one envkit runs on).
    assert "the lock pins a CPU build on a machine with GPUs" in done.stderr
    assert "needs driver CUDA >= 10.1, the driver has 10.0" in done.stderr and "this machine" not in done.stderr
    assert (home.root / "conda-lock.yml").read_text() != (home.root / remake[remake.index("-o") + 1]).read_text()
    [install] = printed(done.stdout, "envkit create --from-lock ")
    assert install[install.index("--name") + 1] == "tensorflow-old-01"
    made = home.envkit(*install[1:], "--yes", env=no_conda(home))
    assert made.returncode == 0, (install, made.stderr + made.stdout)
    assert home.record("tensorflow-old-01")["build"] == "tensorflow-2.15-cpu"


def test_a_cpu_lock_for_identical_machines_says_why_about_them(fleet_home: Home, conda_manifests: Path):
    home = fleet_home
    twins = home.root / "twins"
    twins.mkdir()
    (twins / "old-01.yaml").write_text(OLD_01)
    (twins / "old-02.yaml").write_text(OLD_01.replace("old-01", "old-02"))
    done = home.envkit("lock", "tensorflow", "--machine", str(twins), "--manifests", str(conda_manifests))
    assert done.returncode == 0, done.stderr
    assert "the lock pins a CPU build for machines with GPUs" in done.stderr
    assert "needs driver CUDA >= 10.1, the driver has 10.0" in done.stderr and "this machine" not in done.stderr
