"""Config files as text: which one a command uses, and the data in it (TOML, or JSON).

Nothing here knows what the keys mean (`config` does): a file that cannot be read, or is not
TOML or JSON, is a `ConfigError` naming it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .client_config import CLIENT_CONFIG_FILES
from .errors import ConfigError

__all__ = ["DEFAULT_CONFIG_FILE", "find_config_file", "read_config_data"]

DEFAULT_CONFIG_FILE = "agent-gateway.toml"


def read_config_data(path: Path) -> Any:
    """A config file's data as written (nothing expanded, nothing checked). Raises
    `ConfigError` for a file that cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from exc
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ConfigError(f"{path}: not valid {kind}: {exc}") from exc
    return data


def find_config_file(directory: Path | None = None) -> Path | None:
    """The config file a command uses when none is named: ours, else a client's."""
    directory = directory or Path()
    for name in (DEFAULT_CONFIG_FILE, *CLIENT_CONFIG_FILES):
        if (directory / name).is_file():
            return directory / name
    return None
