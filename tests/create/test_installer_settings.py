"""The user's installer settings never reach the installer, pip included (ENVKIT_INSTALLER=pip): no PIP_PROXY,
PIP_INDEX_URL, PIP_TRUSTED_HOST or pip config file of theirs decides where a package comes from or how it gets
there; the plain-http guard (envkit.system.egress) holds both installers, and a mirror's traffic goes direct. The user's
proxy is a real server on 127.0.0.1 that records every request that reaches it and refuses it."""

from __future__ import annotations

import contextlib
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Iterator

import pytest

from conftest import CU126, Home
from support.http_servers import serving
from support.pypi_index import IndexServer
from support.wheels import build_wheel

from envkit.backends.installers import installer_environ

VERSION = "import importlib.metadata as m; print(m.version('torch'))"
FILELOCK = "filelock-3.20.0-py3-none-any.whl"
OFF_LOOPBACK = f"http://203.0.113.9/{FILELOCK}"  # TEST-NET-3: never connected to


@contextlib.contextmanager
def users_proxy() -> Iterator[tuple[str, list[str]]]:
    """A proxy of the user's on 127.0.0.1: (its URL, the request lines that reached it). It answers 502."""
    seen: list[str] = []

    class Recording(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _refuse(self) -> None:
            seen.append(self.requestline)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_CONNECT = do_POST = _refuse

    with serving(Recording) as url:
        yield url, seen


def test_a_users_pip_settings_and_config_file_never_reach_pip_and_the_mirror_goes_direct(
        home: Home, torch_index: IndexServer, tmp_path: Path):
    decoys = tmp_path / "decoys"
    build_wheel(decoys, "torch", "2.13.9", requires=["filelock"])
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {torch_index.index_url('/pypi/simple')}\nfind-links = {decoys}\n"
                      "trusted-host = 127.0.0.1\n")
    with users_proxy() as (proxy, seen):
        settings = {"ENVKIT_INSTALLER": "pip", "PIP_PROXY": proxy, "PIP_CONFIG_FILE": str(config),
                    "PIP_INDEX_URL": torch_index.index_url("/pypi/simple"), "PIP_TRUSTED_HOST": "127.0.0.1",
                    "PIP_FIND_LINKS": str(decoys), "PIP_NO_INDEX": "1"}
        done = home.envkit("create", *CU126, "--yes", "--no-verify", env=settings)
        assert done.returncode == 0, done.stderr
        assert seen == []  # the mirror on 127.0.0.1 was reached directly, never through the user's proxy
    assert home.in_env("torch-cu126", VERSION) == "2.13.0+cu126"
    assert home.record("torch-cu126")["installer"] == "pip"
    assert not any(path.startswith("/pypi/simple") for path in torch_index.requests)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_the_plain_http_guard_holds_both_installers_whatever_proxy_the_user_set(
        home: Home, torch_index: IndexServer, installer: str):
    torch_index.redirect_file(FILELOCK, OFF_LOOPBACK)
    with users_proxy() as (proxy, seen):
        done = home.envkit("create", *CU126, "--yes", "--no-verify", "--name", "t1",
                           env={"ENVKIT_INSTALLER": installer, "PIP_PROXY": proxy, "HTTP_PROXY": proxy,
                                "http_proxy": proxy})
        assert seen == []
    assert done.returncode == 1, done.stderr
    assert f"{installer} was sent to {OFF_LOOPBACK} over plain http" in done.stderr, done.stderr
    assert not home.prefix("t1").exists() and home.record("t1") is None


@pytest.mark.parametrize("environ, https", [
    ({"PIP_PROXY": "http://proxy.lab:3128"}, "http://proxy.lab:3128"),  # https keeps going through it
    ({"PIP_PROXY": "http://proxy.lab:3128", "HTTPS_PROXY": "http://other.lab:8080"}, "http://other.lab:8080"),
    ({"PIP_PROXY": "http://proxy.lab:3128", "all_proxy": "socks5://other.lab:1080"}, None),
    ({}, None),
])
def test_pip_proxy_becomes_the_https_proxy_only_where_the_user_has_none(environ, https):
    out = installer_environ({"PATH": "/usr/bin", **environ}, None)
    assert "PIP_PROXY" not in out
    assert out.get("HTTPS_PROXY") == https and out.get("https_proxy") in (None, https)
