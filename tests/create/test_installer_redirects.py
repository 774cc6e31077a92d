"""uv follows every redirect it is given; envkit holds it to the transport rule (https, or plain http only on loopback
and under a configured mirror) through a proxy of its own that refuses (envkit.system.egress). A real `envkit create`
from an index on 127.0.0.1 whose wheel redirects off loopback to plain http: refused, named, exit 1, nothing made; a
redirect to another server on loopback: followed."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from conftest import CU126, GTX1080TI, LEGACY_BUILD, LEGACY_CHANNEL, Home
from support.pypi_index import IndexServer

from envkit.system.egress import plain_http_guard

FILELOCK = "filelock-3.20.0-py3-none-any.whl"  # torch's dependency, fetched from the build's own index
OFF_LOOPBACK = f"http://203.0.113.9/{FILELOCK}"  # TEST-NET-3: the proxy refuses it before any connection is tried


def test_a_wheel_redirected_off_loopback_to_plain_http_is_refused_named_and_nothing_is_made(
        home: Home, torch_index: IndexServer):
    torch_index.redirect_file(FILELOCK, OFF_LOOPBACK)
    done = home.envkit("create", *CU126, "--name", "t1", "--yes", "--no-verify")
    assert done.returncode == 1, done.stderr
    assert f"uv was sent to {OFF_LOOPBACK} over plain http (a redirect, or a link of the index)" in done.stderr
    assert "neither on loopback nor under a configured mirror: refused" in done.stderr and "Traceback" not in done.stderr
    assert not home.prefix("t1").exists() and home.record("t1") is None


def test_a_redirect_to_another_server_on_loopback_is_followed(home: Home, torch_index: IndexServer,
                                                             torch_wheels):
    with IndexServer() as other:
        other.add_index("/files", [w for w in torch_wheels["cu126"] if w.name == FILELOCK])
        torch_index.redirect_file(FILELOCK, f"{other.url}/files/filelock/{FILELOCK}")
        done = home.envkit("create", *CU126, "--name", "t2", "--yes", "--no-verify")
        assert done.returncode == 0, done.stderr
        assert f"/files/filelock/{FILELOCK}" in other.requests
    assert home.in_env("t2", "import importlib.metadata as m; print(m.version('filelock'))") == "3.20.0"


def _get(url: str, proxy: dict[str, str]) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy["HTTP_PROXY"]}))
    try:
        with opener.open(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_guard_refuses_and_notes_plain_http_and_names_the_allowed_hosts_for_no_proxy():
    with plain_http_guard(["http://cache.lab:8080/pypi/simple", "https://download.pytorch.org/whl/cu126"],
                          {"NO_PROXY": "intranet.lab"}) as (proxy, refused):
        assert proxy["HTTP_PROXY"] == proxy["http_proxy"] and proxy["HTTP_PROXY"].startswith("http://127.0.0.1:")
        assert proxy["NO_PROXY"] == proxy["no_proxy"] == "localhost,127.0.0.1,::1,cache.lab"  # no https host
        assert _get("http://203.0.113.9/x.whl", proxy) == 403
        assert _get("http://203.0.113.9/x.whl", proxy) == 403
        assert refused == ["http://203.0.113.9/x.whl"]  # each URL once


@pytest.mark.parametrize("environ, kept", [
    ({"NO_PROXY": "intranet.lab"}, False),  # no proxy for https: NO_PROXY means nothing to keep
    ({"NO_PROXY": "intranet.lab", "HTTPS_PROXY": "http://proxy.corp:3128"}, True),
    ({"no_proxy": "intranet.lab", "all_proxy": "socks5://proxy.corp:1080"}, True),
])
def test_a_users_https_proxy_keeps_their_no_proxy_hosts_direct(environ, kept):
    with plain_http_guard([], environ) as (proxy, _):
        assert ("intranet.lab" in proxy["NO_PROXY"].split(",")) is kept


def test_a_client_that_never_finishes_its_request_holds_nothing_and_prints_nothing(capfd):
    import socket

    with plain_http_guard([], {}) as (proxy, refused):
        port = int(proxy["HTTP_PROXY"].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as silent, \
                socket.create_connection(("127.0.0.1", port)) as gone:
            silent.sendall(b"GET http://203.0.113.9/a HTTP/1.1\r\n")  # and never the rest
            gone.close()
            assert _get("http://203.0.113.9/b", proxy) == 403  # others are answered meanwhile
    assert refused == ["http://203.0.113.9/b"]
    assert capfd.readouterr().err == ""


def test_envkit_lock_holds_uv_to_the_rule_too(home: Home, torch_index: IndexServer):
    torch_index.redirect_file(f"{FILELOCK}.metadata", f"{OFF_LOOPBACK}.metadata")  # what uv reads to resolve
    out = home.root / "t.lock.yml"
    done = home.envkit("lock", *CU126, "-o", str(out))
    assert done.returncode == 1, done.stderr
    assert f"uv was sent to {OFF_LOOPBACK}.metadata over plain http" in done.stderr and not out.exists()


def test_the_embedded_conda_engine_is_held_to_the_rule_too(home: Home, legacy_channel, conda_manifests):
    """py-rattler runs in envkit's process: a channel on 127.0.0.1 whose package redirects off loopback."""
    from support.http_servers import directory_handler, serving

    def off_loopback(path: str):
        return f"http://203.0.113.9{path}" if "tensorflow-gpu" in path and path.endswith(".tar.bz2") else None

    with serving(directory_handler(legacy_channel, redirect=off_loopback)) as url:
        home.write_config({LEGACY_CHANNEL: url})
        done = home.envkit("create", *LEGACY_BUILD, *GTX1080TI, "--manifests", str(conda_manifests), "--backend",
                           "rattler", "--name", "tf", "--yes", "--no-verify")
    assert done.returncode == 1, done.stderr
    assert "the conda engine was sent to http://203.0.113.9/" in done.stderr and "tensorflow-gpu" in done.stderr
    assert not home.prefix("tf").exists() and home.record("tf") is None
