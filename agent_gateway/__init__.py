"""The `agent-gateway` command's entry point.

It only imports the command line: that takes a second or two (the MCP SDK, pydantic, the
providers), and a Ctrl-C meanwhile would end in a Python traceback of the import. Here it
exits quietly with 130, as a Ctrl-C at any later moment does.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> int:
    """The `agent-gateway` command (`gateway.cli.main` on this process's command line)."""
    try:
        from gateway.cli import main as command
    except KeyboardInterrupt:
        return 130
    return command()
