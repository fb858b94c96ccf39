"""Requests the SDK would take, refused as the spec means, over `serve --stdio` and `--http`:

- a second `initialize` on an initialized session: -32600 "already initialized";
- a pagination cursor on a list the gateway serves in one page: -32602 (the spec's SHOULD);
- a progress token that is not a string or an integer: -32602 saying so;
- an unknown method as long as a client likes: -32601, quoting no more than 200 characters;
- params that are not the method's, or a request before the handshake: -32602 saying which
  field is wrong and why, or that the session is not initialized (the SDK: "Invalid request
  parameters", nothing more).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.server.processes import TIMES_42, http_server, write_config

from .wire import (
    ERAS,
    LEGACY,
    Era,
    HttpWire,
    calculate,
    calculated,
    initialize,
    modern_params,
    stdio_wire,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one request, returns its reply."""


def _request(request_id: int, method: str, era: Era, params: dict[str, Any] | None = None) -> Any:
    params = modern_params(params) if era != LEGACY else params
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return message if params is None else {**message, "params": params}


def _error(reply: dict[str, Any], request_id: object, code: int) -> str:
    """The message of `reply`, an error `code` to `request_id`."""
    assert reply.get("id", "missing") == request_id, reply
    error: dict[str, Any] = reply.get("error") or {}
    assert error.get("code") == code, reply
    return str(error.get("message"))


@asynccontextmanager
async def _asking(transport: str, era: Era, tmp_path: Path) -> AsyncGenerator[Ask]:
    """A served gateway (the calculator, proxied) and a way to ask it, session opened."""
    config = write_config(tmp_path, TIMES_42)
    if transport == "stdio":
        async with stdio_wire(config) as wire:

            async def over_stdio(message: dict[str, Any]) -> dict[str, Any]:
                await wire.send_json(message)
                return await wire.reply_to(message["id"])

            with anyio.fail_after(30):
                await wire.open(era)
                yield over_stdio
    else:
        async with http_server(config) as served, httpx2.AsyncClient(timeout=10) as http:
            posting = HttpWire(http, served.url, era)

            async def over_http(message: dict[str, Any]) -> dict[str, Any]:
                answer = await posting.post(json.dumps(message).encode())
                assert answer.reply is not None, f"{answer.status}: {answer.text}"
                return answer.reply

            with anyio.fail_after(30):
                await posting.open()
                yield over_http


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_second_initialize_is_refused(transport: str, tmp_path: Path) -> None:
    async with _asking(transport, LEGACY, tmp_path) as ask:
        again = await ask(initialize(5))
        older = initialize(6)
        older["params"]["protocolVersion"] = "2024-11-05"
        renegotiated = await ask(older)
        after = await ask(calculate(7, LEGACY))
    assert "already initialized" in _error(again, 5, INVALID_REQUEST)
    assert "already initialized" in _error(renegotiated, 6, INVALID_REQUEST)
    assert calculated(after) == "42"


async def test_an_initialize_that_failed_may_be_sent_again(tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42)
    async with stdio_wire(config) as wire:
        with anyio.fail_after(30):
            await wire.send_json({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
            early = await wire.reply_to(0)
            await wire.send_json({"jsonrpc": "2.0", "id": 1, "method": "initialize"})
            failed = await wire.reply_to(1)
            await wire.send_json(initialize(2))
            accepted = await wire.reply_to(2)
    assert _error(early, 0, INVALID_PARAMS) == (
        "Invalid params: the session is not initialized yet: send initialize (then "
        "notifications/initialized) first"
    )
    assert _error(failed, 1, INVALID_PARAMS) == "Invalid params: params: Field required"
    assert accepted["result"]["protocolVersion"] == LEGACY


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_params_that_are_not_the_methods_are_refused_naming_the_field(
    transport: str, era: Era, tmp_path: Path
) -> None:
    async with _asking(transport, era, tmp_path) as ask:
        nameless = await ask(_request(1, "tools/call", era, {"arguments": {}}))
        if era == LEGACY:  # deprecated at 2026-07-28: not served there
            loud = await ask(_request(2, "logging/setLevel", era, {"level": "loud"}))
            assert _error(loud, 2, INVALID_PARAMS).startswith(
                "Invalid params: params.level: Input should be 'alert', 'critical', 'debug',"
            )
    assert _error(nameless, 1, INVALID_PARAMS) == "Invalid params: params.name: Field required"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cursor_the_gateway_never_gave_is_invalid(
    transport: str, era: Era, tmp_path: Path
) -> None:
    async with _asking(transport, era, tmp_path) as ask:
        paged = await ask(_request(1, "tools/list", era, {"cursor": "garbage!!"}))
        empty = await ask(_request(2, "tools/list", era, {"cursor": ""}))
        whole = await ask(_request(3, "tools/list", era))
    said = _error(paged, 1, INVALID_PARAMS)
    assert "'garbage!!'" in said
    assert "list again without a cursor" in said
    _error(empty, 2, INVALID_PARAMS)
    assert [tool["name"] for tool in whole["result"]["tools"]] == ["assistant", "calculator"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_progress_token_must_be_a_string_or_an_integer(
    transport: str, era: Era, tmp_path: Path
) -> None:
    refused: list[tuple[object, dict[str, Any]]] = []
    async with _asking(transport, era, tmp_path) as ask:
        for request_id, token in enumerate([True, None, 1.5, {"a": 1}, ["t"]], 10):
            call = calculate(request_id, era)
            meta = {**call["params"].get("_meta", {}), "progressToken": token}
            call["params"]["_meta"] = meta
            refused.append((token, await ask(call)))
        taken: list[dict[str, Any]] = []
        for request_id, token in enumerate(["t-1", 7], 20):
            call = calculate(request_id, era)
            call["params"]["_meta"] = {**call["params"].get("_meta", {}), "progressToken": token}
            taken.append(await ask(call))
    for request_id, (token, reply) in enumerate(refused, 10):
        said = _error(reply, request_id, INVALID_PARAMS)
        assert said == "Invalid params: _meta.progressToken must be a string or an integer", token
    assert [calculated(reply) for reply in taken] == ["42", "42"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_unknown_method_is_quoted_short(transport: str, era: Era, tmp_path: Path) -> None:
    method = "x/" + "y" * 20_000
    async with _asking(transport, era, tmp_path) as ask:
        reply = await ask(_request(1, method, era))
    _error(reply, 1, METHOD_NOT_FOUND)
    assert len(json.dumps(reply)) < 600, reply
