"""Long steps are not silent. Into a pipe (a log, a Slurm job's output) a step that is still running gets a line at
least every ENVKIT_PROGRESS_INTERVAL seconds saying what it is doing; on a terminal (a real pseudo-terminal here)
the status line shows what is being fetched, its bytes, their total and the rate; a terminal whose TERM is dumb
gets the plain lines. Real uv against the tests' index on 127.0.0.1, its torch wheel sent slowly."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CU126, Home
from support.processes import read_terminal, reaped
from support.pypi_index import IndexServer

from envkit.create.progress import Progress
from envkit.lockfile.fetch import fetch_verified
from envkit.lockfile.model import LockedPackage
from envkit.system import transfers

RATE = 2_000_000  # bytes a second big_wheels' torch (about 4 MB) is sent at: a couple of seconds


@pytest.fixture
def slow_index(home: Home, pypi_server: IndexServer, big_wheels: list[Path]) -> Path:
    pypi_server.add_index("/whl/cu126", big_wheels)
    home.mirror_to(pypi_server)
    torch = big_wheels[0]
    pypi_server.throttle_file(torch.name, RATE)
    return torch


def test_into_a_pipe_a_slow_download_gets_a_line_every_interval_saying_what_is_fetched(home: Home, slow_index):
    done = home.envkit("create", *CU126, "--yes", "--no-verify", env={"ENVKIT_PROGRESS_INTERVAL": "0.5"})
    assert done.returncode == 0, done.stderr
    still = [line for line in done.stderr.splitlines() if "still working" in line]
    assert all(re.match(r"      \[[12]/2\] ", line) for line in still), still  # each names its step
    still = [line for line in still if line.startswith("      [2/2] Installing torch-2.13-cu126 packages with uv")]
    assert len(still) >= 2, done.stderr
    fetching = [line for line in still if re.search(r"fetching torch \(4\.[0-9] MB\)", line)]  # what and its size
    assert fetching, still
    assert "last said: Downloading torch (3." in fetching[-1]
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # plain lines in a log


def test_without_the_variable_a_quick_step_gets_no_extra_line_and_a_bad_value_is_refused(home: Home, slow_index):
    bad = home.envkit("create", *CU126, "--yes", "--no-verify", env={"ENVKIT_PROGRESS_INTERVAL": "soon"})
    assert bad.returncode == 2 and "ENVKIT_PROGRESS_INTERVAL='soon' is not a positive number of seconds" in bad.stderr
    assert not home.prefix("torch-cu126").exists()


def _on_a_terminal(home: Home, term: str) -> tuple[int, str]:
    """`envkit create` with its stderr on a pseudo-terminal: (exit status, what the terminal got)."""
    from concurrent.futures import ThreadPoolExecutor

    master, slave = pty.openpty()
    env = {**home.env, "TERM": term, "COLUMNS": "250", "ENVKIT_PROGRESS_INTERVAL": "0.5"}
    try:
        with ThreadPoolExecutor(1) as pool, reaped(subprocess.Popen(
                [sys.executable, "-m", "envkit", "create", *CU126, "--yes", "--no-verify"], env=env, cwd=home.root,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)) as process:
            os.close(slave)
            shown = pool.submit(read_terminal, master)  # read as it comes: a full terminal would hold envkit
            process.communicate(timeout=300)
            got = shown.result(timeout=30)
    finally:
        os.close(master)
    return process.returncode, got.decode("utf-8", "replace")


def test_on_a_terminal_the_status_line_shows_what_is_fetched_its_bytes_total_and_rate(home: Home, slow_index,
                                                                                      pypi_server: IndexServer):
    pypi_server.throttle_file(slow_index.name, RATE // 2)  # long enough for several drawings on a busy machine
    status, shown = _on_a_terminal(home, "xterm")
    assert status == 0, shown
    frames = shown.replace("\r\n", "\n").split("\r\x1b[K")
    # torch alone, or with what uv fetches beside it ("torch and 1 more: ..."): which depends on the machine's pace
    fetching = [frame for frame in frames
                if re.search(r"\[2/2\] Installing .* \.\.\. torch(?: and \d+ more)?: [0-9.]+ [kM]?B of 4\.[0-9] MB, "
                             r"[0-9.]+ [kM]?B/s$", frame.strip())]
    assert len(fetching) >= 2, frames[-20:]  # drawn again as the bytes move
    amounts = [re.search(r"torch(?: and \d+ more)?: ([0-9.]+ [kM]?B) of", frame)[1] for frame in fetching]
    assert len(set(amounts)) >= 2, amounts
    assert "still working" not in shown  # a terminal has its status line, not a log's lines


def test_a_dumb_terminal_gets_plain_lines(home: Home, slow_index):
    status, shown = _on_a_terminal(home, "dumb")
    assert status == 0, shown
    assert "\x1b[K" not in shown and "still working" in shown


# --- the parts, each alone ------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, announced", [
    ("Downloading torch (846.0MiB)", ("torch", int(846.0 * (1 << 20)))),
    ("Downloading nvidia-cudnn-cu12 (644.2MiB)", ("nvidia-cudnn-cu12", int(644.2 * (1 << 20)))),
    ("Downloading http://127.0.0.1:9/whl/torch-2.13.0%2Bcu126-cp311-cp311-linux_x86_64.whl (6.3 MB)",
     ("torch-2.13.0+cu126-cp311-cp311-linux_x86_64.whl", 6_300_000)),
    ("  Downloading torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl (200 kB)",
     ("torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", 200_000)),
    ("Downloaded torch", None),
    ("Resolved 3 packages in 12ms", None),
    ("Downloading torch (a lot)", None),
])
def test_the_installers_announcements_are_read(line, announced):
    assert transfers.announced_download(line) == announced


def test_a_meter_reads_files_bytes_totals_and_rate():
    meter = transfers.Meter()
    meter.file("b.whl", None, 1_000_000)  # an installer said it downloads b.whl, 1 MB; nobody counts its bytes
    assert meter.reading(99.0) == transfers.Reading(("b.whl",), None, 1_000_000, None)
    assert transfers.reading_text(meter.reading(99.0)) == "b.whl (1.0 MB)"
    meter.file("a.whl", 0, 4_000_000)
    assert meter.reading(100.0) == transfers.Reading(("b.whl", "a.whl"), 0, 5_000_000, None)
    meter.file("a.whl", 2_000_000, None)
    reading = meter.reading(101.0)
    assert reading.done == 2_000_000 and reading.rate == pytest.approx(2_000_000)
    assert transfers.reading_text(reading) == "b.whl and 1 more: 2.0 MB of 5.0 MB, 2.0 MB/s"
    meter.finished("a.whl")
    meter.finished("b.whl")
    assert meter.reading(102.0).names == ()
    assert transfers.reading_text(transfers.Meter().reading()) == ""  # nothing fetched: nothing said


def test_envkits_own_downloader_tells_the_meter_each_chunk_of_a_file(tmp_path: Path, pypi_server: IndexServer,
                                                                    big_wheels):
    import hashlib

    torch = big_wheels[0]
    pypi_server.add_index("/whl/cu126", [torch])
    pypi_server.throttle_file(torch.name, 16_000_000)
    package = LockedPackage(name="torch", version="2.13.0+cu126", manager="pip", platform="linux-64",
                            url=f"{pypi_server.url}/whl/cu126/torch/{torch.name}",
                            sha256=hashlib.sha256(torch.read_bytes()).hexdigest())
    seen: list[transfers.Reading] = []
    meter = transfers.Meter()
    original = meter.file

    def noting(name, done, total):
        original(name, done, total)
        seen.append(meter.reading())

    meter.file = noting  # type: ignore[method-assign]
    with transfers.metering(meter):
        fetch_verified(package, package.url, tmp_path / "store", lambda line: None)
    size = torch.stat().st_size
    assert seen[0].names == (torch.name,) and seen[0].total == size
    assert len({r.done for r in seen}) > 3 and seen[-1].done == size and seen[-1].names == ()
    assert [r.done for r in seen] == sorted(r.done for r in seen)


def test_a_step_that_fails_ends_its_clock_and_says_so(tmp_path: Path):
    import io

    stream = io.StringIO()
    progress = Progress(stream, 1, interval=0.1)
    with pytest.raises(RuntimeError), progress.step("Waiting"):
        time.sleep(0.35)
        raise RuntimeError("no")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/1] Waiting ..." and lines[-1].startswith("[1/1] Waiting: failed after")
    assert [line for line in lines if "still working" in line]
    time.sleep(0.3)
    assert stream.getvalue().splitlines() == lines  # nothing more after the step ended


def test_uvs_bars_on_a_terminal_are_read_and_its_lines_come_out_clean():
    """What uv 0.13 drew on a pseudo-terminal (recorded), cut into reads at awkward places."""
    drawn = (b"\x1b[2mUsing Python 3.11.7 environment at: v\x1b[0m\r\n\r\x1b[2K\x1b[2mResolved \x1b[1m2 packages"
             b"\x1b[0m \x1b[2min 10ms\x1b[0m\x1b[0m\r\n\x1b[37m\xe2\xa0\x8b\x1b[0m \x1b[2mPreparing packages...\x1b[0m "
             b"(0/2)   \x1b[2mpkg1100000          \x1b[0m \x1b[32m\x1b[30m\x1b[2m------------------------------\x1b[0m"
             b"\x1b[0m 8.00 KiB/2.10 MiB           \x1b[2mpkg1500000          \x1b[0m \x1b[32m\x1b[30m\x1b[2m-------"
             b"-----------------------\x1b[0m\x1b[0m 23.85 KiB/2.86 MiB          \x1b[2A\r\x1b[2K\x1b[1B\r\x1b[2K\x1b[2A"
             b"\x1b[2mpkg1100000          \x1b[0m \x1b[32m\x1b[30m\x1b[2m------------------------------\x1b[0m"
             b"\x1b[0m 1.50 MiB/2.10 MiB           \r\x1b[2K\x1b[2mPrepared \x1b[1m2 packages\x1b[0m\r\n")
    text = bytearray()
    meter = transfers.Meter()
    with transfers.metering(meter):
        out = transfers.TerminalOutput(text.extend)
        for start in range(0, len(drawn), 37):
            out.add(drawn[start:start + 37])
        reading = meter.reading()
    assert reading.names == ("pkg1500000", "pkg1100000") or reading.names == ("pkg1100000", "pkg1500000")
    assert reading.done == int(1.5 * (1 << 20)) + int(23.85 * (1 << 10))
    assert reading.total == int(2.10 * (1 << 20)) + int(2.86 * (1 << 20))
    assert b"\x1b" not in text
    lines = [line.rpartition("\r")[2] for line in text.decode().rstrip("\r\n").split("\r\n")]
    assert lines == ["Using Python 3.11.7 environment at: v", "Resolved 2 packages in 10ms", "Prepared 2 packages"]


def test_on_a_narrow_terminal_the_title_gives_way_to_what_is_fetched(monkeypatch):
    import io

    monkeypatch.setenv("COLUMNS", "60")
    stream = io.StringIO()
    progress = Progress(stream, 2, live=True)
    with progress.step("Installing torch-2.13-cu126 packages with uv from https://download.pytorch.org/whl/cu126"):
        transfers.fetching("torch", 312_000_000, 846_000_000)
        progress._line("Downloading")  # a line from the installer: the status line is drawn again
    frames = stream.getvalue().split("\r\x1b[K")
    drawn = [frame for frame in frames if "torch: 312 MB of 846 MB" in frame]
    assert drawn and all(len(frame) <= 59 and frame.startswith("[1/2] Installing") for frame in drawn), frames


def test_on_a_terminal_a_spinner_going_round_is_no_sign_of_life_for_the_silence_limit():
    """An installer whose terminal output is only a spinner redrawn (uv's while a download hangs) is silent."""
    from envkit.system.process import run_streamed

    spinner = "import sys, time\nwhile True:\n    for c in '|/-\\\\':\n        sys.stderr.write('\\r' + c); sys.stderr.flush(); time.sleep(0.05)\n"
    started = time.monotonic()
    done = run_streamed([sys.executable, "-c", spinner], os.environ, timeout=60, silence=1.0, terminal=True)
    assert done.returncode is None and done.silent and time.monotonic() - started < 30


def test_a_bar_that_moves_or_a_new_line_is_news_a_bar_drawn_again_is_not():
    out = transfers.TerminalOutput(lambda text: None)
    bar = "\r\x1b[2Ktorch ------------------------------ {} MiB/4.00 MiB"
    assert out.add(bar.format("1.00").encode()) is True
    assert out.add(bar.format("1.00").encode()) is False  # the same drawn again
    assert out.add(bar.format("2.00").encode()) is True
    assert out.add(b"\r\x1b[2KPrepared 1 package\r\n") is True
