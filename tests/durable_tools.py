"""Local tools for the durable-run tests: each call is logged to a file, one can be held, one
waits until the test releases it."""

from __future__ import annotations

import sys

import anyio


async def logged(log: str, name: str, hold: str = "") -> str:
    """Append `start NAME` to `log`, then `end NAME` when done. While the file `hold` exists the
    call waits forever (after saying `logged: holding NAME` on stderr): the test kills it there."""
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"start {name}\n")
    if hold and await anyio.Path(hold).exists():
        print(f"logged: holding {name}", file=sys.stderr, flush=True)
        await anyio.Event().wait()
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"end {name}\n")
    return f"{name} done"


async def gated(log: str, name: str, gate: str) -> str:
    """`logged`, but while the named pipe `gate` exists the call waits (after saying `gated:
    waiting for NAME` on stderr) until the test opens it to write, and closes it. A cancelled
    call stops waiting at once."""
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"start {name}\n")
    if await anyio.Path(gate).exists():
        print(f"gated: waiting for {name}", file=sys.stderr, flush=True)
        await anyio.to_thread.run_sync(_read_to_the_end, gate, abandon_on_cancel=True)
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"end {name}\n")
    return f"{name} done"


def _read_to_the_end(path: str) -> None:
    with open(path, "rb") as fifo:  # opened once a writer opens it
        fifo.read()  # ...and read to its end once the writer closes it
