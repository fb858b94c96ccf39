"""`.env` files: `KEY=VALUE` lines, as `install --env-file` and a client's `envFile` name them."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .errors import GatewayError

__all__ = ["parse_env_assignment", "read_env_file"]


MAX_ENV_FILE_BYTES = 1024 * 1024
"""The largest env file read: a few lines of `KEY=VALUE` are a few kB."""


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (a `.env` file: `#` comments, `export `, quotes). Raises
    `GatewayError` naming the line at fault, or for a file that is not a regular one (a
    FIFO, `/dev/zero`: read to its end, it held the command up or used up the memory) or is
    larger than `MAX_ENV_FILE_BYTES`."""
    try:
        lines = _bounded_text(path).splitlines()
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


def _bounded_text(path: Path) -> str:
    # Opened without waiting (a FIFO's open waits for a writer), then known to be a regular
    # file by what was opened, not by its name (which may change between the two).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GatewayError(f"cannot read env file {path}: not a regular file")
        data = b""
        while len(data) <= MAX_ENV_FILE_BYTES and (
            piece := os.read(fd, MAX_ENV_FILE_BYTES + 1 - len(data))
        ):
            data += piece
    finally:
        os.close(fd)
    if len(data) > MAX_ENV_FILE_BYTES:
        raise GatewayError(
            f"cannot read env file {path}: larger than {MAX_ENV_FILE_BYTES // 1024} kB, "
            "not a .env file of KEY=VALUE lines"
        )
    return data.decode("utf-8")


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
