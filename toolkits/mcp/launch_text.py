"""A stdio server's command line, environment and working directory, as this process can hand
them over.

In an ASCII locale without Python's UTF-8 mode (`LC_ALL=C PYTHONUTF8=0`) the file-system
encoding is ASCII: a server whose args, env or cwd hold any other character (`"grüße"` in a
config, a folder `ünï`) failed to start with a bare `UnicodeEncodeError`. Such text is handed
over as its UTF-8 bytes, as Python's UTF-8 mode (on by default in that locale) would hand it; text
the locale's encoding can write is handed over as it always was (Latin-1 bytes in a Latin-1
locale).
"""

from __future__ import annotations

import os

from mcp.client.stdio import StdioServerParameters

__all__ = ["launchable"]


def launchable(server: StdioServerParameters) -> StdioServerParameters:
    """`server` with each text the file-system encoding cannot write given as its UTF-8."""
    env = server.env
    return server.model_copy(
        update={
            "command": _text(server.command),
            "args": [_text(arg) for arg in server.args],
            "env": None if env is None else {_text(k): _text(v) for k, v in env.items()},
            "cwd": None if server.cwd is None else _text(str(server.cwd)),
        }
    )


def _text(text: str) -> str:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        # The str whose file-system encoding (surrogateescape) is these UTF-8 bytes.
        return os.fsdecode(text.encode("utf-8"))
    return text
