"""No terminal injection: what envkit reads from another program (a GPU's name from NVML, nvidia-smi or a profile, a
partition from sinfo, an installer's output) reaches the user's terminal with its control characters escaped."""

from __future__ import annotations

import pytest

from envkit.slurm.sinfo import parse_sinfo
from envkit.text.terminal import printable

from tests.test_cli import envkit

TITLE_AND_CLEAR = "\x1b]0;pwned\x07\x1b[2J\x1b[H"
HOSTILE = f"NVIDIA A100{TITLE_AND_CLEAR}\u202e\x9b31m"


@pytest.mark.parametrize("text, shown", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
    ("a\x1b[2Jb", "a\\x1b[2Jb"),
    ("bell\x07 del\x7f csi\x9b", "bell\\x07 del\\x7f csi\\x9b"),
    ("right\u202eto-left", "right\\u202eto-left"),
    ("tab\tkept", "tab\tkept"),
])
def test_printable_escapes_control_characters(text, shown):
    assert printable(text) == shown


def test_newlines_are_kept_only_where_asked():
    assert printable("a\nb") == "a\\nb" and printable("a\nb\x1b", lines=True) == "a\nb\\x1b"


def no_control(text: str) -> None:
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in text), \
        repr(text)


def test_a_gpu_name_from_nvml_holding_escape_sequences_is_shown_escaped(this_machine):
    env = this_machine([{"name": HOSTILE, "capability": (8, 0), "memory": 80 << 30}])
    for args in (("detect",), ("list", "torch")):
        done = envkit(*args, env=env)
        assert done.returncode == 0, done.stderr
        no_control(done.stdout + done.stderr)
        assert "NVIDIA A100\\x1b]0;pwned\\x07" in done.stdout, done.stdout


def test_a_gpu_name_in_a_profile_file_is_shown_escaped(tmp_path):
    profile = tmp_path / "hostile.yaml"
    name = HOSTILE.encode("unicode_escape").decode("ascii")  # as YAML's double quotes write it
    profile.write_text(f'driver_version: "550.54.14"\ncuda_driver: "12.4"\ngpus:\n'
                       f'  - {{name: "{name}", compute_capability: "8.0"}}\n')
    done = envkit("list", "torch", "--machine", str(profile))
    assert done.returncode == 0, done.stderr
    no_control(done.stdout + done.stderr)
    assert "\\x1b[2J" in done.stdout


def test_sinfo_fields_are_escaped_as_they_are_read():
    [row] = parse_sinfo(f"gpu{TITLE_AND_CLEAR}|up|node1|gpu:a100:4|(null)|idle\n")
    assert row.partition == "gpu\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H" and row.node == "node1"
