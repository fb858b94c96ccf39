"""The `agent-gateway` command's entry point.

A Ctrl-C while the command line imports exits quietly with 130, as a Ctrl-C at any later
moment does (the chosen command's modules, imported once it is read, take a second or two:
`gateway.cli.main` sees to those). An import that fails because another package shadows one
of ours (`shadowing`) is said in one line, exit 1, instead of a traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """The `agent-gateway` command (`gateway.cli.main` on this process's command line)."""
    try:
        from gateway.cli import main as command
    except KeyboardInterrupt:
        return 130
    except ImportError as exc:
        return _shadowed(exc)
    try:
        return command()
    except ImportError as exc:  # a command's module, imported once the command line is read
        return _shadowed(exc)


def _shadowed(error: ImportError) -> int:
    from .shadowing import shadowing

    said = shadowing()
    if said is None:
        raise error
    print(f"agent-gateway: {said}", file=sys.stderr)
    return 1
