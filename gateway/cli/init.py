"""`agent-gateway init`: the built-in default config written out, to start a config from.

A config file replaces the default, so it must say all of it, the toolbox's command too: the
Python agent-gateway is installed in, by its path. A bare `python` is whichever comes first on
PATH, which a venv's command run without activating the venv, pipx or `uv tool` do not put
there (the toolbox then fails to start: `No module named 'gateway'`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..config import DEFAULT_CONFIG, DEFAULT_CONFIG_FILE
from ..errors import GatewayError
from .commands import Commands, user_path
from .exits import OK
from .output import result_stdout

__all__ = ["default_config_json", "default_config_text", "register"]


def register(commands: Commands) -> None:
    init = commands.add("init", _init, config=False)
    init.add_argument(
        "file",
        nargs="?",
        default=DEFAULT_CONFIG_FILE,
        type=user_path,
        help=f"where to write it (default: ./{DEFAULT_CONFIG_FILE}; a .json name: JSON; "
        "- for stdout)",
    )
    init.add_argument("--force", action="store_true", help="replace the file if it exists")


def _init(args: argparse.Namespace) -> int:
    if args.file == "-":
        result_stdout().write(default_config_text())
        return OK
    path = Path(args.file)
    # A `.json` name is read as JSON (`config_files`): the same config, in JSON, without the
    # comments JSON cannot hold.
    text = default_config_json() if path.suffix.lower() == ".json" else default_config_text()
    if path.exists() and not args.force:
        raise GatewayError(f"{path} exists: --force replaces it")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GatewayError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(
        f"wrote {path}: the built-in default (the calculator, the toolbox server on this Python, "
        "an `assistant` agent on both); give the agent a model to run it",
        file=sys.stderr,
    )
    return OK


def default_config_text(python: str | None = None) -> str:
    """The built-in default config as TOML, its toolbox started by `python` (default: this
    process's interpreter, the one agent-gateway is installed in)."""
    assistant = DEFAULT_CONFIG.agents["assistant"]
    command = _toml_string(python or sys.executable)
    return f"""\
# agent-gateway's built-in default config, written by `agent-gateway init`. A config file
# replaces the default: this one is the same, to change as you like (README, "Config").

[tools.calculator]
builtin = "calculator"

[mcpServers.toolbox]  # the example MCP server shipped with the package, over stdio
command = {command}  # the Python agent-gateway is installed in
args = ["-P", "-m", "gateway.toolbox"]  # -P: the working directory is not on its path

[agents.assistant]
# model = "openai:gpt-4.1-mini"  # any model spec (README, "Models"); `demo` needs none
description = {_toml_string(assistant.description or "")}
tools = {json.dumps(assistant.tools)}
"""


def default_config_json(python: str | None = None) -> str:
    """The built-in default config as JSON: `default_config_text`'s keys and values."""
    assistant = DEFAULT_CONFIG.agents["assistant"]
    command = python or sys.executable
    _toml_string(command)  # the same refusal of a path that is not text
    config = {
        "tools": {"calculator": {"builtin": "calculator"}},
        "mcpServers": {"toolbox": {"command": command, "args": ["-P", "-m", "gateway.toolbox"]}},
        "agents": {
            "assistant": {"description": assistant.description or "", "tools": assistant.tools}
        },
    }
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _toml_string(value: str) -> str:
    """`value` as a TOML basic string (JSON's escapes are TOML's, but for DEL)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise GatewayError(f"{value!r} is not text a config can hold (not UTF-8)") from None
    return json.dumps(value).replace("\x7f", "\\u007f")
