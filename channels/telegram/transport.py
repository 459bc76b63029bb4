"""python-telegram-bot's transport on aiohttp instead of httpx.

PTB lets the transport be swapped (``BaseRequest``). aiohttp is already in the process for the
Discord and Slack adapters, and a Bot API call costs about a third of the CPU through it that it
costs through httpx's async stack (``bench.telegram_e2e``). Everything above the transport (the
JSON envelope, ``retry_after``, PTB's exception mapping) stays PTB's own.
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.request
from base64 import b64encode
from collections.abc import Iterator
from contextvars import ContextVar
from urllib.parse import unquote, urlsplit

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


class AnswerLost(NetworkError):
    """The request went out but no answer came back (it timed out, or the connection dropped on the way):
    Telegram may have carried it out. A failure to connect is a plain NetworkError or TimedOut instead."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"answer lost: {cause}")


class AnswerTimedOut(AnswerLost, TimedOut):
    """No answer within the read timeout: a TimedOut, as PTB knows it, that may have been carried out."""


class BodyTooLarge(NetworkError):
    """An answer's body is longer than :func:`read_cap` allows: the transfer was cut off, nothing of it kept.

    A TelegramError, so PTB passes it on as it is instead of wrapping it."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"answer longer than {limit} bytes")
        self.limit = limit


# The most bytes an answer may have, for requests made in this context (a file download); None: no limit.
# A context variable rather than a parameter: PTB's File.download_as_bytearray reaches do_request through
# BaseRequest.retrieve, which takes no such argument, and other tasks sharing the session stay unaffected.
_READ_CAP: ContextVar[int | None] = ContextVar("telegram_read_cap", default=None)
_CHUNK_BYTES = 64 * 1024


@contextlib.contextmanager
def read_cap(max_bytes: int) -> Iterator[None]:
    """Requests made inside refuse an answer longer than ``max_bytes`` (``BodyTooLarge``) as soon as it says
    so (Content-Length) or grows past it, so a huge file is never held whole."""
    token = _READ_CAP.set(max_bytes)
    try:
        yield
    finally:
        _READ_CAP.reset(token)


async def _read_body(response: aiohttp.ClientResponse) -> bytes:
    cap = _READ_CAP.get()
    if cap is None:
        return await response.read()
    if response.content_length is not None and response.content_length > cap:
        response.close()  # drops the connection: the rest of the body is never transferred
        raise BodyTooLarge(cap)
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
        body += chunk
        if len(body) > cap:
            response.close()
            raise BodyTooLarge(cap)
    return bytes(body)


class AiohttpRequest(BaseRequest):
    """One aiohttp session with at most ``connection_pool_size`` connections to the Bot API."""

    def __init__(
        self,
        *,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._media_write_timeout = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], tuple[str | None, dict[str, str] | None]] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=self._pool_size,
                                             ssl=_tls_context())
            # Telegram's answers are JSON envelopes PTB parses itself; no cookies to keep between calls.
            # Not trust_env: with it aiohttp reads the proxy variables and ~/.netrc in a worker thread on
            # every call. The proxy is resolved once per host instead (``_proxy_for``).
            self._session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                                  headers={"User-Agent": self.USER_AGENT})

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data and request_data.contains_files else None
        read = self._read_timeout if isinstance(read_timeout, DefaultValue) else read_timeout
        connect = self._connect_timeout if isinstance(connect_timeout, DefaultValue) else connect_timeout
        pool = self._pool_timeout if isinstance(pool_timeout, DefaultValue) else pool_timeout
        write = write_timeout if not isinstance(write_timeout, DefaultValue) else (
            self._media_write_timeout if files else self._write_timeout)
        # aiohttp has no separate write timeout: an ordinary call as a whole gets the write and read
        # budgets together; an upload is bounded by its reads only, so a slow but moving one finishes.
        total = None if read is None or write is None or files else read + write
        # aiohttp's ``connect`` covers waiting for a pooled connection and opening one.
        acquire = None if pool is None or connect is None else pool + connect
        timeout = aiohttp.ClientTimeout(total=None if total is None or acquire is None else total + acquire,
                                        connect=acquire, sock_connect=connect, sock_read=read)
        proxy, proxy_headers = self._proxy_for(url)
        body, headers = _body(request_data, files)
        try:
            async with self._session.request(method, url, data=body, headers=headers, timeout=timeout,
                                             proxy=proxy, proxy_headers=proxy_headers) as response:
                return response.status, await _read_body(response)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # Never connected (or no connection free in time): nothing reached Telegram.
            if isinstance(exc, TimeoutError):
                raise TimedOut from exc
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            # Connected and sent (or sending): whether Telegram acted on it is unknown.
            lost = AnswerTimedOut if isinstance(exc, TimeoutError) else AnswerLost
            raise lost(f"aiohttp.{type(exc).__name__}") from exc

    def _proxy_for(self, url: str) -> tuple[str | None, dict[str, str] | None]:
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            self._proxies[key] = env_proxy(parts.scheme, parts.hostname or "")
        return self._proxies[key]


def env_proxy(scheme: str, host: str) -> tuple[str | None, dict[str, str] | None]:
    """The proxy that ``HTTP(S)_PROXY`` / ``NO_PROXY`` give for a host.

    Credentials in the proxy's URL go in a Proxy-Authorization header; the URL is passed without them.
    Not read: ``ALL_PROXY`` (aiohttp speaks to HTTP proxies only) and ``~/.netrc``.
    """
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or (host and urllib.request.proxy_bypass(host)):
        return None, None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.username is None:
        return parts.geturl(), None
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"  # an IPv6 address keeps its brackets
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return parts._replace(netloc=netloc).geturl(), {"Proxy-Authorization": f"Basic {b64encode(credentials).decode()}"}


def _tls_context() -> ssl.SSLContext:
    """Certificates from certifi, as httpx used them, so a system without a CA store still verifies."""
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


_URL_ENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def _body(request_data: RequestData | None,
          files: dict | None) -> tuple[aiohttp.FormData | bytes | None, dict[str, str] | None]:
    """Form fields as PTB encodes them, with their headers: multipart when a file goes along, url-encoded otherwise.

    The url-encoded body is built here rather than by aiohttp's ``FormData``, which sets up a multipart
    writer (and draws a random boundary) for every call only to throw it away.
    """
    if request_data is None:
        return None, None
    if not files:
        return request_data.url_encoded_parameters().encode(), _URL_ENCODED
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, (filename, content, mimetype) in files.items():
        form.add_field(name, content, filename=filename, content_type=mimetype)
    return form, None
