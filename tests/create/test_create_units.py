"""The pure parts of `envkit create`: config and mirrors, names, the plan, the backend choice, installer isolation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from envkit.backends.base import Context
from envkit.backends.choose import choose_backend
from envkit.backends.conda import CondaBackend
from envkit.backends.installers import installer_environ, pip_command
from envkit.backends.plan import Plan, conda_part, cuda_for_solve, default_name, pip_parts
from envkit.backends.tools import CondaTool, Tools
from envkit.errors import BadInputError
from envkit.state.config import Config, ConfigError, Mirror, check_transport, load_config, parse_config
from envkit.state.records import check_name
from envkit.state.userdirs import user_dirs

PYTORCH = "https://download.pytorch.org/whl"


def _config(**mirrors: str) -> Config:
    return Config(path=None, mirrors=tuple(Mirror(up, down) for up, down in mirrors.items()))


def _build(catalog, build_id: str):
    manifest = catalog.manifests[build_id.split("-")[0]]
    return next(b for b in manifest.builds if b.id == build_id)


# --- config and mirrors -----------------------------------------------------------------------------------------

def test_a_mirror_maps_by_prefix_at_a_path_boundary_and_the_longest_wins():
    config = parse_config(
        '{"mirrors": {"https://download.pytorch.org/whl": "http://127.0.0.1:8080/whl/",'
        ' "https://download.pytorch.org/whl/cu126": "file:///srv/cu126"}}', Path("c.yaml"))
    assert config.mirrored(f"{PYTORCH}/cu118") == "http://127.0.0.1:8080/whl/cu118"
    assert config.mirrored(f"{PYTORCH}/cu126") == "file:///srv/cu126"
    assert config.mirrored(f"{PYTORCH}/cu126/") == "file:///srv/cu126/"
    assert config.mirrored(f"{PYTORCH}x/cu126") == f"{PYTORCH}x/cu126"  # not at a path boundary
    assert config.mirrored("https://pypi.org/simple") == "https://pypi.org/simple"


@pytest.mark.parametrize("text, problem", [
    ("[1, 2]", "must be a mapping"),
    ("mirror: {}", "unknown key 'mirror'"),
    ("mirrors: [a]", "must map upstream URLs"),
    ('mirrors: {"pypi.org": "http://x"}', "is not an http(s) URL"),
    ('mirrors: {"https://pypi.org/simple": "ftp://x/simple"}', "is not an https, http or file URL"),
    ('mirrors: {"https://pypi.org/simple": 8080}', "must both be quoted URLs"),
    ("envs_dir: relative/path", "must be an absolute path"),
    ("mirrors: {a: [", "not valid YAML"),
])
def test_a_broken_config_is_bad_input_naming_the_file(text, problem):
    with pytest.raises(ConfigError) as raised:
        parse_config(text, Path("/home/me/.config/envkit/config.yaml"))
    assert problem in raised.value.message and "config.yaml" in raised.value.message
    assert raised.value.exit_code == 2


def test_the_config_file_comes_from_envkit_config_else_the_user_config_dir(tmp_path):
    dirs = user_dirs({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert load_config({"HOME": str(tmp_path)}, dirs).path is None  # no file: an empty config
    (tmp_path / "cfg" / "envkit").mkdir(parents=True)
    (tmp_path / "cfg" / "envkit" / "config.yaml").write_text("envs_dir: /scratch/envs\n")
    assert load_config({}, dirs).envs_dir == Path("/scratch/envs")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config({"ENVKIT_CONFIG": str(tmp_path / "missing.yaml")}, dirs)
    with pytest.raises(ConfigError, match="is empty"):
        load_config({"ENVKIT_CONFIG": " "}, dirs)


def test_user_dirs_follow_xdg_and_ignore_relative_values():
    dirs = user_dirs({"HOME": "/home/me", "XDG_DATA_HOME": "relative", "XDG_CACHE_HOME": "/fast/cache"})
    assert dirs.data == Path("/home/me/.local/share/envkit") and dirs.envs == Path("/home/me/.local/share/envkit/envs")
    assert dirs.cache == Path("/fast/cache/envkit") and dirs.config == Path("/home/me/.config/envkit")


def test_plain_http_only_from_loopback_or_a_configured_mirror():
    mirrors = _config(**{"https://pypi.org/simple": "http://mirror.lab:8080/simple"})
    assert check_transport("http://mirror.lab:8080/simple", mirrors, "index")
    assert check_transport("http://127.0.0.1:9/simple", Config(path=None), "index")
    assert check_transport("http://[::1]:9/simple", Config(path=None), "index")
    assert check_transport("file:///srv/channel", Config(path=None), "channel")
    with pytest.raises(BadInputError, match="is not https"):
        check_transport("http://mirror.lab:8080/simple", Config(path=None), "index")


# --- names and the plan -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["torch-cu126", "TF_2.4", "a", "x" * 64])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "a/b", "..", "a..b", "-rf", ".hidden", "x;rm -rf ~", "$(id)", "a b",
                                  "x" * 65, "naïve"])
def test_bad_names_are_bad_input(name):
    with pytest.raises(BadInputError, match="cannot name an environment"):
        check_name(name)


def test_the_default_name_is_the_manifest_and_the_variant(catalog):
    assert default_name("torch", _build(catalog, "torch-2.13-cu126")) == "torch-cu126"
    assert default_name("tensorflow", _build(catalog, "tensorflow-2.4.1-cu101")) == "tensorflow-cu101"


@pytest.mark.parametrize("environ, expected", [
    ({"CONDA_OVERRIDE_CUDA": "11.8"}, ("11.8", "from CONDA_OVERRIDE_CUDA; the driver supports 12.6")),
    ({"CONDA_OVERRIDE_CUDA": " 12 "}, ("12", "from CONDA_OVERRIDE_CUDA; the driver supports 12.6")),  # as conda
    ({"CONDA_OVERRIDE_CUDA": "12.4.1"}, ("12.4.1", "from CONDA_OVERRIDE_CUDA; the driver supports 12.6")),
    ({"CONDA_OVERRIDE_CUDA": ""}, (None, "from CONDA_OVERRIDE_CUDA; the driver supports 12.6")),
    ({}, ("12.6", "the driver's")),
])
def test_the_cuda_a_solve_sees_is_the_profiles_unless_overridden(load_profile, environ, expected):
    assert cuda_for_solve(load_profile("rtx4090-cuda126"), environ) == expected


@pytest.mark.parametrize("value", ["--foo", "12.", "1.2.3.4", "１２.４", "99999999999999999999.0", "none"])
def test_a_cuda_override_that_is_not_a_cuda_version_is_bad_input(load_profile, value):
    with pytest.raises(BadInputError, match="CONDA_OVERRIDE_CUDA=.*is not a CUDA version like 12.4"):
        cuda_for_solve(load_profile("rtx4090-cuda126"), {"CONDA_OVERRIDE_CUDA": value})


def test_no_driver_means_no_cuda_for_the_solve(load_profile):
    assert cuda_for_solve(load_profile("no-gpu"), {}) == (None, "no NVIDIA driver")


def test_a_legacy_conda_build_solves_python_first_from_its_mirrored_channels_only(catalog):
    build = _build(catalog, "tensorflow-2.4.1-cu101")
    config = _config(**{"https://repo.anaconda.com/pkgs/main": "file:///srv/main"})
    part = conda_part(build, Version("3.8"), catalog.tables.python, config, ("10.1", "the driver's"), with_pip=False)
    assert part.channels == ("file:///srv/main",)
    assert part.specs == ("python=3.8", "tensorflow-gpu=2.4.1", "cudatoolkit=10.1", "cudnn=7.6")
    assert part.cuda == "10.1"


def test_a_pure_pip_build_made_by_conda_gets_python_and_pip_from_conda_forge(catalog):
    build = _build(catalog, "torch-2.13-cu126")
    part = conda_part(build, Version("3.12"), catalog.tables.python, Config(path=None), ("12.6", "the driver's"),
                      with_pip=True)
    assert part.channels == ("https://conda.anaconda.org/conda-forge",)
    assert part.specs == ("python=3.12", "pip")


def test_pip_steps_use_the_builds_own_index_and_ipykernel_the_default_one(catalog):
    config = _config(**{PYTORCH: "http://127.0.0.1:8080/whl", "https://pypi.org/simple": "http://127.0.0.1:8080/pypi"})
    steps = pip_parts(_build(catalog, "torch-2.13-cu126"), catalog.tables.python, config, jupyter=True)
    assert [(s.index_url, s.packages) for s in steps] == [
        ("http://127.0.0.1:8080/whl/cu126", ("torch==2.13.*", "torchvision==0.28.*", "torchaudio==2.11.*")),
        ("http://127.0.0.1:8080/pypi", ("ipykernel",)),
    ]
    tf = pip_parts(_build(catalog, "tensorflow-2.20-cu125"), catalog.tables.python, Config(path=None), jupyter=False)
    assert [s.index_url for s in tf] == ["https://pypi.org/simple"]  # no index_url in the build: the default


# --- the backend -------------------------------------------------------------------------------------------------

CONDA = CondaTool("micromamba", Path("/opt/mm/bin/micromamba"))
PY = Path("/usr/bin/python3.12")


@pytest.mark.parametrize("build_id, tools, backend, why", [
    ("torch-2.13-cu126", Tools(conda=None, uv=Path("/uv"), python=PY), "venv", "Python 3.12 is on this machine"),
    ("torch-2.13-cu126", Tools(conda=CONDA, uv=Path("/uv"), python=PY), "venv", "a pure-pip build"),
    ("torch-2.13-cu126", Tools(conda=CONDA, uv=Path("/uv"), python=None), "conda", "your micromamba at /opt/mm"),
    ("torch-2.13-cu126", Tools(conda=None, uv=Path("/uv"), python=None), "rattler", "no conda"),
    ("tensorflow-2.4.1-cu101", Tools(conda=None, uv=None, python=PY), "rattler", "installs conda packages"),
    ("tensorflow-2.4.1-cu101", Tools(conda=CONDA, uv=None, python=PY), "conda", "your micromamba"),
])
def test_auto_chooses_and_says_why(catalog, build_id, tools, backend, why):
    chosen, reason = choose_backend("auto", _build(catalog, build_id), Version("3.12"), tools)
    assert chosen == backend and why in reason


@pytest.mark.parametrize("requested, build_id, tools, problem", [
    ("venv", "tensorflow-2.4.1-cu101", Tools(conda=None, uv=None, python=PY), "a venv cannot hold them"),
    ("venv", "torch-2.13-cu126", Tools(conda=None, uv=None, python=None), "no Python 3.12 on this machine"),
    ("conda", "torch-2.13-cu126", Tools(conda=None, uv=None, python=PY), "no conda, mamba or micromamba"),
    ("spack", "torch-2.13-cu126", Tools(conda=None, uv=None, python=PY), "is not one of"),
])
def test_a_backend_that_cannot_make_the_build_is_bad_input(catalog, requested, build_id, tools, problem):
    with pytest.raises(BadInputError, match=problem):
        choose_backend(requested, _build(catalog, build_id), Version("3.12"), tools)


# --- installers ---------------------------------------------------------------------------------------------------

def test_installers_see_none_of_the_users_pip_or_uv_settings(tmp_path):
    user = {"PATH": "/usr/bin", "HOME": "/home/me", "PIP_FIND_LINKS": "/opt/wheels", "PIP_INDEX_URL": "https://x",
            "UV_INDEX_URL": "https://y", "UV_EXTRA_INDEX_URL": "https://z", "VIRTUAL_ENV": "/v", "CONDA_PREFIX": "/c",
            "PYTHONPATH": "/p"}
    dirs = user_dirs({"HOME": str(tmp_path)})
    env = installer_environ(user, dirs)
    assert {k for k in env if k.startswith(("PIP_", "UV_"))} == {
        "PIP_CONFIG_FILE", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT", "UV_NO_CONFIG", "UV_PYTHON_DOWNLOADS",
        "UV_CACHE_DIR", "UV_PYTHON_CACHE_DIR", "UV_CREDENTIALS_DIR", "PIP_CACHE_DIR"}
    assert env["PIP_CONFIG_FILE"] == os.devnull and env["UV_NO_CONFIG"] == "1"
    assert env["UV_PYTHON_DOWNLOADS"] == "never" and env["UV_CACHE_DIR"] == str(dirs.uv_cache)
    assert env["UV_CREDENTIALS_DIR"].startswith(str(dirs.data)) and env["PIP_CACHE_DIR"].startswith(str(dirs.cache))
    assert "VIRTUAL_ENV" not in env and "CONDA_PREFIX" not in env and "PYTHONPATH" not in env
    assert env["HOME"] == "/home/me" and env["PATH"] == "/usr/bin"


def test_uv_installs_unless_the_environments_python_is_older_than_it_supports(catalog):
    [step] = pip_parts(_build(catalog, "torch-2.13-cu126"), catalog.tables.python, Config(path=None), jupyter=False)
    python = Path("/e/bin/python")
    uv = pip_command(step, python, Path("/uv"), Version("3.12"))
    assert uv[:6] == ["/uv", "pip", "install", "--python", "/e/bin/python", "--index-url"]
    pip = pip_command(step, python, Path("/uv"), Version("3.7"))  # (-c BOOTSTRAP pip: python -m pip, without the cwd)
    assert pip[:2] + pip[3:6] == ["/e/bin/python", "-c", "pip", "install", "--index-url"]
    assert pip_command(step, python, None, Version("3.12"))[3] == "pip"


def test_network_settings_are_kept_and_the_user_site_is_off():
    env = installer_environ({"PIP_CERT": "/etc/ssl/lab.pem", "PIP_PROXY": "http://proxy:3128", "UV_NATIVE_TLS": "1",
                             "UV_HTTP_TIMEOUT": "90", "PIP_INDEX_URL": "https://x", "PYTHONNOUSERSITE": ""}, None)
    assert env["PIP_CERT"] == "/etc/ssl/lab.pem" and "PIP_PROXY" not in env  # (its https: tests of installer_settings)
    assert env["UV_NATIVE_TLS"] == "1" and env["UV_HTTP_TIMEOUT"] == "90"
    assert "PIP_INDEX_URL" not in env and env["PYTHONNOUSERSITE"] == "1"


def test_pip_is_told_to_trust_a_plain_http_mirror_and_only_that(catalog):
    build = _build(catalog, "torch-2.13-cu126")
    mirrored = _config(**{PYTORCH: "http://cache.lab:8080/whl"})
    [step] = pip_parts(build, catalog.tables.python, mirrored, jupyter=False)
    argv = pip_command(step, Path("/e/bin/python"), None, Version("3.12"))
    assert argv[argv.index("--trusted-host") + 1] == "cache.lab:8080"
    [https] = pip_parts(build, catalog.tables.python, Config(path=None), jupyter=False)
    assert "--trusted-host" not in pip_command(https, Path("/e/bin/python"), None, Version("3.12"))


def test_a_find_links_page_is_mirrored_and_passed_to_uv_and_pip_with_the_index(catalog):
    """torch 1.8 cu101 comes from torch_stable.html plus the default index: both mirrored, both in the argv, before
    the packages; pip trusts each plain-http host once."""
    build = _build(catalog, "torch-1.8-cu101")
    mirrored = _config(**{PYTORCH: "http://cache.lab:8080/whl", "https://pypi.org/simple": "http://cache.lab:8080/pypi"})
    [step] = pip_parts(build, catalog.tables.python, mirrored, jupyter=False)
    assert step.index_url == "http://cache.lab:8080/pypi"
    assert step.find_links == "http://cache.lab:8080/whl/torch_stable.html"
    uv = pip_command(step, Path("/e/bin/python"), Path("/uv"), Version("3.8"))
    assert uv[5:9] == ["--index-url", "http://cache.lab:8080/pypi", "--find-links",
                       "http://cache.lab:8080/whl/torch_stable.html"]
    assert uv[9:] == ["torch==1.8.1+cu101", "torchvision==0.9.1+cu101", "torchaudio==0.8.1"]
    pip = pip_command(step, Path("/e/bin/python"), None, Version("3.7"))
    assert pip.count("--trusted-host") == 1 and pip[pip.index("--find-links") + 1].endswith("/torch_stable.html")
    assert pip[-3:] == ["torch==1.8.1+cu101", "torchvision==0.9.1+cu101", "torchaudio==0.8.1"]


def test_a_find_links_page_on_plain_http_without_a_mirror_is_refused(catalog):
    from envkit.catalog.model import PipInstall

    build = _build(catalog, "torch-1.8-cu101")._replace(
        pip=PipInstall(packages=("torch==1.8.1+cu101",), find_links="http://evil.example/links.html"))
    with pytest.raises(BadInputError, match="find-links page 'http://evil.example/links.html' is not https"):
        pip_parts(build, catalog.tables.python, Config(path=None), jupyter=False)


def _legacy_tensorflow_plan(catalog, load_profile, tmp_path) -> Plan:
    """The plan of the conda build tensorflow-2.4.1-cu101 for a GTX 1080 Ti on CUDA 10.1, with the conda backend."""
    build = _build(catalog, "tensorflow-2.4.1-cu101")
    part = conda_part(build, Version("3.8"), catalog.tables.python, Config(path=None), ("10.1", "the driver's"),
                      with_pip=False)
    return Plan(manifest="tensorflow", build=build, name="tf", prefix=tmp_path / "tf", python=Version("3.8"),
                backend="conda", backend_reason="", conda=part, pip=(), jupyter=False, verify=False,
                profile=load_profile("gtx1080ti-cuda101"), on_target=False)


@pytest.mark.parametrize("kind, defaults", [("conda", True), ("mamba", True), ("micromamba", False)])
def test_conda_creates_from_the_plans_channels_only(catalog, load_profile, kind, defaults, tmp_path):
    plan = _legacy_tensorflow_plan(catalog, load_profile, tmp_path)
    backend = CondaBackend(CondaTool(kind, Path(f"/opt/bin/{kind}")))
    [line] = backend.describe(plan, Context(tools=Tools(None, None, None), environ={}, conda_cache=tmp_path))
    assert line.startswith(f"CONDA_OVERRIDE_CUDA=10.1 /opt/bin/{kind} create --yes --quiet --prefix ")
    assert "--override-channels" in line and "-c https://repo.anaconda.com/pkgs/main" in line
    assert ("--no-default-packages" in line) is defaults


def test_conda_sees_none_of_the_users_variables_that_choose_packages_platform_or_channels(catalog, load_profile,
                                                                                          tmp_path):
    """conda and micromamba read any setting from CONDA_<KEY>/MAMBA_<KEY>: a CONDA_SUBDIR=osx-64 or pinned packages
    in the user's shell would change the build past --override-channels. Network settings and the cache stay."""
    plan = _legacy_tensorflow_plan(catalog, load_profile, tmp_path)
    user = {"PATH": "/usr/bin", "CONDA_SUBDIR": "osx-64", "CONDA_PINNED_PACKAGES": "cudatoolkit=11.8",
            "CONDA_CHANNELS": "bioconda", "MAMBA_CHANNELS": "x", "CONDA_CHANNEL_ALIAS": "https://evil.example",
            "CONDA_CHANNEL_PRIORITY": "disabled", "CONDA_OVERRIDE_CUDA": "12.0", "CONDA_PKGS_DIRS": "/scratch/pkgs",
            "CONDA_SSL_VERIFY": "/etc/lab.pem", "MAMBA_ROOT_PREFIX": "/opt/mamba", "CONDA_OVERRIDE_GLIBC": "2.17"}
    context = Context(tools=Tools(None, None, None), environ=installer_environ(user, None), conda_cache=tmp_path)
    env = CondaBackend(CondaTool("micromamba", Path("/opt/bin/micromamba")))._environ(plan, context)
    assert {k for k in env if k.startswith(("CONDA_", "MAMBA_"))} == {
        "CONDA_OVERRIDE_CUDA", "CONDA_PKGS_DIRS", "CONDA_SSL_VERIFY", "MAMBA_ROOT_PREFIX", "CONDA_OVERRIDE_GLIBC"}
    assert env["CONDA_OVERRIDE_CUDA"] == "10.1" and env["PATH"] == "/usr/bin"
