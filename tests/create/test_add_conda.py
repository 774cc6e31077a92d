"""`envkit add` into an environment conda made (envkit's embedded engine, py-rattler, from the tests' local channel):
pip's side of it, with every Python package conda installed held (the stand-in tensorflow-gpu 2.4.1 among them)."""

from __future__ import annotations

from pathlib import Path


from add_helpers import fingerprint, installed_versions, record_json
from conftest import GTX1080TI, LEGACY_BUILD, Home, conda_mirrors
from support.pypi_index import IndexServer
from support.wheels import build_wheel
from test_create_conda import no_conda

NAME = "tensorflow-cu101"


def test_add_into_a_conda_environment_holds_what_conda_installed(home: Home, legacy_channel: Path,
                                                                conda_manifests: Path, pypi_server: IndexServer,
                                                                tmp_path: Path):
    wheels = tmp_path / "wheels"
    pypi_server.add_index("/pypi/simple", [
        build_wheel(wheels, "small", "1.0", files={"small.py": "ANSWER = 42\n"}),
        build_wheel(wheels, "tfaddon", "1.0", requires=["tensorflow>=2.5"]),
        build_wheel(wheels, "tensorflow", "2.15.0"),  # what pip would put over conda's, were it not held
    ])
    home.write_config(conda_mirrors(legacy_channel, pypi_server))
    env = no_conda(home)
    made = home.envkit("create", *LEGACY_BUILD, *GTX1080TI, "--backend", "rattler", "--manifests",
                       str(conda_manifests), "--yes", env=env)
    assert made.returncode == 0, made.stderr
    prefix = home.prefix(NAME)
    held = (prefix / ".envkit" / "constraints.txt").read_text()
    assert "tensorflow==2.4.1\n" in held
    assert (prefix / "etc" / "conda" / "activate.d" / "envkit-held.sh").is_file()
    before, record = fingerprint(prefix), record_json(home, NAME)
    refused = home.envkit("add", NAME, "tfaddon", env=env)
    assert refused.returncode == 1, refused.stderr
    assert "tfaddon needs tensorflow>=2.5, and this environment is tensorflow 2.4.1" in refused.stderr
    assert fingerprint(prefix) == before and record_json(home, NAME) == record
    done = home.envkit("add", NAME, "small", env=env)
    assert done.returncode == 0, done.stderr
    assert installed_versions(prefix)["tensorflow"] == "2.4.1" and installed_versions(prefix)["small"] == "1.0"
    assert home.record(NAME)["additions"] == ["small"] and home.record(NAME)["verify"]["ok"] is True
