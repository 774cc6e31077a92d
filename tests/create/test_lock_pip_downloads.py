"""A lock's pip files are fetched by envkit itself, not by uv: a redirect off loopback to plain http is refused and
named (exit 1, nothing made), one within loopback is followed, and a file that is not the locked one is refused
before any environment exists. (uv follows every redirect it is given: before, the first case installed whatever
the other end served over plain http.)"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from conftest import PYTHON, Home
from support.wheels import build_wheel, sha256_of

OFF_LOOPBACK = "http://203.0.113.9/alpha-1.0-py3-none-any.whl"  # TEST-NET-3: envkit refuses before connecting


class _Redirecting(BaseHTTPRequestHandler):
    wheel: bytes = b""
    seen: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/off/"):
            self._send(302, b"", OFF_LOOPBACK)
        elif self.path.startswith("/hop/"):
            self._send(302, b"", f"/files/{name}")
        elif self.path.startswith("/files/"):
            self._send(200, type(self).wheel)
        elif self.path.startswith("/other/"):
            self._send(200, type(self).wheel + b"\0")  # not the locked file
        else:
            self._send(404, b"")

    def _send(self, status: int, body: bytes, location: str = "") -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the server's URL, the locked wheel's sha256)."""
    wheel = build_wheel(tmp_path / "wheels", "alpha", "1.0", files={"alpha/__init__.py": "NAME = 'alpha'\n"})
    _Redirecting.wheel, _Redirecting.seen = wheel.read_bytes(), []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", sha256_of(wheel)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _lock(home: Home, url: str, sha256: str) -> Path:
    path = home.root / "pylock.toml"
    path.write_text(f'lock-version = "1.0"\ncreated-by = "a test"\nrequires-python = ">=3.10"\n\n[[packages]]\n'
                    f'name = "alpha"\nversion = "1.0"\n'
                    f'wheels = [{{ url = "{url}", hashes = {{ sha256 = "{sha256}" }} }}]\n', encoding="utf-8")
    return path


def _create(home: Home, lock: Path, name: str):
    return home.envkit("create", "--from-lock", str(lock), "--name", name, "--python", PYTHON, "--yes", "--no-verify")


def test_a_redirect_off_loopback_to_plain_http_is_refused_named_and_makes_nothing(home: Home, server):
    url, sha256 = server
    done = _create(home, _lock(home, f"{url}/off/alpha-1.0-py3-none-any.whl", sha256), "r1")
    assert done.returncode == 1, done.stderr
    assert f"{url}/off/alpha-1.0-py3-none-any.whl redirects (302) to {OFF_LOOPBACK}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not home.prefix("r1").exists() and home.record("r1") is None
    assert _Redirecting.seen == ["/off/alpha-1.0-py3-none-any.whl"]  # asked once, by envkit; never by uv


def test_a_redirect_within_loopback_is_followed_and_the_installer_reaches_no_server(home: Home, server):
    url, sha256 = server
    done = _create(home, _lock(home, f"{url}/hop/alpha-1.0-py3-none-any.whl", sha256), "r2")
    assert done.returncode == 0, done.stderr
    assert home.in_env("r2", "import alpha; print(alpha.NAME)") == "alpha"
    assert _Redirecting.seen == ["/hop/alpha-1.0-py3-none-any.whl", "/files/alpha-1.0-py3-none-any.whl"]
    again = _create(home, _lock(home, f"{url}/hop/alpha-1.0-py3-none-any.whl", sha256), "r3")
    assert again.returncode == 0, again.stderr
    assert len(_Redirecting.seen) == 2  # the second install took the checked copy envkit keeps


def test_a_file_that_is_not_the_locked_one_is_refused_before_anything_is_made(home: Home, server):
    url, sha256 = server
    done = _create(home, _lock(home, f"{url}/other/alpha-1.0-py3-none-any.whl", sha256), "r4")
    assert done.returncode == 1, done.stderr
    assert f"but the lock pins {sha256}" in done.stderr and "nothing was installed" in done.stderr
    assert not home.prefix("r4").exists() and home.record("r4") is None
