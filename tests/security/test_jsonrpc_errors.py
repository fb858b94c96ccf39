"""A message that is not JSON-RPC gets a short JSON-RPC error, over HTTP and stdio, both eras.

The error says what is wrong and echoes nothing of the input but a valid id: no validation
dump, no values. A request whose id is a bool, a float or an array is answered, not taken for
a notification.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.server.processes import TIMES_42, http_server, write_config

from .wire import ERAS, Era, HttpWire, calculate, calculated, stdio_wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SECRET = "do-not-echo-7f3a"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _json(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


REFUSED: list[tuple[str, bytes, int, int | None]] = [
    ("cut short", b'{"jsonrpc": "2.0", "id": 1, "method": "' + SECRET.encode(), PARSE_ERROR, None),
    ("not UTF-8", _json({"id": 2, "method": "ping"})[:-1] + b',"x":"\xff\xfe"}', PARSE_ERROR, None),
    ("NaN", b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":NaN}}', PARSE_ERROR, None),
    ("a batch", b"[" + _json({"id": 4, "method": "ping"}) + b"]", INVALID_REQUEST, None),
    ("a string", json.dumps(SECRET).encode(), INVALID_REQUEST, None),
    (
        "a bool id",
        _json({"id": True, "method": "ping", "params": {SECRET: 1}}),
        INVALID_REQUEST,
        None,
    ),
    ("a float id", _json({"id": 1.5, "method": "ping"}), INVALID_REQUEST, None),
    ("an array id", _json({"id": [SECRET], "method": "ping"}), INVALID_REQUEST, None),
    ("a null id", _json({"id": None, "method": "ping"}), INVALID_REQUEST, None),
    ("a method that is no string", _json({"id": 7, "method": [SECRET]}), INVALID_REQUEST, 7),
    (
        "params that are no object",
        _json({"id": 8, "method": "ping", "params": [SECRET]}),
        INVALID_REQUEST,
        8,
    ),
    (
        "jsonrpc 1.0",
        json.dumps({"jsonrpc": "1.0", "id": 9, "method": "ping"}).encode(),
        INVALID_REQUEST,
        9,
    ),
    ("neither method nor result", _json({"id": "ten", SECRET: 1}), INVALID_REQUEST, "ten"),  # type: ignore[list-item]
    ("an error that is no object", _json({"id": 11, "error": SECRET}), INVALID_REQUEST, 11),
]


def check_error(case: str, message: dict[str, Any] | None, code: int, request_id: object) -> None:
    assert message is not None, f"{case}: no answer"
    assert message.get("id", "missing") == request_id, f"{case}: {message}"
    error: dict[str, Any] = message.get("error") or {}
    assert error.get("code") == code, f"{case}: {message}"
    text = json.dumps(message)
    assert SECRET not in text, f"{case}: echoes the input: {text}"
    assert "pydantic" not in text, f"{case}: {text}"
    assert len(str(error.get("message"))) < 80, f"{case}: {text}"


@pytest.mark.parametrize("era", ERAS)
async def test_http_answers_what_is_not_jsonrpc_with_a_short_error(
    tmp_path: Path, era: Era
) -> None:
    config = write_config(tmp_path, TIMES_42)
    async with http_server(config) as served, httpx2.AsyncClient(timeout=10) as http:
        wire = HttpWire(http, served.url, era)
        with anyio.fail_after(30):
            await wire.open()
            for case, body, code, request_id in REFUSED:
                answer = await wire.post(body)
                assert answer.status == 400, f"{case}: {answer.status} {answer.text}"
                assert len(answer.messages) == 1, f"{case}: {answer.text}"
                check_error(case, answer.messages[0], code, request_id)
            after = await wire.post(json.dumps(calculate(100, era)).encode())
    assert after.status == 200
    assert calculated(after.reply) == "42"


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_answers_each_line_that_is_not_jsonrpc(tmp_path: Path, era: Era) -> None:
    config = write_config(tmp_path, TIMES_42)
    async with stdio_wire(config) as wire:
        with anyio.fail_after(30):
            await wire.open(era)
            for case, line, code, request_id in REFUSED:
                await wire.send(line)
                check_error(case, await wire.receive(), code, request_id)
            await wire.send_json(calculate(100, era))
            after = await wire.reply_to(100)
    assert calculated(after) == "42"
