"""The system message of one item's model call, made from the agent's own and the item's
`context` (a JSON object given with the run).

A text system message may hold placeholders, `{{ context.KEY }}` (a dotted path: `{{
context.customer.name }}`, a list's element by its index, `{{ context.tags.0 }}`; `{{ context
}}` the whole object), `{{ date }}` and `{{ now }}` (UTC, when the model call is made:
`2026-12-07`, `2026-12-07T09:05:00Z`). A string value stands as itself, any other as JSON.
Nothing else in the text is read: other braces stay as written, and no placeholder runs code.
A path the context does not have is `MissingContext`: the item fails saying so before its
model is called, rather than send the model an instruction with a hole in it.

A system message may also be a function of the context (in Python), returning the text (or
an awaitable of it); placeholders in what it returns are not read. What it raises fails the
item as a missing path does (`SystemMessageFailed`), saying what it raised.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import cast

from pydantic import JsonValue

__all__ = ["MissingContext", "SystemMessageFailed", "SystemPrompt", "system_message_for"]

SystemPrompt = Callable[[dict[str, JsonValue]], str | Awaitable[str]]
"""A system message made per item: given a copy of the item's context (`{}` when it has
none), it returns the text."""

_PLACEHOLDER = re.compile(r"\{\{\s*(context(?:\.[^\s{}.]+)*|now|date)\s*\}\}")


class SystemMessageFailed(ValueError):
    """The item's system message could not be made: its item fails, saying why."""


class MissingContext(SystemMessageFailed):
    """The system message names a part of the context that the item's context has not."""


async def system_message_for(
    system_message: str | SystemPrompt,
    context: Mapping[str, JsonValue] | None,
    now: datetime | None = None,
) -> str:
    """The system message for an item whose context is `context`, at `now` (default: the
    clock). Raises `SystemMessageFailed` (`MissingContext` for a placeholder's path)."""
    if not isinstance(system_message, str):
        try:
            made = system_message(copy.deepcopy(dict(context or {})))
            text = cast(object, await made if inspect.isawaitable(made) else made)
        except Exception as exc:  # the user's code, reading a context that may lack a key
            raise SystemMessageFailed(
                f"the system message function failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(text, str):  # pyright trusts the annotation; users' code may not
            raise SystemMessageFailed(
                f"the system message function returned {type(text).__name__}, not a str"
            )
        return text
    given = dict(context or {})
    if "{{" not in system_message:
        return system_message
    clock = now or datetime.now(UTC)

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "now":
            return clock.strftime("%Y-%m-%dT%H:%M:%SZ")
        if name == "date":
            return clock.strftime("%Y-%m-%d")
        found = _lookup(given, name.split(".")[1:], match.group(0))
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return _PLACEHOLDER.sub(value, system_message)


def _lookup(context: dict[str, JsonValue], path: list[str], placeholder: str) -> JsonValue:
    found: JsonValue = context
    for depth, key in enumerate(path):
        if isinstance(found, dict) and key in found:
            found = found[key]
        elif isinstance(found, list) and key.isdigit() and int(key) < len(found):
            found = cast(list[JsonValue], found)[int(key)]
        else:
            where = ".".join(["context", *path[:depth]])
            if not isinstance(found, dict):
                has = f"is {_kind(found)}"
            else:
                has = f"has the keys {', '.join(sorted(found))}" if found else "has no keys"
            raise MissingContext(
                f"the system message uses {placeholder}, but the run's context has no "
                f"{key!r} in {where} (which {has}): give it in the run's context"
            )
    return found


def _kind(value: JsonValue) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "null" if value is None else f"a {type(value).__name__}"
