"""envkit's transport rule (https, or plain http only on loopback and under a configured mirror) held for the
installers too, for every hop of a redirect and every link an index page gives.

uv and pip follow redirects themselves, and have no setting that refuses one. But both send a plain http request to
the proxy ``HTTP_PROXY`` names, unless its host is in ``NO_PROXY``. While an installer runs, :func:`plain_http_guard`
makes that proxy a server of envkit's on 127.0.0.1 that refuses every request it is given (403) and notes its URL,
and ``NO_PROXY`` names loopback and the hosts of the step's index, its page of links and the configured mirrors
(by host: a proxy exception knows no paths). So a plain http request anywhere else (an https index redirecting to
http, a loopback one redirecting off it) ends in a refusal that envkit then names, instead of a download.

https requests are left alone (``HTTPS_PROXY`` is the user's). Where the user has a proxy for https
(``HTTPS_PROXY`` or ``ALL_PROXY``), the hosts of their ``NO_PROXY`` keep going direct, and plain http to them is not
refused.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import Iterator, Mapping, Sequence
from urllib.parse import urlsplit

from envkit.errors import InstallError

HINT = ("Packages are fetched over https only, or over http from loopback and mirrors in envkit's config; fix the "
        "mirror, or add where it redirects to as a mirror if you trust it.")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
_KEPT = 5  # refused URLs noted (the first ones say what happened)
_MAX_LINE = 16 << 10


def allowed_hop(url: str, mirrors: Sequence[str]) -> bool:
    """Whether a redirect may lead to ``url``: https, or plain http on loopback or under a configured mirror (the
    transport rule of envkit.state.config.check_transport, for every hop)."""
    from envkit.state.config import is_loopback, is_under

    scheme = urlsplit(url).scheme.lower()
    return scheme == "https" or (scheme == "http" and (is_loopback(url) or any(is_under(url, m) for m in mirrors)))


class PlainHttpRefused(InstallError):
    """An installer was sent over plain http somewhere the transport rule does not allow."""


class _Refuse(socketserver.StreamRequestHandler):
    """Answers any request 403 and notes its target (a proxy request's target is the absolute URL). socketserver,
    not http.server: that one costs create 24 ms of imports."""

    refused: list[str]
    timeout = 10  # seconds a client may take to send its request: nobody holds a thread of envkit's longer

    def handle(self) -> None:
        try:
            raw = self.rfile.readline(_MAX_LINE)
            for _ in range(100):  # the headers, to the blank line (bounded)
                header = self.rfile.readline(_MAX_LINE)
                if header in (b"\r\n", b"\n") or not header.endswith(b"\n"):
                    break
        except OSError:  # (a timeout)
            return
        if not raw.endswith(b"\n") or not header.endswith(b"\n"):
            return  # a client that never finished its request gets nothing, and is not noted
        line = raw.decode("latin-1").split()
        if len(line) >= 2 and len(self.refused) < _KEPT and line[1] not in self.refused:
            self.refused.append(line[1])
        body = b"envkit refuses plain http off loopback and the configured mirrors\n"
        head = (f"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n").encode("ascii")
        try:
            self.wfile.write(head + (body if line[:1] != ["HEAD"] else b""))
        except OSError:  # (the client is gone)
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        """Nothing on envkit's stderr: socketserver would print a traceback there."""


def _user_no_proxy(environ: Mapping[str, str]) -> list[str]:
    """The user's NO_PROXY hosts, kept where the user has a proxy for https (they reach those hosts directly)."""
    if not any(environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return []
    text = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    return [entry.strip() for entry in text.split(",") if entry.strip()]


@contextlib.contextmanager
def plain_http_guard(allowed: Sequence[str], environ: Mapping[str, str]
                     ) -> Iterator[tuple[dict[str, str], list[str]]]:
    """While the block runs: (the installer's proxy variables, the plain http URLs it was refused so far).
    ``allowed``: the URLs whose hosts plain http may reach (the step's index and links, the mirrors)."""
    hosts = [*LOOPBACK, *(urlsplit(url).hostname or "" for url in allowed if urlsplit(url).scheme == "http")]
    no_proxy = ",".join(dict.fromkeys(host for host in (*hosts, *_user_no_proxy(environ)) if host))
    refused: list[str] = []
    server = _Server(("127.0.0.1", 0), type("Refuse", (_Refuse,), {"refused": refused}))
    stop = threading.Event()

    def serve() -> None:  # each connection to a thread of its own, until told to stop (no polling: at once)
        while not stop.is_set():
            server.handle_request()

    thread = threading.Thread(target=serve, daemon=True, name="envkit-plain-http-guard")
    thread.start()
    proxy = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": no_proxy, "no_proxy": no_proxy}, refused
    finally:
        stop.set()
        # A connection of its own wakes the server up to see it must stop: to the address itself, not through the
        # resolver (which loads the idna codec, 1.2 ms, for every installer step).
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_STREAM) as wake:
            wake.settimeout(5)
            wake.connect(server.server_address)
        thread.join(timeout=10)
        server.server_close()


@contextlib.contextmanager
def guarded(installer: str, allowed: Sequence[str], environ: Mapping[str, str],
            failures: tuple[type[BaseException], ...] = (InstallError,)) -> Iterator[dict[str, str]]:
    """:func:`plain_http_guard` around an installer's run (the block gets the proxy variables for its environment):
    when the run fails (one of ``failures``) after a refusal, the refusal is the error, naming where it was sent."""
    with plain_http_guard(allowed, environ) as (proxy, refused):
        try:
            yield proxy
        except failures:
            if refused:  # why it failed: a hop the transport rule does not allow
                raise refusal(installer, refused) from None
            raise


@contextlib.contextmanager
def in_this_process(variables: Mapping[str, str]) -> Iterator[None]:
    """``variables`` in this process's own environment for the block, for what runs in process and reads its proxy
    settings there (py-rattler's HTTP client, when it is made); the previous values afterwards."""
    import os

    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def refusal(installer: str, refused: Sequence[str]) -> PlainHttpRefused:
    """The error for an installer step that failed after the guard refused ``refused``."""
    from envkit.text.redact import redact

    where = ", ".join(refused)
    return PlainHttpRefused(redact(f"{installer} was sent to {where} over plain http (a redirect, or a link of the "
                                   "index), which is neither on loopback nor under a configured mirror: refused"),
                            hint=HINT)
