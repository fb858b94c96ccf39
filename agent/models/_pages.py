"""What a provider's error answer says, for an error message: its own words from a JSON
body, else the words of a page (a proxy's 503, a login page) without its markup."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx

from ._json import is_arr, is_obj

__all__ = ["PAGE_EXCERPT", "error_code", "error_detail", "is_markup", "is_page", "page_text"]

_MARKUP = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.I | re.S)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.I | re.S)
_SPACE = re.compile(r"\s+")
PAGE_EXCERPT = 300
"""Characters of a page's words quoted in an error."""


def is_page(response: httpx.Response) -> bool:
    """Whether a read body is a page: by its type, or its start (a type mislabelled)."""
    start = response.text.lstrip()[:15].lower()
    return is_markup(response) or start.startswith(("<!doctype html", "<html"))


def page_text(page: str) -> str:
    """What a person reads of an HTML page, for an error: its title, then its words without
    markup, styles or scripts (the title once), cut at `PAGE_EXCERPT` characters."""
    found = _TITLE.search(page)
    title = _SPACE.sub(" ", html.unescape(found.group(1))).strip() if found else ""
    words = _SPACE.sub(" ", html.unescape(_MARKUP.sub(" ", page))).strip()
    if title and words.startswith(title):
        words = words[len(title) :].lstrip(" :-")
    text = f"{title}: {words}" if title and words else title or words
    return text if len(text) <= PAGE_EXCERPT else text[: PAGE_EXCERPT - 1].rstrip() + "…"


def is_markup(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return media == "text/html" or media.endswith(("/xml", "+xml"))


def error_detail(response: httpx.Response) -> str:
    """The provider's own error text: `error.message` in OpenAI, Anthropic and Gemini bodies
    (Gemini may wrap it in a list), `detail` from FastAPI-based servers, else the body text
    (a page's words, without its markup: a proxy's 503 page, a login page)."""
    try:
        data: Any = response.json()
    except httpx.ResponseNotRead:
        return ""
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply to read
        return page_text(response.text) if is_page(response) else response.text.strip()[:500]
    if is_arr(data) and data:
        data = data[0]
    if is_obj(data):
        error: Any = data.get("error", data)
        if is_obj(error):
            message: Any = error.get("message") or error.get("detail")
            if isinstance(message, str):
                return message[:2000]
        if isinstance(error, str):
            return error[:2000]
    return response.text.strip()[:500]


def error_code(response: httpx.Response) -> str | None:
    """The provider's own error code, `error.code` in an OpenAI-shaped body
    (`context_length_exceeded`, say); None when it has none."""
    try:
        data: Any = response.json()
    except (httpx.ResponseNotRead, ValueError, RecursionError):
        return None
    error: Any = data.get("error") if is_obj(data) else None
    code: Any = error.get("code") if is_obj(error) else None
    return code if isinstance(code, str) else None
