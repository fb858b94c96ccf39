"""Proxied calls of a 2026-07-28 stdio client, passed straight through, answer as the SDK's
usual path does.

The downstream and the two gateways served as over stdio (pass-through on and off) of
`test_stdio_pass_through`; clients that open the connection in the 2026-07-28 era: the SDK's
`Client` (its default with our server), and raw JSON-RPC lines for what only the wire shows.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from toolkits import result_text
from toolkits.mcp.config import ProtocolMode

from .proxying import ClientAnswers, answers_by_name
from .stdio_fronts import StdioFront
from .test_pass_through import CALLS, NODE_PROTOCOLS, Heard, answered_each
from .test_pass_through_sessions import ASKED, check_asked
from .test_stdio_pass_through import both_fronts

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
MODERN = "2026-07-28"
ENVELOPE: JsonObject = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


async def _answers(front: StdioFront) -> tuple[list[tuple[Any, ...]], list[str]]:
    logs = Heard()
    async with Client(front.client(), logging_callback=logs.on_log, log_level="info") as client:
        assert client.protocol_version == MODERN
        await client.list_tools()  # as clients do; a call before any listing takes the usual path
        answers = await answered_each(client, CALLS)
    return answers, logs.logs


@NODE_PROTOCOLS
async def test_calls_of_a_modern_stdio_client_pass_through_and_answer_as_the_usual_path_does(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            passed = await _answers(fast)
            assert fast.forwarded == len(CALLS)
            assert passed == await _answers(usual)
    answers, logs = passed
    by_name = answers_by_name(answers, logs, protocol=protocol)
    stamp = by_name["d__echo"][0]["_meta"][SERVER_INFO]  # ours, not the downstream's
    assert stamp["name"] == "agent-gateway"


@NODE_PROTOCOLS
async def test_a_modern_stdio_client_that_can_be_asked_is_asked_in_rounds(
    protocol: ProtocolMode,
) -> None:
    asked: dict[bool, list[str]] = {}
    answers: dict[bool, ClientAnswers] = {}
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            for passing, front in ((True, fast), (False, usual)):
                answers[passing] = ClientAnswers()
                async with Client(front.client(), **answers[passing].callbacks()) as client:
                    await client.list_tools()
                    asked[passing] = [
                        result_text(await client.call_tool(name, {"message": "hi"}))
                        for name in ASKED
                    ]
            assert fast.forwarded == len(ASKED)  # their first rounds
    assert asked[True] == asked[False]
    for seen in ("elicited", "sampled", "roots_asked"):
        assert getattr(answers[True], seen) == getattr(answers[False], seen)
    check_asked(protocol, asked[True])


async def _request(front: StdioFront, request_id: int, method: str, **params: Any) -> None:
    await front.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": {**ENVELOPE, **params.get("_meta", {})}},
        }
    )


async def _answer(front: StdioFront, request_id: int) -> JsonObject:
    while True:
        message = await front.receive()
        if message.get("id") == request_id and "method" not in message:
            return message


async def test_a_modern_call_its_client_cancels_is_cancelled_at_the_server_and_never_answered() -> (
    None
):
    with anyio.fail_after(30):
        async with both_fronts("auto") as (down, fast, _):
            await _request(fast, 1, "server/discover")
            await _answer(fast, 1)
            await _request(fast, 2, "tools/list")
            await _answer(fast, 2)
            await _request(fast, 3, "tools/call", name="d__wait", arguments={})
            await down.started.wait()
            cancel = {"requestId": 3, "reason": "enough"}
            await fast.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            )
            await down.cancelled.wait()
            await _request(fast, 4, "tools/call", name="d__echo", arguments={"message": "next"})
            message = await fast.receive()  # the next response is the echo's: 3 is never answered
            assert fast.forwarded == 1  # the echo: a call its client cancelled is not answered
    assert message["id"] == 4
    assert message["result"]["content"] == [{"type": "text", "text": "next"}]


async def test_a_modern_call_with_a_malformed_envelope_gets_the_sdks_error() -> None:
    """The ladder's refusal is the SDK's to give: the call is not passed through."""
    with anyio.fail_after(30):
        async with both_fronts("auto") as (_, fast, usual):
            answers: list[JsonObject] = []
            for front in (fast, usual):
                await _request(front, 1, "server/discover")
                await _answer(front, 1)
                await _request(front, 2, "tools/list")
                await _answer(front, 2)
                meta = {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}
                await _request(front, 3, "tools/call", name="d__echo", arguments={}, _meta=meta)
                answers.append(await _answer(front, 3))
            assert fast.forwarded == 0
    assert answers[0] == answers[1]
    assert answers[0]["error"]["code"] == types.UNSUPPORTED_PROTOCOL_VERSION
