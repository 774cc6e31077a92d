"""The embedded conda engine: real solves and real installs from a local channel of tiny packages (file:// and
http://127.0.0.1), never the network."""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.conda_channel import build_package, build_python_package, index_channel

from envkit.backends.conda_engine import CondaSolveRequest, create_prefix, solve
from envkit.errors import InstallError

PY = ".".join(str(part) for part in sys.version_info[:3])
PY_SHORT = ".".join(str(part) for part in sys.version_info[:2])
PY_RANGE = f"python >={PY_SHORT},<{sys.version_info[0]}.{sys.version_info[1] + 1}"
SITE_PACKAGES = f"lib/python{PY_SHORT}/site-packages"


@pytest.fixture(scope="session")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A legacy-TensorFlow-like channel: a working python, two cudatoolkits that each need a driver for their CUDA, a
    GPU TensorFlow that pins the old one and needs __cuda >=10.1, a newer one that needs __cuda >=11.3, a CPU one, and
    an MXNet that needs __cuda only through its cudatoolkit."""
    root = tmp_path_factory.mktemp("channel")
    build_python_package(root, PY)
    for version, cuda in (("10.1.243", "10.1"), ("11.3.1", "11.3")):
        build_package(
            root,
            "cudatoolkit",
            version,
            depends=(f"__cuda >={cuda}",),
            files={f"lib/libcudart.so.{version}": f"cudart {version}\n"},
        )
    build_package(root, "mxnet-cu113", "1.9.1", depends=("cudatoolkit >=11.3,<11.4", PY_RANGE))
    build_package(root, "future-glibc-tool", "1.0", depends=("__unix", "__linux", "__glibc >=99"))
    build_package(
        root,
        "tensorflow-gpu",
        "2.4.1",
        depends=("cudatoolkit >=10.1,<10.2", PY_RANGE, "__cuda >=10.1"),
        files={f"{SITE_PACKAGES}/tensorflow_stub.py": "VARIANT = 'gpu 2.4.1'\n"},
    )
    build_package(root, "tensorflow-gpu", "2.6.0", depends=("cudatoolkit >=11.3,<11.4", PY_RANGE, "__cuda >=11.3"))
    build_package(
        root,
        "tensorflow-cpu",
        "2.4.1",
        depends=(PY_RANGE,),
        files={f"{SITE_PACKAGES}/tensorflow_stub.py": "VARIANT = 'cpu 2.4.1'\n"},
        subdir="noarch",
    )
    index_channel(root)
    return root


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smallest valid pure-Python wheel, to install with uv into an environment made by the engine."""
    path = tmp_path_factory.mktemp("wheels") / "hello_wheel-1.0-py3-none-any.whl"
    info = "hello_wheel-1.0.dist-info"
    members = {
        "hello_wheel.py": "GREETING = 'hello'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: hello-wheel\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    members[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*members, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def request(channel: Path | str, *specs: str, cuda: str | None = None) -> CondaSolveRequest:
    channel_url = channel.as_uri() if isinstance(channel, Path) else channel
    return CondaSolveRequest((channel_url,), specs, (("__cuda", cuda),) if cuda else ())


def prefix_python(prefix: Path, code: str) -> str:
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


@contextmanager
def serve(directory: Path, on_package: Callable[[], None] | None = None) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 and yield its URL; ``on_package`` runs before a package file is sent."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if on_package and self.path.endswith(".tar.bz2"):
                on_package()
            super().do_GET()

    from support.http_servers import serving

    with serving(functools.partial(Handler, directory=str(directory))) as url:
        yield url


def test_legacy_tensorflow_gpu_installs_with_its_cudatoolkit_and_python(channel, tmp_path):
    prefix, lines = tmp_path / "env", []
    installed = create_prefix(
        prefix, request(channel, f"python={PY_SHORT}", "tensorflow-gpu=2.4.1", cuda="10.1"), tmp_path / "cache",
        lines.append,
    )
    assert installed == ("cudatoolkit-10.1.243-0", f"python-{PY}-0", "tensorflow-gpu-2.4.1-0")
    assert (prefix / "lib/libcudart.so.10.1.243").read_text() == "cudart 10.1.243\n"
    assert not (prefix / "lib/libcudart.so.11.3.1").exists()
    records = {json.loads(path.read_text())["name"] for path in (prefix / "conda-meta").glob("*.json")}
    assert records == {"cudatoolkit", "python", "tensorflow-gpu"}
    assert lines == ["fetching repodata from 1 channel", "solved: 3 packages", "installing 3 packages"]
    output = prefix_python(prefix, "import sys, tensorflow_stub; print(sys.prefix); print(tensorflow_stub.__file__)")
    assert output.splitlines() == [str(prefix), str(prefix / SITE_PACKAGES / "tensorflow_stub.py")]


def test_the_python_package_makes_a_venv_that_uv_installs_into(channel, wheel, tmp_path):
    uv = pytest.importorskip("uv").find_uv_bin()
    prefix = tmp_path / "env"
    create_prefix(prefix, request(channel, f"python={PY_SHORT}"), tmp_path / "cache")
    subprocess.run(
        [uv, "pip", "install", "--no-config", "--offline", "--no-index", "--cache-dir", str(tmp_path / "uv-cache"),
         "--python", str(prefix / "bin" / "python"), str(wheel)],
        capture_output=True, check=True, timeout=120,
    )
    assert (prefix / SITE_PACKAGES / "hello_wheel.py").is_file()
    assert prefix_python(prefix, "import hello_wheel; print(hello_wheel.GREETING)") == "hello"


def test_cuda_too_old_names_cuda_and_leaves_no_prefix(channel, tmp_path):
    prefix = tmp_path / "env"
    with pytest.raises(InstallError) as raised:
        create_prefix(prefix, request(channel, "tensorflow-gpu=2.6.0", cuda="10.1"), tmp_path / "cache")
    message = raised.value.message
    assert message.startswith("tensorflow-gpu 2.6.0 needs __cuda >=11.3")
    assert "the solve's __cuda is 10.1" in message
    assert any("__cuda >=11.3" in line for line in raised.value.tail)
    assert "CONDA_OVERRIDE_CUDA" in raised.value.hint
    assert not prefix.exists() and tmp_path.is_dir()


def test_cuda_too_old_deep_in_the_tree_names_the_package_that_needs_it(channel, tmp_path):
    expected = r"^cudatoolkit 11\.3\.1 needs __cuda >=11\.3, but the solve's __cuda is 10\.1"
    with pytest.raises(InstallError, match=expected):
        solve(request(channel, "mxnet-cu113", cuda="10.1"), tmp_path / "cache")


def test_a_failed_install_is_an_install_error_and_leaves_no_prefix(tmp_path):
    broken = tmp_path / "broken-channel"
    build_python_package(broken, PY)
    index_channel(broken)
    (broken / "linux-64" / f"python-{PY}-0.tar.bz2").unlink()
    prefix = tmp_path / "env"
    with pytest.raises(InstallError, match=f"Installing the conda packages into {prefix} failed") as raised:
        create_prefix(prefix, request(broken, "python"), tmp_path / "cache")
    assert any(f"python-{PY}-0.tar.bz2" in line for line in raised.value.tail)
    assert not prefix.exists()


def test_create_prefix_refuses_an_existing_prefix_and_keeps_it(channel, tmp_path):
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("mine")
    with pytest.raises(InstallError, match="already exists"):
        create_prefix(prefix, request(channel, f"python={PY_SHORT}"), tmp_path / "cache")
    assert (prefix / "keep.txt").read_text() == "mine"


def test_without_cuda_the_gpu_build_is_unsatisfiable_and_the_cpu_build_installs(channel, tmp_path):
    cuda = None  # a machine without an NVIDIA driver (envkit.backends.plan.cuda_for_solve)
    with pytest.raises(InstallError, match="the solve has no __cuda") as raised:
        solve(request(channel, "tensorflow-gpu", cuda=cuda), tmp_path / "cache")
    assert any("__cuda" in line for line in raised.value.tail)
    prefix = tmp_path / "env"
    installed = create_prefix(prefix, request(channel, "tensorflow-cpu", cuda=cuda), tmp_path / "cache")
    assert installed == (f"python-{PY}-0", "tensorflow-cpu-2.4.1-0")
    assert prefix_python(prefix, "import tensorflow_stub; print(tensorflow_stub.VARIANT)") == "cpu 2.4.1"


def test_explicit_cuda_is_what_the_solve_uses(channel, tmp_path):
    records = solve(request(channel, "tensorflow-gpu", cuda="11.3"), tmp_path / "cache")
    assert {(record.name.normalized, str(record.version)) for record in records} >= {
        ("tensorflow-gpu", "2.6.0"),
        ("cudatoolkit", "11.3.1"),
    }


def test_the_engine_takes_cuda_from_the_request_only(channel, tmp_path, monkeypatch):
    """The caller applies CONDA_OVERRIDE_CUDA (envkit.backends.plan.cuda_for_solve); the engine neither detects __cuda
    nor reads the variable, so a profile for another machine is what the solve sees."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.0")
    with pytest.raises(InstallError, match="the solve has no __cuda"):
        solve(request(channel, "tensorflow-gpu"), tmp_path / "cache")


def test_detected_virtual_packages_are_used_and_an_explicit_one_replaces_its_namesake(channel, tmp_path):
    """__unix and __linux come from detection; this machine's __glibc is too old until the request gives one."""
    with pytest.raises(InstallError, match=r"needs __glibc >=99, but the target machine has __glibc=\d"):
        solve(request(channel, "future-glibc-tool"), tmp_path / "cache")
    newer = CondaSolveRequest((channel.as_uri(),), ("future-glibc-tool",), (("__glibc", "99.1"),))
    assert [record.name.normalized for record in solve(newer, tmp_path / "cache")] == ["future-glibc-tool"]


def test_a_missing_channel_is_named(tmp_path):
    missing = (tmp_path / "no-such-channel").as_uri()
    with pytest.raises(InstallError) as raised:
        solve(request(missing, "python"), tmp_path / "cache")
    assert missing in raised.value.message
    assert raised.value.tail


def test_a_channel_name_instead_of_a_url_is_refused(tmp_path):
    with pytest.raises(InstallError, match="'conda-forge' is not a URL"):
        solve(request("conda-forge", "python"), tmp_path / "cache")


def test_an_unknown_package_is_named(channel, tmp_path):
    with pytest.raises(InstallError, match="matches no-such-package") as raised:
        solve(request(channel, "no-such-package"), tmp_path / "cache")
    assert channel.as_uri() in raised.value.message


def test_an_invalid_spec_is_named(channel, tmp_path):
    with pytest.raises(InstallError, match="'python >=3=x=y' is not a valid conda package spec"):
        solve(request(channel, "python >=3=x=y"), tmp_path / "cache")


def test_an_http_channel_installs_and_reports_downloads(channel, tmp_path):
    prefix, lines, cache = tmp_path / "env", [], tmp_path / "cache"
    with serve(channel) as url:
        installed = create_prefix(prefix, request(url, "tensorflow-cpu"), cache, lines.append)
    assert installed == (f"python-{PY}-0", "tensorflow-cpu-2.4.1-0")
    assert {"downloading python", "downloading tensorflow-cpu"} <= set(lines)
    assert any((cache / "repodata").iterdir()) and (cache / "pkgs" / f"python-{PY}-0").is_dir()
    assert prefix_python(prefix, "import tensorflow_stub; print(tensorflow_stub.VARIANT)") == "cpu 2.4.1"


def test_rattlers_own_download_progress_reaches_the_progress_display(channel, tmp_path):
    """Each package's bytes and total, as rattler reports them (envkit.system.transfers), for the status line."""
    from envkit.system import transfers

    meter, said = transfers.Meter(), []
    original = meter.file

    def noting(name, done, total):
        original(name, done, total)
        said.append((name, done, total))

    meter.file = noting  # type: ignore[method-assign]
    with serve(channel) as url, transfers.metering(meter):
        create_prefix(tmp_path / "env", request(url, "tensorflow-cpu"), tmp_path / "cache")
    sizes = {path.name.rsplit("-", 2)[0]: path.stat().st_size for path in channel.rglob("*.tar.bz2")}
    final = {name: (done, total) for name, done, total in said}
    assert final["tensorflow-cpu"] == (sizes["tensorflow-cpu"], sizes["tensorflow-cpu"])  # its whole file
    reading = meter.reading()
    assert reading.names == () and reading.done == reading.total == sum(total for _, total in final.values())


def test_ctrl_c_during_the_download_propagates_and_removes_the_prefix(channel, tmp_path):
    interrupted, release = threading.Event(), threading.Event()

    def interrupt_then_stall() -> None:
        """One Ctrl-C (a second one would interrupt the clean-up), then every package download hangs."""
        if not interrupted.is_set():
            interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)
        release.wait(30)

    prefix = tmp_path / "env"
    try:
        with serve(channel, interrupt_then_stall) as url, pytest.raises(KeyboardInterrupt):
            create_prefix(prefix, request(url, "tensorflow-cpu"), tmp_path / "cache")
    finally:
        release.set()
    assert not prefix.exists(), sorted(prefix.rglob("*"))


def test_importing_the_engine_does_not_load_rattler():
    code = "import sys, envkit.backends.conda_engine; print('rattler' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
