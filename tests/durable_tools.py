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


async def released(log: str, name: str, gate: str) -> str:
    """Append `start NAME` to `log`, then wait until the test, which holds the FIFO `gate`
    open for writing (its open returns once this call waits), closes it; then `end NAME`."""
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"start {name}\n")
    await anyio.to_thread.run_sync(_read_to_the_end, gate, abandon_on_cancel=True)
    async with await anyio.open_file(log, "a") as file:
        await file.write(f"end {name}\n")
    return f"{name} done"


def _read_to_the_end(path: str) -> None:
    with open(path, "rb") as fifo:
        fifo.read()
