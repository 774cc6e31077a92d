"""Modulefiles from one pure function per syntax (envkit.shared.modulefile): their text, and what the real module systems
make of it (Lmod, Environment Modules: tests/support/module_systems.py): a path with spaces, `$`, quotes and
brackets reaches PATH and VIRTUAL_ENV exactly, `module help` and `whatis` say the build (its CUDA as the record
keeps it, never read out of the build id), loading a second envkit module swaps the first, and `module unload`
restores the environment exactly: a VIRTUAL_ENV set before the load, the environment's bin that was on PATH before
it, and after the file was rewritten for another version while the module was loaded."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from envkit.errors import BadInputError
from envkit.shared.modulefile import ModuleInfo, lua_string, lua_text, module_info, tcl_string, tcl_text
from support import module_systems

NASTY = "/opt/site envs/it's \"$HOME\" [x] {y} \\z"
# Lmod's reader of Tcl modulefiles (tcl2lua.tcl, 8.6) writes a prepend-path value into Lua without escaping its
# quotes and backslashes: envkit refuses to write a Tcl modulefile for such a path, and the Lua one carries it. A path
# without them goes through both module systems' Tcl readers intact.
LESS_NASTY = "/opt/site envs/it's $HOME [x] {y}"


def info(prefix: str, kind: str = "venv", name: str = "torch-cu126", build: str = "torch-2.13-cu126",
         cuda: str = "12.6", held: bool = False) -> ModuleInfo:
    record = SimpleNamespace(build=build, manifest="torch", python="3.11", prefix=prefix, kind=kind, cuda=cuda,
                             rocm=None, name=name, machine={"name": "rtx4090"},
                             held=["torch==2.13.0+cu126"] if held else None,
                             target={"options": ["--partition", "gpu-4-a100"], "machines": ["a100"]},
                             verify={"ok": True, "time": "2026-11-27T01:00:00+00:00", "node": "node1"})
    return module_info(f"site:{name}", record, "alice")


def test_the_words_of_help_and_whatis():
    made = info("/opt/x")
    assert made.whatis == ("Name: site:torch-cu126", "Description: torch build torch-2.13-cu126 (CUDA 12.6), Python "
                           "3.11", "CUDA: 12.6", "Fits: partition gpu-4-a100",
                           "Last check: PASS 2026-11-27T01:00:00+00:00 on node1")
    assert "Published by alice." in made.help


def test_the_cuda_is_the_builds_as_recorded_never_read_out_of_the_build_id():
    jax = info("/opt/x", name="jax", build="jax-0.12-cu12", cuda="12.0")  # the manifest's cuda: "12.0"
    assert "CUDA: 12.0" in jax.whatis and "(CUDA 12.0)" in jax.whatis[1]
    cpu = info("/opt/x", build="torch-2.13-cpu", cuda="none")
    assert "CUDA: none (a CPU build)" in cpu.whatis and "(no CUDA)" in cpu.whatis[1]
    unknown = info("/opt/x", build="torch-2.13-cu126", cuda=None)  # a record made before records kept it
    assert any(line.startswith("CUDA: unknown") for line in unknown.whatis)
    assert "CUDA: 12.8" in module_info("x", SimpleNamespace(**{**vars(_record()), "cuda": None}), cuda="12.8").whatis


def _record() -> SimpleNamespace:
    return SimpleNamespace(build="torch-2.13-cu126", manifest="torch", python="3.11", prefix="/opt/x", kind="venv",
                           cuda="12.6", rocm=None, name="torch", machine={}, target=None, verify=None)


def test_a_tcl_modulefile_is_refused_for_a_path_lmod_would_load_wrong():
    for bad in ('/opt/a"b', "/opt/a\\b"):
        with pytest.raises(BadInputError, match="Tcl modulefile cannot carry"):
            tcl_text(info(bad))
        assert f"local bin = {lua_string(bad + '/bin')}" in lua_text(info(bad))  # the Lua one carries it


def test_a_rocm_build_says_its_rocm_release_and_that_it_is_for_amd_gpus():
    record = SimpleNamespace(build="torch-2.9-rocm6.4", manifest="torch", python="3.12", prefix="/opt/x", kind="venv",
                             cuda=None, rocm="6.4", name="torch-rocm", machine={"name": "mi300x-node"}, target=None,
                             verify=None)
    made = module_info("site:torch-rocm", record, "alice")
    assert made.whatis[1:3] == ("Description: torch build torch-2.9-rocm6.4 (ROCm 6.4, for AMD GPUs), Python 3.12",
                                "ROCm: 6.4 (AMD GPUs)")
    assert "whatis(\"ROCm: 6.4 (AMD GPUs)\")" in lua_text(made) and "CUDA" not in tcl_text(made)
    # the release is the build's as the record keeps it, never read out of the build id
    amd = module_info("x", SimpleNamespace(**{**vars(record), "build": "torch-amd", "rocm": None}), rocm="6.2.4")
    assert "ROCm: 6.2.4 (AMD GPUs)" in amd.whatis and "(ROCm 6.2.4, for AMD GPUs)" in amd.whatis[1]


def test_each_syntax_quotes_by_its_own_rule():
    assert lua_string('a "b" \\c $d\n') == '"a \\"b\\" \\\\c $d\\n"'
    assert tcl_string('a "b" \\c $d [e] {f}') == '"a \\"b\\" \\\\c \\$d \\[e\\] \\{f\\}"'
    venv, conda = info("/opt/x"), info("/opt/y", kind="conda", name="tf")
    assert 'local bin = "/opt/x/bin"' in lua_text(venv) and 'set bin "/opt/y/bin"' in tcl_text(conda)
    assert 'pushenv("VIRTUAL_ENV", prefix)' in lua_text(venv) and "CONDA" not in lua_text(venv)
    assert '$push CONDA_PREFIX $prefix' in tcl_text(conda) and '$push CONDA_DEFAULT_ENV "tf"' in tcl_text(conda)
    assert "VIRTUAL_ENV" not in tcl_text(conda)
    for text in (lua_text(venv), tcl_text(venv)):  # nothing else is set: no PYTHONPATH, no LD_LIBRARY_PATH
        set_lines = [line for line in text.splitlines()
                     if line.startswith(("setenv", "prepend", "append", "pushenv", "$push"))]
        assert len(set_lines) == 3 and "ENVKIT_MODULE_BIN" in set_lines[1], set_lines


@pytest.fixture(scope="session")
def systems(tmp_path_factory) -> dict[str, str]:
    """{"lmod": the function, "tcl": the function} of the module systems there are (missing ones skip the test,
    or fail it under CI)."""
    out = {}
    problems = []
    problem = module_systems.install_lmod()
    if problem is None:
        out["lmod"] = module_systems.module_function("lmod")
    else:
        problems.append(problem)
    cmd, problem = module_systems.modulecmd_tcl(tmp_path_factory.mktemp("environment-modules"))
    if cmd is not None:
        out["tcl"] = module_systems.module_function("tcl", cmd)
    else:
        problems.append(problem)
    if problems:
        if module_systems.required(os.environ):
            pytest.fail("; ".join(problems))
        pytest.skip("; ".join(problems))
    return out


def shell(function: str, script: str, modulepath: Path) -> subprocess.CompletedProcess:
    # A login shell's environment: no environment active (CI runs the suite inside a venv, whose VIRTUAL_ENV an
    # envkit module would replace and unloading it unset, as a module's setenv does)
    env = {k: v for k, v in os.environ.items() if not k.startswith(module_systems.BOOKKEEPING)
           and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")}
    env["MODULEPATH"] = str(modulepath)
    # Lmod keeps one of each PATH entry when it changes PATH (this machine's PATH may name one twice)
    env["PATH"] = ":".join(dict.fromkeys(env.get("PATH", os.defpath).split(":")))
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{function}\nset -e\n{script}"],
                          capture_output=True, text=True, env=env, timeout=120)


ENV0 = 'env -0 > "$1"'


@pytest.mark.parametrize("system", ["lmod", "lmod-reading-tcl", "tcl"])
def test_a_real_module_system_loads_swaps_and_unloads_exactly(systems, system: str, tmp_path: Path):
    modules = tmp_path / "modulefiles"
    (modules / "envkit").mkdir(parents=True)
    nasty = NASTY if system == "lmod" else LESS_NASTY  # (a Tcl modulefile refuses `"` and `\\`)
    first, second = info(nasty), info("/opt/other env", name="jax")
    for made, name in ((first, "torch"), (second, "jax")):
        if system == "lmod":  # the Lua one alone (a Tcl modulefile refuses NASTY's `"` and `\\`)
            (modules / "envkit" / f"{name}.lua").write_text(lua_text(made))
        else:
            (modules / "envkit" / name).write_text(tcl_text(made))
    dumps = [tmp_path / f"env{i}" for i in range(4)]
    script = "\n".join([
        f"env -0 > {dumps[0]}",
        "module load envkit/torch", f"env -0 > {dumps[1]}",
        "module load envkit/jax", f"env -0 > {dumps[2]}",
        "module unload envkit/jax", f"env -0 > {dumps[3]}",
        "module help envkit/torch 2>&1 | tr -d '\\n' > " + str(tmp_path / "help"),
        "module whatis envkit/torch > " + str(tmp_path / "whatis") + " 2>&1",
    ])
    done = shell(systems[system.split("-")[0]], script, modules)
    assert done.returncode == 0, done.stderr
    before, loaded, swapped, after = (module_systems.parse_env0(d.read_text()) for d in dumps)
    assert loaded["_LMFILES_"].endswith(".lua" if system == "lmod" else "envkit/torch")
    assert loaded["VIRTUAL_ENV"] == nasty and loaded["PATH"].split(":")[0] == f"{nasty}/bin"
    assert loaded["PATH"].split(":")[1:] == before["PATH"].split(":")
    assert swapped["VIRTUAL_ENV"] == "/opt/other env" and f"{nasty}/bin" not in swapped["PATH"]
    assert swapped["PATH"] == f"/opt/other env/bin:{before['PATH']}"
    assert module_systems.activation(after) == module_systems.activation(before)
    assert "torch build torch-2.13-cu126 (CUDA 12.6)" in (tmp_path / "help").read_text()
    whatis = (tmp_path / "whatis").read_text()
    assert "CUDA: 12.6" in whatis and "Fits: partition gpu-4-a100" in whatis and "Last check: PASS" in whatis


@pytest.mark.parametrize("system", ["lmod", "lmod-reading-tcl", "tcl"])
def test_a_held_environment_puts_its_constraints_first_and_unload_gives_the_users_back(systems, system: str,
                                                                                       tmp_path: Path):
    """An environment whose build is held (envkit.backends.guard): UV_CONSTRAINT and PIP_CONSTRAINT get its
    constraints file first, the user's own after it, and unloading leaves the user's exactly."""
    record = SimpleNamespace(build="torch-2.13-cu126", manifest="torch", python="3.11", prefix="/opt/envs/torch",
                             kind="venv", name="torch", machine={"name": "x"}, target=None, verify=None,
                             held=["torch==2.13.0+cu126"], cuda="12.6", rocm=None)
    made = module_info("torch", record)
    assert made.constraints == "/opt/envs/torch/.envkit/constraints.txt"
    modules = tmp_path / "modulefiles"
    (modules / "envkit").mkdir(parents=True)
    (modules / "envkit" / "torch").write_text(tcl_text(made))
    if system == "lmod":
        (modules / "envkit" / "torch.lua").write_text(lua_text(made))
    dumps = [tmp_path / f"env{i}" for i in range(2)]
    script = f"export UV_CONSTRAINT=/home/me/mine.txt\nmodule load envkit/torch\nenv -0 > {dumps[0]}\n" \
             f"module unload envkit/torch\nenv -0 > {dumps[1]}"
    done = shell(systems[system.split("-")[0]], script, modules)
    assert done.returncode == 0, done.stderr
    loaded, after = (module_systems.parse_env0(d.read_text()) for d in dumps)
    assert loaded["UV_CONSTRAINT"] == f"{made.constraints} /home/me/mine.txt"
    assert loaded["PIP_CONSTRAINT"] == made.constraints
    assert after["UV_CONSTRAINT"] == "/home/me/mine.txt" and "PIP_CONSTRAINT" not in after
@pytest.mark.parametrize("system", ["lmod", "tcl"])
def test_unload_takes_back_exactly_what_load_set(systems, system: str, tmp_path: Path):
    """A VIRTUAL_ENV of the user's and the environment's bin already on their PATH (a shell where they activated it)
    come back as they were; and a module loaded before the admin rewrote its file for another version (a
    replacement published) unloads what it added, not what the file says now. Each module system reads the syntax
    envkit writes for it (Lmod the Lua file, published beside the Tcl one)."""
    modules = tmp_path / "modulefiles"
    (modules / "envkit").mkdir(parents=True)
    old, new = tmp_path / "envs" / "torch" / "v1", tmp_path / "envs" / "torch" / "v2"
    for prefix in (old, new):
        (prefix / "bin").mkdir(parents=True)
        (prefix / "bin" / "python").write_text(f"#!/bin/sh\necho {prefix.name}\n")
        (prefix / "bin" / "python").chmod(0o755)

    def write(prefix: Path) -> None:
        made = info(str(prefix), name="torch", held=True)
        if system == "lmod":
            (modules / "envkit" / "torch.lua").write_text(lua_text(made))
        else:
            (modules / "envkit" / "torch").write_text(tcl_text(made))

    write(old)
    dumps = [tmp_path / f"env{i}" for i in range(6)]
    script = "\n".join([
        "export VIRTUAL_ENV=/the/users/own/venv",
        f"export PATH=/usr/bin:{old}/bin:/bin", f"env -0 > {dumps[0]}",
        "module load envkit/torch", f"env -0 > {dumps[1]}", "python > " + str(tmp_path / "ran"),
        "module unload envkit/torch", f"env -0 > {dumps[2]}",
        "export PATH=/usr/bin:/bin", f"env -0 > {dumps[3]}",
        "module load envkit/torch", f"env -0 > {dumps[4]}",
    ])
    done = shell(systems[system.split("-")[0]], script, modules)
    assert done.returncode == 0, done.stderr
    had, loaded, unloaded, plain, loaded_old = (module_systems.parse_env0(d.read_text()) for d in dumps[:5])
    assert loaded["VIRTUAL_ENV"] == str(old) and (tmp_path / "ran").read_text().strip() == "v1"
    assert loaded["PIP_CONSTRAINT"] == f"{old}/.envkit/constraints.txt" and "PIP_CONSTRAINT" not in unloaded
    assert os.path.realpath(loaded["PATH"].split(":")[0]) == str(old / "bin")
    assert module_systems.activation(unloaded) == module_systems.activation(had)  # PATH and VIRTUAL_ENV as they were
    assert unloaded["VIRTUAL_ENV"] == "/the/users/own/venv" and unloaded["PATH"] == f"/usr/bin:{old}/bin:/bin"
    assert loaded_old["PATH"].split(":")[0] == f"{old}/bin"
    # the admin publishes v2 while the module of v1 is loaded: the unload takes back v1's entry
    write(new)
    state = {k: v for k, v in loaded_old.items() if k not in ("PWD", "OLDPWD", "SHLVL", "_")}
    after = subprocess.run(["bash", "--noprofile", "--norc", "-c",
                            f"{systems[system.split('-')[0]]}\nset -e\nmodule unload envkit/torch\n"
                            f"env -0 > {dumps[5]}"], env=state, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    unloaded_new = module_systems.parse_env0(dumps[5].read_text())
    assert module_systems.activation(unloaded_new) == module_systems.activation(plain), unloaded_new["PATH"]
    assert f"{old}/bin" not in unloaded_new["PATH"] and unloaded_new["VIRTUAL_ENV"] == "/the/users/own/venv"
    assert loaded_old["UV_CONSTRAINT"] == f"{old}/.envkit/constraints.txt"  # the guard the load added goes too
    assert "UV_CONSTRAINT" not in unloaded_new and "PIP_CONSTRAINT" not in unloaded_new
