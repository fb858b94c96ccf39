"""Proxy mode with server-everything (stdio, 2025-11-25) as the node: the rest of its surface.

Its sampling, elicitation and roots tools ask the client mid-call over a pipe that does not
say which call asked; our client answers them in either era. Its resources (7 documents, 2
templates), prompts (4) and completions are served through us.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway import Gateway
from toolkits import result_text
from toolkits.mcp import McpToolkitGroup

from ..servers.real import everything_stdio
from .proxying import ClientAnswers
from .support import ERAS, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@asynccontextmanager
async def through_us(era: str, **client: Any) -> AsyncGenerator[Client]:
    """A client of a gateway proxying server-everything (in process, over stdio)."""
    async with (
        McpToolkitGroup({"everything": everything_stdio()}) as group,
        Client(serve(Gateway(group.nodes, []), expose_tools=True), mode=era, **client) as c,
    ):
        yield c


class StderrWatch(logging.Handler):
    """Sets `seen` once the node logs a line of its server's stderr containing `text`."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


@pytest.mark.parametrize("era", ERAS)
async def test_its_sampling_elicitation_and_roots_reach_our_client(era: str) -> None:
    answers = ClientAnswers()
    with anyio.fail_after(40):
        async with through_us(era, **answers.callbacks()) as client:
            sampled = await client.call_tool(
                "everything__trigger-sampling-request",
                {"prompt": "six times seven", "maxTokens": 5},
            )
            elicited = await client.call_tool("everything__trigger-elicitation-request", {})
            roots = await client.call_tool("everything__get-roots-list", {})
    assert not sampled.is_error
    assert '"text": "42"' in result_text(sampled)
    assert '"model": "upstream-model"' in result_text(sampled)
    [params] = answers.sampled
    assert params.messages[0].content == types.TextContent(
        text="Resource trigger-sampling-request context: six times seven"
    )
    assert params.max_tokens == 5
    assert not elicited.is_error
    assert "- Name: Ada" in result_text(elicited)
    [form] = answers.elicited
    assert form.message == "Please provide inputs for the following fields:"
    assert not roots.is_error
    assert "URI: file:///work" in result_text(roots)
    assert answers.roots_asked >= 1


