"""`envkit pack` and running from the image it makes, for real: mksquashfs, squashfuse and fusermount3 (Debian's),
a stand-in PyTorch venv packed and mounted; the fit checked against this machine as the stand-in NVML describes it;
nothing left mounted however the command ends (its end, Ctrl-C, SIGTERM, envkit SIGKILLed); bad images refused in
one sentence, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support import squashfs
from tests.probe.probe_helpers import A100, V100
from tests.travel.image_fixtures import _nothing_left_mounted, image, packer, squashfs_tools  # noqa: F401 (fixtures)

SHOW = "import json, os, sys, torch; print(json.dumps([sys.prefix, torch.__file__, sys.argv[1:]]))"


def refused(done: subprocess.CompletedProcess, message: str, code: int = 2) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("envkit: error: ") and message in first, done.stderr
    return done.stderr


def mounted_here(root: Path) -> list[str]:
    return [point for point in squashfs.squashfuse_mounts() if point.startswith(str(root))]


def test_pack_records_the_fit_inside_and_beside_and_run_mounts_it_only_while_the_command_runs(packer, image,
                                                                                              this_machine):
    beside = json.loads(Path(f"{image}.fit.json").read_text())
    inside = subprocess.run(["unsquashfs", "-cat", str(image), ".envkit/image.json"], capture_output=True, text=True)
    assert json.loads(inside.stdout) == beside
    mount = packer.root / "mnt" / "torch"
    assert beside["prefix"] == str(mount) and beside["build"] == "torch-2.14-cu126" and beside["manifest"] == "torch"
    assert beside["record"]["prefix"] == str(mount) and beside["platform"] == os.uname().machine
    record = json.loads(subprocess.run(["unsquashfs", "-cat", str(image), ".envkit/record.json"],
                                       capture_output=True, text=True).stdout)
    assert record["prefix"] == str(mount)  # relocated: its own record too
    # the environment itself is untouched: its record, its scripts name its own path
    assert json.loads((packer.prefix / ".envkit" / "record.json").read_text())["prefix"] == str(packer.prefix)
    assert str(packer.prefix) in (packer.prefix / "bin" / "activate").read_text()
    activate = subprocess.run(["unsquashfs", "-cat", str(image), "bin/activate"], capture_output=True, text=True)
    assert str(mount) in activate.stdout and str(packer.prefix) not in activate.stdout

    done = packer.envkit("run", str(image), "--", "python", "-c", SHOW + "; sys.exit(7)", "a b", "--x",
                         env=this_machine([A100, A100]))
    assert done.returncode == 7, done.stderr  # the command's own exit status
    prefix, torch_file, argv = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(prefix) == mount and torch_file.startswith(str(mount)) and argv == ["a b", "--x"]
    assert not mounted_here(packer.root) and not mount.exists()  # unmounted, and the mount point it made is gone


def test_an_image_that_does_not_fit_this_machine_is_refused_before_anything_starts(packer, image, this_machine):
    old = this_machine([V100], driver="470.82.01", cuda=11040)
    marker = packer.root / "started"
    done = packer.envkit("run", str(image), "--", "python", "-c", f"open({str(marker)!r}, 'w')", env=old)
    said = refused(done, "would not run on this machine", code=1)
    assert "torch-2.14-cu126" in said and "--no-fit-check" in said
    assert not marker.exists() and not (packer.root / "mnt").exists()
    unchecked = packer.envkit("run", "--no-fit-check", str(image), "--", "python", "-c",
                              f"open({str(marker)!r}, 'w')", env=old)
    assert unchecked.returncode == 0, unchecked.stderr
    assert marker.exists()
    assert "--no-fit-check: the fit" in unchecked.stderr and "neither read nor checked" in unchecked.stderr


def test_verify_checks_the_environment_inside_the_image(packer, image, this_machine):
    done = packer.envkit("verify", str(image), "--json", env=this_machine([A100, A100]))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert not mounted_here(packer.root)


def _started(process: subprocess.Popen, flag: Path) -> None:
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)


WAIT = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_an_interrupted_or_killed_run_leaves_nothing_mounted(packer, image, this_machine, how):
    flag = packer.root / f"running-{how}"
    process = packer.popen("run", str(image), "--", "python", "-c", WAIT, str(flag),
                           env=this_machine([A100, A100]), start_new_session=True)
    try:
        _started(process, flag)
        assert mounted_here(packer.root)
        if how == "ctrl-c":  # the terminal's SIGINT goes to the whole foreground process group
            os.killpg(process.pid, signal.SIGINT)
        elif how == "sigterm":  # to envkit alone: passed on to the command, then unmounted
            process.send_signal(signal.SIGTERM)
        else:  # envkit killed outright: squashfuse, told by the kernel, unmounts
            process.kill()
        process.wait(timeout=60)  # (not its output: the command, left running by a SIGKILL, holds the pipes)
        expected = {"ctrl-c": 130, "sigterm": 143, "sigkill": -9}[how]
        assert process.returncode == expected, process.stderr.read() if how != "sigkill" else ""
        deadline = time.monotonic() + 20
        while mounted_here(packer.root) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not mounted_here(packer.root)
    finally:
        try:  # the command outlived a SIGKILLed envkit (a killed job's would not): its group ends here
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        process.stdout.close()
        process.stderr.close()
    mount = packer.root / "mnt" / "torch"
    if how == "sigkill":  # the empty mount point envkit made is all a SIGKILL leaves
        assert os.listdir(mount) == []
        mount.rmdir()
        (packer.root / "mnt").rmdir()
    assert not mount.exists()


def test_bad_images_are_refused_in_one_sentence_and_nothing_is_mounted(packer, image, this_machine, tmp_path):
    machine = this_machine([A100, A100])
    garbage = tmp_path / "garbage.sqfs"
    garbage.write_bytes(b"not an image at all\n" * 10)
    refused(packer.envkit("run", str(garbage), "--", "python", "-V", env=machine), "is not a SquashFS image")
    truncated = tmp_path / "cut.sqfs"
    truncated.write_bytes(image.read_bytes()[:4096])
    refused(packer.envkit("run", str(truncated), "--", "python", "-V", env=machine), "is truncated")
    refused(packer.envkit("run", str(tmp_path / "none.sqfs"), "--", "python", "-V"), "does not exist")

    # an image with no fit: the environment packed by mksquashfs alone
    bare = tmp_path / "bare.sqfs"
    subprocess.run(["mksquashfs", str(packer.prefix), str(bare), "-quiet", "-no-progress"], check=True)
    said = refused(packer.envkit("run", str(bare), "--", "python", "-V", env=machine), "records no fit")
    assert "--no-fit-check" in said

    # the fit beside it altered (a GPU build claimed for other machines), or inside it
    altered = tmp_path / "altered.sqfs"
    altered.write_bytes(image.read_bytes())
    fit = json.loads(Path(f"{image}.fit.json").read_text())
    fit["build"] = "torch-2.14-cu130"
    Path(f"{altered}.fit.json").write_text(json.dumps(fit))
    refused(packer.envkit("run", str(altered), "--", "python", "-V", env=machine), "was altered")
    inside = tmp_path / "inside.json"
    inside.write_text(json.dumps(fit))
    edited = tmp_path / "edited.sqfs"
    subprocess.run(["mksquashfs", str(packer.prefix), str(edited), "-quiet", "-no-progress", "-p",
                    f".envkit/image.json f 644 0 0 cat {inside}"], check=True)
    refused(packer.envkit("run", str(edited), "--", "python", "-V", env=machine), "was altered")
    assert not mounted_here(packer.root)


def test_a_mount_point_that_is_not_empty_or_no_fuse_is_refused_with_how_to_unpack(packer, image, this_machine,
                                                                                    tmp_path):
    machine = this_machine([A100, A100])
    # packed at its own path, where the environment itself is: not empty
    own = tmp_path / "own.sqfs"
    assert packer.envkit("pack", "torch-test", "-o", str(own)).returncode == 0
    refused(packer.envkit("run", str(own), "--", "python", "-V", env=machine), "which is not empty")
    assert os.listdir(packer.prefix)  # untouched
    # no squashfuse on PATH: FUSE unavailable here
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("unsquashfs", "python3"):
        (bin_dir / program).symlink_to(subprocess.run(["which", program], capture_output=True, text=True
                                                      ).stdout.strip())
    said = refused(packer.envkit("run", str(image), "--", "python", "-V", env={**machine, "PATH": str(bin_dir)}),
                   "cannot be mounted here: squashfuse_ll and fusermount3 are not installed here")
    assert f"unsquashfs -d {packer.root / 'mnt' / 'torch'} {image}" in said
    assert not (packer.root / "mnt").exists()


def test_pack_refuses_what_it_cannot_pack(packer, tmp_path):
    refused(packer.envkit("pack", "torch-test", "-o", str(packer.prefix / "inside.sqfs")), "is inside the environment")
    refused(packer.envkit("pack", "torch-test", "-o", str(tmp_path / "x.sqfs"), "--format", "tar"), "--format tar")
    refused(packer.envkit("pack", "torch-test", "-o", str(tmp_path / "x.sqfs"), "--relocate", "relative/path"),
            "--relocate")
    mine = tmp_path / "mine"
    mine.write_text("mine")
    link = tmp_path / "link.sqfs"
    link.symlink_to(mine)
    refused(packer.envkit("pack", "torch-test", "-o", str(link)), "is a symbolic link")
    assert mine.read_text() == "mine" and link.is_symlink()
    refused(packer.envkit("pack", "torch-test", "-o", str(tmp_path)), "is a directory")
    assert not list(tmp_path.glob(".*.part"))  # nothing half-written left


SITE = """version: 1
partitions:
  part-a:
    nodes:
      - {node: gpu-a1, count: 2, profile: {driver_version: "535.129.03", cuda_driver: "12.2", gpus: [
          {name: NVIDIA A100-SXM4-40GB, compute_capability: "8.0", memory_mib: 40960}]}}
  part-v:
    nodes:
      - {node: gpu-v1, count: 1, profile: {driver_version: "470.82.01", cuda_driver: "11.4", gpus: [
          {name: Tesla V100-SXM2-16GB, compute_capability: "7.0", memory_mib: 16384}]}}
