"""Config files as text: which one a command uses, and the data in it (TOML, or JSON).

Nothing here knows what the keys mean (`config` does): a file that cannot be read, or is not
TOML or JSON, is a `ConfigError` naming it.
"""

from __future__ import annotations

import codecs
import json
import tomllib
from pathlib import Path
from typing import Any, cast

from toolkits.nesting import MAX_DEPTH, nesting

from .client_config import CLIENT_CONFIG_FILES, key_path
from .errors import ConfigError

__all__ = ["DEFAULT_CONFIG_FILE", "find_config_file", "read_config_data", "read_config_file"]

DEFAULT_CONFIG_FILE = "agent-gateway.toml"


def read_config_data(path: Path) -> Any:
    """A config file's data as written (nothing expanded, nothing checked). Raises
    `ConfigError` for a file that cannot be read or parsed."""
    return read_config_file(path)[0]


def read_config_file(path: Path) -> tuple[Any, bool]:
    """A config file's data as written, and whether it is JSON (else TOML): a `.json` file in
    any case (`MCP.JSON`), or one of another name that opens with `{`, which no TOML does. A
    UTF-8 byte order mark (what some Windows editors write) is no part of the text. Raises
    `ConfigError` for a file that cannot be read or parsed, or JSON giving a key twice."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
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
