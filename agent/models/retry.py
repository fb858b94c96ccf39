"""When and how long to wait before trying a provider again."""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import anyio

from ._json import arr, is_arr, obj

__all__ = ["RetryPolicy", "parse_retry_after", "parse_retry_info"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter, honouring `Retry-After`.

    Retried: HTTP 408, 429, every 5xx, and connection failures before the request reached the
    provider (a read timeout is not: the provider has the request and would answer it twice). A
    `Retry-After` (or Gemini's `RetryInfo` in the body, read the same way) longer than
    `max_retry_after` is not waited for: the call fails at once, so
    a `FallbackModel` can move on, and its error says the wait asked for. Each retry is
    logged as a warning (logger `agent.models`): why, how long, which attempt comes next;
    `on_retry` hears the same words (the model's name, then them), for a run's trace, but
    for the provider's explanation of an error status (it may quote the request).
    `sleep`, `random` and `now` are injectable so tests never wait on real time.
    """

    max_attempts: int = 4
    initial_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    random: Callable[[], float] = random.random
    now: Callable[[], datetime] = field(default=_utc_now)
    on_retry: Callable[[str, str], Awaitable[None]] | None = None

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based), without a hint.

        "Equal jitter": half the exponential step is kept, half is random, so clients that
        failed together spread out but none retries at once.
        """
        step = min(self.max_delay, self.initial_delay * 2 ** (attempt - 1))
        return step / 2 + step / 2 * self.random()

    @staticmethod
    def retryable_status(status_code: int) -> bool:
        return status_code in (408, 429) or status_code >= 500


def parse_retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms` (OpenAI) or `Retry-After`.

    `Retry-After` is either delay-seconds or an HTTP date; anything unreadable is ignored, and
    so is a wait that is not positive (a negative number, a date gone by: a skewed clock), as
    the OpenAI and Anthropic SDKs ignore it: the backoff applies, so four attempts are not
    spent in a few milliseconds.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            wait = _positive(float(millis) / 1000)
        except ValueError:
            wait = None
        if wait is not None:
            return wait
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return _positive(float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return _positive((when - now).total_seconds())


def _positive(seconds: float) -> float | None:
    return seconds if seconds > 0 else None  # NaN too: not a wait


_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?)s\s*")


def parse_retry_info(body: Any) -> float | None:
    """Seconds a Google API error body asks to wait: `error.details[]`'s `RetryInfo`, whose
    `retryDelay` is a JSON Duration (`"37s"`, `"0.250s"`). Gemini says it there, not in a
    header; the body may come wrapped in a list. None when there is none."""
    if is_arr(body) and body:
        body = body[0]
    for detail in map(obj, arr(obj(obj(body).get("error")).get("details"))):
        delay = detail.get("retryDelay")
        if detail.get("@type") == _RETRY_INFO and isinstance(delay, str):
            match = _DURATION.fullmatch(delay)
            if match is not None:
                return float(match.group(1))
    return None
