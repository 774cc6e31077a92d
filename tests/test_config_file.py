"""Living with envkit for weeks, without a subprocess: the config file as users get it wrong (mirrors that are not
URL prefixes, a file that is a directory, a link to nothing, text not UTF-8), a $HOME that is not absolute, and the
environments a user has moved, deleted or hand-edited as `envkit envs` shows them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.create.jupyter import remove_kernel
from envkit.create.records_render import envs_json, envs_text
from envkit.state import records
from envkit.state.config import ConfigError, load_config, parse_config
from envkit.state.userdirs import user_dirs

CONFIG = Path("/home/me/.config/envkit/config.yaml")
TORCH = "https://download.pytorch.org/whl"


def _refused(text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(text, CONFIG)
    assert raised.value.exit_code == 2 and str(CONFIG) in raised.value.message
    return raised.value.message


# --- mirrors: what cannot be a URL prefix is refused when the config is read, not inside uv or the conda engine ---

@pytest.mark.parametrize("target, words", [
    ("http://[::1/whl", "it cannot be parsed (Invalid IPv6 URL)"),  # was: internal error: ValueError
    ("http://127.0.0.1:80a/whl", "it cannot be parsed (Port could not be cast"),  # was: uv's usage error
    ("http://127.0.0.1:99999/whl", "Port out of range"),
    ("https://my mirror/whl", "holds a space"),
    ("https://mirror.lab/whl?token=1", "has a query or a fragment"),  # was: https://mirror.lab/whl?token=1/cu126
    ("https://:8080/whl", "names no host"),
    ("file://srv/channels/whl", "three slashes: file:///srv/channel"),  # was: rattler's \\srv\channels\...
    ("file:srv/channels/whl", "three slashes"),
])
def test_a_mirror_that_is_no_url_prefix_is_refused_naming_it(target: str, words: str):
    message = _refused(json.dumps({"mirrors": {TORCH: target}}))
    assert f"the mirror {target!r} is not an https, http or file URL: " in message and words in message


def test_an_upstream_that_cannot_be_parsed_is_bad_input_not_an_internal_error():
    message = _refused(json.dumps({"mirrors": {"https://[::1/whl": "https://mirror.lab/whl"}}))
    assert "'https://[::1/whl' is not an http(s) URL to mirror: it cannot be parsed" in message


def test_a_directory_path_as_mirror_is_told_its_file_url_and_good_mirrors_are_still_taken():
    assert '(a local directory: "file:///srv/channel")' in _refused('mirrors: {"%s": "/srv/channel"}' % TORCH)
    for target in ("http://[::1]:8080/whl", "file:///srv/whl", "file://localhost/srv/whl",
                   "https://user:token@mirror.lab/whl/", "http://127.0.0.1:8080/whl"):
        config = parse_config(json.dumps({"mirrors": {TORCH: target}}), CONFIG)
        assert config.mirrored(f"{TORCH}/cu126") == f"{target.rstrip('/')}/cu126"


def test_an_upstream_given_twice_is_refused_and_its_host_matches_in_any_case():
    message = _refused(json.dumps({"mirrors": {"https://pypi.org/simple": "http://127.0.0.1:1/a",  # was: /a, silently
                                               "https://pypi.org/simple/": "http://127.0.0.1:1/b"}}))
    assert message.endswith("mirrors: 'https://pypi.org/simple/' is given twice (once as 'https://pypi.org/simple')")
    config = parse_config(json.dumps({"mirrors": {"HTTPS://Download.PyTorch.org/whl": "http://127.0.0.1:1/whl"}}),
                          CONFIG)
    assert config.mirrored(f"{TORCH}/cu126") == "http://127.0.0.1:1/whl/cu126"  # was: never mirrored
    # and the other way round: a URL written with capitals, under an upstream written in lower case
    lower = parse_config(json.dumps({"mirrors": {TORCH: "http://127.0.0.1:1/whl"}}), CONFIG)
    assert lower.mirrored("HTTPS://Download.PyTorch.org/whl/cu126/") == "http://127.0.0.1:1/whl/cu126/"
    assert lower.mirrored("https://download.pytorch.org/whlx") == "https://download.pytorch.org/whlx"  # not under


def test_a_key_of_the_wrong_kind_names_what_was_given():
    assert _refused("mirrors: [oops]\n").endswith("'mirrors' must map upstream URLs to mirror URLs, not a list "
                                                  '["oops"]')
    assert _refused("manifests: 12\n").endswith("'manifests' must be the path of a manifests directory, not the "
                                                "number 12")
    assert _refused("envs_dir: true\n").endswith("'envs_dir' must be a directory path, not true")


# --- the config file itself ---------------------------------------------------------------------------------------

def _dirs(tmp_path: Path):
    return user_dirs({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})


def test_a_default_config_that_is_a_link_to_nothing_is_an_error_not_no_config(tmp_path: Path):
    dirs = _dirs(tmp_path)
    dirs.config.mkdir(parents=True)
    (dirs.config / "config.yaml").symlink_to(tmp_path / "dotfiles" / "envkit.yaml")  # the mirrors silently dropped
    with pytest.raises(ConfigError) as raised:
        load_config({}, dirs)
    assert raised.value.message == (f"config file {dirs.config / 'config.yaml'} is a symbolic link to "
                                    f"{tmp_path / 'dotfiles' / 'envkit.yaml'}, which does not exist")


def test_a_config_not_utf8_says_the_line_and_a_directory_says_so(tmp_path: Path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b'mirrors:\n  "https://pypi.org/simple": "https://caf\xe9.lab/simple"\n')
    with pytest.raises(ConfigError) as raised:
        load_config({"ENVKIT_CONFIG": str(latin)}, _dirs(tmp_path))
    assert raised.value.message == f"config file {latin} is not UTF-8 text (byte 0xe9 at line 2): save it as UTF-8"
    with pytest.raises(ConfigError) as raised:
        load_config({"ENVKIT_CONFIG": str(tmp_path)}, _dirs(tmp_path))
    assert raised.value.message == f"config file {tmp_path} is a directory, not a file"
    assert "$ENVKIT_CONFIG names it" in raised.value.hint
    read, write = os.pipe()  # a shell's ENVKIT_CONFIG=<(...) is still read
    os.write(write, b"envs_dir: /scratch/envs\n")
    os.close(write)
    try:
        assert load_config({"ENVKIT_CONFIG": f"/dev/fd/{read}"}, _dirs(tmp_path)).envs_dir == Path("/scratch/envs")
    finally:
        os.close(read)


# --- where envkit keeps things ------------------------------------------------------------------------------------

def test_a_relative_home_never_puts_environments_under_the_working_directory():
    import pwd

    dirs = user_dirs({"HOME": "relhome"})  # was: relhome/.local/share/envkit, the records unreadable at once
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert dirs.data == Path(home) / ".local" / "share" / "envkit" and dirs.data.is_absolute()
    assert user_dirs({"HOME": "/home/me"}).config == Path("/home/me/.config/envkit")


# --- environments moved, deleted, edited --------------------------------------------------------------------------

RECORD = {"kind": "venv", "backend": "venv", "manifest": "torch", "build": "torch-2.13-cu126", "python": "3.11",
          "created": "2026-11-21T10:00:00+00:00", "machine": {}, "on_target": True}


def _record(name: str, prefix: Path, **changes) -> records.Record:
    return records.Record(**{**RECORD, "name": name, "prefix": str(prefix), **changes})


def test_a_deleted_environment_is_not_ready_in_json_and_the_text_says_what_to_do(tmp_path: Path):
    here = _record("here", tmp_path / "here")
    records.save(here, tmp_path / "records")
    gone = _record("gone", tmp_path / "gone")
    [listed_gone, listed_here] = envs_json([gone, here])
    assert (listed_gone["state"], listed_gone["exists"], listed_gone["error"]) == ("not held", False, "it is gone")
    assert listed_here["state"] == "ready" and "error" not in listed_here
    text = envs_text([gone, here])
    assert f"{tmp_path / 'gone'} (missing)" in text
    assert f"\ngone: {tmp_path / 'gone'} is gone; `envkit remove gone --yes` forgets it." in text


def test_a_check_result_the_record_does_not_say_is_not_shown_as_pass(tmp_path: Path):
    for ok, shown in [(True, "PASS"), (False, "FAIL"), ("false", "?"), ("yes", "?"), (None, "?")]:
        record = _record("x", tmp_path / "x", verify={"ok": ok})  # a hand-edited "false" was PASS
        records.save(record, tmp_path / "records")
        row = next(line for line in envs_text([record]).splitlines() if line.startswith("x "))
        assert row.split()[4] == shown, ok


def test_the_command_that_makes_an_environment_again_keeps_its_python_and_its_place(tmp_path: Path):
    # was: the Python found first on the machine, and the default place (with --force: this one deleted)
    record = _record("t", tmp_path / "t", python="3.11")
    assert record.remake_command("--force") == ("envkit create torch --build torch-2.13-cu126 --name t --prefix "
                                                f"{tmp_path / 't'} --python 3.11 --force")


def test_a_record_not_utf8_or_with_a_relative_prefix_says_which(tmp_path: Path):
    index = tmp_path / "records"
    index.mkdir()
    (index / "latin.json").write_bytes(b'{"name": "caf\xe9"}')
    (index / "rel.json").write_text(json.dumps({**RECORD, "name": "rel", "prefix": "envs/rel"}), encoding="utf-8")
    reasons = {entry.name: entry.reason for entry in records.scan(index)[1]}
    assert reasons["latin"] == f"{index / 'latin.json'} is not UTF-8 text (envkit writes its records as UTF-8 JSON)"
    assert reasons["rel"] == f"{index / 'rel.json'}: the environment's directory 'envs/rel' is not an absolute path"


# --- the Jupyter kernel ---------------------------------------------------------------------------------------------

def test_a_kernel_kept_elsewhere_through_a_link_is_unlisted_not_said_removed_and_left(tmp_path: Path):
    prefix = tmp_path / "env"
    kept = tmp_path / "dotfiles" / "torch"
    kept.mkdir(parents=True)
    (kept / "kernel.json").write_text(json.dumps({"argv": [str(prefix / "bin" / "python"), "-m", "ipykernel"]}))
    kernels = tmp_path / "jupyter" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "torch").symlink_to(kept)
    assert remove_kernel("torch", prefix, {"JUPYTER_DATA_DIR": str(tmp_path / "jupyter")})
    assert not os.path.lexists(kernels / "torch")  # was: "Removed the Jupyter kernel", and the link still there
    assert (kept / "kernel.json").exists()  # the user's own directory: only the link was envkit's to delete
    (kernels / "other").mkdir()
    (kernels / "other" / "kernel.json").write_text(json.dumps({"argv": ["/usr/bin/python3", "-m", "ipykernel"]}))
    assert not remove_kernel("other", prefix, {"JUPYTER_DATA_DIR": str(tmp_path / "jupyter")})
    assert (kernels / "other" / "kernel.json").exists()  # another Python's kernel: never envkit's to delete


# --- an unknown name among many -------------------------------------------------------------------------------------

def test_an_unknown_name_among_many_offers_the_closest_not_all_of_them():
    from envkit.commands.recorded import known_names_hint

    many = [f"bulk-{i:03d}" for i in range(300)] + ["torch-cu126"]
    hint = known_names_hint("torch-cu128", many)
    assert hint == "Did you mean torch-cu126? `envkit envs` lists its 301 environments." and len(hint) < 200
    assert known_names_hint("x", ["a", "b"]) == "Its environments: a, b."
    assert known_names_hint("zzz", many) == "`envkit envs` lists its 301 environments."
