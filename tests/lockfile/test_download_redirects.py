"""envkit's own downloader (a lock's conda packages): the transport rule (https, or plain http only on loopback and
configured mirrors) holds for every hop of a redirect, and credentials go only to the host they were given for."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envkit.errors import InstallError
from envkit.lockfile.fetch import fetch_verified
from envkit.lockfile.model import LockedPackage
from envkit.system.download import RedirectRefused
from envkit.system.egress import allowed_hop

DATA = b"a conda package\n"
OFF_LOOPBACK = "http://203.0.113.9/pkgs/x-1.0-0.conda"  # TEST-NET-3: refused before any connection is tried


class _Handler(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/off/x-1.0-0.conda":
            self._redirect(OFF_LOOPBACK)
        elif self.path == "/hop/x-1.0-0.conda":
            self._redirect("/pkgs/x-1.0-0.conda")
        elif self.path == "/pkgs/x-1.0-0.conda":
            self.send_response(200)
            self.send_header("Content-Length", str(len(DATA)))
            self.end_headers()
            self.wfile.write(DATA)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def server():
    _Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


PACKAGE = LockedPackage(name="x", version="1.0", manager="conda", platform="linux-64",
                        url="https://conda.anaconda.org/c/linux-64/x-1.0-0.conda",
                        sha256=hashlib.sha256(DATA).hexdigest(), md5=hashlib.md5(DATA).hexdigest())


def test_a_redirect_off_loopback_to_plain_http_is_refused_and_named(server, tmp_path: Path):
    with pytest.raises(RedirectRefused) as refused:
        fetch_verified(PACKAGE, f"{server}/off/x-1.0-0.conda", tmp_path, lambda line: None)
    assert isinstance(refused.value, InstallError) and refused.value.exit_code == 1
    assert f"{server}/off/x-1.0-0.conda redirects (302) to {OFF_LOOPBACK}" in refused.value.message
    assert list(tmp_path.rglob("*.conda")) == [] and len(_Handler.seen) == 1  # asked once: no retry of a refusal


def test_a_redirect_within_loopback_is_followed_and_credentials_reach_the_server(server, tmp_path: Path):
    with_credentials = server.replace("http://", "http://alice:pw@")
    path = fetch_verified(PACKAGE, f"{with_credentials}/hop/x-1.0-0.conda", tmp_path, lambda line: None)
    assert path.read_bytes() == DATA
    token = "Basic " + base64.b64encode(b"alice:pw").decode()
    assert _Handler.seen == [("/hop/x-1.0-0.conda", token), ("/pkgs/x-1.0-0.conda", token)]


@pytest.mark.parametrize("url, mirrors, allowed", [
    ("https://example.org/x", (), True),
    ("http://127.0.0.1:9/x", (), True),
    ("http://localhost/x", (), True),
    ("http://example.org/x", (), False),
    ("http://cache.lab:8080/conda/x", ("http://cache.lab:8080/conda",), True),
    ("http://cache.lab:8080/other/x", ("http://cache.lab:8080/conda",), False),
    ("file:///etc/passwd", (), False),
    ("ftp://example.org/x", (), False),
])
def test_the_transport_rule_for_each_hop(url, mirrors, allowed):
    assert allowed_hop(url, mirrors) is allowed


def test_a_kept_file_is_hashed_again_only_when_it_may_have_changed(server, tmp_path: Path, monkeypatch):
    from envkit.lockfile import fetch

    hashed: list[Path] = []
    real_verify = fetch.verify
    monkeypatch.setattr(fetch, "verify", lambda package, path, source: (hashed.append(path),
                                                                       real_verify(package, path, source)))
    url = f"{server}/pkgs/x-1.0-0.conda"
    path = fetch_verified(PACKAGE, url, tmp_path, lambda line: None)
    assert len(hashed) == 1 and len(_Handler.seen) == 1
    fetch_verified(PACKAGE, url, tmp_path, lambda line: None)
    assert len(hashed) == 2  # marked less than a second after it was written: not trusted yet, hashed again
    time.sleep(1.1)
    fetch_verified(PACKAGE, url, tmp_path, lambda line: None)  # marked anew, a second later
    fetch_verified(PACKAGE, url, tmp_path, lambda line: None)
    assert len(hashed) == 3 and len(_Handler.seen) == 1  # the last one trusted the mark: no hashing, no download
    before = path.stat()
    path.write_bytes(DATA.replace(b"a", b"b"))  # the same size, and the same mtime put back
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert fetch_verified(PACKAGE, url, tmp_path, lambda line: None).read_bytes() == DATA
    assert len(hashed) == 5 and len(_Handler.seen) == 2  # the changed copy was caught, and fetched again


def test_a_lock_installed_before_takes_its_kept_files_in_order_and_fetches_only_the_rest(server, tmp_path: Path):
    from dataclasses import replace

    from envkit.lockfile.fetch import fetch_all, link_into

    store = tmp_path / "store"
    url = f"{server}/pkgs/x-1.0-0.conda"
    kept = fetch_verified(PACKAGE, url, store, lambda line: None)
    time.sleep(1.1)
    fetch_verified(PACKAGE, url, store, lambda line: None)  # hash-checked again, a second on: its mark is trusted
    other_data = b"another conda package\n"
    other = replace(PACKAGE, name="y", url="https://conda.anaconda.org/c/linux-64/y-1.0-0.conda",
                    sha256=hashlib.sha256(other_data).hexdigest(), md5=hashlib.md5(other_data).hexdigest())
    (tmp_path / "y-1.0-0.conda").write_bytes(other_data)  # a file:// source: hashed where it is, every time
    said: list[str] = []
    _Handler.seen.clear()
    paths = fetch_all([other, PACKAGE], [(tmp_path / "y-1.0-0.conda").as_uri(), url], store, said.append)
    assert paths == [tmp_path / "y-1.0-0.conda", kept]  # in the lock's order
    assert _Handler.seen == [] and said == []  # nothing downloaded

    links = tmp_path / "links"
    link_into(paths, links)
    first = os.lstat(links / kept.name)
    (links / "y-1.0-0.conda").unlink()
    os.symlink(tmp_path / "elsewhere", links / "y-1.0-0.conda")  # a stale link: replaced
    link_into(paths, links)
    assert os.lstat(links / kept.name).st_ino == first.st_ino  # the same link: left as it was
    assert [os.readlink(links / path.name) for path in paths] == [str(path) for path in paths]
