"""The lock a writer of a shared file holds while it reads, changes and writes it back (envkit/state/sharedlock.py)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from envkit.errors import EnvkitError
from envkit.state.sharedlock import holding, lock_path


def test_a_second_writer_waits_for_the_first_and_a_link_takes_the_same_lock(tmp_path: Path):
    site = tmp_path / "shared" / "site.yaml"
    site.parent.mkdir()
    site.write_text("version: 1\n")
    link = tmp_path / "mine.yaml"
    link.symlink_to(site)
    with holding(site, "the site file"):
        assert lock_path(site).is_file()
        with pytest.raises(EnvkitError) as refused:  # (wait=0: the first still holds it)
            with holding(link, "the site file", wait=0):
                pass
        assert "kept the site file locked" in refused.value.message and str(lock_path(site)) in refused.value.message
    with holding(link, "the site file", wait=0):  # released: taken at once
        fd = os.open(lock_path(site), os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)


def test_where_no_lock_file_can_be_made_the_change_goes_on(tmp_path: Path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    ran = []
    with holding(blocked / "site.yaml", "the site file", wait=0):
        ran.append(True)
    assert ran == [True] and not lock_path(blocked / "site.yaml").exists()
