"""Recovery from a run that died at each point of its journal: what it made goes, what it set aside comes back,
and a run that had finished its environment is finished, not undone."""

from __future__ import annotations

import json
from pathlib import Path

from envkit import records
from envkit.create.journal import Journal, recover, stamp, unstamp


def _env(prefix: Path, name: str, created: str) -> dict:
    prefix.mkdir(parents=True)
    record = {"name": name, "prefix": str(prefix), "kind": "venv", "backend": "venv", "manifest": "torch",
              "build": "torch-2.13-cpu", "python": "3.12", "created": created, "machine": {}, "on_target": True}
    records.write_json_atomic(records.in_prefix(prefix), record)
    return record


def test_died_after_setting_the_old_one_aside_puts_it_back(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", "2026-01-01")
    records.write_json_atomic(records.index_path(index, "t"), old)
    journal = Journal(tmp_path / "t.creating", name="t", prefix=str(prefix), old_record=old)
    journal.save()
    journal.move_aside(prefix)
    prefix.mkdir()
    stamp(prefix)  # the new one, half made
    assert recover(journal.path, index)[0].startswith("undid")
    assert records.owner(prefix) == "t" and json.loads(records.in_prefix(prefix).read_text())["created"] == "2026-01-01"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["t"] and not journal.path.exists()


def test_died_after_finishing_the_new_one_keeps_it_and_deletes_the_old(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", "2026-01-01")
    journal = Journal(tmp_path / "t.creating", name="t", prefix=str(prefix), old_record=old)
    journal.save()
    journal.move_aside(prefix)
    _env(prefix, "t", "2026-11-21")
    stamp(prefix)
    unstamp(prefix)  # complete: it died before deleting what it replaced
    assert recover(journal.path, index)[0].startswith("finished")
    assert json.loads(records.in_prefix(prefix).read_text())["created"] == "2026-11-21"
    assert records.load(index, "t").created == "2026-11-21"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["t"]


def test_died_before_touching_anything_leaves_the_old_one_as_it_was(tmp_path: Path):
    prefix, index = tmp_path / "envs" / "t", tmp_path / "records"
    old = _env(prefix, "t", "2026-01-01")
    journal = Journal(tmp_path / "t.creating", name="t", prefix=str(prefix), old_record=old)
    journal.save()
    assert recover(journal.path, index)[0].startswith("undid")
    assert records.owner(prefix) == "t" and records.load(index, "t").created == "2026-01-01"
