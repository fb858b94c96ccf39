"""A store's URL as errors name it: plain, its password hidden."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["redacted"]


def redacted(url: str) -> str:
    """`url` without its password (`redis://:***@host:6379/0`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that cannot be parsed>"
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
