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
from envkit.system.signals import interrupting_signals, lost_signal, raise_lost_signal

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
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's own: KeyboardInterrupt
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
