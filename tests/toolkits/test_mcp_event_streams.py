"""A call's answer over streamable HTTP as an event stream carries it, on both ways a node
calls (raw JSON-RPC and the SDK client), alike: a stream the server closes before its answer
(SSE polling) is resumed with `Last-Event-ID`; events of a type other than `message` (a `ping`
keep-alive, a `heartbeat`) are no answer; an answer with an id no request has fails its call
at once, saying so."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from tests.servers.asgi import serve_on_loopback
from tests.servers.faulty_http import Fault, FaultyFront, Waiting, faulty_server
from tests.servers.polling_http import polling_server
from toolkits.errors import ToolTimeout
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BOTH_WAYS = pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])


@BOTH_WAYS
@pytest.mark.parametrize("protocol", ["legacy", "auto"])
@pytest.mark.parametrize("retry", [1, None], ids=["retry", "no-retry"])
async def test_a_stream_the_server_closes_before_its_answer_is_resumed_for_it(
    raw: bool, protocol: ProtocolMode, retry: int | None
) -> None:
    front = polling_server(retry_interval=retry)
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol=protocol, timeout=10)
            async with McpToolkit("p", config) as node:
                node.raw_calls = raw
                polled = await node.call_tool("p__polled", {"text": "hi"})
                quick = await node.call_tool("p__quick", {"text": "after"})
                assert node.health.state == "ready"
    assert (polled.is_error, result_text(polled)) == (False, "polled hi")
    assert result_text(quick) == "quick after"
    # Resumed once, after the call's priming event (the store's fifth: the handshake and the
    # tool listing had two each).
    assert front.resumed_after == ["e5"]


@BOTH_WAYS
async def test_a_resumed_stream_that_never_answers_times_out_as_any_call(raw: bool) -> None:
    front = polling_server(retry_interval=1)
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol="legacy", timeout=1)
            async with McpToolkit("p", config) as node:
                node.raw_calls = raw
                with pytest.raises(ToolTimeout, match=r"no result or progress for 1 s"):
                    await node.call_tool("p__never", {})
                quick = await node.call_tool("p__quick", {"text": "after"})
    assert len(front.resumed_after) == 1
    assert result_text(quick) == "quick after"


def _events(*events: bytes) -> Fault:
    """A call answered by an event stream of `events`, then its `message` event with the
    answer `ANSWER`."""

    def reply(request: dict[str, Any]) -> bytes:
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": _text("ANSWER")}
        decoy = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": _text("DECOY")})
        made = b"".join(events).replace(b"DECOY", decoy.encode())
        return made + b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"

    return Fault(200, "text/event-stream", reply=reply)


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@BOTH_WAYS
async def test_events_of_other_types_are_no_answer(raw: bool) -> None:
    faults = {
        "pinged": _events(b"event: ping\ndata: ping\n\n"),
        "heartbeat": _events(b"event: heartbeat\ndata: DECOY\n\n"),
        "typed_twice": _events(b"event: message\nevent: other\ndata: DECOY\n\n"),
        "comment": _events(b": keep-alive\n\nevent:\ndata: \n\n"),
    }
    server = faulty_server(Waiting(), *faults)
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls=faults)
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(front) as base,
            McpToolkit("f", McpServerConfig(url=f"{base}/mcp")) as node,
        ):
            node.raw_calls = raw
            results = [await node.call_tool(f"f__{name}", {}) for name in faults]
    assert [(r.is_error, result_text(r)) for r in results] == [(False, "ANSWER")] * len(faults)


@pytest.mark.parametrize("protocol", ["auto", "modern"])
@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_an_answer_with_an_id_no_request_has_fails_its_call_at_once_saying_so(
    protocol: ProtocolMode, content_type: str
) -> None:
    def reply(request: dict[str, Any]) -> bytes:
        said = json.dumps({"jsonrpc": "2.0", "id": f"nope-{request['id']}", "result": {}})
        return said.encode() if content_type == "application/json" else f"data: {said}\n\n".encode()

    server = faulty_server(Waiting(), "stray")
    fault = Fault(200, content_type, reply=reply)
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls={"stray": fault})
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol=protocol, timeout=20)
            async with McpToolkit("f", config) as node:
                with anyio.fail_after(10):  # at once: not after the call's timeout
                    stray = await node.call_tool("f__stray", {})
                ok = await node.call_tool("f__ok", {})
                assert node.health.state == "ready"
    assert stray.is_error
    said = r"MCP server 'f' answered with id 'nope-agent-gateway-\d+', which no request has"
    assert re.fullmatch(said, result_text(stray))
    assert result_text(ok) == "ok"
