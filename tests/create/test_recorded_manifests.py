"""An environment made from a manifests directory other than the shipped one (--manifests, $ENVKIT_MANIFESTS, the
config's ``manifests:``) keeps that directory in its record: the command that makes it again names it, `verify`,
`export` and `job` read its build from there, and a directory that is gone since is said, not crashed on. Real create
(local index, real uv) from an admin's copy of envs/ whose torch manifest is named lab-torch: the shipped manifests
have no such build, so a command that forgot the directory would fail with "unknown manifest"."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import PROFILES, PYTHON, Home
from envkit.errors import BadInputError
from envkit.state import records
from support.pypi_index import IndexServer

ADA = str(PROFILES / "rtx4090-cuda126.yaml")
LAB = ("lab-torch", "--build", "lab-torch-2.13-cu126", "--python", PYTHON, "--machine", ADA, "--yes", "--no-verify")
OLD = {"name": "t", "prefix": "/envs/t", "kind": "venv", "backend": "venv", "manifest": "torch",
       "build": "torch-2.13-cu126", "python": "3.12", "created": "2026-11-21T10:00:00+00:00", "machine": {},
       "on_target": True}  # a record written before records kept their manifests directory


def lab_manifests(where: Path) -> Path:
    from envkit.catalog import default_manifests_dir

    shutil.copytree(default_manifests_dir(), where, ignore=shutil.ignore_patterns("__*", "*.md"))
    (where / "lab-torch.yaml").write_text((where / "torch.yaml").read_text().replace(
        "\nname: torch\n", "\nname: lab-torch\n", 1))
    (where / "torch.yaml").unlink()
    return where


def remake_in(stderr: str) -> list[str]:
    """The `envkit create ...` a hint gives to make the environment again, as argv."""
    assert "makes it again" in stderr, stderr
    return shlex.split(stderr.split("`envkit create ", 1)[1].split("`", 1)[0])


def test_an_old_record_loads_and_its_remake_command_names_no_manifests():
    old = records.record_from_dict(OLD, "t.json")
    assert old.manifests is None and "--manifests" not in old.remake_command("--force")
    assert old.remake_hint() == f"`{old.remake_command()}` makes it again"


def test_the_remake_command_names_the_recorded_manifests_shell_quoted(tmp_path: Path):
    lab = tmp_path / "lab manifests"
    lab.mkdir()
    record = records.record_from_dict({**OLD, "manifests": str(lab)}, "t.json")
    argv = shlex.split(record.remake_command("--force"))
    assert argv[-3:] == ["--manifests", str(lab), "--force"] and f"'{lab}'" in record.remake_command()
    assert "no longer exists" not in record.remake_hint()
    lab.rmdir()  # gone: the command still names it, and the advice says it must be back first
    assert record.remake_hint("--force") == (f"`{record.remake_command('--force')}` makes it again once {lab} is "
                                             "back (the manifests directory it was made from no longer exists)")


def test_a_record_with_a_relative_manifests_directory_is_unreadable(tmp_path: Path):
    index = tmp_path / "records"
    index.mkdir()
    records.index_path(index, "t").write_text(json.dumps({**OLD, "manifests": "lab"}), encoding="utf-8")
    with pytest.raises(BadInputError, match="the manifests directory 'lab' is not an absolute path"):
        records.load(index, "t")


def test_made_from_other_manifests_the_record_keeps_them_and_every_command_reads_them(
        home: Home, torch_index: IndexServer, tmp_path: Path):
    lab = lab_manifests(tmp_path / "lab manifests")
    made = home.envkit("create", *LAB, "--manifests", str(lab))
    assert made.returncode == 0, made.stderr
    assert home.record("lab-torch-cu126")["manifests"] == str(lab.resolve())
    [entry] = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert entry["manifests"] == str(lab.resolve()) and entry["build"] == "lab-torch-2.13-cu126"

    # verify NAME, without --manifests: judged against the build it was made from, read from the recorded directory.
    # (The shipped manifests have a torch-2.13-cu126 too, which the check named as installed before.)
    checked = home.envkit("verify", "lab-torch-cu126", "--json")
    report = json.loads(checked.stdout)
    assert report["installed_build"] == "lab-torch-2.13-cu126" and checked.returncode == 0, checked.stderr
    # export: its lock installs with the same manifests (its post-install check needs the lab-torch build).
    exported = home.root / "lab.yml"
    done = home.envkit("export", "lab-torch-cu126", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    [install] = [line for line in done.stdout.splitlines() if line.startswith("Install it with: ")]
    assert shlex.split(install.split(": ", 1)[1])[-2:] == ["--manifests", str(lab.resolve())]

    # Its directory gone: the command that makes it again names the manifests and, pasted, makes the same build.
    shutil.rmtree(home.prefix("lab-torch-cu126"))
    gone = home.envkit("run", "lab-torch-cu126", "--", "python", "-V")
    assert gone.returncode == 1 and "Traceback" not in gone.stderr, gone.stderr
    argv = remake_in(gone.stderr)
    assert argv[argv.index("--manifests") + 1] == str(lab.resolve())
    again = home.envkit("create", *argv, "--yes", "--no-verify")
    assert again.returncode == 0, (argv, again.stderr)
    assert home.record("lab-torch-cu126")["build"] == "lab-torch-2.13-cu126"
    assert home.record("lab-torch-cu126")["manifests"] == str(lab.resolve())

    # The manifests directory gone too: verify says so and still checks; the advice says it must be back first.
    lab.rename(tmp_path / "moved")
    checked = home.envkit("verify", "lab-torch-cu126")
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
    assert f"was made from the manifests in {lab.resolve()}, which no longer exists" in checked.stderr
    shutil.rmtree(home.prefix("lab-torch-cu126"))
    gone = home.envkit("run", "lab-torch-cu126", "--", "python", "-V")
    assert gone.returncode == 1 and "Traceback" not in gone.stderr, gone.stderr
    assert f"makes it again once {lab.resolve()} is back (the manifests directory it was made from no longer " \
           "exists)" in " ".join(gone.stderr.split())


def test_manifests_from_the_environment_or_the_config_are_recorded_absolute_and_resolved(
        home: Home, torch_index: IndexServer):
    lab = lab_manifests(home.root / "lab")
    made = home.envkit("create", *LAB, env={"ENVKIT_MANIFESTS": "lab"})  # relative to the working directory
    assert made.returncode == 0, made.stderr
    assert home.record("lab-torch-cu126")["manifests"] == str(lab.resolve())

    (home.root / "lab-link").symlink_to(lab)
    config = json.loads(home.config.read_text())
    home.write_config(config["mirrors"], manifests="lab-link")  # relative to the config file, through a link
    made = home.envkit("create", *LAB, "--name", "from-config")
    assert made.returncode == 0, made.stderr
    assert home.record("from-config")["manifests"] == str(lab.resolve())


def test_made_from_the_shipped_manifests_the_record_names_none(home: Home, torch_index: IndexServer):
    from envkit.catalog import default_manifests_dir

    made = home.envkit("create", "torch", "--build", "torch-2.13-cu126", "--python", PYTHON, "--machine", ADA,
                       "--manifests", str(default_manifests_dir()), "--yes", "--no-verify")
    assert made.returncode == 0, made.stderr
    assert home.record("torch-cu126")["manifests"] is None


def test_a_job_refused_without_manifests_suggests_a_create_from_the_recorded_ones(
        home: Home, torch_index: IndexServer, tmp_path: Path):
    lab = lab_manifests(tmp_path / "lab manifests")
    made = home.envkit("create", *LAB, "--manifests", str(lab))
    assert made.returncode == 0, made.stderr
    site = tmp_path / "site.yaml"
    site.write_text(f"version: 1\npartitions:\n  old:\n    nodes:\n"
                    f"      - profile_file: {PROFILES / 'gtx1080ti-cuda112.yaml'}\n")
    refused = home.envkit("job", "lab-torch-cu126", "-p", "old", "--", "true", env={"ENVKIT_SITE": str(site)})
    assert refused.returncode == 1 and "would not run on partition old" in refused.stderr, refused.stderr
    argv = shlex.split(refused.stderr.split("Create one for it: ", 1)[1])
    assert argv[-2:] == ["--manifests", str(lab.resolve())]
    pasted = home.envkit(*argv[1:], "--dry-run", env={"ENVKIT_SITE": str(site)})
    assert pasted.returncode == 0, (argv, pasted.stderr)
