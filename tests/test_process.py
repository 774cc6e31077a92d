"""envkit's one subprocess gateway (envkit/system/process.py) against programs that misbehave, for real: one endless
line, output without end, a program that exits leaving a child holding its output, one that hangs silent, one that stops
reading its input. Each bound is checked by what it keeps (bytes, lines, processes), never by how long it took; the
``timeout`` of the outer subprocess.run only turns a hang into a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import time

from envkit.system.process import MAX_LINE, run_captured, run_streamed, start_captured, watching

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


def _in_a_fresh_python(code: str, hang: float = 300) -> dict:
    """Run ``code`` (which binds ``result``) in a new interpreter; ``result`` plus its peak memory in MiB. Past
    ``hang`` seconds it is a hang: a failure, not a wait for the sleeps below."""
    # VmHWM, the peak of this interpreter's own memory: getrusage's ru_maxrss would also count the memory of the
    # process it was forked from before the exec (a test run that has grown to 300 MB)
    program = textwrap.dedent(code) + textwrap.dedent("""
        import json, re
        status = open("/proc/self/status").read()
        result["peak_mib"] = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
        print(json.dumps(result))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=hang,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_one_300_mib_line_costs_its_last_bytes_not_its_size():
    result = _in_a_fresh_python(f"""
        import sys
        from envkit.system.process import run_streamed
        writer = "import sys\\nfor _ in range(300): sys.stdout.buffer.write(b'x' * (1 << 20))\\nprint('END')"
        seen = []
        done = run_streamed([{sys.executable!r}, "-c", writer], {ENV!r}, seen.append, timeout=240)
        result = {{"returncode": done.returncode, "lines": [len(line) for line in seen], "last": seen[-1][-10:],
                   "start": seen[-1][:6]}}
    """)
    assert result["returncode"] == 0
    assert result["lines"] == [MAX_LINE + len("[...] ")] and result["start"] == "[...] "
    assert result["last"] == "xxxxxxxEND"
    assert result["peak_mib"] < 200, result  # (it was 1.2 GB)


def test_output_without_end_is_cut_off_at_the_time_limit_with_a_bounded_buffer():
    result = _in_a_fresh_python("""
        from envkit.system.process import run_captured
        done = run_captured(["yes", "endless"], {"PATH": "/usr/bin:/bin"}, 3, max_output=1 << 20)
        result = {"returncode": done.returncode, "kept": len(done.stdout), "tail": done.stdout[-8:]}
    """)
    assert result["returncode"] is None and result["kept"] == 1 << 20 and result["tail"] == "endless\n"
    assert result["peak_mib"] < 200, result  # (nvidia-smi printing without end took 12 GB)


def test_an_installer_that_exits_leaving_a_child_on_its_output_ends_with_its_child():
    result = _in_a_fresh_python("""
        from envkit.system.process import run_streamed
        done = run_streamed(["sh", "-c", "sleep 3600 & echo $!; echo failed; exit 1"], {"PATH": "/usr/bin:/bin"},
                            timeout=120)
        result = {"returncode": done.returncode, "tail": list(done.tail)}
    """, hang=100)  # (it hung envkit until the child ended)
    assert result["returncode"] == 1 and result["tail"][-1] == "failed"
    assert not _alive(int(result["tail"][0]))  # its whole process group ended with it


def test_a_program_that_exits_0_leaving_a_worker_gets_its_worker_ended_too():
    done = run_captured(["sh", "-c", "sleep 3600 & echo $!"], ENV, 120)
    assert done.returncode == 0
    assert not _alive(int(done.stdout.split()[0]))


def test_a_silent_hang_is_stopped_with_everything_it_started():
    done = run_streamed(["sh", "-c", "sleep 3600 & echo $!; echo started; sleep 3600"], ENV, timeout=600, silence=2)
    assert done.returncode is None and done.silent
    assert done.tail[-1] == "started" and not _alive(int(done.tail[0]))


def test_a_program_that_keeps_talking_is_stopped_at_its_time_limit():
    chatty = "import time\nwhile True:\n    print('working', flush=True)\n    time.sleep(0.1)"
    done = run_streamed([sys.executable, "-c", chatty], ENV, timeout=2, silence=600)
    assert done.returncode is None and not done.silent and done.tail[-1] == "working"


