"""A real Python package index for tests: hand-built wheels served over HTTP on 127.0.0.1.

The pip side of envkit is tested against real installers (uv, pip) resolving against real PEP 503 "simple"
indexes, one per CUDA variant, the way download.pytorch.org serves them; only the wheels are tiny. Nothing here
touches the network: the server binds 127.0.0.1, and `installer_env` strips every setting that could point an
installer at another index. The wheels come from support.wheels (built by hand) or support.local_wheels (already
on this machine).
"""

from __future__ import annotations

import functools
import hashlib
import html
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, unquote, urlsplit

from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename

from support.wheels import metadata_bytes, read_wheel_metadata, sha256_of

_CHUNK = 1 << 20  # bytes sent at a time


# --------------------------------------------------------------------------------------------------------------
# The server


@dataclass(frozen=True)
class _Wheel:
    """One file of an index: where it lies on disk, and what the project page says about it."""

    path: Path
    sha256: str
    metadata: bytes  # served as <file>.metadata (PEP 658), so installers need not download a wheel to resolve
    requires_python: str | None

    @property
    def filename(self) -> str:
        return self.path.name

    @classmethod
    def of(cls, path: Path) -> _Wheel:
        return cls(path, sha256_of(path), metadata_bytes(path), read_wheel_metadata(path).get("Requires-Python"))


