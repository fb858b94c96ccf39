"""Sending one request to a provider: the shared client, retries, SSE, and error mapping.

Every provider module builds a JSON body and reads a JSON answer; everything between (status
codes, `Retry-After`, connection failures, event streams, the provider's error text, keeping
API keys out of messages) lives here once.
"""

from __future__ import annotations

import base64
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import anyio
import httpx

from ..errors import (
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from ..url_credentials import query_credentials, redacted
from ._clients import new_http_client, shared_http_client
from ._json import NestedTooDeeply, arr, is_arr, json_body, obj, read_json
from ._pages import error_code, error_detail, is_markup, is_page, page_text
from ._sse import SSEDecoder, SSEEvent, SSELines
from .retry import RetryPolicy, parse_retry_after, parse_retry_info
from .settings import added_headers

__all__ = [
    "ProviderHTTP",
    "Secret",
    "Unretried",
    "WholeAnswer",
    "checked_base_url",
    "endpoint",
    "new_http_client",
    "public_url",
    "shared_http_client",
    "url_secrets",
    "without_credentials",
]

_log = logging.getLogger("agent.models")
"""Retries are said here, as warnings: a provider that rate limits holds a call up for seconds."""


class _QueryCredentialsHidden(logging.Filter):
    """httpx logs every request's URL at INFO (`-v`): a credential in its query (a model URL's
    `?api_key=KEY`, sent on every request) is logged as `***`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(arg, httpx.URL) and arg.query for arg in record.args
        ):
            record.args = tuple(
                redacted(str(arg)) if isinstance(arg, httpx.URL) else arg for arg in record.args
            )
        return True


logging.getLogger("httpx").addFilter(_QueryCredentialsHidden())

LOOKUP_TIMEOUT = 10.0
"""Seconds an optional lookup (the context window) may take: it must not hold a call up."""

Unretried = Callable[[int, str], bool]
"""Told an error status a retry would send again and the provider's words for it, whether to
fail at once instead (a server that cannot read the request's images will not on retry)."""


class Secret:
    """An API key that never shows itself in a repr, str or f-string."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def public_url(url: str) -> str:
    """`url` without user info, query or fragment: safe for names, traces and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, slots=True)
class WholeAnswer:
    """The JSON body a server sent where a stream of events was asked for."""

    data: Any


async def _start(response: httpx.Response, limit: int = 16384) -> bytes:
    """The first `limit` bytes (about) of a streamed body, for an error's excerpt."""
    read = bytearray()
    async for piece in response.aiter_bytes():
        read += piece
        if len(read) >= limit:
            break
    return bytes(read)


def _is_json(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def without_credentials(url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """`url` without its user and password, and `headers` with them as HTTP Basic auth.

    Credentials in a model's URL name a user of that one server, so they win over an API key
    (`OPENAI_COMPATIBLE_API_KEY` is one variable for every server), which that server is then
    not sent. Taken out before the request is made, they never reach a log line (httpx logs
    every request's URL at INFO) or an error.
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, dict(headers)
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    netloc = parts.netloc.rpartition("@")[2]
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    kept = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    return (
        urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
        {**kept, "Authorization": f"Basic {token}"},
    )


def url_secrets(url: str) -> list[Secret]:
    """The credentials in `url`, in every form a server may say them back: those of its
    query (`?api_key=KEY`, as written and decoded), the user info's password as written and
    percent-decoded, `user:password`, and the HTTP Basic token `without_credentials` sends
    for them. A user without a password is itself the secret (a token in the user's place,
    `https://TOKEN@host`)."""
    parts = urlsplit(url)
    in_query = [Secret(value) for value in query_credentials(parts.query)]
    raw_user, raw_password = parts.username, parts.password
    if raw_user is None and raw_password is None:
        return in_query
    user, password = unquote(raw_user or ""), unquote(raw_password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    said = {token, token.rstrip("=")}
    if raw_password is None:
        said |= {raw_user or "", user}
    else:
        said |= {raw_password, password, f"{raw_user or ''}:{raw_password}", f"{user}:{password}"}
    return [*in_query, *(Secret(value) for value in said if value)]


def checked_base_url(base_url: str) -> str:
    """`base_url` when it is an http(s) URL with a host; else `ModelConfigError`, at once: a
    request to it could only fail, after every retry."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        raise ModelConfigError(f"base URL must be http(s): {public_url(base_url)!r}")
    if not parts.hostname:
        raise ModelConfigError(f"base URL names no host: {public_url(base_url)!r}")
    return base_url


def endpoint(base_url: str, path: str) -> str:
    """`path` appended to the path of `base_url`, before its query (Azure's `?api-version=`),
    which every request to the server keeps."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


class ProviderHTTP:
    """POSTs JSON to one provider with retries, and turns every failure into a `ModelError`.

    `label` (the model's name) starts every error message; `secrets` (the API key, the
    credentials of the model's URL: `url_secrets`) are scrubbed from them.
    """

    def __init__(
        self,
        *,
        label: str,
        provider: str,
        client: httpx.AsyncClient | None,
        retry: RetryPolicy,
        secrets: Sequence[Secret],
        read_timeout: float | None = None,
    ) -> None:
        self._label = label
        self._provider = provider
        self._client = client
        self._retry = retry
        # Longest first: a password inside `user:password` must not leave `user:***`.
        values = {secret.reveal() for secret in secrets if secret.reveal()}
        self._secrets = [_masker(value) for value in sorted(values, key=len, reverse=True)]
        self._read_timeout = read_timeout

    @property
    def client(self) -> httpx.AsyncClient:
        return self._client if self._client is not None else shared_http_client()

    async def post_json(
        self,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        *,
        unretried: Unretried | None = None,
    ) -> Any:
        response = await self._send(url, body, headers, stream=False, unretried=unretried)
        return self._json(response)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return read_json(response.content)
        except NestedTooDeeply as exc:  # JSON, but no answer a stored run could hold
            raise ModelResponseError(f"{self._label}: the answer is {exc}") from None
        except ValueError:
            if is_page(response):
                raise self._page_instead(response, response.content, "JSON") from None
            raise ModelResponseError(
                self._redact(f"{self._label}: answer is not JSON: {response.text[:200]!r}")
            ) from None

    async def get_json(self, url: str, headers: Mapping[str, str]) -> Any:
        """GET `url` once (no retries) for an optional fact about the model; None when the
        request or the answer fails."""
        url, sent = without_credentials(url, headers)
        try:
            response = await self.client.get(url, headers=sent, timeout=LOOKUP_TIMEOUT)
            return response.json() if response.is_success else None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, RuntimeError, RecursionError):
            return None

    async def post_sse(
        self,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        on_event: Callable[[SSEEvent], Awaitable[None]],
        *,
        unretried: Unretried | None = None,
    ) -> WholeAnswer | None:
        """POST and hand each server-sent event to `on_event`, in order, until the stream ends;
        or, when the server answered with JSON instead of a stream, return that JSON.

        Only failures before the first byte are retried: after that the caller may already
        have shown tokens, and a second answer would not continue the first.
        """
        response = await self._send(url, body, headers, stream=True, unretried=unretried)
        decoder = SSEDecoder()
        events = 0
        try:
            if _is_json(response):  # some OpenAI-compatible servers ignore `stream: true`
                await response.aread()
                return WholeAnswer(self._json(response))
            if is_markup(response):  # a proxy's or a captive portal's page, not the model
                raise self._page_instead(response, await _start(response))
            lines = SSELines()  # not `aiter_lines`, which also ends a line at U+2028 (`_sse`)
            async for piece in response.aiter_text():
                for line in lines.feed(piece):
                    event = decoder.feed(line)
                    if event is not None:
                        events += 1
                        await on_event(event)
            # An event no blank line ended is dropped, as the event-stream format says: a
            # stream cut inside one is a stream cut short, which `on_event`'s owner tells by
            # its end event's absence; parsed, half an event read as a garbled answer.
            return None
        except httpx.ReadTimeout as exc:
            if not events:  # headers (and keep-alive comments, perhaps) but no answer yet
                raise self._timed_out(
                    url, "the model did not answer within", "the request reached it"
                ) from exc
            raise self._timed_out(
                url,
                "the model stopped sending mid-answer: nothing came for",
                "part of the answer was already read",
            ) from exc
        except httpx.RequestError as exc:
            raise ModelConnectionError(
                self._redact(f"{self._label}: stream broke: {_said(exc)}")
            ) from exc
        finally:
            with anyio.CancelScope(shield=True):  # return the connection even when cancelled
                await response.aclose()

    def _page_instead(
        self, response: httpx.Response, start: bytes, due: str = "an event stream"
    ) -> ModelConnectionError:
        """The error for a page sent where an answer (`due`) was: a connection's failure
        (something between us and the provider answered), so a stopped run resumes later."""
        media = response.headers.get("content-type", "").partition(";")[0].strip() or "a page"
        said = page_text(start.decode("utf-8", "replace"))
        return ModelConnectionError(
            self._redact(
                f"{self._label}: {public_url(str(response.request.url))} answered HTTP "
                f"{response.status_code} with {media}, not {due}"
                + (f": {said}" if said else "")
                + " (a proxy or a login page in the way?)"
            )
        )

    async def _send(
        self,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        *,
        stream: bool,
        unretried: Unretried | None = None,
    ) -> httpx.Response:
        policy = self._retry
        client = self.client
        timeout = self._timeout(client)
        url, headers = without_credentials(url, headers)
        content = json_body(body)
        sent = {**added_headers(), "Content-Type": "application/json", **headers}
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= policy.max_attempts
            try:
                request = client.build_request(
                    "POST", url, content=content, headers=sent, timeout=timeout
                )
                response = await client.send(request, stream=stream)
            except httpx.ReadTimeout as exc:
                # The request reached the provider, which is still working on it (or hung):
                # sending it again would have it generate, and bill, the answer once more,
                # and hold a fallback model back for attempts times the timeout.
                raise self._timed_out(
                    url, "the model did not answer within", "the request reached it"
                ) from exc
            except (httpx.RequestError, httpx.InvalidURL, RuntimeError) as exc:
                # RuntimeError: httpx's for a closed client, asyncio's for a connection opened
                # in an event loop that has ended (one client used by two `asyncio.run`s);
                # httpx drops that connection, so another attempt opens a fresh one.
                if last or client.is_closed or isinstance(exc, _HOPELESS):
                    raise ModelConnectionError(self._unreachable(url, attempt, exc)) from exc
                problem = f"cannot reach {public_url(url)}: {_said(exc)}"
                await self._retry_after(problem, policy.backoff(attempt), attempt)
                continue
            if response.is_success:
                return response
            try:
                await response.aread()  # the error body carries the provider's explanation
            except httpx.RequestError:
                pass  # the status alone will do
            finally:
                await response.aclose()
            wait = parse_retry_after(response.headers, policy.now())
            if wait is None:
                wait = parse_retry_info(_body(response))  # Gemini's wait is in the body
            retryable = policy.retryable_status(response.status_code)
            if response.headers.get("x-should-retry") == "false":
                # The server says so (as OpenAI's SDKs read it): another attempt would repeat
                # what failed (a gateway's agent run, its tools' effects with it).
                retryable = False
            if retryable and unretried is not None:
                retryable = not unretried(response.status_code, error_detail(response))
            if retryable and wait is not None and wait > policy.max_retry_after:
                raise self._http_error(response, self._too_long(wait))
            if retryable and not last:
                problem = _status_problem(response, error_detail(response))
                delay = wait if wait is not None else policy.backoff(attempt)
                await self._retry_after(problem, delay, attempt, public=_status_head(response))
                continue
            raise self._http_error(response)

    async def _retry_after(
        self, problem: str, seconds: float, attempt: int, *, public: str | None = None
    ) -> None:
        """Say why and when the request is sent again (a warning: the user waits meanwhile),
        then wait. `public`: `problem` without the provider's words, for `on_retry`."""
        tries = self._retry.max_attempts
        when = f". Retrying in {_seconds(seconds)} s (attempt {attempt + 1} of {tries})"
        _log.warning("%s: %s", self._label, self._redact(problem + when))
        if self._retry.on_retry is not None:
            await self._retry.on_retry(self._label, self._redact((public or problem) + when))
        await self._retry.sleep(seconds)

    def _too_long(self, wait: float) -> str:
        cap = self._retry.max_retry_after
        return (
            f"; the provider asked to wait {_seconds(wait)} s before trying again, longer than "
            f"this model waits ({_seconds(cap)} s, RetryPolicy.max_retry_after): not retried, "
            "so a fallback model can answer now"
        )

    def _unreachable(self, url: str, attempt: int, exc: Exception) -> str:
        tries = "1 attempt" if attempt == 1 else f"{attempt} attempts"
        said = f"{self._label}: cannot reach {public_url(url)} after {tries}: "
        said += _said(exc)
        if isinstance(exc, RuntimeError):
            said += (
                ". An httpx client serves one event loop, until it is closed: give each "
                "event loop its own client (new_http_client()), or none"
            )
        return self._redact(said)

    def _timed_out(self, url: str, what: str, why: str) -> ModelTimeout:
        """A read that timed out: `what` happened for the timeout's seconds, not retried
        because of `why`."""
        seconds = self._read_seconds()
        said = (
            f"{self._label}: {what} {seconds:g} s ({public_url(url)}); not retried, as {why}. "
            "A slow model needs a longer `model_timeout` (ModelSettings.timeout)"
        )
        return ModelTimeout(self._redact(said), seconds=seconds)

    def _read_seconds(self) -> float:
        """The read timeout in effect, in seconds (inf when there is none)."""
        read = self._timeout(self.client).read
        return read if read is not None else math.inf

    def _timeout(self, client: httpx.AsyncClient) -> httpx.Timeout:
        """The client's timeouts, with this model's read timeout when it has one."""
        default = client.timeout
        if self._read_timeout is None:
            return default
        return httpx.Timeout(
            connect=default.connect,
            read=self._read_timeout,
            write=default.write,
            pool=default.pool,
        )

    def _http_error(self, response: httpx.Response, note: str = "") -> ModelHTTPError:
        """The error for `response`; `note` (why it was not retried) ends its message."""
        detail = self._redact(error_detail(response))
        kind = ModelAuthError if _refuses_the_key(response) else ModelHTTPError
        said = detail or response.reason_phrase
        if response.status_code == 404:  # a wrong path, often: say which one was asked
            said += f" ({response.request.method} {public_url(str(response.request.url))})"
        return kind(
            f"{self._label}: HTTP {response.status_code}: {said}{note}",
            status_code=response.status_code,
            provider=self._provider,
            provider_message=detail or None,
            code=error_code(response),
        )

    def redact(self, message: str) -> str:
        """`message` with every secret (the API key, the URL's credentials) replaced by
        `***`: wherever it appears, or, one shorter than `SHORT_SECRET`, where it stands as a
        word of its own."""
        return self._redact(message)

    def _redact(self, message: str) -> str:
        for masker in self._secrets:
            message = masker.sub("***", message)
        return message


SHORT_SECRET = 8
"""Characters below which a key is masked only as a word of its own. A local server's dummy
key (`x`, `none`, `EMPTY`, `ollama`) is no secret, and masked wherever it appears it garbled
the provider's words (`E***pected a string with ma***imum length`); said alone, it still is."""


def _masker(value: str) -> re.Pattern[str]:
    if len(value) >= SHORT_SECRET:
        return re.compile(re.escape(value))
    return re.compile(rf"(?<!\w){re.escape(value)}(?!\w)")


def _seconds(value: float) -> str:
    return f"{round(value, 1):g}"


def _status_problem(response: httpx.Response, detail: str) -> str:
    """What an error status that is retried means, for a warning: the provider's words
    (cut short: a rate limit's can run to a paragraph), else the status's phrase."""
    said = (detail or response.reason_phrase).strip().rstrip(".")
    if len(said) > 200:
        said = said[:200] + "..."
    head = _status_head(response)
    return f"{head}: {said}" if said else head


def _status_head(response: httpx.Response) -> str:
    """An error status as `_status_problem` begins, without the provider's words."""
    status = response.status_code
    return f"rate limited (HTTP {status})" if status == 429 else f"HTTP {status}"


def _said(exc: Exception) -> str:
    """`exc`'s type and text; its type alone when the text is empty (httpx's `ReadTimeout`,
    `RemoteProtocolError` often are), never a colon followed by nothing."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_HOPELESS = (httpx.UnsupportedProtocol, httpx.InvalidURL)
"""Failures another attempt cannot mend: the URL itself is wrong."""


def _body(response: httpx.Response) -> Any:
    """The JSON of a read error answer, or None."""
    try:
        return response.json()
    except (httpx.ResponseNotRead, ValueError, RecursionError):
        return None


_KEY_REFUSED = frozenset({401, 403})
_GOOGLE_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def _refuses_the_key(response: httpx.Response) -> bool:
    """Whether an error answer refuses the credentials: 401 or 403, or Gemini's 400 whose
    `error.details[]` hold an `ErrorInfo` with reason `API_KEY_INVALID` (a 400 is otherwise
    about the one request's content)."""
    if response.status_code in _KEY_REFUSED:
        return True
    body = _body(response)
    if is_arr(body) and body:
        body = body[0]
    details = arr(obj(obj(body).get("error")).get("details"))
    return any(
        detail.get("@type") == _GOOGLE_ERROR_INFO and detail.get("reason") == "API_KEY_INVALID"
        for detail in map(obj, details)
    )
