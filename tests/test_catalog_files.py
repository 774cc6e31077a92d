"""What a manifests directory's entries may be: regular files. A FIFO named x.yaml made `envkit list` and `manifests
validate` wait forever for a writer; a link to nothing was reported as a missing table. Run as a user runs envkit (a
subprocess, with a time limit: on the old code these waited forever)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

PROFILE = Path(__file__).parent / "profiles" / "h100-cuda128.yaml"


def envkit(*args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    try:
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                              env=environment, timeout=20)
    except subprocess.TimeoutExpired:  # run() has killed it
        pytest.fail(f"envkit {' '.join(args)} did not finish in 20 s (waiting to read a file?)")


def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    for word in words:  # (list says it on stderr; validate lists its problems on stdout)
        assert word in result.stdout + result.stderr, (word, result.stdout, result.stderr)


def listed(envs: Path, *names: str) -> subprocess.CompletedProcess:
    return envkit("list", *names, "--manifests", str(envs), "--machine", str(PROFILE))


def validated(envs: Path) -> subprocess.CompletedProcess:
    return envkit("manifests", "validate", str(envs))


def test_a_fifo_among_the_manifests_is_refused_not_read_forever(envs_copy: Path):
    fifo = envs_copy / "x.yaml"
    os.mkfifo(fifo)
    refused(listed(envs_copy), f"{fifo}: a FIFO (named pipe), not a regular file")
    refused(validated(envs_copy), f"{fifo}: a FIFO (named pipe), not a regular file")
    other = listed(envs_copy, "torch")  # as a broken manifest does not stop listing another, neither does this
    assert other.returncode == 0 and "torch-" in other.stdout, other.stderr
    # Only a manifests directory's entries must be regular files: `--machine <(cat profile.yaml)` reads a pipe.
    piped = subprocess.run(["bash", "-c", '"$0" -m envkit list torch --manifests "$1" --machine <(cat "$2")',
                            sys.executable, str(envs_copy), str(PROFILE)], capture_output=True, text=True, timeout=20,
                           env={k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")})
    assert piped.returncode == 0 and "NVIDIA H100" in piped.stdout, piped.stderr


def test_a_table_that_is_a_fifo_is_refused(envs_copy: Path):
    table = envs_copy / "cuda.yaml"
    table.unlink()
    os.mkfifo(table)
    refused(listed(envs_copy, "torch"), f"{table}: a FIFO (named pipe), not a regular file")


def test_a_socket_or_a_directory_named_like_a_manifest_is_refused(envs_copy: Path):
    (envs_copy / "x.yaml").mkdir()
    refused(listed(envs_copy), f"{envs_copy / 'x.yaml'}: a directory, not a regular file")
    (envs_copy / "x.yaml").rmdir()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(envs_copy / "x.yaml"))
        refused(validated(envs_copy), f"{envs_copy / 'x.yaml'}: a socket, not a regular file")


def test_a_link_to_nothing_says_so_and_names_its_target(envs_copy: Path):
    link = envs_copy / "x.yaml"
    link.symlink_to("missing.yaml")
    words = f"{link}: a symbolic link to {envs_copy.resolve() / 'missing.yaml'}, which does not exist"
    refused(listed(envs_copy), words)
    refused(validated(envs_copy), words)  # (it said "missing: a manifests directory needs cuda.yaml, ...")


def test_a_file_not_in_utf8_names_its_line_not_a_byte_offset(envs_copy: Path):
    path = envs_copy / "torch.yaml"
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"summary:"))
    lines[at] = b"summary: PyTorch, \xe9dited in Latin-1"
    path.write_bytes(b"\n".join(lines))
    refused(listed(envs_copy, "torch"), f"{path}: not UTF-8 (byte 0xe9 at line {at + 1}): save the file as UTF-8")
    refused(validated(envs_copy), f"{path}:{at + 1}: not UTF-8 (byte 0xe9 at line {at + 1})")
