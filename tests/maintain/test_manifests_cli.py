"""`envkit manifests validate | check | diff` as an admin runs them: a subprocess, a private home, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from maintain_helpers import complete_index, index, manifests, wheels  # noqa: F401 (fixtures)
from support.manifest_edits import edit, release

PROFILES = Path(__file__).resolve().parents[1] / "profiles"


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / "home" / name.lower())
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def envkit(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def no_traceback(result) -> None:
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr


def position(directory: Path, version: str) -> int:
    return [r["version"] for r in yaml.safe_load((directory / "torch.yaml").read_text())["releases"]].index(version)


def test_validate_reports_every_problem_and_exits_2(home, envs_copy):
    edit(envs_copy, "torch.yaml", lambda d: next(b for b in release(d, "2.14")["builds"]
                                                 if b["variant"] == "cu132").update(cuda="12.7"))
    edit(envs_copy, "torch.yaml", lambda d: release(d, "2.13").update(python=">=3.10,<3.17"))
    edit(envs_copy, "jax.yaml", lambda d: d.update(framework="caffe"))
    result = envkit(home, "manifests", "validate", str(envs_copy))
    no_traceback(result)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    torch = str(envs_copy / "torch.yaml")
    assert any(line.startswith(f"{torch}:") and "build torch-2.14-cu132, field 'cuda'" in line
               and "not in cuda.yaml" in line for line in lines), lines
    field = f"releases[{position(envs_copy, '2.13')}].python"
    assert any(field in line and "claims Python 3.16" in line for line in lines), lines
    assert any("jax.yaml" in line and "'caffe'" in line for line in lines), lines
    # (and, since issue 30, 2.13 claiming 3.15 makes its four torchaudio 2.11 pins problems: no cp315 wheel)
    assert sum("torchaudio 2.11 has no wheel for Python 3.15" in line for line in lines) == 4
    assert "7 problems" in result.stderr

    as_json = envkit(home, "manifests", "validate", str(envs_copy), "--json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and len(report["problems"]) == 7
    assert all(isinstance(p["line"], int) for p in report["problems"])


def test_validate_a_good_directory_and_a_missing_one(home, envs_copy, tmp_path):
    good = envkit(home, "manifests", "validate", str(envs_copy))
    assert good.returncode == 0 and "valid" in good.stdout
    missing = envkit(home, "manifests", "validate", str(tmp_path / "nope"))
    no_traceback(missing)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


@pytest.mark.parametrize("args, argument", [(("validate", "{nope}"), "DIR"), (("diff", "{nope}", "{good}"), "OLD_DIR"),
                                            (("diff", "{good}", "{nope}"), "NEW_DIR")])
def test_a_missing_directory_given_as_an_argument_is_said_of_that_argument(home, envs_copy, tmp_path, args, argument):
    paths = {"nope": str(tmp_path / "nope"), "good": str(envs_copy)}
    missing = envkit(home, "manifests", *(arg.format(**paths) for arg in args))
    no_traceback(missing)
    assert missing.returncode == 2 and f"manifests directory {paths['nope']} does not exist" in missing.stderr
    assert f"Check the {argument} argument" in missing.stderr and "ENVKIT_MANIFESTS" not in missing.stderr


@pytest.mark.parametrize("broken", ["OLD_DIR", "NEW_DIR"])
def test_diff_says_a_broken_manifest_of_its_argument_is_fixed_there_not_with_manifests(home, envs_copy, tmp_path,
                                                                                       broken):
    bad = tmp_path / "bad copy"
    shutil.copytree(envs_copy, bad)
    (bad / "jax.yaml").write_text("name: [unclosed\n")
    old, new = (bad, envs_copy) if broken == "OLD_DIR" else (envs_copy, bad)
    result = envkit(home, "manifests", "diff", str(old), str(new))
    no_traceback(result)
    assert result.returncode == 2 and f"{bad / 'jax.yaml'}: not valid YAML" in result.stderr
    assert f"Fix it (`envkit manifests validate '{bad}'` lists every problem), or give a good copy as {broken}." \
        in result.stderr, result.stderr
    assert "--manifests" not in result.stderr


def write_config(home, index) -> None:
    config = Path(home["XDG_CONFIG_HOME"]) / "envkit" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"mirrors": {"https://download.pytorch.org/whl": f"{index.url}/whl"}}))


def test_check_exits_1_on_a_miss_and_0_when_all_is_there(home, manifests, index):
    write_config(home, index)
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130", pythons=("312",)),
                             *wheels("torchvision", "0.29.1+cu130"), *wheels("torchaudio", "2.11.0+cu130")])
    result = envkit(home, "manifests", "check", "torch", "--manifests", str(manifests), "--retries", "0")
    no_traceback(result)
    assert result.returncode == 1
    assert "torch-2.14-cu130: no torch wheel for Python 3.11, 3.13" in result.stdout
    assert "Checked 2 builds" in result.stdout and "1 problem" in result.stdout

    only = envkit(home, "manifests", "check", "--manifests", str(manifests), "--build", "torch-2.14-cu130",
                  "--python", "3.12", "--json")
    assert only.returncode == 0, only.stdout + only.stderr
    report = json.loads(only.stdout)
    assert report["ok"] is True and report["builds"] == ["torch-2.14-cu130"]
    assert report["pythons"] == {"torch-2.14-cu130": ["3.12"]} and report["missing"] == []


@pytest.mark.parametrize("args, words", [
    (["--build", "torch-9.9-cpu"], "no build named 'torch-9.9-cpu'"),
    (["--python", "2.7"], "--python 2.7"),
    (["pytorch"], "no manifest named 'pytorch'"),
])
def test_check_bad_input_exits_2(home, manifests, args, words):
    result = envkit(home, "manifests", "check", "--manifests", str(manifests), *args)
    no_traceback(result)
    assert result.returncode == 2 and words in result.stderr


def test_diff_per_machine_and_per_partition(home, envs_copy, tmp_path):
    def drop_cu126_and_add_2_16(data):
        newest_with_cu126 = release(data, "2.14")
        newest_with_cu126["builds"] = [b for b in newest_with_cu126["builds"] if b["variant"] != "cu126"]
        data["releases"].insert(0, {"version": "2.16", "python": ">=3.11,<3.16",
                                    "pip": {"packages": ["torch==2.16.*"]},
                                    "builds": [{"variant": "cu130", "cuda": "13.0", "arch": "turing-to-blackwell"}]})

    new = tmp_path / "new"
    shutil.copytree(envs_copy, new)
    edit(new, "torch.yaml", drop_cu126_and_add_2_16)
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"version": 1, "partitions": {
        "gpu-b200": {"nodes": [{"profile_file": str(PROFILES / "b200-cuda130.yaml")}]},
        "gpu-mixed": {"nodes": [{"profile_file": str(PROFILES / "b200-cuda130.yaml")},
                                {"profile_file": str(PROFILES / "v100x8-cuda130.yaml"), "count": 3}]},
    }}))
    env = {**home, "ENVKIT_SITE": str(site)}
    result = envkit(env, "manifests", "diff", str(envs_copy), str(new), "--machine",
                    str(PROFILES / "v100x8-cuda130.yaml"), "--partition", "gpu-b200", "--partition", "gpu-mixed")
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.split("\n\n")
    assert blocks[0].splitlines() == [
        "machine v100x8:",
        "  torch: torch-2.14-cu126 -> torch-2.13-cu126",
        "    no longer fits: torch-2.14-cu126",
    ]
    assert blocks[1].splitlines() == [
        "partition gpu-b200 (1 machine):",
        "  torch: torch-2.15-cu130 -> torch-2.16-cu130",
        "    now fits: torch-2.16-cu130",
    ]
    # its nodes, not its site file entries: the V100 entry stands for 3
    assert blocks[2].splitlines() == ["partition gpu-mixed (4 nodes):", "  no change"]

    as_json = json.loads(envkit(env, "manifests", "diff", str(envs_copy), str(new), "--partition", "gpu-b200",
                                "--json").stdout)
    torch = next(m for m in as_json["targets"][0]["manifests"] if m["manifest"] == "torch")
    assert torch == {"manifest": "torch", "before": "torch-2.15-cu130", "after": "torch-2.16-cu130", "changed": True,
                     "in_old": True, "in_new": True,
                     "became_compatible": ["torch-2.16-cu130"], "became_incompatible": []}
    unknown = envkit(env, "manifests", "diff", str(envs_copy), str(new), "--partition", "gpu-h100")
    no_traceback(unknown)
    assert unknown.returncode == 2 and "gpu-b200" in unknown.stderr


def test_diff_without_a_target_judges_this_machine(home, envs_copy):
    result = envkit(home, "manifests", "diff", str(envs_copy), str(envs_copy))
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["this machine:", "  no change"]


def test_requests_is_imported_only_by_check():
    code = ("import sys, envkit.cli, envkit.commands.manifests, envkit.maintain.check, envkit.maintain.fetch; "
            "print('requests' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def test_users_point_envkit_at_the_admins_directory(home, envs_copy, tmp_path):
    """The config's `manifests:` (relative to the config file) is read by every command; ENVKIT_MANIFESTS wins."""
    edit(envs_copy, "torch.yaml", lambda d: d["releases"][0]["builds"][0].update(cuda="12.7"))
    config = Path(home["XDG_CONFIG_HOME"]) / "envkit" / "config.yaml"
    config.parent.mkdir(parents=True)
    shutil.move(str(envs_copy), str(config.parent / "admin-envs"))
    config.write_text("manifests: admin-envs\n")
    validate = envkit(home, "manifests", "validate")
    assert validate.returncode == 2 and str(config.parent / "admin-envs" / "torch.yaml") in validate.stdout
    listed = envkit(home, "list", "torch", "--machine", str(PROFILES / "b200-cuda130.yaml"))
    no_traceback(listed)
    assert listed.returncode == 2 and "admin-envs" in listed.stderr and "12.7" in listed.stderr
    shipped = Path(__file__).resolve().parents[2] / "envs"
    overridden = envkit({**home, "ENVKIT_MANIFESTS": str(shipped)}, "list", "torch", "--machine",
                        str(PROFILES / "b200-cuda130.yaml"))
    assert overridden.returncode == 0 and "torch-2.14-cu130" in overridden.stdout


def test_check_shows_progress_on_a_terminal_only(home, manifests, index):
    import pty

    write_config(home, index)
    complete_index(index)
    main, secondary = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "envkit", "manifests", "check", "--manifests", str(manifests)],
                                stdout=subprocess.PIPE, stderr=secondary, text=True, env=home, timeout=120)
        os.close(secondary)
        secondary = -1
        seen = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: everything was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main)
        if secondary >= 0:
            os.close(secondary)
    assert result.returncode == 0, result.stdout
    assert b"reading index pages: 6/6" in seen
    assert "reading index pages" not in result.stdout
    piped = envkit(home, "manifests", "check", "--manifests", str(manifests))
    assert piped.returncode == 0 and "reading index pages" not in piped.stderr