@dataclass
class _State:
    """What the request handlers read and the test writes, behind one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    indexes: dict[str, dict[NormalizedName, dict[str, _Wheel]]] = field(default_factory=dict)
    # Flat pages of links (pip --find-links), as download.pytorch.org/whl/torch_stable.html: page path -> files,
    # each file served beside the page.
    pages: dict[str, dict[str, _Wheel]] = field(default_factory=dict)
    failing: set[tuple[str, NormalizedName]] = field(default_factory=set)
    delays: dict[str, float] = field(default_factory=dict)
    rates: dict[str, int] = field(default_factory=dict)  # file name -> bytes a second its body is sent at
    moved: dict[str, str] = field(default_factory=dict)  # file name -> where a 302 sends its requests
    requests: list[str] = field(default_factory=list)
    core_metadata: bool = True
    authorization: str | None = None  # "Basic ..." that every request must carry (require_credentials)
    # PyPI's layout (add_index's files_at): an index prefix -> the path its pages link their files under, and each
    # such file's path -> the wheel, served there and not beside the pages.
    file_roots: dict[str, str] = field(default_factory=dict)
    files: dict[str, _Wheel] = field(default_factory=dict)


class IndexServer:
    """PEP 503 simple indexes under URL prefixes of one HTTP server on 127.0.0.1, for the length of a `with`.

    `add_index("/whl/cu126", wheels)` serves `<url>/whl/cu126/` (project list), `<url>/whl/cu126/<project>/`
    (links with #sha256= and data-requires-python) and the wheels themselves, streamed from where they lie.
    `requests` logs every path asked for (percent-decoded, without query), so a test can tell which index a
    file came from. On exit the listening socket is closed and every server thread joined.

    With `core_metadata` (the default, as on PyPI and download.pytorch.org) each wheel's METADATA is also served
    as `<file>.metadata` (PEP 658/714), and installers fetch a wheel once, to install it. Without it, uv sends a
    HEAD for range support (not offered here) and then downloads each wheel twice: for metadata, then to install.
    """

    def __init__(self, *, core_metadata: bool = True) -> None:
        self._state = _State(core_metadata=core_metadata)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> IndexServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def require_credentials(self, user: str, password: str) -> None:
        """Answer 401 to every request without HTTP basic auth of ``user:password`` (a lab's authenticated mirror)."""
        import base64

        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        with self._state.lock:
            self._state.authorization = f"Basic {token}"

    def start(self) -> None:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("the index server is already started")
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler, self._state)
        # A short poll interval: shutdown() waits for the accept loop to look at its flag, 0.5 s by default.
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, name="pypi-index-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving: wake delayed downloads, stop the accept loop, close the socket, join every thread."""
        if self._httpd is None:
            return
        self._state.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the request threads (daemon_threads is off)
        assert self._thread is not None
        self._thread.join()
        self._httpd = self._thread = None

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT, no trailing slash."""
        if self._httpd is None:
            raise RuntimeError("the index server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def thread(self) -> threading.Thread | None:
        """The accept-loop thread while running (for tests of the server itself)."""
        return self._thread

    def index_url(self, prefix: str) -> str:
        """The URL to give an installer as --index-url for the index at `prefix`."""
        return f"{self.url}{_prefix(prefix)}/"

    def add_index(self, prefix: str, wheels: Iterable[Path], files_at: str | None = None) -> str:
        """Serve `wheels` as a simple index at `prefix` (added to what it already serves); return its URL.

        A file name already served for the project is kept, not replaced: the same wheel found in two places on
        disk is one link. With `files_at` (a path like "/packages"), the index is laid out as PyPI and its mirrors
        lay theirs out: the project pages link each file by its absolute path `<files_at>/<ab>/<cd>/<file>` (the
        first digits of its sha256), where it is served, outside `prefix`.
        """
        entries = [_Wheel.of(Path(wheel)) for wheel in wheels]
        with self._state.lock:
            projects = self._state.indexes.setdefault(_prefix(prefix), {})
            for entry in entries:
                project = parse_wheel_filename(entry.filename)[0]
                projects.setdefault(project, {}).setdefault(entry.filename, entry)
            if files_at is not None:
                self._state.file_roots[_prefix(prefix)] = _prefix(files_at)
                for entry in entries:
                    self._state.files[_file_path(_prefix(files_at), entry)] = entry
        return self.index_url(prefix)

    def add_find_links(self, page: str, wheels: Iterable[Path]) -> str:
        """Serve `wheels` on one flat HTML page of links at the path `page` (like `/whl/torch_stable.html`), the
        files beside it; return the page's URL, for an installer's --find-links."""
        entries = [_Wheel.of(Path(wheel)) for wheel in wheels]
        path = "/" + page.strip("/")
        with self._state.lock:
            files = self._state.pages.setdefault(path, {})
            for entry in entries:
                files.setdefault(entry.filename, entry)
        return f"{self.url}{path}"

    def delay_file(self, filename: str, seconds: float) -> None:
        """Hold the body of `filename` (in any index) for `seconds` after its headers, or until close()."""
        with self._state.lock:
            self._state.delays[filename] = seconds

    def throttle_file(self, filename: str, bytes_per_second: int) -> None:
        """Send the body of `filename` (in any index) at about `bytes_per_second`: a slow link."""
        with self._state.lock:
            self._state.rates[filename] = bytes_per_second

    def redirect_file(self, filename: str, location: str) -> None:
        """Answer every request for `filename` (in any index) with a 302 to the absolute URL `location`."""
        with self._state.lock:
            self._state.moved[filename] = location

    def fail_project(self, prefix: str, name: str) -> None:
        """Answer the project page of `name` in the index at `prefix` with HTTP 500."""
        with self._state.lock:
            self._state.failing.add((_prefix(prefix), canonicalize_name(name)))

    @property
    def requests(self) -> list[str]:
        """A copy of the paths requested so far, in order."""
        with self._state.lock:
            return list(self._state.requests)

    def fetched_files(self) -> list[str]:
        """The requested paths that name a wheel."""
        return [path for path in self.requests if path.endswith(".whl")]


def _prefix(prefix: str) -> str:
    """'/whl/cu126', whatever slashes the caller wrote."""
    stripped = prefix.strip("/")
    if not stripped:
        raise ValueError("an index needs a non-empty URL prefix")
    return "/" + stripped


class _HTTPServer(ThreadingHTTPServer):
    """Tracks its request threads, so that server_close() can join them all; quiet about hung-up clients."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 128  # uv opens many connections at once; the default 5 drops some (a 1 s retry each)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], state: _State) -> None:
        self.state = state
        super().__init__(address, handler)

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a bug in the handler: print it


# A response chosen under the state's lock, sent after it is released; called with body=False for HEAD.
_Response = Callable[[bool], None]


class _Handler(BaseHTTPRequestHandler):
    """Routes /<prefix>/, /<prefix>/<project>/ and /<prefix>/<project>/<file> to the indexes in the state."""

    server: _HTTPServer
    timeout = 30  # a client that stops reading cannot hold close() forever

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        """Silence the per-request line on stderr; `IndexServer.requests` is the log."""

    def do_GET(self) -> None:
        self._respond(body=True)

    def do_HEAD(self) -> None:
        self._respond(body=False)

    def _respond(self, *, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        state = self.server.state
        with state.lock:
            state.requests.append(path)
            wanted = state.authorization
            route = self._route(path, state)
        if wanted is not None and self.headers.get("Authorization") != wanted:
            self.send_response(HTTPStatus.UNAUTHORIZED)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        route(body)

    def _route(self, path: str, state: _State) -> _Response:
        """Pick the response while holding the lock; the response itself is sent without it."""
        if path in state.files:
            return functools.partial(self._send_file, state.files[path], 0.0, None)
        if path.endswith(".metadata") and path.removesuffix(".metadata") in state.files and state.core_metadata:
            return functools.partial(self._send_bytes, state.files[path.removesuffix(".metadata")].metadata,
                                     "application/octet-stream")
        for page, files in state.pages.items():
            if path == page:
                return functools.partial(self._send_html, _flat_page(files.values()))
            folder, _, name = path.rpartition("/")
            if folder == page.rpartition("/")[0] and name in files:
                return functools.partial(self._send_file, files[name], state.delays.get(name, 0.0),
                                         state.rates.get(name))
        for prefix in sorted(state.indexes, key=len, reverse=True):
            if path == prefix or path.startswith(prefix + "/"):
                return self._route_in_index(prefix, path[len(prefix) :], state)
        return functools.partial(self._send_error, HTTPStatus.NOT_FOUND)

    def _route_in_index(self, prefix: str, rest: str, state: _State) -> _Response:
        projects = state.indexes[prefix]
        parts = rest.strip("/").split("/") if rest.strip("/") else []
        if not parts:
            if not rest:
                return functools.partial(self._redirect, prefix + "/")
            return functools.partial(self._send_html, _project_list(sorted(projects)))
        project = canonicalize_name(parts[0])
        if project not in projects or len(parts) > 2:
            return functools.partial(self._send_error, HTTPStatus.NOT_FOUND)
        if len(parts) == 2:
            return self._route_to_file(projects[project], parts[1], state)
        if (prefix, project) in state.failing:
            return functools.partial(self._send_error, HTTPStatus.INTERNAL_SERVER_ERROR)
        if not rest.endswith("/"):
            return functools.partial(self._redirect, f"{prefix}/{parts[0]}/")  # relative links need the slash
        page = _project_page(project, projects[project].values(), core_metadata=state.core_metadata,
                             files_at=state.file_roots.get(prefix))
        return functools.partial(self._send_html, page)

    def _route_to_file(self, wheels: Mapping[str, _Wheel], filename: str, state: _State) -> _Response:
        """A wheel, or with core_metadata its <file>.metadata."""
        if filename in state.moved:
            return functools.partial(self._moved, state.moved[filename])
        if wheel := wheels.get(filename):
            return functools.partial(self._send_file, wheel, state.delays.get(filename, 0.0),
                                     state.rates.get(filename))
        wheel = wheels.get(filename.removesuffix(".metadata"))
        if wheel and filename.endswith(".metadata") and state.core_metadata:
            return functools.partial(self._send_bytes, wheel.metadata, "application/octet-stream")
        return functools.partial(self._send_error, HTTPStatus.NOT_FOUND)

    def _send_html(self, page: str, body: bool) -> None:
        self._send_bytes(page.encode(), "text/html; charset=utf-8", body)

    def _send_bytes(self, data: bytes, content_type: str, body: bool) -> None:
        self._send_headers(HTTPStatus.OK, content_type, len(data))
        if body:
            self.wfile.write(data)

    def _send_error(self, status: HTTPStatus, body: bool) -> None:
        data = f"{status.value} {status.phrase}\n".encode()
        self._send_headers(status, "text/plain; charset=utf-8", len(data))
        if body:
            self.wfile.write(data)

    def _redirect(self, location: str, body: bool) -> None:
        self.send_response(HTTPStatus.MOVED_PERMANENTLY)
        self.send_header("Location", quote(location))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _moved(self, location: str, body: bool) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_file(self, wheel: _Wheel, delay: float, rate: int | None, body: bool) -> None:
        """Stream from disk in chunks (never a copy in memory), at ``rate`` bytes a second if given; stop at once
        when the server is closing."""
        stopping = self.server.state.stopping
        self._send_headers(HTTPStatus.OK, "application/octet-stream", wheel.path.stat().st_size)
        if not body:
            return
        self.wfile.flush()
        if delay and stopping.wait(delay):
            return  # the client sees a body cut short, as when a real download is interrupted
        size = max(1, rate // 10) if rate else _CHUNK  # a tenth of a second's worth at a time when throttled
        with wheel.path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(size), b""):
                if stopping.is_set():
                    return
                self.wfile.write(chunk)
                if rate and stopping.wait(len(chunk) / rate):
                    return

    def _send_headers(self, status: HTTPStatus, content_type: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()


def _project_list(projects: Iterable[str]) -> str:
    links = "\n".join(f'<a href="{quote(p)}/">{html.escape(p)}</a><br>' for p in projects)
    return _page("Simple index", links)


def _file_path(files_at: str, wheel: _Wheel) -> str:
    """Where PyPI's layout serves ``wheel``: ``<files_at>/<ab>/<cd>/<file>``."""
    return f"{files_at}/{wheel.sha256[:2]}/{wheel.sha256[2:4]}/{wheel.filename}"


def _project_page(project: str, wheels: Iterable[_Wheel], *, core_metadata: bool, files_at: str | None = None) -> str:
    links = []
    for wheel in sorted(wheels, key=lambda w: w.filename):
        attributes = ""
        if wheel.requires_python:
            attributes += f' data-requires-python="{html.escape(wheel.requires_python)}"'
        if core_metadata:
            digest = f"sha256={hashlib.sha256(wheel.metadata).hexdigest()}"
            attributes += f' data-core-metadata="{digest}" data-dist-info-metadata="{digest}"'  # PEP 714, PEP 658
        where = _file_path(files_at, wheel) if files_at is not None else wheel.filename
        href = f"{quote(where)}#sha256={wheel.sha256}"
        links.append(f'<a href="{href}"{attributes}>{html.escape(wheel.filename)}</a><br>')
    return _page(f"Links for {html.escape(project)}", "\n".join(links))


def _flat_page(wheels: Iterable[_Wheel]) -> str:
    """A find-links page: every file linked by its name relative to the page, with its hash."""
    links = [f'<a href="{quote(w.filename)}#sha256={w.sha256}">{html.escape(w.filename)}</a><br>'
             for w in sorted(wheels, key=lambda w: w.filename)]
    return _page("Links", "\n".join(links))


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    )


# --------------------------------------------------------------------------------------------------------------
# Installers


def uv_binary() -> str:
    """The uv executable that envkit itself depends on (the `uv` Python package), not whatever is on PATH."""
    import uv  # here, not at the top: building wheels and serving them need no uv

    return uv.find_uv_bin()


def installer_env(cache_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for uv and pip subprocesses that can only see the indexes given on their command line.

    Drops UV_*, PIP_* (this machine sets PIP_FIND_LINKS, and its pip.conf adds extra-index-url and find-links),
    proxies and an active venv; disables uv.toml/pyproject [tool.uv] and pip.conf; caches into `cache_dir`;
    forbids uv's Python downloads.
    """
    dropped = ("UV_", "PIP_", "VIRTUAL_ENV", "CONDA_PREFIX")
    env = {
        key: value
        for key, value in (os.environ if base is None else base).items()
        if not key.upper().startswith(dropped) and not key.lower().endswith("_proxy")
    }
    env.update(
        UV_NO_CONFIG="1",
        UV_CACHE_DIR=str(cache_dir / "uv"),
        UV_PYTHON_DOWNLOADS="never",
        PIP_CONFIG_FILE=os.devnull,
        PIP_CACHE_DIR=str(cache_dir / "pip"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env
