"""envkit's own downloader: a URL's body over HTTP(S) with every redirect held to the transport rule
(``allowed_hop``: https, loopback or a configured mirror), a mirror's credentials sent as HTTP basic auth and dropped
when a redirect leaves their host, time limits per read, retries, and the bytes told to the progress display
(envkit.system.transfers). A lock's files (envkit.lockfile.fetch) and an index's pages (create's variant pins) come
through it."""

from __future__ import annotations

import time
from typing import Optional, Sequence
from urllib.parse import unquote, urlsplit

from envkit.errors import InstallError
from envkit.system.egress import HINT, allowed_hop

_CHUNK = 1 << 20
_TIMEOUT_S = 60.0  # per read, not per download: a 3 GB package on a slow line is fine
_RETRIES = 3


class RedirectRefused(InstallError):
    """A download redirected somewhere envkit may not fetch from: plain http off loopback and the mirrors."""



def _opener(mirrors: Sequence[str]):
    """urllib's opener whose every redirect is checked (``allowed_hop``) and loses its credentials when it leaves
    the host they were for."""
    from urllib.request import HTTPRedirectHandler, build_opener

    class CheckedRedirects(HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            from envkit.text.redact import redact

            if not allowed_hop(newurl, mirrors):
                raise RedirectRefused(
                    redact(f"{req.full_url} redirects ({code}) to {newurl}, which is neither https nor on loopback or "
                           "a configured mirror: refused"),
                    hint=HINT)
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and urlsplit(newurl).netloc != urlsplit(req.full_url).netloc:
                new.remove_header("Authorization")
            return new

    return build_opener(CheckedRedirects)


def _copy(response, out, name: Optional[str]) -> None:
    """The response's body into ``out``, its progress told as it goes (envkit.system.transfers: the bytes, of the
    Content-Length) unless ``name`` is None (an index's page); in a download thread of a command a signal stopped,
    it stops (envkit.system.signals)."""
    from envkit.system.signals import stop_in_thread
    from envkit.system.transfers import fetched, fetching

    length = response.headers.get("Content-Length", "")
    total = int(length) if length.isdigit() else None
    done = 0
    tell = (lambda: None) if name is None else (lambda: fetching(name, done, total))
    tell()
    read = getattr(response, "read1", response.read)  # what has come, not a whole chunk: the display moves
    for chunk in iter(lambda: read(_CHUNK), b""):
        stop_in_thread()
        out.write(chunk)
        done += len(chunk)
        tell()
    if name is not None:
        fetched(name)


class NotThere(InstallError):
    """The server says there is no such file (HTTP 404 or 410): not tried again."""


_PAGE_LIMIT = 64 << 20  # bytes of an index's page read at most (PyPI's largest project pages are a few MiB)


class _Bounded:
    """A buffer that refuses more than ``limit`` bytes."""

    def __init__(self, limit: int, url: str) -> None:
        import io

        self.data, self.limit, self.url = io.BytesIO(), limit, url

    def seek(self, offset: int) -> None:
        self.data.seek(offset)

    def truncate(self) -> None:
        self.data.truncate()

    def write(self, chunk: bytes) -> None:
        if self.data.tell() + len(chunk) > self.limit:
            from envkit.text.redact import redact

            raise InstallError(redact(f"{self.url} is over {self.limit >> 20} MiB: not an index's page"))
        self.data.write(chunk)


def fetch_page(url: str, mirrors: Sequence[str] = (), accept: str = "text/html") -> tuple[str, str, str]:
    """An index's page through envkit's downloader (every redirect held to the transport rule, a mirror's
    credentials sent as HTTP basic auth): (its text, its content type, the URL it came from after redirects).
    NotThere for a 404 or 410, InstallError when it cannot be read, or is over 64 MiB."""
    out = _Bounded(_PAGE_LIMIT, url)
    content_type, final = download(url, out, mirrors, accept, shown=False)
    return out.data.getvalue().decode("utf-8", "replace"), content_type, final


def download(url: str, out, mirrors: Sequence[str] = (), accept: Optional[str] = None,
              shown: bool = True) -> tuple[str, str]:
    """``url``'s body into ``out``; (its content type, the URL it came from after redirects). ``shown``: its
    progress goes to the progress display (a package's, not an index page's)."""
    from urllib.error import HTTPError, URLError
    from urllib.request import Request

    from envkit.text.redact import redact, split_credentials

    bare, has_credentials = split_credentials(url)
    headers = {"User-Agent": "envkit", **({"Accept": accept} if accept else {})}
    if has_credentials:  # urllib takes no user:password in a URL: HTTP basic auth, as uv and pip send it
        import base64

        userinfo = unquote(urlsplit(url).netloc.rpartition("@")[0])
        headers["Authorization"] = "Basic " + base64.b64encode(userinfo.encode("utf-8")).decode("ascii")
    opener = _opener(mirrors)
    for attempt in range(1, _RETRIES + 1):
        try:
            out.seek(0)
            out.truncate()
            with opener.open(Request(bare, headers=headers), timeout=_TIMEOUT_S) as response:
                _copy(response, out, (unquote(urlsplit(bare).path.rpartition("/")[2]) or bare) if shown else None)
                return response.headers.get("Content-Type", ""), response.geturl()
        except HTTPError as error:
            if error.code in (404, 410):
                raise NotThere(redact(f"{url} is not there (HTTP {error.code})")) from None
            if attempt == _RETRIES:
                raise InstallError(redact(f"downloading {url} failed: HTTP {error.code} {error.reason}"),
                                   hint="Check the network and the mirror settings, then run the command again.") from None
            time.sleep(0.5 * attempt)
        except (URLError, OSError) as error:
            if attempt == _RETRIES:
                raise InstallError(redact(f"downloading {url} failed: {getattr(error, 'reason', error)}"),
                                   hint="Check the network and the mirror settings, then run the command again.") from None
            time.sleep(0.5 * attempt)