"""


def test_a_job_script_runs_the_image_by_its_absolute_path_and_a_partition_it_does_not_fit_is_refused(packer, image,
                                                                                                       tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    relative = os.path.relpath(image, packer.root)
    script = packer.envkit("job", relative, "-p", "part-a", "--print", "--", "python", "train.py",
                           env={"ENVKIT_SITE": str(site)})
    assert script.returncode == 0, script.stderr
    assert f"envkit run {image} -- python train.py" in script.stdout and "--job-name=torch" in script.stdout
    said = refused(packer.envkit("job", str(image), "-p", "part-v", "--print", "--", "python", "-V",
                                 env={"ENVKIT_SITE": str(site)}), "would not run on partition part-v", code=1)
    assert "needs driver CUDA >= 12.6" in said
    unchecked = packer.envkit("job", "--no-fit-check", str(image), "-p", "part-v", "--print", "--", "python", "-V",
                              env={"ENVKIT_SITE": str(site)})
    assert unchecked.returncode == 0, unchecked.stderr
    assert f"envkit run --no-fit-check {image} -- python -V" in unchecked.stdout


def test_jupyter_finds_the_server_program_inside_an_image_without_mounting_it(packer, image, tmp_path):
    from envkit.commands.jupyter import _image_program
    from envkit.state.records import Record

    def record(of: Path) -> Record:
        return Record(name="x", prefix="/nowhere", kind="venv", backend="venv", manifest="torch", build="b",
                      python="3.12", created="", machine={}, on_target=True, extra={"image": str(of)})

    assert _image_program(record(image)) is None  # the stand-in has no Jupyter
    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "jupyter-server").write_text("#!/bin/sh\n")
    served = tmp_path / "served.sqfs"
    subprocess.run(["mksquashfs", str(tree), str(served), "-quiet", "-no-progress"], check=True)
    assert _image_program(record(served)) == "jupyter-server"
    assert not mounted_here(tmp_path)


@pytest.mark.parametrize("command", ["shell", "jupyter"])
def test_shell_refuses_a_partition_the_image_does_not_fit_unless_no_fit_check_which_says_what_it_skips(
        packer, image, tmp_path, command):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    tools = tmp_path / "bin"  # unsquashfs (the fit is read from the image), and no Slurm: nothing is asked of one
    tools.mkdir()
    (tools / "unsquashfs").symlink_to("/usr/bin/unsquashfs")
    env = {"ENVKIT_SITE": str(site), "PATH": str(tools)}
    said = refused(packer.envkit(command, str(image), "-p", "part-v", env=env), "would not run on partition part-v",
                   code=1)
    assert "needs driver CUDA >= 12.6" in said
    unchecked = packer.envkit(command, "--no-fit-check", str(image), "-p", "part-v", env=env)
    assert unchecked.returncode == 1, unchecked.stderr  # past the fit: stopped where Slurm is asked for the job
    assert "would not run" not in unchecked.stderr and "sinfo" in unchecked.stderr, unchecked.stderr
    assert f"--no-fit-check: the fit {image} records is neither read nor checked" in unchecked.stderr
    assert not mounted_here(tmp_path)
