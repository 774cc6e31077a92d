"""A SIGKILL in the middle of an installer leaves its scratch directory in $TMPDIR; the next run removes it."""

from __future__ import annotations

from test_faults import Target, venv_target  # noqa: F401 (a fixture)


def test_the_scratch_a_sigkilled_run_left_in_tmpdir_is_removed_by_the_next_run(venv_target: Target):
    venv_target.kill_at("inside-backend")
    left = venv_target.home.leftovers()
    assert any(name.startswith("envkit-venv-") for name in left), left  # the dead run's
    done = venv_target.create("--no-verify")  # undoes the dead run, then makes the environment
    assert done.returncode == 0, done.stderr
    assert venv_target.home.leftovers() == []
