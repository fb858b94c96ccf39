"""`.env` files: `KEY=VALUE` lines, as `install --env-file` and a client's `envFile` name them."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import GatewayError

__all__ = ["parse_env_assignment", "read_env_file"]


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (a `.env` file: `#` comments, `export `, quotes). Raises
    `GatewayError` naming the line at fault."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GatewayError(f"cannot read env file {path}: {exc}") from exc
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key, value = parse_env_assignment(line.removeprefix("export "))
        except GatewayError as exc:
            raise GatewayError(f"{path}:{number}: {exc}") from None
        values[key] = value
    return values


def parse_env_assignment(text: str) -> tuple[str, str]:
    """`KEY=VALUE` (the value may be quoted). Raises `GatewayError` (never quoting the text:
    it may be a secret)."""
    key, equals, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise GatewayError("expected KEY=VALUE (KEY: letters, digits and _)")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return key, value
