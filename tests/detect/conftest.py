"""Fixtures for the detection tests: the real tables, a fake /proc, fake nvidia-smi executables."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest
from detect_fakes import DATA, REPO, data

from envkit.catalog.load import load_tables
from envkit.catalog.model import Tables


@pytest.fixture(scope="session")
def tables() -> Tables:
    return load_tables(REPO / "envs")


@pytest.fixture
def cuda_table(tables):
    return tables.cuda


@pytest.fixture
def gpu_names(tables):
    return tables.gpu_names


# --- /proc ----------------------------------------------------------------------------------------------------------

@pytest.fixture
def make_proc(tmp_path) -> Callable[..., Path]:
    """make_proc(version_file, {bus_id: information_file}) -> a directory laid out like /proc."""

    def make(version: Optional[str], gpus: Optional[dict[str, str]] = None) -> Path:
        root = tmp_path / "proc"
        nvidia = root / "driver" / "nvidia"
        nvidia.mkdir(parents=True)
        if version is not None:
            (nvidia / "version").write_text(data(f"proc/{version}"), encoding="utf-8")
        if gpus is not None:
            (nvidia / "gpus").mkdir()
            for bus_id, information in gpus.items():
                (nvidia / "gpus" / bus_id).mkdir()
                if information is not None:
                    (nvidia / "gpus" / bus_id / "information").write_text(
                        data(f"proc/{information}"), encoding="utf-8"
                    )
        return root

    return make


@pytest.fixture
def no_proc(tmp_path) -> Path:
    return tmp_path / "empty-proc"


# --- nvidia-smi -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FakeSmi:
    path: Path
    log: Path
    pids: Path
    env: Path

    @property
    def command(self) -> str:
        return str(self.path)

    def calls(self) -> list[str]:
        """The argument lists it was run with, one string per run."""
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def make_smi(tmp_path) -> Callable[..., FakeSmi]:
    """make_smi(query=..., legacy=..., header=..., *_status=..., hang=...) -> a fake nvidia-smi executable.

    ``query`` answers the query that names compute_cap, ``legacy`` the one without it, ``header`` a plain run;
    each is a file under data/smi/ (None: prints nothing). ``hang`` starts a child that sleeps, and waits for it.
    """

    def make(
        query: Optional[str] = None,
        query_status: int = 0,
        legacy: Optional[str] = None,
        legacy_status: int = 0,
        header: Optional[str] = None,
        header_status: int = 0,
        hang: bool = False,
    ) -> FakeSmi:
        directory = tmp_path / "smi"
        directory.mkdir()
        fake = FakeSmi(directory / "nvidia-smi", directory / "calls.log", directory / "pids", directory / "env")

        def answer(name: Optional[str], status: int) -> str:
            show = f"cat {shlex.quote(str(DATA / 'smi' / name))}; " if name else ""
            return f"{show}exit {status}"

        lines = [
            "#!/bin/sh",
            f"env > {shlex.quote(str(fake.env))}",
            f'printf "%s\\n" "$*" >> {shlex.quote(str(fake.log))}',
        ]
        if hang:
            lines += [f"sleep 30 & echo $$ $! > {shlex.quote(str(fake.pids))}", "wait", "exit 0"]
        lines += [
            'case "$1" in',
            f"  --query-gpu=*compute_cap*) {answer(query, query_status)} ;;",
            f"  --query-gpu=*) {answer(legacy, legacy_status)} ;;",
            f"  *) {answer(header, header_status)} ;;",
            "esac",
        ]
        fake.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        fake.path.chmod(0o755)
        return fake

    return make


@pytest.fixture
def no_smi(tmp_path) -> str:
    return str(tmp_path / "no-such-dir" / "nvidia-smi")