def test_a_child_started_now_and_waited_for_later_ran_meanwhile_and_keeps_what_it_printed(tmp_path: Path):
    # create starts the new Python's check, runs the first pip step, then reads the check's answer: the check must
    # have run during the step (its mark is there before finish is called), and its output must be all there
    mark = tmp_path / "ran"
    told = []
    with watching(told.append):
        pending = start_captured(["sh", "-c", f"echo out; echo err >&2; : > {mark}; exit 3"], ENV)
    deadline = time.monotonic() + 60
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mark.exists()  # it ran before anyone waited for it
    done = pending.finish(60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert told == [pending.process.pid]  # the watchers (create's journal) heard of it at its start, once


def test_a_child_waited_for_later_has_its_time_limit_counted_from_its_start():
    pending = start_captured(["sleep", "3600"], ENV)
    time.sleep(1.5)
    done = pending.finish(1)  # already past its 1 s when finish is called: stopped at once, not 1 s later
    assert done.returncode is None and not _alive(pending.process.pid)
    assert done.elapsed < 30


def test_a_child_that_ended_long_before_it_was_waited_for_is_read_in_full_past_its_time_limit():
    # create's Python check (120 s) beside a pip step that downloads for ten minutes: the check answered at once
    pending = start_captured(["sh", "-c", "echo 3.11; exit 0"], ENV)
    time.sleep(1.5)
    done = pending.finish(1)
    assert (done.returncode, done.stdout) == (0, "3.11\n")


def test_a_child_no_longer_wanted_is_stopped_with_everything_it_started():
    pending = start_captured(["sh", "-c", "sleep 3600 & echo $!; sleep 3600"], ENV)
    deadline = time.monotonic() + 60
    worker = None
    while worker is None and time.monotonic() < deadline:  # its worker's pid, read from /proc (nobody reads its pipe)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pending.process.pid and int(stat.parent.name) != pending.process.pid:
                worker = int(stat.parent.name)
        time.sleep(0.01)
    assert worker is not None and _alive(worker)
    pending.stop()
    assert pending.process.returncode is not None  # reaped
    assert not _alive(pending.process.pid) and not _alive(worker)


def test_input_is_written_in_full_and_a_reader_that_stops_early_is_no_error():
    text = "".join(f"line {i}\n" for i in range(100_000))  # past any pipe buffer
    done = run_captured(["cat"], ENV, 120, input_text=text)
    assert done.returncode == 0 and done.stdout == text
    early = run_captured(["head", "-c", "10"], ENV, 120, input_text=text)
    assert early.returncode == 0 and early.stdout == "line 0\nlin"


def test_a_missing_program_is_127_with_the_reason():
    done = run_streamed(["/nonexistent/installer"], ENV)
    assert done.returncode == 127 and "No such file" in done.tail[0]


def test_an_nvidia_smi_that_prints_without_end_costs_a_bounded_buffer(tmp_path: Path):
    # It took 12 GB before its 10 s limit. Through the real detect fallback, with a fake nvidia-smi.
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec yes 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    result = _in_a_fresh_python(f"""
        from envkit.detect.smi import probe_smi
        from envkit.machines.gpu_names import GpuNameTable
        profile = probe_smi(GpuNameTable({{}}), command={str(smi)!r}, timeout=3)
        result = {{"notes": list(profile.notes), "gpus": len(profile.gpus)}}
    """)
    assert result["notes"] == ["nvidia-smi: timed out after 3 s"] and result["gpus"] == 0, result
    assert result["peak_mib"] < 200, result


def test_a_child_that_closed_its_output_is_looked_at_again_after_1_ms_then_less_and_less_often(monkeypatch):
    """Waiting for a child to exit sleeps 1 ms, 2, 4, ... at most 20 ms between looks (a first wait of 20 ms
    made each installer step of create 20 ms longer), and never past the deadline. Counted, not timed."""
    import envkit.system.process as gateway

    looks = iter([False] * 7 + [True])
    pauses: list[float] = []
    monkeypatch.setattr(gateway, "_exited", lambda process: next(looks))
    monkeypatch.setattr(gateway.time, "sleep", lambda seconds: pauses.append(round(seconds, 6)))
    assert gateway._wait_exited(None, gateway.time.monotonic() + 3600) is True
    assert pauses == [0.001, 0.002, 0.004, 0.008, 0.016, 0.02, 0.02]
    pauses.clear()
    monkeypatch.setattr(gateway, "_exited", lambda process: False)
    clock = iter([100.0, 100.0195, 100.03])
    monkeypatch.setattr(gateway.time, "monotonic", lambda: next(clock))
    assert gateway._wait_exited(None, 100.02) is False  # the last pause is cut to the deadline
    assert pauses == [0.001, 0.0005]
