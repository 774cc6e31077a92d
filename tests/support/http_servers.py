"""Small HTTP servers on 127.0.0.1 for the tests of redirects and authentication: a handler served for a `with`
block, and a handler that serves a directory (a conda channel) with some paths redirected or guarded."""

from __future__ import annotations

import contextlib
import functools
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator, Optional


@contextlib.contextmanager
def serving(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a free port of 127.0.0.1 for the block: its base URL. Stopped and joined afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def directory_handler(directory: Path, redirect: Callable[[str], Optional[str]] = lambda path: None,
                      authorization: Optional[str] = None, asked: Optional[list] = None):
    """Serves ``directory``; a path for which ``redirect`` gives a location is answered 302 there; with
    ``authorization`` ("Basic ..."), a request without it is answered 401. ``asked`` gets (path, authorized) each."""

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            authorized = authorization is None or self.headers.get("Authorization") == authorization
            if asked is not None:
                asked.append((self.path, authorized))
            location = redirect(self.path)
            if not authorized or location is not None:
                self.send_response(401 if not authorized else 302)
                if not authorized:
                    self.send_header("WWW-Authenticate", 'Basic realm="test"')
                else:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

        do_HEAD = do_GET

    return functools.partial(Handler, directory=str(directory))
