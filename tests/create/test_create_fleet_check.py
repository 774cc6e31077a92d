"""The check after `envkit create` for a fleet judges the machine the environment is planned on; when it fails, the
build it advises is for every machine of the fleet (or one per group), and the command works when pasted. It used to
be the build for that one machine, with the whole fleet named: `envkit create torch --build torch-2.3-cu118
--machine fleet2` for a K80 and a B200 machine, which create refuses ("does not fit every machine: b200")."""

from __future__ import annotations

import json
import shlex

from conftest import FAKES, PROFILES, PYTHON, Home
from support.pypi_index import IndexServer
from support.wheels import build_wheel


def test_the_build_advised_after_a_failed_check_for_a_fleet_works_when_pasted(home: Home, pypi_server: IndexServer,
                                                                                tmp_path):
    files = {"fakearray.py": (FAKES / "fakearray.py").read_text(encoding="utf-8")}
    for source in sorted((FAKES / "torch").glob("*.py")):
        files[f"torch/{source.name}"] = source.read_text(encoding="utf-8")
    # A CPU build (the one that fits both machines alike) whose import fails: the check fails. (Until issue 30 the
    # fleet was a K80 and a B200, which shared torch 1.5 through its compute_37 PTX; its cuDNN 7.6 serves nothing
    # after Turing, so they split now. A V100 + A100 node and an RTX 5090 desk share 2.10 cu128.)
    files["fake_config.json"] = json.dumps({"torch": {"version": "2.13.0+cpu", "cuda": None,
                                                      "import_error": "missing-library"}})
    wheels = tmp_path / "wheels"
    pypi_server.add_index("/whl/cpu", [build_wheel(wheels, "torch", "2.13.0+cpu", files=files),
                                       build_wheel(wheels, "torchvision", "0.28.0+cpu"),
                                       build_wheel(wheels, "torchaudio", "2.11.0+cpu")])
    home.mirror_to(pypi_server)
    fleet = tmp_path / "fleet2"
    fleet.mkdir()
    for name in ("v100-a100-cuda122.yaml", "rtx5090-cuda128.yaml"):
        (fleet / name).write_text((PROFILES / name).read_text())
    made = home.envkit("create", "torch", "--build", "torch-2.13-cpu", "--python", PYTHON, "--machine", str(fleet),
                       "--yes")
    assert made.returncode == 1 and "Traceback" not in made.stderr, made.stdout + made.stderr
    assert "FAIL" in made.stdout and "solve for: mixed" in made.stdout
    [advice] = [line for line in made.stdout.splitlines() if line.startswith("To get a build that fits: ")]
    argv = shlex.split(advice.split(": ", 1)[1])
    assert argv[:2] == ["envkit", "create"] and argv[-2:] == ["--machine", str(fleet)]
    pasted = home.envkit(*argv[1:], "--dry-run", "--json")
    assert pasted.returncode == 0, (argv, pasted.stderr)
    plan = json.loads(pasted.stdout)
    assert plan["build"] == argv[argv.index("--build") + 1]
    assert sorted(plan["target"]["machines"]) == ["blackwell-desk", "mixed"]
