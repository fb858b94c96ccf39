"""McpToolkit against real MCP servers in subprocesses: every transport, both protocol eras."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Literal

import anyio
import mcp_types as types
import pytest

from tests.servers.real import everything_http, everything_stdio, filesystem_stdio, time_stdio
from toolkits import CallContext
from toolkits.mcp import McpServerConfig, McpToolkit, McpToolkitGroup, ProtocolMode
from toolkits.observation import result_data, result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

Progress = tuple[float, float | None, str | None]


async def long_running_operation(node: McpToolkit, name: str) -> list[Progress]:
    """Run server-everything's progress-reporting tool; returns the progress seen."""
    seen: list[Progress] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(20):
        context = CallContext(on_progress=on_progress)
        result = await node.call_tool(name, {"duration": 0.6, "steps": 3}, context=context)
    assert "Long running operation completed" in result_text(result)
    return sorted(seen)


async def test_everything_over_stdio(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    config = everything_stdio(env={"AGENT_GATEWAY_PROBE": "passed-through"})
    async with McpToolkit("everything", config) as node:
        names = {tool.name for tool in await node.list_tools()}
        assert {"everything__echo", "everything__get-tiny-image"} <= names
        assert node.health.protocol_version == "2025-11-25"  # TypeScript servers fall back

        echo = await node.call_tool("everything__echo", {"message": "hi"})
        assert result_text(echo) == "Echo: hi"

        image = await node.call_tool("everything__get-tiny-image", {})
        assert any(isinstance(block, types.ImageContent) for block in image.content)
        assert "[image: image/png, " in result_text(image)

        links = await node.call_tool("everything__get-resource-links", {"count": 2})
        assert sum(isinstance(block, types.ResourceLink) for block in links.content) == 2
        assert "[resource link 'Blob Resource 1': demo://resource/dynamic/blob/1" in result_text(
            links
        )

        reference = await node.call_tool(
            "everything__get-resource-reference", {"resourceType": "Text", "resourceId": 1}
        )
        assert any(isinstance(block, types.EmbeddedResource) for block in reference.content)
        assert "[resource: demo://resource/dynamic/text/1 (text/plain)]" in result_text(reference)

        weather = await node.call_tool(
            "everything__get-structured-content", {"location": "Chicago"}
        )
        assert weather.structured_content is not None
        assert result_data(weather) == weather.structured_content

        env = await node.call_tool("everything__get-env", {})
        assert "passed-through" in result_text(env)

        assert await long_running_operation(node, "everything__trigger-long-running-operation") == [
            (1, 3, None),
            (2, 3, None),
            (3, 3, None),
        ]
    # The server's stderr went to our log, not to our own stdout/stderr.
    assert "stderr: Starting default (STDIO) server..." in caplog.messages
    assert any(r.name == "toolkits.mcp.everything" for r in caplog.records)
    out, err = capfd.readouterr()
    assert "Starting default" not in out + err


async def test_everything_over_streamable_http(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("EVERYTHING_TOKEN", "s3cr3t-token-value")
    async with everything_http("streamableHttp") as url:
        assert url.startswith("http://127.0.0.1:")
        config = McpServerConfig(
            transport="http", url=url, headers={"X-Probe": "1"}, bearer_token_env="EVERYTHING_TOKEN"
        )
        assert "s3cr3t" not in repr(config)
        async with McpToolkit("everything", config) as node:
            assert node.health.state == "ready", node.health
            echo = await node.call_tool("everything__echo", {"message": "over http"})
            assert result_text(echo) == "Echo: over http"
            progress = await long_running_operation(
                node, "everything__trigger-long-running-operation"
            )
            assert progress == [(1, 3, None), (2, 3, None), (3, 3, None)]
    assert "s3cr3t-token-value" not in caplog.text


async def test_a_restarted_server_everything_answers_the_first_call_after_it() -> None:
    """It answers the old session id with 400 (the spec says 404): a new session, same call."""

    gone = anyio.Event()

    async def serve(
        port: int, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[str]
    ) -> None:
        async with everything_http("streamableHttp", port) as url:
            task_status.started(url)
            await stop.wait()
        gone.set()

    async with anyio.create_task_group() as tg:
        first = anyio.Event()
        url = await tg.start(serve, 0, first)
        async with McpToolkit("everything", McpServerConfig(url=url)) as node:
            with anyio.fail_after(30):
                echo = await node.call_tool("everything__echo", {"message": "before"})
                assert result_text(echo) == "Echo: before"
                first.set()
                await gone.wait()  # its process ended: the port is free for the next one
                second = anyio.Event()
                await tg.start(serve, int(url.rsplit(":", 1)[1].split("/")[0]), second)
                echo = await node.call_tool("everything__echo", {"message": "after"})
                assert result_text(echo) == "Echo: after"
                second.set()


async def test_a_restarted_server_everythings_resources_are_listed_and_read_at_once() -> None:
    """Its 400 to the old session id, met by a listing rather than a call, is a lost session
    too: the node reconnects and lists again; nothing is left out."""

    gone = anyio.Event()

    async def serve(
        port: int, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[str]
    ) -> None:
        async with everything_http("streamableHttp", port) as url:
            task_status.started(url)
            await stop.wait()
        gone.set()

    document = "demo://resource/static/document/features.md"
    async with anyio.create_task_group() as tg:
        first = anyio.Event()
        url = await tg.start(serve, 0, first)
        async with McpToolkit("everything", McpServerConfig(url=url)) as node:
            with anyio.fail_after(30):
                before = [r.uri for r in await node.catalog.list_resources()]
                first.set()
                await gone.wait()  # its process ended: the port is free for the next one
                second = anyio.Event()
                await tg.start(serve, int(url.rsplit(":", 1)[1].split("/")[0]), second)
                after = [r.uri for r in await node.catalog.list_resources()]
                read = await node.catalog.read_resource(document)
                second.set()
                assert document in before
                assert after == before
                assert read.contents[0].uri == document


async def test_everything_over_legacy_sse() -> None:
    async with (
        everything_http("sse") as url,
        McpToolkit("everything", McpServerConfig(transport="sse", url=url)) as node,
    ):
        assert node.health.state == "ready", node.health
        echo = await node.call_tool("everything__echo", {"message": "over sse"})
        assert result_text(echo) == "Echo: over sse"


@pytest.mark.parametrize(
    ("protocol", "version"),
    [("auto", "2025-11-25"), ("modern", "2026-07-28"), ("legacy", "2025-11-25")],
)
async def test_time_server_in_both_eras(protocol: ProtocolMode, version: str) -> None:
    async with McpToolkit("time", time_stdio(protocol=protocol, prefix="never")) as node:
        assert node.health.protocol_version == version
        assert {tool.name for tool in await node.list_tools()} == {
            "get_current_time",
            "convert_time",
        }
        result = await node.call_tool("get_current_time", {"timezone": "UTC"})
        assert not result.is_error
        assert '"timezone": "UTC"' in result_text(result)


async def test_server_filesystem_has_no_resources_so_resource_tools_offers_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It declares no `resources` capability (server-everything does: its resource tools are
    offered, below; mcp-server-time declares it, and lists none)."""
    config = filesystem_stdio(tmp_path, resource_tools=True, prefix="never")
    with anyio.fail_after(30):
        async with McpToolkit("files", config) as node:
            names = {tool.name for tool in await node.list_tools()}
    assert "read_text_file" in names
    assert not names & {"read_resource", "list_resources"}
    assert caplog.text.count("resource_tools has no effect") == 1, caplog.text


async def test_everything_in_legacy_mode_and_a_modern_time_server_in_one_group() -> None:
    configs = {
        "everything": everything_stdio(protocol="legacy", prefix="auto", include=["echo", "get-*"]),
        "time": time_stdio(protocol="modern", prefix="auto"),
    }
    with anyio.fail_after(30):
        async with McpToolkitGroup(configs) as group:
            names = sorted(tool.name for tool in await group.list_tools())
            assert "echo" in names
            assert "get_current_time" in names
            assert "trigger-long-running-operation" not in names
            assert all(health.state == "ready" for health in group.health.values()), (
                group.health_report()
            )
            assert (
                result_text(await group["everything"].call_tool("echo", {"message": "x"}))
                == "Echo: x"
            )
            assert not (
                await group["time"].call_tool("get_current_time", {"timezone": "UTC"})
            ).is_error


@pytest.mark.parametrize("transport", ["stdio", "streamableHttp"])
async def test_an_error_the_server_prefixed_itself_is_prefixed_once(transport: str) -> None:
    # The TypeScript SDK's McpError puts "MCP error CODE: " in its message already.
    arguments = {"url": "https://example.com/approve", "errorPath": True}
    with anyio.fail_after(30):
        if transport == "stdio":
            async with McpToolkit("everything", everything_stdio()) as node:
                result = await node.call_tool("everything__trigger-url-elicitation", arguments)
        else:
            async with (
                everything_http("streamableHttp") as url,
                McpToolkit("everything", McpServerConfig(url=url)) as node,
            ):
                result = await node.call_tool("everything__trigger-url-elicitation", arguments)
    assert result.is_error
    assert result_text(result).startswith(
        "MCP error -32042: This request requires browser-based authorization.; "
        "open https://modelcontextprotocol.io"  # for the model to pass on (its URL, not ours)
    )


async def test_everythings_resources_are_read_through_its_resource_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with McpToolkit("everything", everything_stdio(resource_tools=True)) as node:
        with anyio.fail_after(20):
            names = {tool.name for tool in await node.list_tools()}
            listed = result_text(await node.call_tool("everything__list_resources", {}))
            links = await node.call_tool("everything__get-resource-links", {"count": 2})
            uris = [block.uri for block in links.content if isinstance(block, types.ResourceLink)]
            reads = [await node.call_tool("everything__read_resource", {"uri": u}) for u in uris]
            document = await node.call_tool(
                "everything__read_resource",
                {"uri": "demo://resource/static/document/architecture.md"},
            )
            unknown = await node.call_tool("everything__read_resource", {"uri": "demo://nope"})
        # The server's tools go raw on its pipe; these two are no `tools/call` of the server's.
        assert node.forward("everything__echo") is not None
        assert node.forward("everything__read_resource") is None
        assert node.forward("everything__list_resources") is None
    assert {"everything__list_resources", "everything__read_resource"} <= names
    assert "resource_tools has no effect" not in caplog.text
    assert "demo://resource/static/document/architecture.md  architecture.md (text/markdown)" in (
        listed
    )
    assert "demo://resource/dynamic/text/{resourceId}" in listed.split("Resource templates")[1]
    # What the model saw as a link it now reads (a text resource, or a blob of text).
    assert len(uris) == 2
    for uri, read in zip(uris, reads, strict=True):
        assert uri.startswith(("demo://resource/dynamic/text/", "demo://resource/dynamic/blob/"))
        said = result_text(read).splitlines()
        assert said[0] == f"[resource: {uri} (text/plain)]"
        assert said[1].startswith(f"Resource {uri.rsplit('/', 1)[1]}: This is a ")
    assert result_text(document).startswith(
        "[resource: demo://resource/static/document/architecture.md (text/markdown)]\n"
    )
    assert unknown.is_error
    assert result_text(unknown) == (
        "MCP server 'everything' could not read 'demo://nope': "
        "MCP error -32602: Resource demo://nope not found"
    )


@pytest.mark.parametrize("transport", ["stdio", "streamableHttp", "sse"])
async def test_everythings_research_query_runs_as_a_task_its_stages_as_progress(
    transport: Literal["stdio", "streamableHttp", "sse"], caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Progress] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with AsyncExitStack() as stack:
        if transport == "stdio":
            config = everything_stdio()
        else:
            url = await stack.enter_async_context(everything_http(transport))
            kind = "sse" if transport == "sse" else "http"
            config = McpServerConfig(transport=kind, url=url)
        node = await stack.enter_async_context(McpToolkit("everything", config))
        # Never passed through raw as a plain call: the node makes the task.
        assert node.forward("everything__simulate-research-query") is None
        assert (node.forward("everything__echo") is not None) == (transport != "sse")
        with anyio.fail_after(30):
            result = await node.call_tool(
                "everything__simulate-research-query",
                {"topic": "tides"},
                context=CallContext(on_progress=on_progress),
            )
    assert not result.is_error
    assert result_text(result).startswith("# Research Report: tides\n")
    # Each stage lasts the server's poll interval (1 s): a poll may fall on either side of a
    # change and miss a stage (it did, in CI). The server's `notifications/tasks/status`, which
    # the SDK drops, tell each at once; polled too, each is told once.
    stages = ["Gathering sources...", "Analyzing content...", "Synthesizing findings..."]
    stages.append("Generating report...")
    messages = [message or "" for _, _, message in seen]
    if transport != "streamableHttp":  # one stream: each status heard, in order
        assert messages == stages
    else:  # heard on the GET stream, which may open after the task began: polls fill in
        assert messages[0] == stages[0]
        assert set(messages) <= set(stages)
        assert messages == sorted(set(messages), key=stages.index)
    assert [progress for progress, _, _ in seen] == list(range(1, len(seen) + 1))
    assert "only as tasks" not in caplog.text


async def test_everythings_ambiguous_research_query_asks_the_caller_through_the_task() -> None:
    asked: list[types.ElicitRequest] = []

    async def answer(request: types.InputRequest) -> types.InputResponse:
        if not isinstance(request, types.ElicitRequest):
            return types.ListRootsResult(roots=[])  # it asks for roots too, once it can
        asked.append(request)
        return types.ElicitResult(action="accept", content={"interpretation": "historical"})

    async with McpToolkit("everything", everything_stdio()) as node:
        with anyio.fail_after(30):
            result = await node.call_tool(
                "everything__simulate-research-query",
                {"topic": "tides", "ambiguous": True},
                context=CallContext(answer=answer),
            )
    (request,) = asked
    assert isinstance(request.params, types.ElicitRequestFormParams)
    assert "could have multiple interpretations" in request.params.message
    assert "- **Clarification**: historical" in result_text(result)
