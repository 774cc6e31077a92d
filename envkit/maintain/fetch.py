"""Fetch index pages, each once, in parallel: ``requests`` for http(s), the file system for ``file://`` mirrors.

One ``requests.Session`` per host (connections are reused), a timeout on every request, retries with exponential
backoff on 429 and 5xx answers, connection errors (resets) and timeouts. Proxies and CA bundles come from the
environment as requests reads them (HTTPS_PROXY, NO_PROXY, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, .netrc). A page
that cannot be read is a result with an error sentence, never an exception: the check reports it and goes on.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence
from urllib.parse import unquote, urlsplit

from envkit.versions import is_ascii_number

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_WAIT_S = 30.0  # the most a Retry-After is honoured for

Progress = Callable[[int, int, str], None]  # (pages done, pages in all, the URL just done)


@dataclass(frozen=True)
class Page:
    url: str  # as asked for
    status: Optional[int] = None  # HTTP status (200 for a file read), None when nothing came back
    text: str = ""
    content_type: str = ""
    final_url: str = ""  # after redirects: the base for relative links
    error: Optional[str] = None  # why the page could not be read (a 404 is not an error: the page is absent)

    @property
    def found(self) -> bool:
        return self.error is None and self.status == 200


@dataclass(frozen=True)
class FetchSettings:
    timeout_s: float = 20.0
    retries: int = 3
    backoff_s: float = 0.5  # waits backoff, 2*backoff, 4*backoff, ... between tries
    jobs: int = 8
    accept: str = "*/*"


class PageFetcher:
    """Fetches pages once each; ``fetch_all`` runs them on ``settings.jobs`` threads."""

    def __init__(self, settings: FetchSettings = FetchSettings(), progress: Optional[Progress] = None,
                 mirrors: Sequence[str] = ()) -> None:
        self.settings = settings
        self.progress = progress
        self.mirrors = tuple(mirrors)  # where a redirect may lead over plain http, besides loopback
        self._sessions: dict[str, object] = {}
        self._lock = threading.Lock()
        self._pages: dict[str, Page] = {}

    def fetch_all(self, urls: Iterable[str]) -> dict[str, Page]:
        """Every URL's page (those fetched before are not fetched again)."""
        wanted = [url for url in dict.fromkeys(urls) if url not in self._pages]
        total, done = len(wanted), 0
        with ThreadPoolExecutor(max_workers=max(1, self.settings.jobs), thread_name_prefix="envkit-fetch") as pool:
            futures = {pool.submit(self.fetch, url): url for url in wanted}
            for future in as_completed(futures):
                done += 1
                if self.progress is not None:
                    self.progress(done, total, futures[future])
        return dict(self._pages)

    def fetch(self, url: str) -> Page:
        with self._lock:
            if url in self._pages:
                return self._pages[url]
        page = _read_file(url) if urlsplit(url).scheme == "file" else self._get(url)
        with self._lock:
            return self._pages.setdefault(url, page)

    @property
    def pages(self) -> dict[str, Page]:
        with self._lock:
            return dict(self._pages)

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()  # type: ignore[attr-defined]

    def __enter__(self) -> PageFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session(self, url: str):
        import requests
        from requests.adapters import HTTPAdapter

        parts = urlsplit(url)
        host = f"{parts.scheme}://{parts.netloc}"
        with self._lock:
            session = self._sessions.get(host)
            if session is None:
                session = requests.Session()  # trust_env: proxies, CA bundles and .netrc from the environment
                adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(1, self.settings.jobs), max_retries=0)
                session.mount(host, adapter)
                session.headers.update({"Accept": self.settings.accept, "User-Agent": "envkit-manifests-check"})
                session.hooks["response"].append(self._checked_redirect)
                self._sessions[host] = session
            return session

    def _checked_redirect(self, response, *args: object, **kwargs: object) -> None:
        """Every redirect held to the transport rule before requests follows it (envkit.system.egress.allowed_hop)."""
        from urllib.parse import urljoin

        from envkit.system.egress import allowed_hop

        if response.is_redirect:
            target = urljoin(response.url, response.headers.get("Location", ""))
            if not allowed_hop(target, self.mirrors):
                raise _RedirectRefused(target)

    def _get(self, url: str) -> Page:
        import requests

        settings = self.settings
        problem = "no answer"
        for attempt in range(settings.retries + 1):
            if attempt:
                time.sleep(min(_MAX_WAIT_S, settings.backoff_s * 2 ** (attempt - 1)))
            try:
                response = self._session(url).get(url, timeout=settings.timeout_s)
            except _RedirectRefused as refused:
                from envkit.text.redact import redact

                return Page(url, error=redact(f"redirected to {refused.target}, which is neither https nor on loopback "
                                              "or a configured mirror: refused"))
            except requests.exceptions.Timeout:
                problem = f"no answer within {settings.timeout_s:g} s"
                continue
            except requests.exceptions.SSLError as error:
                return Page(url, error=f"TLS error: {_first_line(error)} (set REQUESTS_CA_BUNDLE for a private CA)")
            except requests.exceptions.ConnectionError as error:
                problem = _connection_problem(error, url)
                continue
            except requests.exceptions.RequestException as error:
                return Page(url, error=_first_line(error))
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code} {response.reason or ''}".strip()
                wait = _retry_after(response.headers.get("Retry-After"))
                if wait is not None and attempt < settings.retries:
                    time.sleep(min(wait, _MAX_WAIT_S))
                continue
            if response.status_code != 200:
                return Page(url, status=response.status_code, final_url=response.url)
            return Page(url, status=200, text=response.text, content_type=response.headers.get("Content-Type", ""),
                        final_url=response.url)
        tries = settings.retries + 1
        return Page(url, error=f"{problem} ({tries} {'try' if tries == 1 else 'tries'})")


class _RedirectRefused(Exception):
    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def _connection_problem(error: BaseException, url: str) -> str:
    """A connection error in a few words (requests wraps urllib3's, which wraps the socket's)."""
    text = str(error)
    host = urlsplit(url).hostname or url
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return f"connection failed: cannot resolve {host}"
    if "Connection refused" in text:
        return f"connection failed: {host} refused it"
    if "reset" in text.lower() or "RemoteDisconnected" in text or "aborted" in text.lower():
        return "connection failed: reset by the server"
    return f"connection failed: {_first_line(error)}"


def _read_file(url: str) -> Page:
    """A file:// page: a directory's index.html, or a listing of the files in it (a flat mirror)."""
    path = Path(unquote(urlsplit(url).path))
    try:
        if path.is_dir():
            index = path / "index.html"
            if index.is_file():
                return Page(url, 200, index.read_text(encoding="utf-8"), "text/html", url)
            links = "".join(f'<a href="{child.name}">{child.name}</a>\n' for child in sorted(path.iterdir()))
            return Page(url, 200, f"<html><body>\n{links}</body></html>\n", "text/html", url)
        if path.is_file():
            return Page(url, 200, path.read_text(encoding="utf-8"), "text/html", url)
    except (OSError, UnicodeDecodeError) as error:
        return Page(url, error=f"cannot read {path}: {error}")
    return Page(url, status=404, final_url=url)


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value and is_ascii_number(value.strip()):  # (not "²": float() refuses it)
        return float(value.strip())
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
