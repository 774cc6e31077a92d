"""The local package index works with the real installers: uv and pip resolve, download and install from it.

Every installer runs with `installer_env` (no config files, no UV_*/PIP_* settings, caches in tmp_path) and is
given only 127.0.0.1 index URLs.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import http.client
import io
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from support.fixtures import pypi_server  # noqa: F401 (a fixture)
from support.local_wheels import (
    MissingDistributionError,
    dependency_closure,
    find_torch_cpu_wheel,
    local_distribution_files,
    torch_cpu_dependencies,
)
from support.pypi_index import IndexServer, installer_env, uv_binary
from support.wheels import build_wheel, read_wheel_metadata

# Never a proxy, even if the environment names one: these requests go to 127.0.0.1 only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --------------------------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return installer_env(tmp_path / "cache")


@pytest.fixture
def venv_python(tmp_path: Path, env: dict[str, str]) -> Path:
    """A fresh, empty virtual environment made by uv from this interpreter (no download, no seed packages)."""
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], env=env, check=True)
    return venv / "bin" / "python"


def uv_install(python: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [uv_binary(), "pip", "install", "--python", str(python), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def run_python(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def installed_version(python: Path, distribution: str) -> str:
    return run_python(python, f"import importlib.metadata as m; print(m.version({distribution!r}))")


def fetch(url: str) -> tuple[int, bytes]:
    """Status and body; an HTTP error status is a result here, not an exception."""
    try:
        with _OPENER.open(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


# --------------------------------------------------------------------------------------------------------------
# build_wheel


def test_wheel_file_name_normalises_the_name_and_keeps_the_local_version(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "Fake.GPU-Kit", "2.13.0+cu126", files={"fake_gpu_kit.py": ""})

    assert wheel.name == "fake_gpu_kit-2.13.0+cu126-py3-none-any.whl"
    name, version, _, _ = parse_wheel_filename(wheel.name)
    assert (name, str(version), version.local) == ("fake-gpu-kit", "2.13.0+cu126", "cu126")


def test_wheel_record_hashes_and_sizes_match_the_contents(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0", files={"pkg/__init__.py": "X = 1\n", "pkg/data.bin": b"\0\1"})

    with zipfile.ZipFile(wheel) as archive:
        record = archive.read("pkg-1.0.dist-info/RECORD").decode()
        rows = list(csv.reader(io.StringIO(record)))
        assert {row[0] for row in rows} == set(archive.namelist())
        for path, digest, size in rows:
            if path.endswith("/RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (f"sha256={expected}", str(len(data)))


def test_wheel_metadata_carries_requirements_and_requires_python(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0", requires=["dep>=2", "other; extra == 'x'"], requires_python=">=3.10")

    metadata = read_wheel_metadata(wheel)
    assert metadata.get_all("Requires-Dist") == ["dep>=2", "other; extra == 'x'"]
    assert metadata["Requires-Python"] == ">=3.10"


# --------------------------------------------------------------------------------------------------------------
# Installing from the server


def test_uv_installs_a_built_wheel_and_its_dependency_from_the_index(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    app_code = {"demo_app.py": "from demo_lib import X\n"}
    app = build_wheel(tmp_path / "w", "demo-app", "1.0", requires=["Demo_Lib>=2"], files=app_code)
    lib = build_wheel(tmp_path / "w", "demo-lib", "2.1", files={"demo_lib.py": "X = 42\n"})
    index = pypi_server.add_index("/pypi/simple", [app, lib])

    result = uv_install(venv_python, env, "--index-url", index, "demo-app")

    assert result.returncode == 0, result.stderr
    assert run_python(venv_python, "import demo_app; print(demo_app.X)") == "42"
    assert "/pypi/simple/demo-lib/demo_lib-2.1-py3-none-any.whl" in pypi_server.fetched_files()


def test_pip_installs_a_built_wheel_and_its_dependency_from_the_index(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str]
) -> None:
    app_code = {"demo_app.py": "from demo_lib import X\n"}
    app = build_wheel(tmp_path / "w", "demo-app", "1.0", requires=["demo-lib"], files=app_code)
    lib = build_wheel(tmp_path / "w", "demo-lib", "2.1", files={"demo_lib.py": "X = 42\n"})
    index = pypi_server.add_index("/pypi/simple", [app, lib])
    target = tmp_path / "target"

    command = [sys.executable, "-m", "pip", "install", "-q", "--target", str(target), "--index-url", index, "demo-app"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert result.returncode == 0, result.stderr
    assert (target / "demo_lib.py").read_text() == "X = 42\n"
    assert pypi_server.fetched_files() == [
        "/pypi/simple/demo-app/demo_app-1.0-py3-none-any.whl",
        "/pypi/simple/demo-lib/demo_lib-2.1-py3-none-any.whl",
    ]


def test_a_local_version_satisfies_a_wildcard_and_comes_from_its_own_index(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    cuda = build_wheel(tmp_path / "cu126", "fakegpu", "2.13.0+cu126", files={"fakegpu.py": "BUILD = 'cu126'\n"})
    cpu = build_wheel(tmp_path / "cpu", "fakegpu", "2.13.0+cpu", files={"fakegpu.py": "BUILD = 'cpu'\n"})
    pypi_server.add_index("/whl/cpu", [cpu])
    index = pypi_server.add_index("/whl/cu126", [cuda])

    result = uv_install(venv_python, env, "--index-url", index, "fakegpu==2.13.*")

    assert result.returncode == 0, result.stderr
    assert installed_version(venv_python, "fakegpu") == "2.13.0+cu126"
    assert pypi_server.fetched_files() == ["/whl/cu126/fakegpu/fakegpu-2.13.0+cu126-py3-none-any.whl"]


def test_uv_takes_a_project_from_the_extra_index_first_and_only_from_there(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    """uv's default index strategy (first-index): --extra-index-url outranks --index-url, and a project found on
    the higher index is never looked up on the lower one, even when only the lower one has the version asked for."""
    cuda = pypi_server.add_index("/whl/cu126", [build_wheel(tmp_path / "a", "fakegpu", "2.13.0+cu126")])
    pypi = pypi_server.add_index("/pypi/simple", [build_wheel(tmp_path / "b", "fakegpu", "2.14.0")])

    assert uv_install(venv_python, env, "--index-url", cuda, "--extra-index-url", pypi, "fakegpu").returncode == 0
    assert installed_version(venv_python, "fakegpu") == "2.14.0"
    pinned = uv_install(venv_python, env, "--index-url", cuda, "--extra-index-url", pypi, "fakegpu==2.13.*")
    assert pinned.returncode != 0
    assert "only consider versions that are published on the first index" in pinned.stderr
    swapped = uv_install(venv_python, env, "--index-url", pypi, "--extra-index-url", cuda, "fakegpu==2.13.*")
    assert swapped.returncode == 0, swapped.stderr
    assert installed_version(venv_python, "fakegpu") == "2.13.0+cu126"


def test_uv_skips_a_wheel_whose_requires_python_excludes_this_interpreter(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    old = build_wheel(tmp_path, "pkg", "1.0", files={"pkg.py": ""})
    future = build_wheel(tmp_path, "pkg", "2.0", requires_python=">=4", files={"pkg.py": ""})
    index = pypi_server.add_index("/pypi/simple", [old, future])

    assert b'data-requires-python="&gt;=4"' in fetch(index + "pkg/")[1]
    assert uv_install(venv_python, env, "--index-url", index, "pkg").returncode == 0
    assert installed_version(venv_python, "pkg") == "1.0"


def test_a_failing_project_page_answers_500_and_uv_fails(
    tmp_path: Path, pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    index = pypi_server.add_index("/pypi/simple", [build_wheel(tmp_path, "pkg", "1.0")])
    pypi_server.fail_project("/pypi/simple/", "PKG")

    assert fetch(index + "pkg/")[0] == 500
    result = uv_install(venv_python, {**env, "UV_HTTP_RETRIES": "0"}, "--index-url", index, "pkg")
    assert result.returncode != 0
    assert "500 Internal Server Error" in result.stderr


# --------------------------------------------------------------------------------------------------------------
# The server's pages


def test_project_pages_link_every_wheel_with_its_sha256(tmp_path: Path, pypi_server: IndexServer) -> None:
    wheel = build_wheel(tmp_path, "fakegpu", "2.13.0+cu126")
    index = pypi_server.add_index("/whl/cu126", [wheel])
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()

    status, page = fetch(index + "fakegpu/")
    assert status == 200
    assert f'href="fakegpu-2.13.0%2Bcu126-py3-none-any.whl#sha256={digest}"'.encode() in page
    assert fetch(index + "fakegpu/fakegpu-2.13.0%2Bcu126-py3-none-any.whl") == (200, wheel.read_bytes())
    status, project_list = fetch(index)
    assert status == 200 and b'href="fakegpu/"' in project_list


def test_project_names_are_normalised(tmp_path: Path, pypi_server: IndexServer) -> None:
    index = pypi_server.add_index("/pypi/simple", [build_wheel(tmp_path, "typing_extensions", "4.12.0")])

    for spelling in ("Typing_Extensions/", "typing.extensions/", "typing-extensions", "TYPING--extensions"):
        status, page = fetch(index + spelling)
        assert status == 200, spelling
        assert b"typing_extensions-4.12.0-py3-none-any.whl#sha256=" in page


def test_unknown_projects_files_and_indexes_are_404(tmp_path: Path, pypi_server: IndexServer) -> None:
    index = pypi_server.add_index("/pypi/simple", [build_wheel(tmp_path, "pkg", "1.0")])

    assert fetch(index + "nothere/")[0] == 404
    assert fetch(index + "pkg/pkg-9.9-py3-none-any.whl")[0] == 404
    assert fetch(pypi_server.url + "/whl/cu126/pkg/")[0] == 404


def test_the_request_log_records_decoded_paths(tmp_path: Path, pypi_server: IndexServer) -> None:
    index = pypi_server.add_index("/whl/cu126", [build_wheel(tmp_path, "fakegpu", "2.13.0+cu126")])

    fetch(index + "fakegpu/fakegpu-2.13.0%2Bcu126-py3-none-any.whl?x=1")
    fetch(index + "nothere/")

    assert pypi_server.requests == [
        "/whl/cu126/fakegpu/fakegpu-2.13.0+cu126-py3-none-any.whl",
        "/whl/cu126/nothere/",
    ]


def test_a_delayed_file_arrives_late_and_whole(tmp_path: Path, pypi_server: IndexServer) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0")
    index = pypi_server.add_index("/pypi/simple", [wheel])
    pypi_server.delay_file(wheel.name, 0.5)

    start = time.monotonic()
    assert fetch(f"{index}pkg/{wheel.name}") == (200, wheel.read_bytes())
    assert time.monotonic() - start >= 0.5


def test_closing_cuts_a_delayed_download_short_and_leaves_no_thread(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0")
    threads_before = set(threading.enumerate())
    outcome: dict[str, object] = {}
    with IndexServer() as server:
        url = f"{server.add_index('/pypi/simple', [wheel])}pkg/{wheel.name}"
        server.delay_file(wheel.name, 60)
        client = threading.Thread(target=lambda: outcome.update(result=_download(url)))
        client.start()
        wait_for(lambda: server.requests == [f"/pypi/simple/pkg/{wheel.name}"])
        accept_loop, address = server.thread, server.url.removeprefix("http://").split(":")
        start = time.monotonic()
    closing = time.monotonic() - start
    client.join(10)

    assert closing < 5, "close() waited for the delayed download"
    assert isinstance(outcome["result"], http.client.IncompleteRead)
    assert accept_loop is not None and not accept_loop.is_alive()
    assert set(threading.enumerate()) <= threads_before
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address[0], int(address[1])), timeout=5).close()


def _download(url: str) -> bytes | Exception:
    try:
        with _OPENER.open(url, timeout=30) as response:
            return response.read()
    except Exception as error:  # the test inspects which
        return error


# --------------------------------------------------------------------------------------------------------------
# Wheels already on this machine


def test_local_distribution_files_follows_relative_links_and_keeps_installable_wheels(tmp_path: Path) -> None:
    files, simple, flat = tmp_path / "files", tmp_path / "simple", tmp_path / "flat"
    good = build_wheel(files, "good", "1.0")
    windows = build_wheel(files, "good", "0.9", tag="cp311-cp311-win_amd64")
    future = build_wheel(files, "future", "1.0", requires_python=">=4")
    other = build_wheel(flat, "Other_Pkg", "3.0")
    for project, wheels in {"good": [good, windows], "future": [future]}.items():
        (simple / project).mkdir(parents=True)
        links = "".join(f'<a href="../../files/{w.name}#sha256=00">{w.name}</a>' for w in wheels)
        (simple / project / "index.html").write_text(f"<html><body>{links}</body></html>")

    found = local_distribution_files(["Good", "other.pkg"], simple_dirs=[simple], wheel_dirs=[flat])

    assert found == [good, other]
    with pytest.raises(MissingDistributionError, match="future, absent"):
        local_distribution_files(["good", "future", "absent"], simple_dirs=[simple], wheel_dirs=[flat])


def test_dependency_closure_evaluates_markers_and_extras_recursively(tmp_path: Path) -> None:
    top = build_wheel(
        tmp_path / "top",
        "top",
        "1.0",
        requires=["a>=1", "b; python_version < '3'", "c[fast]", "d; extra == 'never'"],
    )
    build_wheel(tmp_path, "a", "1.0", requires=["e"])
    build_wheel(tmp_path, "c", "1.0", requires=["f; extra == 'fast'", "g; extra == 'slow'"])
    build_wheel(tmp_path, "e", "1.0", requires=["a", "top"])  # a cycle back to the start
    build_wheel(tmp_path, "f", "1.0")

    assert dependency_closure(top, simple_dirs=(), wheel_dirs=[tmp_path]) == ["a", "c", "e", "f"]


_TORCH_CPU = find_torch_cpu_wheel()
needs_torch_cpu = pytest.mark.skipif(
    _TORCH_CPU is None, reason="no torch +cpu wheel for this Python in /opt/wheels (the real-wheel tests need one)"
)


@needs_torch_cpu
def test_local_distribution_files_finds_every_torch_dependency() -> None:
    dependencies = torch_cpu_dependencies()

    files = local_distribution_files(dependencies)

    assert {"filelock", "typing-extensions", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec"} <= set(
        dependencies
    )
    assert {parse_wheel_filename(f.name)[0] for f in files} == set(dependencies)


@needs_torch_cpu
def test_uv_installs_the_real_torch_cpu_wheel_from_local_indexes(
    pypi_server: IndexServer, env: dict[str, str], venv_python: Path
) -> None:
    assert _TORCH_CPU is not None
    cpu = pypi_server.add_index("/whl/cpu", [_TORCH_CPU])
    pypi = pypi_server.add_index("/pypi/simple", local_distribution_files(torch_cpu_dependencies(_TORCH_CPU)))

    result = uv_install(venv_python, env, "--index-url", pypi, "--extra-index-url", cpu, "torch==2.*")

    assert result.returncode == 0, result.stderr
    assert installed_version(venv_python, "torch") == str(parse_wheel_filename(_TORCH_CPU.name)[1])
    assert f"/whl/cpu/torch/{_TORCH_CPU.name}" in pypi_server.fetched_files()
    fetched = {parse_wheel_filename(path.rsplit("/", 1)[1])[0] for path in pypi_server.fetched_files()}
    assert fetched >= {"torch", "sympy", "mpmath", "jinja2", "markupsafe"}
