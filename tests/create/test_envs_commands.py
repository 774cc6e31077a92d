"""What comes after create: `envkit envs`, `run`, `verify ENV`, `remove`, the Jupyter kernel; and create's bad input."""

from __future__ import annotations

import json

import pytest

from conftest import CU126, PROFILES, Home
from support.local_wheels import dependency_closure, local_distribution_files
from support.pypi_index import IndexServer


@pytest.fixture
def created(home: Home, torch_index: IndexServer) -> Home:
    done = home.envkit("create", *CU126, "--yes", "--no-verify")
    assert done.returncode == 0, done.stderr
    return home


def test_envs_lists_what_envkit_made(created: Home):
    text = created.envkit("envs")
    assert text.returncode == 0
    assert "torch-cu126  torch-2.13-cu126  venv     " in text.stdout and str(created.prefix("torch-cu126")) in text.stdout
    [entry] = json.loads(created.envkit("envs", "--json").stdout)["environments"]
    assert entry["name"] == "torch-cu126" and entry["exists"] is True and entry["verify"] is None
    assert entry["prefix"] == str(created.prefix("torch-cu126"))


def test_run_activates_the_environment_and_passes_the_exit_code_through(created: Home):
    code = "import os, sys; print(sys.prefix, os.environ['VIRTUAL_ENV']); sys.exit(7)"
    done = created.envkit("run", "torch-cu126", "--", "python", "-c", code)
    prefix = str(created.prefix("torch-cu126"))
    assert done.returncode == 7 and done.stdout.split() == [prefix, prefix]
    missing = created.envkit("run", "torch-cu126", "--", "no-such-command-here")
    assert missing.returncode == 2 and "no-such-command-here: no such command" in missing.stderr
    assert created.envkit("run", "torch-cu126").returncode == 2  # no command


def test_verify_by_name_judges_against_the_recorded_build_and_stores_the_result(created: Home):
    done = created.envkit("verify", "torch-cu126", "--json")
    report = json.loads(done.stdout)
    assert report["version"] == "2.13.0+cu126" and report["installed_build"] == "torch-2.13-cu126"
    # Checked on this machine (no GPU): a CUDA build where no GPU is visible does not pass here.
    assert done.returncode == (0 if report["ok"] else 1)
    stored = created.record("torch-cu126")["verify"]
    assert stored["ok"] is report["ok"] and stored["version"] == "2.13.0+cu126"
    assert json.loads((created.prefix("torch-cu126") / ".envkit" / "record.json").read_text())["verify"] == stored


def test_remove_asks_unless_yes_and_deletes_the_environment_and_its_record(created: Home):
    prefix = created.prefix("torch-cu126")
    refused = created.envkit("remove", "torch-cu126")  # no terminal to ask on
    assert refused.returncode == 2 and "--yes" in refused.stderr and prefix.exists()
    done = created.envkit("remove", "torch-cu126", "--yes")
    assert done.returncode == 0 and f"Deleted {prefix}." in done.stdout
    assert not prefix.exists() and created.record("torch-cu126") is None
    assert "No environments yet" in created.envkit("envs").stdout


@pytest.mark.parametrize("command", [("remove", "nope", "--yes"), ("run", "nope", "--", "true"), ("verify", "nope")])
def test_an_unknown_environment_is_bad_input_naming_the_known_ones(created: Home, command):
    done = created.envkit(*command)
    assert done.returncode == 2 and "envkit made no environment named 'nope'" in done.stderr
    assert "torch-cu126" in done.stderr and "Traceback" not in done.stderr


def test_jupyter_registers_a_kernel_running_the_environments_python_and_remove_drops_it(
        home: Home, torch_index: IndexServer):
    kernel = [w for w in local_distribution_files(["ipykernel"]) if w.name.startswith("ipykernel-")][-1:]
    if not kernel:
        pytest.skip("no ipykernel wheel on this machine")
    torch_index.add_index("/pypi/simple", kernel + local_distribution_files(dependency_closure(kernel[0])))
    done = home.envkit("create", *CU126, "--yes", "--no-verify", "--jupyter")
    assert done.returncode == 0, done.stderr
    assert home.leftovers() == []  # the user's temporary directory: ipykernel's leftovers would land there
    spec = home.root / ".local" / "share" / "jupyter" / "kernels" / "torch-cu126" / "kernel.json"
    data = json.loads(spec.read_text())
    assert data["argv"][0] == str(home.prefix("torch-cu126") / "bin" / "python")
    assert data["display_name"] == "torch-cu126 (envkit)"
    assert home.record("torch-cu126")["kernel"] == "torch-cu126"
    assert any(p.startswith("/pypi/simple/ipykernel/") for p in torch_index.requests)
    assert home.envkit("remove", "torch-cu126", "--yes").returncode == 0
    assert not spec.parent.exists()


@pytest.mark.parametrize("args, code, message", [
    (("create", "pytorch"), 2, "no manifest named 'pytorch'"),
    (("create", "torch", "--build", "torch-9.9-cu999"), 2, "torch has no build 'torch-9.9-cu999'"),
    (("create", "torch", "--build", "torch-2.14-cu130"), 1, "torch-2.14-cu130 does not fit"),
    (("create", "torch", "--name", "../escape"), 2, "cannot name an environment"),
    (("create", "torch", "--backend", "spack"), 2, "is not one of"),
    (("create", "torch", "--python", "2.7"), 2, "2.7"),
])
def test_create_bad_input_is_one_clear_line_and_changes_nothing(home: Home, args, code, message):
    done = home.envkit(*args, "--machine", str(PROFILES / "gtx1080ti-cuda101.yaml"), "--dry-run")
    assert done.returncode == code and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not home.data.exists()


def test_a_broken_config_file_is_bad_input(home: Home):
    home.config.write_text("mirrors: [oops]\n")
    done = home.envkit("create", "torch", "--dry-run", "--machine", str(PROFILES / "no-gpu.yaml"))
    assert done.returncode == 2 and "envkit.yaml: 'mirrors' must map upstream URLs" in done.stderr


def test_create_help_teaches(home: Home):
    text = home.envkit("create", "--help", env={"COLUMNS": "200"}).stdout
    for option in ("--name", "--build", "--python", "--backend", "--prefix", "--dry-run", "--yes", "--force",
                   "--json", "--no-verify", "--jupyter", "--verbose", "--machine", "ENVKIT_CONFIG", "mirrors"):
        assert option in text, option
