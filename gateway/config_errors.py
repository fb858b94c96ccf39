"""A config's validation errors as one line: each naming the key at fault as the file wrote it,
and an unknown key with the known one it is close to."""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import get_args, get_origin

from pydantic import BaseModel, ValidationError

from toolkits.mcp.config import McpServerConfig

from .client_config import key_path

__all__ = ["describe"]


def describe(exc: ValidationError, root: type[BaseModel], as_written: Mapping[str, str]) -> str:
    """`exc`, an error in data validated as `root`, in one line; `as_written` has a client's
    server keys by the node names they became."""
    lines: list[str] = []
    for err in exc.errors():
        loc = err["loc"]
        if err["type"] == "finite_number" and loc[-1:] == ("float",):
            loc = loc[:-1]  # the branch of a JSON value (`extra_body`) it was tried as
        where = _where(loc, as_written)
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key" + _did_you_mean(root, err["loc"])
        elif err["type"] in _TYPES:
            message += _given(err["input"], _TYPES[err["type"]])
        elif err["type"] == "list_type":
            message += _as_list(err["input"])
        elif err["type"] == "finite_number":  # TOML's `nan`, `inf`
            message += f", not {err['input']}"
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


_TYPES = {"int_type": int, "float_type": float, "bool_type": bool, "string_type": str}
"""Errors of a value of another type (validated strictly: `true` is no number, "10" none)."""


def _given(value: object, due: type) -> str:
    """`, not true`: what the file gave instead; for a string that would do unquoted, how."""
    if isinstance(value, bool):
        return f", not {str(value).lower()}"
    if not isinstance(value, str):
        shown = json.dumps(value, ensure_ascii=False, default=str)
        return f", not {shown if len(shown) <= 40 else shown[:37] + '...'}"
    unquoted = value.strip().lower()
    if due is bool:
        fits = unquoted in ("true", "false")
    else:
        try:
            fits = due is not str and due(unquoted) is not None
        except ValueError:
            fits = False
    shown = json.dumps(value if len(value) <= 40 else value[:37] + "...", ensure_ascii=False)
    return f", not the string {shown}" + (" (write it without quotes)" if fits else "")


def _as_list(value: object) -> str:
    """`, not the string "a b" (write it as a list: ["a", "b"])`: a list written as one string
    (`args = "--local-timezone UTC"`, `tools = "time, calculator"`) is the usual slip."""
    if not isinstance(value, str):
        return _given(value, list)
    if "," in value:
        items = [item.strip() for item in value.split(",") if item.strip()]
    else:
        try:
            items = shlex.split(value)
        except ValueError:  # an unclosed quote: the words as they are
            items = value.split()
    shown = json.dumps(value if len(value) <= 40 else value[:37] + "...", ensure_ascii=False)
    written = json.dumps(items or [value], ensure_ascii=False)
    return f", not the string {shown} (write it as a list: {written})"


def _where(loc: Sequence[int | str], as_written: Mapping[str, str]) -> str:
    """The key at fault, as the file wrote it: a client's server by its own key."""
    if len(loc) >= 2 and loc[0] == "mcpServers" and isinstance(loc[1], str):
        server = key_path("mcpServers", as_written.get(loc[1], loc[1]))
        return ".".join([server, *(str(part) for part in loc[2:])])
    return ".".join(str(part) for part in loc)


def _did_you_mean(root: type[BaseModel], loc: Sequence[int | str]) -> str:
    """` (did you mean 'agents'?)` for an unknown key close to one that is known there."""
    *path, key = loc
    known = _keys_at(root, path)
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.7)
    if not close:  # a case slip (`mcpservers`) is near whatever the length
        close = [k for k in known if k.lower() == str(key).lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def _keys_at(model: type[BaseModel], path: Sequence[int | str]) -> list[str]:
    """The keys the table at `path` (below `model`) takes; [] where that is not known."""
    current: object = model
    for part in path:
        current = _table_type(current)
        if current is None:
            return []
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = current.model_fields
            field = next((f for name, f in fields.items() if part in (name, f.alias)), None)
            if field is None:
                return []
            current = field.annotation
        else:  # a table of named entries: the name chooses no type
            current = get_args(current)[1]
    current = _table_type(current)
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    keys = [field.alias or name for name, field in current.model_fields.items()]
    return [*keys, "type"] if current is McpServerConfig else keys


def _table_type(annotation: object) -> object | None:
    """A model, or a `dict[str, ...]`, that `annotation` is (with None, or beside plain
    values: `MemoryConfig | str | None`); None if it is neither."""
    if get_origin(annotation) is dict:
        return annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    tables = [a for a in get_args(annotation) if _table_type(a) is not None]
    return tables[0] if len(tables) == 1 else None
