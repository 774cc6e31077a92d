"""The command line, run as a user runs it: a real subprocess, real manifests, real exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support.next_steps import check_pasted

PROFILES = Path(__file__).parent / "profiles"


def envkit(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=environment, cwd=cwd, timeout=60
    )
    check_pasted(args, done.stdout + done.stderr, environment, cwd)
    return done


def assert_clean_error(result: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("envkit: error: ")
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def test_json_is_indented_for_a_terminal_and_one_line_for_a_pipe():
    """A person at a terminal reads it; a program gets the one-line form from json's fast encoder."""
    import pty

    from support.processes import read_terminal

    args = ("list", "torch", "--json", "--machine", str(PROFILES / "v100x8-cuda130.yaml"))
    piped = envkit(*args)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.count("\n") == 1 and json.loads(piped.stdout)["manifests"][0]["name"] == "torch"

    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    with subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=follower, stderr=subprocess.PIPE,
                          env=environment) as process:
        os.close(follower)
        got = read_terminal(leader)
        assert process.wait(timeout=60) == 0, process.stderr.read()
    os.close(leader)
    shown = got.decode().replace("\r\n", "\n")
    assert shown.startswith('{\n  "schema_version": 1,\n  "machine": {') and json.loads(shown) == json.loads(piped.stdout)


