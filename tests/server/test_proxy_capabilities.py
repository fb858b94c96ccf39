"""The gateway's handshake offers what it honours: prompts, resources and their subscriptions,
completions and logging as the exposed servers offer them (logging also when agents are
served, whose runs log), and a request for what it does not offer gets -32601 "Method not
found", as the server connected directly answers it.

Compared with a direct connection to the real servers (mcp-server-time: no completions, no
logging; server-everything: both), in process and through a real `serve` over stdio and HTTP.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway import Gateway
from toolkits.mcp import McpServerConfig, McpToolkit, McpToolkitGroup

from ..servers.catalog import CatalogServer
from ..servers.inprocess import CrashableTransport, ToyServer
from ..servers.real import everything_stdio, time_stdio
from .processes import REPO, SCRIPT, http_server
from .proxying import Heard, listening, mcp_nodes, set_log_level
from .support import ERAS, calculator_agent, calculator_gateway, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

REAL = {"time": time_stdio, "everything": everything_stdio}
PORTS = {"time": 47931, "everything": 47932}
"""`serve --http` in front of each (the range these tests may bind)."""
ARGUMENT = {"name": "a", "value": ""}


async def code_of(request: Awaitable[Any]) -> int | None:
    """The JSON-RPC error code `request` is answered with (None: a result)."""
    try:
        await request
    except MCPError as exc:
        return exc.code
    return None


async def offered(target: Any, era: str) -> tuple[str, dict[str, bool], dict[str, int | None]]:
    """What a client of `target` is told at its handshake, and the codes its requests for
    each of it get: its protocol version, the features, the answers."""
    async with Client(target, mode=era) as client:
        features = features_of(client.server_capabilities)
        unknown = types.PromptReference(name="no-such-prompt")
        answers = {"completion/complete": await code_of(client.complete(unknown, ARGUMENT))}
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # the era's own methods
            answers["logging/setLevel"] = await code_of(set_log_level(client, "info"))
            subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri="x://y"))
            sent = client.session.send_request(subscribe, types.EmptyResult)
            answers["resources/subscribe"] = await code_of(sent)
        return client.protocol_version, features, answers


def features_of(capabilities: types.ServerCapabilities) -> dict[str, bool]:
    resources = capabilities.resources
    return {
        "prompts": capabilities.prompts is not None,
        "resources": resources is not None,
        "subscribe": resources is not None and bool(resources.subscribe),
        "completions": capabilities.completions is not None,
        "logging": capabilities.logging is not None,
    }


def direct(config: McpServerConfig) -> StdioServerParameters:
    assert config.command is not None
    return StdioServerParameters(command=config.command, args=list(config.args))


def same_as_direct(
    through: tuple[str, dict[str, bool], dict[str, int | None]],
    directly: tuple[str, dict[str, bool], dict[str, int | None]],
) -> None:
    """The gateway's client is told and answered as the direct one (methods of an era the
    other did not settle on aside: server-everything speaks 2025-11-25 only)."""
    _, features, answers = through
    _, direct_features, direct_answers = directly
    assert features == direct_features
    both = answers.keys() & direct_answers.keys()
    assert {m: answers[m] for m in both} == {m: direct_answers[m] for m in both}


def config_for(tmp_path: Path, name: str) -> Path:
    server = REAL[name]()
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.{name}]\ncommand = {json.dumps(server.command)}\n"
        f'args = {json.dumps(server.args)}\nprefix = "never"\n'
    )
    return config


@pytest.mark.parametrize("era", ERAS)
async def test_in_front_of_one_server_the_gateway_offers_what_it_offers(era: str) -> None:
    for name, make in REAL.items():
        with anyio.fail_after(30):
            directly = await offered(direct(make()), era)
            async with McpToolkitGroup({name: make(prefix="never")}) as group:
                through = await offered(serve(Gateway(group.nodes, []), expose_tools=True), era)
        same_as_direct(through, directly)
        version, features, answers = through
        offers = name == "everything"
        assert features["completions"] is offers
        assert features["logging"] is offers
        assert (answers["completion/complete"] == types.METHOD_NOT_FOUND) is not offers
        if version not in MODERN_PROTOCOL_VERSIONS:
            assert (answers["logging/setLevel"] == types.METHOD_NOT_FOUND) is not offers


async def test_a_real_stdio_front_offers_what_the_server_offers(tmp_path: Path) -> None:
    for name, make in REAL.items():
        config = config_for(tmp_path, name)
        front = StdioServerParameters(
            command=str(SCRIPT),
            args=["serve", "--stdio", "--config", str(config)],
            cwd=str(REPO),
            env=dict(os.environ),  # the SDK passes on only a few variables: PYTHONPATH too
        )
        for era in ERAS:
            with anyio.fail_after(60):
                directly = await offered(direct(make()), era)
                through = await offered(front, era)
            same_as_direct(through, directly)
            assert through[1]["completions"] is (name == "everything")


async def test_a_real_http_front_offers_what_the_server_offers(tmp_path: Path) -> None:
    for name, make in REAL.items():
        config = config_for(tmp_path, name)
        with anyio.fail_after(90):
            async with http_server(config, address=f"127.0.0.1:{PORTS[name]}") as served:
                for era in ERAS:
                    directly = await offered(direct(make()), era)
                    through = await offered(served.url, era)
                    same_as_direct(through, directly)
                    assert through[1]["logging"] is (name == "everything")


@pytest.mark.parametrize("era", ERAS)
async def test_with_agents_logging_is_offered_and_completions_as_a_server_has_them(
    era: str,
) -> None:
    with anyio.fail_after(30):
        async with (
            McpToolkitGroup({"time": time_stdio()}) as group,
            mcp_nodes(("docs", CatalogServer("docs"))) as (docs,),
        ):
            time_node = group.nodes[0]
            agent = calculator_agent(["-"])
            # Agents, and a server without completions or logging: the agents' runs log.
            _, alone, said_alone = await offered(
                serve(calculator_gateway(agent, nodes=[time_node]), expose_tools=True), era
            )
            # Agents and two servers, one with completions (and no logging).
            _, both, said_both = await offered(
                serve(calculator_gateway(agent, nodes=[time_node, docs]), expose_tools=True), era
            )
            # The same servers, no agent: nothing logs.
            _, quiet, said_quiet = await offered(
                serve(Gateway([time_node, docs], []), expose_tools=True), era
            )
    assert alone["logging"]
    assert not alone["completions"]
    assert said_alone["completion/complete"] == types.METHOD_NOT_FOUND
    assert both["logging"]
    assert both["completions"]
    assert said_both["completion/complete"] == types.INVALID_PARAMS  # no such prompt
    assert not quiet["logging"]
    assert quiet["completions"]
    if era == "legacy":  # a 2026-07-28 client sets no level
        assert said_alone["logging/setLevel"] is None
        assert said_quiet["logging/setLevel"] == types.METHOD_NOT_FOUND


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_not_connected_yet_is_offered_once_it_is(era: str) -> None:
    """A client that connected before the server came up was told nothing of its
    completions; its requests are answered from when the server is there, and it hears that
    the prompts and resources changed (a handshake-era server says nothing of them)."""
    config = McpServerConfig(command="in-process", protocol="legacy")
    docs = McpToolkit("docs", config, target=CatalogServer().server)
    server = serve(Gateway([docs], []), expose_tools=True)
    ref = types.PromptReference(name="no-such-prompt")
    heard = Heard()
    with anyio.fail_after(30):
        async with (
            Client(server, mode=era, message_handler=heard.on_message) as early,
            listening(early, heard),
        ):
            assert early.server_capabilities.completions is None
            assert early.server_capabilities.prompts is None
            assert await code_of(early.complete(ref, ARGUMENT)) == types.METHOD_NOT_FOUND
            async with docs:
                await heard.until(kinds={"prompts", "resources"})
                _, features, _ = await offered(server, era)
                assert await code_of(early.complete(ref, ARGUMENT)) == types.INVALID_PARAMS
    assert features["completions"]
    assert features["prompts"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_is_offered_as_it_was_while_it_reconnects_then_as_it_is(era: str) -> None:
    """Restarted without completions or prompts: told from its new session on; while it is
    down, a client is told what it offered last (a restart mostly offers the same)."""
    crashable = CrashableTransport(CatalogServer().server)
    up = anyio.Event()
    up.set()

    @asynccontextmanager
    async def when_up() -> AsyncGenerator[Any]:
        await up.wait()
        async with crashable.connect() as streams:
            yield streams

    docs = McpToolkit("docs", McpServerConfig(command="in-process"), target=when_up)
    server = serve(Gateway([docs], []), expose_tools=True)
    with anyio.fail_after(30):
        async with docs:
            _, before, _ = await offered(server, era)
            up = anyio.Event()
            crashable.crash()
            await docs.wait_for_health(lambda health: health.state != "ready")
            async with Client(server, mode=era) as client:  # its requests would wait for it
                meanwhile = features_of(client.server_capabilities)
            crashable.server = ToyServer("docs").server  # tools only
            up.set()
            await docs.wait_for_health(lambda health: health.state == "ready")
            _, after, answers = await offered(server, era)
    assert before["completions"]
    assert before["prompts"]
    assert meanwhile == before
    assert not after["completions"]
    assert not after["prompts"]
    assert answers["completion/complete"] == types.METHOD_NOT_FOUND
