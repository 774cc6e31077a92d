"""A SIGTERM that lands while Python runs a finalizer (Popen.__del__ did, in CI: `envkit jupyter` then waited on and
its job stayed queued) loses the Interrupted its handler raised; envkit's waiting loops raise it again. Real signals,
sent to this process, with the handlers envkit installs."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from envkit.errors import Interrupted
from envkit.system.process import run_captured
from envkit.system.signals import cleaning_up, interrupting_signals, lost_signal, raise_lost_signal, stop_asked

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class _SignalledWhileFinalized:
    """An object whose finalizer is where the signal lands (as a Popen's __del__ was)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        for _ in range(100_000):  # the handler runs here, inside the finalizer
            pass


def _lose(signum: int = signal.SIGTERM) -> None:
    _SignalledWhileFinalized(signum)  # made and finalized at once


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_an_interrupted_swallowed_by_a_finalizer_is_kept_and_raised_once(signum: int):
    with interrupting_signals():
        _lose(signum)  # no exception reaches here: Python swallowed it
        assert lost_signal() == signum
        with pytest.raises(Interrupted) as raised:
            raise_lost_signal()
        assert raised.value.signum == signum
        raise_lost_signal()  # once only
        assert lost_signal() is None


def test_a_ctrl_c_swallowed_by_a_finalizer_is_raised_again_as_a_ctrl_c():
    with interrupting_signals():
        with pytest.raises(KeyboardInterrupt) as raised:  # Ctrl-C is Python's own KeyboardInterrupt, as always
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert not isinstance(raised.value, Interrupted)
    with interrupting_signals():
        _lose(signal.SIGINT)
        assert lost_signal() == signal.SIGINT
        with pytest.raises(KeyboardInterrupt) as raised:
            raise_lost_signal()
        assert not isinstance(raised.value, Interrupted)


def test_an_interrupted_that_went_its_way_is_not_raised_again():
    with interrupting_signals():
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert lost_signal() is None
        raise_lost_signal()  # nothing


def test_outside_the_block_the_handlers_and_the_hook_are_back():
    hook = sys.unraisablehook
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    with interrupting_signals():
        _lose()
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert sys.unraisablehook is hook
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert lost_signal() is None  # what the block lost goes with it


def test_a_child_being_waited_for_is_stopped_when_the_signal_was_lost(tmp_path: Path):
    started = time.monotonic()
    with interrupting_signals():
        _lose()
        with pytest.raises(Interrupted):
            run_captured(["sh", "-c", f"echo $$ > {tmp_path}/pid; exec sleep 60"], os.environ, timeout=120)
    assert time.monotonic() - started < 30
    pid = int((tmp_path / "pid").read_text()) if (tmp_path / "pid").exists() else None
    if pid is not None:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_jupyters_wait_for_its_server_ends_when_the_signal_was_lost(tmp_path: Path):
    from envkit.slurm.client import Slurm
    from envkit.slurm.jupyter_server import wait_for_server

    with interrupting_signals():
        _lose()
        with pytest.raises(Interrupted):  # before it asks Slurm anything: none is needed here
            wait_for_server(Slurm(), "1", tmp_path, "token", queue_timeout=600, server_timeout=600)


def _in_a_thread(work):
    """``work()`` run in a thread of its own: what it returned, or the exception it raised."""
    import threading

    box = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # noqa: B036 (what the thread met is the result)
            box["value"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    return box["value"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_child_another_thread_waits_on_and_that_thread_starts_no_other(tmp_path: Path, signum):
    """The main thread gets the signal; a thread of the same command (the survey's) waiting on its child stops it
    and raises too; a thread starts no new child after it, except to clean up."""
    import threading

    started = threading.Event()
    pid_file = tmp_path / "pid"

    def waits() -> object:
        started.set()
        return run_captured(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"], os.environ, timeout=120)

    begun = time.monotonic()
    with interrupting_signals():
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(waits)
            started.wait(10)
            while not pid_file.exists():
                time.sleep(0.02)
            with pytest.raises(KeyboardInterrupt) as raised:
                os.kill(os.getpid(), signum)
                future.result()
            assert getattr(raised.value, "signum", signal.SIGINT) == signum and stop_asked() == signum
            thrown = future.exception(timeout=30)  # the thread stopped its child and raised the same
        assert isinstance(thrown, KeyboardInterrupt) and getattr(thrown, "signum", signal.SIGINT) == signum
        refused = _in_a_thread(lambda: run_captured(["sh", "-c", f"touch {tmp_path}/ran"], os.environ, timeout=10))
        assert isinstance(refused, KeyboardInterrupt) and not (tmp_path / "ran").exists()

        def cleans_up():
            with cleaning_up():
                return run_captured(["sh", "-c", f"touch {tmp_path}/cleaned"], os.environ, timeout=10).returncode

        assert _in_a_thread(cleans_up) == 0 and (tmp_path / "cleaned").exists()
        assert run_captured(["true"], os.environ, timeout=10).returncode == 0  # the main thread cleans up as it goes
    assert stop_asked() is None  # the next command starts afresh
    assert time.monotonic() - begun < 30
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_signal_ignored_when_envkit_started_stays_ignored():
    """`nohup envkit survey ...`: the terminal's hang-up must not end it (nor Ctrl-C a job started in the background)."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interrupting_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.1)  # nothing raised
            assert stop_asked() is None
            with pytest.raises(Interrupted):  # the others still end it
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
