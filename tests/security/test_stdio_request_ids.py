"""`serve --stdio` byte by byte: a request whose id is still in flight is refused with -32600
and does not run, in both eras, whether the first one is a proxied call (passed straight
through) or a local tool's (the SDK's path); once answered or cancelled, the id is free.

Before (QA round 7), every such request ran, and the client got several answers with one id.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .wire import ERAS, MODERN, Era, StdioWire, modern_params, stdio_wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PIPED = Path(__file__).parents[1] / "servers" / "piped.py"
DUPLICATE = (
    "Invalid Request: a request with this id is still in flight on this session; "
    "give each request its own id"
)


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.piped]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(PIPED))}]\n"
        '[tools.released]\npython = "tests.sample_tools:released_by"\n'
        '[tools.append]\npython = "tests.sample_tools:append_line"\n'
    )
    return config


def _request(request_id: int | str, era: Era, method: str, **params: Any) -> dict[str, Any]:
    if era == MODERN:
        params = modern_params(params)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _call(request_id: int | str, era: Era, name: str, **arguments: Any) -> dict[str, Any]:
    return _request(request_id, era, "tools/call", name=name, arguments=arguments)


def _refused(request_id: int | str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": DUPLICATE}}


async def _next_answer(wire: StdioWire) -> dict[str, Any]:
    """The next answer written (notifications skipped)."""
    while True:
        message = await wire.receive()
        if "method" not in message:
            return message


async def _rest(wire: StdioWire) -> list[dict[str, Any]]:
    """The messages written until stdout ends."""
    data = b""
    with contextlib.suppress(anyio.EndOfStream):
        while True:
            data += await wire.stdout.receive()
    return [json.loads(line) for line in data.splitlines()]


def _text(answer: dict[str, Any]) -> str:
    return answer["result"]["content"][0]["text"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_request_whose_id_is_in_flight_is_refused_and_does_not_run(
    tmp_path: Path, era: Era
) -> None:
    appended = tmp_path / "appended.txt"
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    release = os.open(fifo, os.O_RDWR)  # never blocks, and the tool's open finds a writer

    def append(request_id: int | str, line: str) -> dict[str, Any]:
        return _call(request_id, era, "append", path=str(appended), line=line)

    cancel_7: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    cancel_7["params"] = {"requestId": 7, "reason": "done with it"}
    try:
        async with stdio_wire(_config(tmp_path)) as wire:
            with anyio.fail_after(60):
                await wire.open(era)
                # 7: a proxied call (passed through) that waits until cancelled; 8: a local
                # tool's, answered once released. Each refused answer comes before any other:
                # nothing else is answered meanwhile.
                await wire.send_json(_call(7, era, "piped__wait"))
                await wire.send_json(append(7, "a second 7"))
                assert await _next_answer(wire) == _refused(7)
                await wire.send_json(_request(7, era, "tools/list"))
                assert await _next_answer(wire) == _refused(7)
                await wire.send_json(_call(8, era, "released", fifo=str(fifo)))
                for same in (8, "8"):  # one id to the SDK
                    await wire.send_json(append(same, "a second 8"))
                    assert await _next_answer(wire) == _refused(same)

                os.write(release, b"released\n")
                assert _text(await _next_answer(wire)) == "released"
                await wire.send_json(append(8, "8 once answered"))
                assert _text(await _next_answer(wire)) == "appended '8 once answered'"
                await wire.send_json(cancel_7)
                await wire.send_json(append(7, "7 once cancelled"))
                assert _text(await _next_answer(wire)) == "appended '7 once cancelled'"

                assert wire.process.stdin is not None
                await wire.process.stdin.aclose()
                assert await wire.process.wait() == 0  # every call read was answered first
                rest = await _rest(wire)
    finally:
        os.close(release)
    assert [message for message in rest if "method" not in message] == []
    # The refused ones never ran.
    assert appended.read_text() == "8 once answered\n7 once cancelled\n"
