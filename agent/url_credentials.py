"""Credentials a URL carries, found and hidden: its user info's password
(`postgresql://bob:PW@host/db`) and the values of query parameters whose name says they are one
(`?password=PW`, `?sslpassword=`, `?api_key=`, `?token=`: libpq, redis-py and many HTTP APIs
read credentials there too). A URL to show or store has each as `***`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus, urlsplit

__all__ = [
    "HIDDEN",
    "driver_said",
    "is_credential_name",
    "query_credentials",
    "query_without_credentials",
    "redacted",
    "url_credentials",
    "without_credentials_of",
]

HIDDEN = "***"
"""What stands for a credential taken out."""

_CREDENTIAL_WORDS = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential", re.IGNORECASE)
"""In a query parameter's name: its value is a credential (`sslpassword`, `api-key`, `sig`)."""


def is_credential_name(name: str) -> bool:
    """Whether a query parameter named `name` (as written, percent-encoded or not) holds one."""
    return _CREDENTIAL_WORDS.search(unquote_plus(name)) is not None


def query_without_credentials(query: str) -> str:
    """`query` with the value of every credential parameter as `***`, the rest as written."""
    return "&".join(
        f"{name}={HIDDEN}" if value and is_credential_name(name) else f"{name}{equals}{value}"
        for name, equals, value in (pair.partition("=") for pair in query.split("&"))
    )


def query_credentials(query: str) -> list[str]:
    """The values of `query`'s credential parameters, as written and decoded."""
    found: set[str] = set()
    for name, _, value in (pair.partition("=") for pair in query.split("&")):
        if value and is_credential_name(name):
            found |= {value, unquote_plus(value)}
    return [value for value in found if value]


def url_credentials(url: str) -> list[str]:
    """Every credential in `url` (its password and query credentials), as written and
    decoded: what a driver quoting the URL in its error may say."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    found = set(query_credentials(parts.query))
    if password:
        found |= {password, unquote(password)}
    return [value for value in found if value]


def without_credentials_of(url: str, text: str) -> str:
    """`text` (a driver's error, say) with every credential of `url` in it as `***`."""
    # Longest first: a value inside another must not leave part of the longer one.
    for secret in sorted(url_credentials(url), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text


def driver_said(url: str, exc: BaseException) -> str:
    """What a database driver's error `exc` says, in one line: its first (libpq adds a hint on
    the next, `Is the server running on that host...`), every credential of `url` as `***` (a
    driver may quote its connection string)."""
    said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return without_credentials_of(url, said)


def redacted(url: str) -> str:
    """`url` to show: its password and query credentials as `***`
    (`redis://:***@host:6379/0`, `postgresql://bob@host/db?password=***`)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<a URL that cannot be parsed>"
    query = query_without_credentials(parts.query)
    shown = url
    if query != parts.query:
        # Put in place as text: rebuilt, `unix:///path` would lose its empty host.
        before, _, after = shown.partition("?")
        shown = f"{before}?{query}{after[len(parts.query) :]}"
    if password is not None:
        host = parts.netloc.rpartition("@")[2]
        shown = shown.replace(parts.netloc, f"{parts.username or ''}:{HIDDEN}@{host}", 1)
    return shown