@pytest.mark.parametrize("era", ERAS)
async def test_without_the_capabilities_it_is_told_why(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    roots_refused = StderrWatch("roots/list refused: the upstream client lacks roots")
    caplog.set_level(logging.INFO, logger="toolkits.mcp.everything")  # its stderr is logged at info
    node_log = logging.getLogger("toolkits.mcp.everything")
    node_log.addHandler(roots_refused)
    try:
        with anyio.fail_after(40):
            async with through_us(era) as client:
                sampled = await client.call_tool(
                    "everything__trigger-sampling-request", {"prompt": "hi"}
                )
                elicited = await client.call_tool("everything__trigger-elicitation-request", {})
                # server-everything keeps going without roots, and says why on its stderr.
                roots = await client.call_tool("everything__get-roots-list", {})
                await roots_refused.seen.wait()
    finally:
        node_log.removeHandler(roots_refused)
    assert sampled.is_error
    assert "the upstream client lacks sampling" in result_text(sampled)
    assert elicited.is_error
    assert "the upstream client lacks elicitation" in result_text(elicited)
    assert "no roots are currently configured" in result_text(roots)


@pytest.mark.parametrize("era", ERAS)
async def test_its_resources_prompts_and_completions_are_served(era: str) -> None:
    with anyio.fail_after(40):
        async with through_us(era) as client:
            resources = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            document = await client.read_resource("demo://resource/static/document/features.md")
            blob = await client.read_resource("demo://resource/dynamic/blob/3")
            prompts = (await client.list_prompts()).prompts
            weather = await client.get_prompt(
                "everything__args-prompt", {"city": "Paris", "state": "Texas"}
            )
            departments = await client.complete(
                types.PromptReference(name="everything__completable-prompt"),
                {"name": "department", "value": "Eng"},
            )
            people = await client.complete(
                types.PromptReference(name="everything__completable-prompt"),
                {"name": "name", "value": ""},
                {"department": "Sales"},
            )
    assert len(resources) == 7
    assert all(r.uri.startswith("demo://resource/static/document/") for r in resources)
    assert [t.uri_template for t in templates] == [
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    ]
    [text] = document.contents
    assert isinstance(text, types.TextResourceContents)
    assert text.mime_type == "text/markdown"
    assert text.text
    [contents] = blob.contents
    assert isinstance(contents, types.BlobResourceContents)
    assert base64.b64decode(contents.blob).startswith(b"Resource 3: This is a base64 blob")
    assert sorted(p.name for p in prompts) == [
        "everything__args-prompt",
        "everything__completable-prompt",
        "everything__resource-prompt",
        "everything__simple-prompt",
    ]
    assert weather.messages[0].content == types.TextContent(text="What's weather in Paris, Texas?")
    assert departments.completion.values == ["Engineering"]
    assert people.completion.values == ["David", "Eve", "Frank"]


async def test_its_log_message_during_a_call_reaches_our_client() -> None:
    # Turning simulated logging on sends one random-leveled message at once, during that call
    # (then one every 5 s, between calls: for the node's log only). Only a 2026-07-28 client
    # opting in to debug takes every level, so only that pairing is deterministic.
    heard: list[types.LoggingMessageNotificationParams] = []

    async def hear(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params)

    with anyio.fail_after(40):
        async with through_us("auto", logging_callback=hear, log_level="debug") as client:
            started = await client.call_tool("everything__toggle-simulated-logging", {})
            stopped = await client.call_tool("everything__toggle-simulated-logging", {})
    assert "Started simulated" in result_text(started)
    assert "Stopped simulated" in result_text(stopped)
    [message] = heard
    assert isinstance(message.data, str)
    assert message.data.lower().startswith(message.level.lower())


async def test_its_url_elicitation_error_reaches_a_handshake_client_as_sent() -> None:
    # The client runs the URL flow from the error's data: an error result would lose it.
    arguments = {"url": "https://example.com/approve", "errorPath": True}
    with anyio.fail_after(40):
        async with through_us("legacy") as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("everything__trigger-url-elicitation", arguments)
    error = raised.value.error
    assert error.code == types.URL_ELICITATION_REQUIRED
    assert error.message == "MCP error -32042: This request requires browser-based authorization."
    [asked] = cast(dict[str, Any], error.data)["elicitations"]
    assert (asked["mode"], asked["url"]) == ("url", "https://modelcontextprotocol.io")


async def test_an_error_it_prefixed_itself_reaches_a_modern_client_prefixed_once() -> None:
    # 2026-07-28 has no -32042: its client gets the error result, the URL named.
    arguments = {"url": "https://example.com/approve", "errorPath": True}
    with anyio.fail_after(40):
        async with through_us("auto") as client:
            refused = await client.call_tool("everything__trigger-url-elicitation", arguments)
    assert refused.is_error
    assert result_text(refused).startswith(
        "MCP error -32042: This request requires browser-based authorization.; "
        "open https://modelcontextprotocol.io"  # its URL, whatever we gave
    )
    assert "MCP error -32042: MCP error" not in result_text(refused)


@pytest.mark.parametrize("era", ERAS)
async def test_its_task_only_tool_is_served_as_a_plain_tool_and_runs_as_a_task(era: str) -> None:
    with anyio.fail_after(40):
        async with through_us(era) as client:
            listed = await client.list_tools()
            result = await client.call_tool(
                "everything__simulate-research-query", {"topic": "tides"}
            )
    (tool,) = [t for t in listed.tools if t.name == "everything__simulate-research-query"]
    assert tool.execution is None  # a plain call to our client: the gateway makes the task
    assert not result.is_error
    assert result_text(result).startswith("# Research Report: tides\n")
    # The client made no task and can ask nothing of the gateway's: none is named to it.
    assert "io.modelcontextprotocol/related-task" not in (result.meta or {})


async def test_its_resource_tools_are_served_as_tools() -> None:
    with anyio.fail_after(40):
        async with (
            McpToolkitGroup({"everything": everything_stdio(resource_tools=True)}) as group,
            Client(serve(Gateway(group.nodes, []), expose_tools=True)) as client,
        ):
            read = await client.call_tool(
                "everything__read_resource", {"uri": "demo://resource/dynamic/text/3"}
            )
    assert not read.is_error
    (block,) = read.content
    assert isinstance(block, types.EmbeddedResource)
    assert isinstance(block.resource, types.TextResourceContents)
    assert block.resource.text.startswith("Resource 3: This is a plaintext resource")
