"""Colour that carries meaning: PASS green, FAIL red, NOT RUN and warnings yellow, the pick marked, nothing else;
on for a terminal, off into a pipe, with NO_COLOR (any value) or --no-color, forced by FORCE_COLOR or --color always."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.state import records
from envkit.state.userdirs import user_dirs
from envkit.text.colour import colour_wanted, paint
from tests.test_cli import PROFILES, assert_clean_error

GREEN, RED, YELLOW, BOLD, RESET = "\033[32m", "\033[31m", "\033[33m", "\033[1m", "\033[0m"
H100 = str(PROFILES / "h100-cuda130.yaml")
REPORT = """Machine: driver 580.159.04, CUDA 13.0 (nvml); NVIDIA H100 80GB HBM3 (sm_90)
  Warning: no torch GPU build runs here.
  GPU 0: NVIDIA H100 80GB HBM3: ok (matmul ok, conv2d ok)
  GPU 1: NVIDIA H100 80GB HBM3: FAIL (matmul off by 3.8)
FAIL: torch 2.11.0 does not work on this machine.
Why:
  - the PASSWORD and FAILOVER of a FAIL-safe are not verdicts
"""


@pytest.mark.parametrize("choice, environ, terminal, wanted", [
    ("auto", {}, True, True),
    ("auto", {}, False, False),
    ("auto", {"NO_COLOR": ""}, True, False),  # set to anything, even empty: off
    ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
    ("auto", {"FORCE_COLOR": "1"}, False, True),
    ("auto", {"FORCE_COLOR": ""}, False, False),
    ("always", {"NO_COLOR": "1"}, False, True),
    ("never", {"FORCE_COLOR": "1"}, True, False),
])
def test_when_colour_is_on(choice, environ, terminal, wanted):
    assert colour_wanted(choice, environ, terminal) is wanted


def test_only_verdicts_warnings_and_the_pick_are_coloured():
    painted = paint(REPORT)
    assert f"{RED}FAIL{RESET}: torch 2.11.0" in painted
    assert f"  {YELLOW}Warning:{RESET} no torch" in painted
    assert f": {RED}FAIL{RESET} (matmul off" in painted and ": ok (" in painted
    assert "the PASSWORD and FAILOVER of a FAIL-safe" in painted  # words that hold the verdicts' letters: plain
    assert painted.replace(RED, "").replace(YELLOW, "").replace(RESET, "") == REPORT
    assert paint("PASS: torch works\nNOT RUN on a: no job\n") == (f"{GREEN}PASS{RESET}: torch works\n"
                                                                 f"{YELLOW}NOT RUN{RESET} on a: no job\n")
    assert paint("    BUILD\n  * torch-2.14-cu126  2.14\n    torch-2.13-cu126  2.13\n") == (
        f"    BUILD\n  {BOLD}* torch-2.14-cu126{RESET}  2.14\n    torch-2.13-cu126  2.13\n")
    table = "NAME  CHECK  PREFIX\ndl    PASS*  /a\ntf    FAIL   /b\n"
    assert paint(table) == table  # cells only where the caller says it is a table
    assert paint(table, table=True) == (f"NAME  CHECK  PREFIX\ndl    {GREEN}PASS*{RESET}  /a\n"
                                        f"tf    {RED}FAIL{RESET}   /b\n")


def envkit(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=environment,
                          timeout=60)


def test_a_pipe_gets_no_colour_unless_forced():
    plain = envkit("list", "torch", "--machine", H100)
    assert plain.returncode == 0 and "\033[" not in plain.stdout
    forced = envkit("list", "torch", "--machine", H100, env={"FORCE_COLOR": "1"})
    pick = next(line for line in forced.stdout.splitlines() if "* torch-" in line)
    assert pick.startswith(f"  {BOLD}* torch-") and RESET in pick
    assert forced.stdout.count("\033[") == 2  # the pick's mark and its reset: nothing else
    assert "\033[" not in envkit("--no-color", "list", "torch", "--machine", H100, env={"FORCE_COLOR": "1"}).stdout
    assert "\033[" not in envkit("list", "torch", "--machine", H100,
                                 env={"FORCE_COLOR": "1", "NO_COLOR": ""}).stdout
    assert "\033[" in envkit("--color", "always", "list", "torch", "--machine", H100).stdout


def test_json_is_never_coloured():
    result = envkit("--color", "always", "list", "torch", "--json", "--machine", H100)
    assert result.returncode == 0, result.stderr
    assert "\033[" not in result.stdout and json.loads(result.stdout)["schema_version"] == 1


def test_the_envs_table_colours_its_check_column(tmp_path: Path):
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), "FORCE_COLOR": "1"}
    for name, ok in (("good", True), ("bad", False)):
        prefix = tmp_path / name
        (prefix / "bin").mkdir(parents=True)
        records.save(records.Record(name=name, prefix=str(prefix), kind="venv", backend="venv", manifest="torch",
                                    build="torch-2.14-cu126", python="3.12", created="2026-11-01T00:00:00Z",
                                    machine={}, on_target=True, verify={"ok": ok, "time": "2026-11-02T00:00:00Z"}),
                     user_dirs({**os.environ, **env}).records)
    shown = envkit("envs", env=env)
    assert shown.returncode == 0, shown.stderr
    good = next(line for line in shown.stdout.splitlines() if line.startswith("good"))
    bad = next(line for line in shown.stdout.splitlines() if line.startswith("bad"))
    assert f"{GREEN}PASS{RESET}" in good and f"{RED}FAIL{RESET}" in bad


@pytest.mark.parametrize("value", ["sometimes", "yes", ""])
def test_an_unknown_color_is_a_usage_error(value):
    assert_clean_error(envkit("--color", value, "list", "--machine", H100), 2, "Invalid value for '--color'",
                       "is not one of auto, always, never")
