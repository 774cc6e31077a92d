"""A package index on 127.0.0.1 that lists wheel file names (no wheel bodies) and misbehaves on request.

`manifests check` reads only project pages, so the pages here name files that need not exist. Each index is a URL
prefix (``/whl/cu130``) mapping project names to file names; pages are PEP 503 HTML, or PEP 691 JSON when the
client asks for it and the index was added with ``json=True``. Faults, per request path:
``fail(path, status, times)`` answers ``status`` that many times, then normally; ``reset(path)`` closes the
connection without an answer (a TCP reset); ``hang(path)`` answers nothing until the server closes.
"""

from __future__ import annotations

import functools
import html
import json
import socket
import struct
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


class FaultyIndex:
    def __init__(self) -> None:
        self.indexes: dict[str, tuple[dict[str, list[tuple[str, str | None]]], bool]] = {}
        self.faults: dict[str, list[object]] = {}
        self.requests: list[str] = []
        self.json_pages_served = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FaultyIndex:
        handler = functools.partial(_Handler, self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, prefix: str, files: Iterable[str], *, json_pages: bool = False,
            requires_python: dict[str, str] | None = None) -> str:
        """Serve the wheel file names ``files`` as an index at ``prefix`` (added to what it serves); its URL."""
        prefix = "/" + prefix.strip("/")
        with self.lock:
            projects, _ = self.indexes.setdefault(prefix, ({}, json_pages))
            self.indexes[prefix] = (projects, json_pages)
            for name in files:
                project = canonicalize_name(name.split("-")[0])
                projects.setdefault(project, []).append((name, (requires_python or {}).get(name)))
        return self.url + prefix

    def fail(self, path: str, status: int, times: int = 1) -> None:
        with self.lock:
            self.faults.setdefault(path, []).extend([status] * times)

    def reset(self, path: str, times: int = 1) -> None:
        with self.lock:
            self.faults.setdefault(path, []).extend(["reset"] * times)

    def hang(self, path: str) -> None:
        with self.lock:
            self.faults[path] = ["hang"] * 1000

    def count(self, path: str) -> int:
        with self.lock:
            return self.requests.count(path)


class _Handler(BaseHTTPRequestHandler):
    timeout = 10

    def __init__(self, index: FaultyIndex, *args: object) -> None:
        self.index = index
        super().__init__(*args)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.index.lock:
            self.index.requests.append(path)
            queue = self.index.faults.get(path)
            fault = queue.pop(0) if queue else None
        if fault == "hang":
            self.index.stopping.wait(30)
            return
        if fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if isinstance(fault, int):
            return self._send(fault, "text/plain", f"{fault}\n")
        self._page(path)

    def _page(self, path: str) -> None:
        with self.index.lock:
            for prefix in sorted(self.index.indexes, key=len, reverse=True):
                if path.startswith(prefix + "/"):
                    projects, json_pages = self.index.indexes[prefix]
                    rest = path[len(prefix) + 1 :].strip("/")
                    break
            else:
                return self._send(404, "text/plain", "not found\n")
            files = list(projects.get(canonicalize_name(rest), [])) if rest else None
            names = sorted(projects)
        wants_json = json_pages and JSON_TYPE in (self.headers.get("Accept") or "")
        if files is None:  # the root page: the list of projects
            if wants_json:
                return self._send(200, JSON_TYPE, json.dumps({"meta": {"api-version": "1.0"},
                                                              "projects": [{"name": n} for n in names]}))
            links = "".join(f'<a href="{n}/">{n}</a>\n' for n in names)
            return self._send(200, "text/html", f"<html><body>\n{links}</body></html>\n")
        if not files:
            return self._send(404, "text/plain", "not found\n")
        if wants_json:
            with self.index.lock:
                self.index.json_pages_served += 1
            entries = [{"filename": f, "url": f, "hashes": {}, **({"requires-python": r} if r else {})}
                       for f, r in files]
            return self._send(200, JSON_TYPE, json.dumps({"meta": {"api-version": "1.0"}, "name": rest,
                                                          "files": entries}))
        links = "".join(f'<a href="{html.escape(f)}"{_requires(r)}>{html.escape(f)}</a>\n' for f, r in files)
        return self._send(200, "text/html", f"<html><body>\n{links}</body></html>\n")

    def _send(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _requires(requires_python: str | None) -> str:
    return f' data-requires-python="{html.escape(requires_python)}"' if requires_python else ""
