"""A record that cannot be read (truncated, edited by hand, from elsewhere): its error names the fields plainly,
`envkit envs` lists it as unreadable with the reason (text and JSON), and `envkit remove` forgets it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Home
from envkit.create.records_render import envs_json, envs_text
from envkit.errors import BadInputError
from envkit.state import records

GOOD = {"name": "good", "prefix": "/envs/good", "kind": "venv", "backend": "venv", "manifest": "torch",
        "build": "torch-2.13-cpu", "python": "3.12", "created": "2026-11-21T10:00:00+00:00", "machine": {},
        "on_target": True}


def write(index: Path, name: str, data: object) -> Path:
    path = records.index_path(index, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_a_record_missing_fields_names_them_plainly():
    with pytest.raises(BadInputError) as caught:
        records.record_from_dict({"name": "x", "prefix": "/p"}, "x.json")
    assert caught.value.message == ("x.json: not an envkit record (missing fields: kind, backend, manifest, build, "
                                    "python, created, machine, on_target)")
    assert "__init__" not in caught.value.message and "positional" not in caught.value.message


def test_a_record_with_fields_of_the_wrong_kind_names_them():
    bad = {**GOOD, "on_target": "yes", "machine": [], "schema": True, "kernel": None}
    with pytest.raises(BadInputError, match=r"bad fields: machine \(not a mapping\), on_target \(not true or false\), "
                                            r"schema \(not a number\)\)$"):
        records.record_from_dict(bad, "x.json")
    assert records.record_from_dict({**GOOD, "kernel": None, "extra": {"a": 1}}, "x.json").kernel is None


def test_every_field_of_a_record_has_its_kind_checked():
    assert set(records._FIELD_TYPES) == set(records.Record.__dataclass_fields__)  # a new field gets a kind too


def test_scan_keeps_the_unreadable_entries_with_their_reason(tmp_path: Path):
    index = tmp_path / "records"
    records.save(records.Record(**{**GOOD, "prefix": str(tmp_path / "good")}), index)  # (its directory holds it)
    write(index, "cut", '{"name": "cut", "prefix": "/envs/cut", "kin')
    write(index, "partial", {"name": "partial", "prefix": str(tmp_path / "partial")})
    found, broken = records.scan(index)
    assert [r.name for r in found] == ["good"] and [r.name for r in records.load_all(index)] == ["good"]
    assert [(b.name, b.prefix) for b in broken] == [("cut", None), ("partial", str(tmp_path / "partial"))]
    assert "is not valid JSON" in broken[0].reason and "missing fields: kind" in broken[1].reason
    text = envs_text(found, (), broken)
    assert "partial" in text and "unreadable" in text and "`envkit remove partial --yes` forgets it" in text
    entries = json.loads(json.dumps(envs_json(found, (), broken)))
    assert [(e["name"], e["state"]) for e in entries] == [("cut", "unreadable"), ("good", "ready"),
                                                          ("partial", "unreadable")]
    assert "missing fields" in entries[2]["error"] and entries[0]["prefix"] is None
    alone = envs_text([], (), broken)
    assert "No environments yet" not in alone and "cut      -" in alone


def test_an_entry_that_no_environment_name_fits_is_not_sent_to_remove(tmp_path: Path):
    # envkit never writes such an entry, and `envkit remove 'a b'` refuses the name: the advice is another one.
    index = tmp_path / "records"
    for name in ("a b", "-x", "ok"):
        write(index, name, "{")
    hints = {entry.name: entry.hint for entry in records.scan(index)[1]}
    assert hints["ok"] == "`envkit remove ok --yes` forgets it."
    for name in ("a b", "-x"):
        assert "envkit remove" not in hints[name].replace("`envkit remove` takes none", "")
        assert f"move {records.index_path(index, name)} out of {index} yourself" in hints[name]


def test_envs_lists_a_corrupt_record_and_remove_cleans_it_up(home: Home):
    index = home.data / "records"
    prefix = home.prefix("half")
    (prefix / ".envkit").mkdir(parents=True)
    (prefix / ".envkit" / "record.json").write_text(json.dumps({"name": "half"}), encoding="utf-8")
    write(index, "half", {"name": "half", "prefix": str(prefix), "kind": "venv"})
    elsewhere = home.root / "not-envkits"
    elsewhere.mkdir()
    write(index, "other", {"name": "other", "prefix": str(elsewhere)})

    listed = home.envkit("envs")
    assert listed.returncode == 0, listed.stderr
    assert "half" in listed.stdout and "unreadable" in listed.stdout and "missing fields: backend" in listed.stdout
    entries = json.loads(home.envkit("envs", "--json").stdout)["environments"]
    assert {e["name"]: e["state"] for e in entries} == {"half": "unreadable", "other": "unreadable"}

    used = home.envkit("run", "half", "--", "true")
    assert used.returncode == 2 and "missing fields: backend, manifest" in used.stderr
    assert "`envkit remove half --yes`" in used.stderr and "Traceback" not in used.stderr

    removed = home.envkit("remove", "half", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert f"Deleted {prefix}." in removed.stdout and "Forgot half." in removed.stdout
    assert not prefix.exists() and not records.index_path(index, "half").exists()

    kept = home.envkit("remove", "other", "--yes")  # its directory holds no envkit record of it: left alone
    assert kept.returncode == 0 and f"Left {elsewhere} alone" in kept.stdout and elsewhere.is_dir()
    assert "No environments yet" in home.envkit("envs").stdout


def test_a_record_whose_kernel_climbs_out_of_the_kernels_directory_deletes_nothing_there(home: Home):
    # The kernel a record names is deleted by `envkit remove` when it runs the environment's Python: a kernel of
    # "../../victim" was the directory victim beside the kernels directory, deleted with all it held (issue #40).
    prefix = home.prefix("k1")
    (prefix / "bin").mkdir(parents=True)
    victim = home.root / "victim"
    victim.mkdir()
    (victim / "kernel.json").write_text(json.dumps({"argv": [str(prefix / "bin" / "python")]}), encoding="utf-8")
    (victim / "precious.txt").write_text("kept\n", encoding="utf-8")
    record = {**GOOD, "name": "k1", "prefix": str(prefix), "kernel": "../../victim"}
    records.write_json_atomic(records.in_prefix(prefix), record)
    write(home.data / "records", "k1", record)
    environ = {"JUPYTER_DATA_DIR": str(home.root / "jupyter")}
    listed = home.envkit("envs", env=environ)
    assert "k1" in listed.stdout and "its kernel '../../victim' holds a path separator" in listed.stdout, listed.stdout
    done = home.envkit("remove", "k1", "--yes", env=environ)
    assert done.returncode == 0, done.stderr
    assert (victim / "precious.txt").read_text() == "kept\n"
    assert not prefix.exists() and home.record("k1") is None


def test_a_record_nested_beyond_what_json_reads_is_unreadable_not_an_internal_error(home: Home):
    # json.loads raises RecursionError (not ValueError) for 100,000 nested arrays: `envkit envs` ended in
    # "internal error" for such an index entry, and for such a record inside an environment.
    deep = "[" * 100_000 + "]" * 100_000
    write(home.data / "records", "deep", deep)
    prefix = home.prefix("inner")
    (prefix / ".envkit").mkdir(parents=True)
    (prefix / ".envkit" / "record.json").write_text(deep, encoding="utf-8")
    write(home.data / "records", "inner", {**GOOD, "name": "inner", "prefix": str(prefix)})
    listed = home.envkit("envs")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr and "internal error" not in listed.stderr, \
        listed.stderr
    assert "deep.json is not valid JSON" in listed.stdout and "record.json is not valid JSON" in listed.stdout
    removed = home.envkit("remove", "inner", "--yes")
    assert removed.returncode == 0 and "internal error" not in removed.stderr, removed.stderr
    assert prefix.exists()  # its own record cannot be read: not known to be the environment, not deleted
