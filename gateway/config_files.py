"""Config files as text: which one a command uses, and the data in it (TOML, or JSON).

Nothing here knows what the keys mean (`config` does): a file that cannot be read, or is not
TOML or JSON, is a `ConfigError` naming it.
"""

from __future__ import annotations

import codecs
import json
import os
import selectors
import stat
import time
import tomllib
from pathlib import Path
from typing import Any, cast

from toolkits.nesting import MAX_DEPTH, nesting

from .client_config import CLIENT_CONFIG_FILES, key_path
from .errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "MAX_CONFIG_BYTES",
    "PIPE_WAIT",
    "find_config_file",
    "read_config_bytes",
    "read_config_data",
    "read_config_file",
]

DEFAULT_CONFIG_FILE = "agent-gateway.toml"
MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""The largest config read: a thousand servers' config is a few hundred kB."""
PIPE_WAIT = 10.0
"""Seconds a config from a pipe (`--config <(...)`, a FIFO) may take to be written whole."""


def read_config_data(path: Path) -> Any:
    """A config file's data as written (nothing expanded, nothing checked). Raises
    `ConfigError` for a file that cannot be read or parsed."""
    return read_config_file(path)[0]


def read_config_file(path: Path) -> tuple[Any, bool]:
    """A config file's data as written, and whether it is JSON (else TOML): a `.json` file in
    any case (`MCP.JSON`), or one of another name that opens with `{`, which no TOML does. A
    UTF-8 byte order mark (what some Windows editors write) is no part of the text. Raises
    `ConfigError` for a file that cannot be read or parsed, or JSON giving a key twice."""
    raw = read_config_bytes(path)
    try:
        text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from exc
    suffix = path.suffix.lower()
    as_json = suffix == ".json" or (suffix != ".toml" and text.lstrip().startswith("{"))
    try:
        data: Any = tomllib.loads(text) if not as_json else None
        if as_json:
            data = _once_each(json.loads(text, object_pairs_hook=_Pairs), path, "")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid {'JSON' if as_json else 'TOML'}: {exc}") from exc
    except RecursionError:  # ~1,000 levels: past what the readers (and `_once_each`) go
        raise ConfigError(_too_deep(path, "")) from None
    depth = nesting(data)
    if depth > MAX_DEPTH:
        raise ConfigError(_too_deep(path, f"{depth} levels; "))
    if not isinstance(data, dict):  # JSON's `[...]`, `"..."`, `null`: TOML is a table anyway
        raise ConfigError(_not_an_object(path, cast(object, data), text))
    return cast(dict[str, Any], data), as_json


def read_config_bytes(path: Path, *, pipe_wait: float = PIPE_WAIT) -> bytes:
    """The bytes of the config file `path`: a regular file, or a pipe its writer writes and
    closes within `pipe_wait` seconds (`--config <(...)`). Raises `ConfigError` for anything
    else (a device: `/dev/zero` was read until the memory ran out; a FIFO without a writer
    held the command up, deaf to signals), an empty pipe, or more than `MAX_CONFIG_BYTES`."""
    try:
        # Opened without waiting (a FIFO's open waits for a writer); what was opened is
        # looked at, not the name.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode):
            data = _from_pipe(fd, path, pipe_wait)
        elif stat.S_ISREG(mode):
            data = _bounded(fd, path)
        else:
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device?)"
            raise ConfigError(f"cannot read config {path}: {kind}")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return data


def _bounded(fd: int, path: Path) -> bytes:
    data = b""
    while len(data) <= MAX_CONFIG_BYTES and (piece := os.read(fd, _more(data))):
        data += piece
    _at_most(data, path)
    return data


def _from_pipe(fd: int, path: Path, wait: float) -> bytes:
    deadline = time.monotonic() + wait
    data = b""
    with selectors.DefaultSelector() as waiting:
        waiting.register(fd, selectors.EVENT_READ)
        while True:
            try:
                piece = os.read(fd, _more(data))
            except BlockingIOError:  # its writer has more to write
                left = deadline - time.monotonic()
                if left <= 0 or not waiting.select(left):
                    raise ConfigError(
                        f"cannot read config {path}: a pipe still being written after {wait:g} s"
                    ) from None
                continue
            if not piece:  # no writer (any more)
                if not data:
                    raise ConfigError(
                        f"cannot read config {path}: a pipe with nothing in it (a FIFO "
                        "nothing writes to?)"
                    )
                return data
            data += piece
            _at_most(data, path)


def _more(data: bytes) -> int:
    return MAX_CONFIG_BYTES + 1 - len(data)


def _at_most(data: bytes, path: Path) -> None:
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"cannot read config {path}: larger than {MAX_CONFIG_BYTES // 2**20} MB, not a config"
        )


def _not_an_object(path: Path, data: object, text: str) -> str:
    kind = _JSON_KINDS.get(type(data), "a value")
    return (
        f'{path}: a config is a JSON object of keys, like {{"mcpServers": {{...}}, '
        f'"agents": {{...}}}}, not {kind} ({text.strip()[:40]!r})'
    )


_JSON_KINDS: dict[type, str] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _too_deep(path: Path, levels: str) -> str:
    # Nothing a config holds needs it; the validation after would recurse, and its error
    # would name a key hundreds of levels long.
    return f"{path}: nested too deeply ({levels}at most {MAX_DEPTH} levels of tables and arrays)"


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members as written, before each key is known to be given once."""


def _once_each(value: Any, path: Path, where: str) -> Any:
    """`value` with its objects as dicts. Raises `ConfigError` for a key given twice in one
    object: JSON readers keep the last one silently (a second server of the same name
    replaced the first), and TOML refuses it."""
    if isinstance(value, list) and not isinstance(value, _Pairs):
        items = cast(list[Any], value)
        return [_once_each(item, path, f"{where}[{n}]") for n, item in enumerate(items)]
    if not isinstance(value, _Pairs):
        return value
    table: dict[str, Any] = {}
    for key, member in value:
        at = key_path(where, key).removeprefix(".")  # at the top: the key alone
        if key in table:
            raise ConfigError(f"{path}: {at}: given twice in one object; keep one of them")
        table[key] = _once_each(member, path, at)
    return table


def find_config_file(directory: Path | None = None) -> Path | None:
    """The config file a command uses when none is named: ours, else a client's."""
    directory = directory or Path()
    for name in (DEFAULT_CONFIG_FILE, *CLIENT_CONFIG_FILES):
        if (directory / name).is_file():
            return directory / name
    return None
