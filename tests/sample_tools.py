"""Functions that tests load as configured tools (`python = "tests.sample_tools:NAME"`)."""

from __future__ import annotations

import sys

import anyio


def shout(text: str, times: int = 1) -> str:
    """Repeat a text in capitals."""
    return " ".join([text.upper()] * times)


async def wait_until_cancelled(marker: str) -> str:
    """Wait until the call is cancelled; then write "cancelled" to the file `marker`.

    Each step is also a line on stderr (`wait_until_cancelled: started`, `...: cancelled`), for
    a test to await where the tool runs in another process.
    """
    print("wait_until_cancelled: started", file=sys.stderr, flush=True)
    try:
        await anyio.Event().wait()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
        print("wait_until_cancelled: cancelled", file=sys.stderr, flush=True)
    return "released"