@pytest.mark.parametrize("args", [("list", "--all"), ("list", "--json"), ("manifests", "validate"), ("--help",)])
def test_a_reader_that_stops_reading_ends_the_command_quietly(args):
    """`envkit list --all | head`: once the reader has gone, the command stops with exit 1 (as click does for its
    own output) and says nothing: it was an 'internal error ... report it' with the BrokenPipeError."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    with subprocess.Popen([sys.executable, "-m", "envkit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=environment) as process:
        process.stdout.close()  # before the command has written anything: its first write meets a closed pipe
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) == 1
    assert stderr == ""


def test_help_teaches_the_commands():
    result = envkit("--help")
    assert result.returncode == 0
    for word in ("detect", "list", "compute capability"):
        assert word in result.stdout
    list_help = envkit("list", "--help").stdout
    for option in ("--machine", "--cuda", "--gpu-arch", "--manifests", "--all", "--json", "--python"):
        assert option in list_help


@pytest.mark.parametrize("words", [(), ("manifests",)])
def test_a_bare_command_prints_its_help_once_and_exits_2(words):
    result = envkit(*words)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    usage = " ".join(["Usage: envkit", *words]) + " [OPTIONS] COMMAND"
    assert result.stdout.count(usage) == 1, result.stdout


def test_list_json_contract():
    result = envkit("list", "torch", "--json", "--machine", str(PROFILES / "v100x8-cuda130.yaml"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["machine"]["cuda_driver"] == "13.0"
    assert len(data["machine"]["gpus"]) == 8
    [torch] = data["manifests"]
    assert torch["name"] == "torch"
    assert torch["selected"] == "torch-2.14-cu126"
    builds = {b["id"]: b for b in torch["builds"]}
    assert builds["torch-2.14-cu126"] == {
        **builds["torch-2.14-cu126"],
        "version": "2.14", "variant": "cu126", "compatible": True, "native": True,
    }
    assert builds["torch-2.14-cu130"]["compatible"] is False
    assert any("sm_70" in reason for reason in builds["torch-2.14-cu130"]["reasons"])
    assert builds["torch-2.14-cpu"]["variant"] == "cpu" and builds["torch-2.14-cpu"]["native"] is None
    assert torch["builds"][0]["id"] == torch["selected"]


def test_list_text_marks_the_selected_build_and_hides_incompatible_ones():
    result = envkit("list", "torch", "--machine", str(PROFILES / "rtx5090-cuda128.yaml"))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Machine: blackwell-desk: driver 570.133.07, CUDA 12.8")
    selected = [line for line in lines if line.startswith("  * ")]
    assert len(selected) == 1 and "torch-2.13-cu129" in selected[0]  # CUDA 12 minor-version compat (issue 30, 46)
    assert "torch-2.14-cu130" not in result.stdout
    # The next step judges the same machine when pasted.
    machine = str(PROFILES / "rtx5090-cuda128.yaml")
    assert f"do not fit this machine: `envkit list torch --all --machine {machine}` says why." in result.stdout


def test_list_where_no_build_fits_points_at_all_without_counting_more():
    machine = str(PROFILES / "h100-cuda128.yaml")
    result = envkit("list", "jax", "--python", "3.9", "--machine", machine)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"  No build of jax fits this machine: `envkit list jax --all --machine {machine} --python 3.9` says why.")
    assert "more build" not in result.stdout


def test_list_all_shows_reasons():
    result = envkit("list", "torch", "--all", "--machine", str(PROFILES / "rtx5090-cuda128.yaml"))
    assert "torch-2.14-cu130" in result.stdout
    assert "no: needs driver CUDA >= 13.0, the driver has 12.8" in result.stdout
    assert "no kernels for sm_120" in result.stdout


def test_overrides_resolve_for_a_login_node():
    result = envkit("list", "torch", "--json", "--machine", str(PROFILES / "no-gpu.yaml"),
                    "--cuda", "11.2", "--gpu-arch", "6.1")
    data = json.loads(result.stdout)
    assert data["manifests"][0]["selected"] == "torch-2.7-cu118"
    assert data["machine"]["sources"] == {"cuda_driver": "--cuda option", "gpus": "--gpu-arch option"}


def test_python_option():
    result = envkit("list", "torch", "--json", "--python", "3.8", "--machine", str(PROFILES / "no-gpu.yaml"))
    assert json.loads(result.stdout)["manifests"][0]["selected"] == "torch-2.4-cpu"


def test_unknown_manifest_exits_2_with_the_names_that_exist():
    result = envkit("list", "pytorch", "--machine", str(PROFILES / "no-gpu.yaml"))
    assert_clean_error(result, 2, "'pytorch'", "torch", "tensorflow", "jax", "mxnet")


def test_bad_option_values_exit_2():
    assert_clean_error(envkit("list", "torch", "--python", "2.7"), 2, "--python 2.7")
    assert_clean_error(envkit("list", "torch", "--cuda", "twelve"), 2, "--cuda")
    assert_clean_error(envkit("list", "torch", "--gpu-arch", "ampere", "--cuda", "12.4"), 2, "--gpu-arch")


@pytest.mark.parametrize("target", [("--cuda", "12.4"), ("--gpu-arch", "8.0"), ("--machine", "x.yaml")])
def test_the_check_a_node_runs_on_itself_takes_no_other_machine(target):
    # verify --on-node (what `verify --partition` has the node run) checks that node for real: --cuda and --gpu-arch
    # would judge it as another machine, and slipped through.
    assert_clean_error(envkit("verify", "torch-x", "--on-node", *target), 2, "--on-node checks the machine it runs on")


@pytest.mark.parametrize("args, command", [(("manifests", "check", "--build"), "envkit manifests check"),
                                           (("--debug", "list", "torch", "--python"), "envkit list")])
def test_an_option_without_its_value_points_at_its_own_commands_help(args, command):
    # click raises this before the command has a context: the hint pointed at `envkit --help`.
    assert_clean_error(envkit(*args), 2, "requires an argument", f"`{command} --help` lists what it takes")


def test_malformed_profile_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cuda_driver: '12.4'\ngpus: [{name: A100}]\n")
    assert_clean_error(envkit("list", "--machine", str(bad)), 2, str(bad), "compute_capability")
    assert_clean_error(envkit("list", "--machine", str(tmp_path / "absent.yaml")), 2, "cannot read")


def copy_envs(tmp_path: Path) -> Path:
    from envkit.catalog import default_manifests_dir

    copy = tmp_path / "envs"
    shutil.copytree(default_manifests_dir(), copy, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return copy


def test_broken_manifest_exits_2_naming_file_build_and_field(tmp_path):
    envs = copy_envs(tmp_path)
    path = envs / "torch.yaml"
    path.write_text(path.read_text().replace('{variant: cu130, cuda: "13.0"', '{variant: cu130, cuda: "13.7"', 1))
    result = envkit("list", "torch", "--manifests", str(envs), "--machine", str(PROFILES / "no-gpu.yaml"))
    assert_clean_error(result, 2, str(path), "build torch-2.15-cu130", "field 'cuda'", "13.7")


def test_manifests_directory_from_the_environment(tmp_path):
    envs = copy_envs(tmp_path)
    path = envs / "torch.yaml"
    path.write_text(path.read_text().replace("summary: PyTorch", "summary: EDITED PyTorch"))
    result = envkit("list", "torch", "--machine", str(PROFILES / "no-gpu.yaml"), env={"ENVKIT_MANIFESTS": str(envs)})
    assert result.returncode == 0
    assert "torch: EDITED PyTorch" in result.stdout
    missing = envkit("list", env={"ENVKIT_MANIFESTS": str(tmp_path / "nowhere")})
    assert_clean_error(missing, 2, "does not exist")


def test_debug_shows_the_traceback_and_keeps_the_exit_code():
    result = envkit("--debug", "list", "pytorch")
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "UnknownNameError" in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0", "601"])
def test_probe_timeout_must_be_sensible(value):
    result = envkit("detect", "--timeout", value)
    assert result.returncode == 2 and "between 0.1 and 600" in result.stderr


def test_empty_manifests_setting_is_bad_input():
    assert_clean_error(envkit("list", "--manifests", ""), 2, "--manifests")


# CI machines have no NVIDIA driver; on a machine with one, these two tests say nothing and are skipped.
needs_no_driver = pytest.mark.skipif(
    Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None,
    reason="this machine has an NVIDIA driver",
)


@needs_no_driver
def test_detect_on_this_machine_without_a_driver():
    # These machines have no NVIDIA driver: the real NVML library is missing, which is a normal outcome.
    result = envkit("detect", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpus"] == [] and data["cuda_driver"] is None
    assert any("NVML" in note for note in data["notes"])
    text = envkit("detect")
    assert text.returncode == 0
    assert "No NVIDIA driver found" in text.stdout


@needs_no_driver
def test_detect_json_is_a_profile_that_list_reads_back(tmp_path):
    saved = tmp_path / "here.json"
    saved.write_text(envkit("detect", "--json").stdout)
    result = envkit("list", "torch", "--json", "--machine", str(saved))
    assert result.returncode == 0
    assert json.loads(result.stdout)["manifests"][0]["selected"] == "torch-2.15-cpu"


# The console script pip installed for the Python running the tests (not whichever `envkit` PATH finds first).
CONSOLE_SCRIPT = Path(sysconfig.get_path("scripts")) / "envkit"


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason=f"no console script at {CONSOLE_SCRIPT}")
def test_console_script_runs_from_another_directory(tmp_path):
    result = subprocess.run([str(CONSOLE_SCRIPT), "list", "torch", "--machine", str(PROFILES / "no-gpu.yaml")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0 and "torch-2.15-cpu" in result.stdout


def test_the_selected_builds_note_is_shown():
    result = envkit("list", "mxnet", "--machine", str(PROFILES / "no-gpu.yaml"))
    assert "note on mxnet-1.9.1-cpu: numpy is pinned below 1.24" in result.stdout
    assert "retired: retired to the Apache Attic" in result.stdout


def test_next_step_commands_keep_the_python_asked_for():
    # `--python 3.10` used to be dropped from the printed `envkit list ... --all` command, which then listed a
    # different set of builds than the one it was said to explain.
    machine = str(PROFILES / "no-gpu.yaml")
    listed = envkit("list", "torch", "--machine", machine, "--python", " 3.10")
    assert listed.returncode == 0, listed.stderr
    assert f"`envkit list torch --all --machine {machine} --python 3.10` says why" in listed.stdout
    refused = envkit("create", "torch", "--machine", machine, "--python", "3.10", "--build", "torch-2.14-cu126",
                     "--dry-run")
    assert_clean_error(refused, 1, f"`envkit list torch --machine {machine} --python 3.10` shows the builds")
    pasted = envkit("list", "torch", "--all", "--machine", machine, "--python", "3.10")
    assert pasted.returncode == 0 and "torch-2.14-cu126" in pasted.stdout


def test_an_empty_name_is_refused_not_replaced_by_the_default():
    for name in ("", "  "):
        done = envkit("create", "torch", "--name", name, "--machine", str(PROFILES / "no-gpu.yaml"), "--dry-run")
        assert_clean_error(done, 2, "--name is empty")
        assert done.stdout == ""


def _commands(app, path=()):
    """Every command of a typer app as (its words on the command line, its function), subcommands included."""
    for info in app.registered_commands:
        yield (*path, info.name or info.callback.__name__.replace("_", "-")), info.callback
    for group in app.registered_groups:
        yield from _commands(group.typer_instance, (*path, group.name))


def test_every_commands_help_has_each_paragraph_of_its_docstring_on_one_line():
    """typer keeps a docstring's own line breaks and the terminal wraps each line again; envkit.cli reflows them,
    so that in a window wide enough every paragraph is one line, and in a narrow one it wraps evenly."""
    import inspect

    import typer
    from typer.testing import CliRunner

    from envkit.cli import groups_for, reflow_help

    app = typer.Typer()
    app.callback()(lambda: None)
    for group in groups_for(["--help"]):
        group.register(app)
    reflow_help(app)
    commands = list(_commands(app))
    assert len(commands) >= 15 and ("manifests", "check") in [words for words, _ in commands]
    for words, callback in commands:
        result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "2000"})
        assert result.exit_code == 0, (words, result.output)
        lines = [line.strip() for line in result.output.splitlines()]
        for paragraph in inspect.cleandoc(callback.__doc__).split("\n\n"):
            assert " ".join(paragraph.split()) in lines, (words, paragraph)


A100 = {"name": "NVIDIA A100-SXM4-80GB", "capability": [8, 0], "memory": 85899345920}
H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": [9, 0], "memory": 85899345920}


def test_detect_json_names_the_gpus_cuda_visible_devices_hides_as_list_json_does(this_machine):
    # (CUDA_DEVICE_ORDER=PCI_BUS_ID: numbered as NVML numbers them; CUDA's default puts the H100, the faster, first)
    env = {**this_machine([A100, H100]), "CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    detected = envkit("detect", "--json", env=env)
    assert detected.returncode == 0, detected.stderr
    data = json.loads(detected.stdout)
    assert [(g["index"], g["name"]) for g in data["gpus"]] == [(1, H100["name"])]
    assert [(g["index"], g["name"]) for g in data["hidden_gpus"]] == [(0, A100["name"])]
    listed = json.loads(envkit("list", "torch", "--json", env=env).stdout)["machine"]
    assert (data["gpus"], data["hidden_gpus"]) == (listed["gpus"], listed["hidden_gpus"])
    text = envkit("detect", env=env).stdout
    assert "Hidden by CUDA_VISIBLE_DEVICES (not counted):\n  GPU 0: NVIDIA A100-SXM4-80GB" in text
    hidden_all = envkit("detect", env={**env, "CUDA_VISIBLE_DEVICES": ""}).stdout
    assert "GPUs: none visible\nHidden by CUDA_VISIBLE_DEVICES (not counted):\n  GPU 0:" in hidden_all


def test_detect_json_with_no_gpu_hidden_says_so_and_reads_back_as_a_profile(this_machine, tmp_path):
    env = this_machine([A100])
    detected = envkit("detect", "--json", env=env)
    data = json.loads(detected.stdout)
    assert data["hidden_gpus"] == [] and [g["name"] for g in data["gpus"]] == [A100["name"]]
    saved = tmp_path / "a100.json"
    saved.write_text(detected.stdout)
    listed = envkit("list", "torch", "--json", "--machine", str(saved))
    assert listed.returncode == 0, listed.stderr
    assert [g["name"] for g in json.loads(listed.stdout)["machine"]["gpus"]] == [A100["name"]]


def test_a_broken_table_detection_needs_is_an_error_not_a_note(this_machine, envs_copy):
    """Detection reads cuda.yaml only when it needs it (here: NVML does not tell the driver's CUDA, so it comes from
    the driver's version). Broken, it is the manifests' error (exit 2), never a probe's note on a machine that then
    looks like one without a driver."""
    env = this_machine([A100], driver="535.129.03", cuda=0)
    fine = envkit("detect", "--json", "--manifests", str(envs_copy), env=env)
    assert fine.returncode == 0 and json.loads(fine.stdout)["cuda_driver"] == "12.2", fine.stderr
    (envs_copy / "cuda.yaml").write_text("min_driver: [\n")
    for command in ("detect", "list"):
        assert_clean_error(envkit(command, "--manifests", str(envs_copy), env=env), 2, "cuda.yaml")


def test_a_missing_manifests_directory_is_an_error_even_where_no_table_is_needed(tmp_path):
    for command in (("detect",), ("list", "--machine", str(PROFILES / "h100-cuda128.yaml"))):
        assert_clean_error(envkit(*command, "--manifests", str(tmp_path / "nowhere")), 2, "does not exist")


def test_a_mistyped_manifest_is_said_before_the_machines_are_read(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("gpus: [\n")
    result = envkit("list", "toch", "--machine", str(broken))
    assert_clean_error(result, 2, "no manifest named 'toch'", "torch")
    assert "broken.yaml" not in result.stderr


def test_every_value_a_command_takes_is_named_in_its_help_not_by_a_python_type():
    """Help names what each option takes (SECONDS, N, DIR, ...) and each argument by its metavar, with a type
    column a user can read: never typer's `<float>`, `<int range>`, or a parser function's name (`<path_value>`)."""
    from support.cli_tree import envkit_command

    def params(command, path=("envkit",)):
        for param in command.params:
            yield " ".join(path), param
        for name, sub in getattr(command, "commands", {}).items():
            yield from params(sub, (*path, name))

    found = list(params(envkit_command()))
    assert len(found) > 100
    for where, param in found:
        if param.param_type_name == "option" and (param.is_flag or param.hidden):
            continue
        name = param.metavar.strip("[].") if param.metavar else ""
        assert name and (name.upper() == name or "|" in name), (where, param.opts, param.metavar)
        kind = getattr(param, "type", None)  # (typer 0.29's own arguments have none: the help below still shows it)
        if param.param_type_name == "argument" and kind is not None:  # help shows its type beside its metavar
            assert "_" not in kind.name, (where, param.opts, kind.name)
    shown = envkit("manifests", "diff", "--help", env={"COLUMNS": "200"}).stdout
    assert "OLD_DIR" in shown and "<path>" in shown and "_value" not in shown
    for command in (("manifests", "check"), ("verify",), ("job",), ("survey",), ("list",), ("create",)):
        shown = envkit(*command, "--help", env={"COLUMNS": "200"}).stdout
        assert ("SECONDS" in shown or " N " in shown) and "<float>" not in shown and "<int" not in shown, command


@pytest.mark.parametrize("args, meant, not_meant", [
    (("lsit",), "Did you mean 'list'?", "'site'"),  # two letters swapped: one edit, nearer than site's two
    (("creat", "torch"), "Did you mean 'create'?", None),
    (("manifests", "chekc"), "Did you mean 'check'?", None),
    (("create", "torhc", "--dry-run"), "Did you mean 'torch'? Manifests: jax, mxnet, tensorflow, torch.", None),
    (("lock", "tensorflw", "--machine", str(PROFILES / "h100-cuda128.yaml")), "Did you mean 'tensorflow'?", None),
])
def test_a_typo_of_a_command_or_a_manifest_is_told_the_nearest_name(args, meant, not_meant):
    result = envkit(*args)
    assert_clean_error(result, 2, meant)
    assert not_meant is None or not_meant not in result.stderr


def test_a_name_near_nothing_gets_no_guess():
    result = envkit("zzzzzz")
    assert_clean_error(result, 2, "No such command 'zzzzzz'.")
    assert "Did you mean" not in result.stderr


@pytest.mark.parametrize("name, choices, nearest", [
    ("torhc", ["jax", "mxnet", "tensorflow", "torch"], ["torch"]),
    ("lsit", ["detect", "list", "create", "site"], ["list"]),
    ("tensorflw", ["tensorflow", "torch"], ["tensorflow"]),
    ("jsx", ["jax", "mxnet"], ["jax"]),
    ("list", ["list", "site"], []),  # the name itself is no typo
    ("qqqq", ["list", "site"], []),
])
def test_the_nearest_names(name, choices, nearest):
    from envkit.text.words import closest

    assert closest(name, choices) == nearest
