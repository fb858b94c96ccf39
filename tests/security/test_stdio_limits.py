"""`serve --stdio` caps a message as HTTP caps a body (`max_request_bytes`): a longer line gets
-32600 (its id echoed when the line starts with it), nothing of it is kept past the cap or
sent on, and the next line is served as usual."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.processes import TIMES_42, write_config

from .wire import ERAS, Era, StdioWire, calculate, calculated, stdio_wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

INVALID_REQUEST = -32600
CAP = 64 * 1024
HUGE = 24 * 1024 * 1024
"""Far over the cap: held whole, it would show in the process's peak memory."""


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory so far, in bytes (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _padded_call(request_id: int, era: Era, pad: int, *, id_first: bool = True) -> bytes:
    """A calculator call `pad` bytes longer than it needs to be (a string in `_meta`)."""
    message = calculate(request_id, era)
    params = message["params"]
    params["_meta"] = {**params.get("_meta", {}), "pad": "x" * pad}
    if not id_first:  # the id after the params: not read from the start of the line
        message = {"jsonrpc": "2.0", "params": message["params"], "method": "tools/call", "id": 9}
    return json.dumps(message).encode()


async def _refused(wire: StdioWire, request_id: object) -> None:
    answer = await wire.receive()
    assert answer.get("id", "missing") == request_id, answer
    error: dict[str, Any] = answer.get("error") or {}
    assert error.get("code") == INVALID_REQUEST, answer
    assert f"longer than {CAP} bytes" in str(error.get("message")), answer


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("era", ERAS)
async def test_a_line_over_the_cap_is_refused_without_being_held(tmp_path: Path, era: Era) -> None:
    config = write_config(tmp_path, TIMES_42, gateway=f"max_request_bytes = {CAP}")
    async with stdio_wire(config) as wire:
        with anyio.fail_after(60):
            await wire.open(era)
            # A call just under the cap is served: the cap is the line, not less.
            await wire.send(_padded_call(1, era, CAP - 1024))
            assert calculated(await wire.reply_to(1)) == "42"
            before = _peak_rss(wire.process.pid)

            await wire.send(_padded_call(2, era, HUGE))
            await _refused(wire, 2)
            await wire.send(_padded_call(3, era, HUGE, id_first=False))
            await _refused(wire, None)
            # No newline for a long while (sent in parts), then one: refused once.
            assert wire.process.stdin is not None
            await wire.process.stdin.send(b'{"jsonrpc": "2.0", "id": "s", "params": "')
            for _ in range(HUGE // (1 << 20)):
                await wire.process.stdin.send(b"y" * (1 << 20))
            await wire.send(b'"}')
            await _refused(wire, "s")

            await wire.send_json(calculate(4, era))
            after = await wire.reply_to(4)
            grown = _peak_rss(wire.process.pid) - before
    assert calculated(after) == "42"
    # Held whole, one such line would have taken its 24 MB and more (copies, decoding).
    assert grown < 8 * 1024 * 1024, f"peak memory grew by {grown} bytes"
