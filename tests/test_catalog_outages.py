"""A node that cannot list is left out of the served lists, warned of once per outage (per
node and kind), not at every listing; it is said when it lists again, and what its listing
clashes with is not warned of again."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from gateway.server.served.proxied_prompts import ProxiedPrompts
from gateway.server.served.proxied_resources import ProxiedResources
from toolkits import CallContext, ServerUnavailable
from toolkits.mcp.config import PrefixPolicy

pytestmark = pytest.mark.anyio

NO_CONTEXT = cast(ServerRequestContext[Any, Any], None)  # the listings do not read it


class Node:
    """A node whose catalog lists two resources (one every node lists) and one prompt, or
    fails as a server that is down does (`ServerUnavailable`) while `down`."""

    prefix: PrefixPolicy = "always"
    instructions: str | None = None
    capabilities: types.ServerCapabilities | None = None

    def __init__(self, name: str) -> None:
        self.name = name
        self.down = False

    @property
    def catalog(self) -> Node:
        return self

    def _check(self) -> None:
        if self.down:
            raise ServerUnavailable(f"MCP server {self.name!r} is unavailable", node=self.name)

    async def list_resources(self) -> list[types.Resource]:
        self._check()
        shared = types.Resource(uri="shared://readme", name="readme")
        return [types.Resource(uri=f"{self.name}://doc", name="doc"), shared]

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        self._check()
        return []

    async def list_prompts(self) -> list[types.Prompt]:
        self._check()
        return [types.Prompt(name="greet")]

    async def read_resource(
        self, uri: str, *, context: CallContext | None = None
    ) -> types.ReadResourceResult:
        raise NotImplementedError

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        context: CallContext | None = None,
    ) -> types.GetPromptResult:
        raise NotImplementedError

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context_arguments: Mapping[str, str] | None = None,
    ) -> types.CompleteResult:
        raise NotImplementedError


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "gateway.catalog"]


async def test_a_node_down_is_warned_of_once_per_kind_and_said_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    up, evh = Node("up"), Node("evh")
    resources, prompts = ProxiedResources([up, evh]), ProxiedPrompts([up, evh])

    async def list_both() -> tuple[list[str], list[str]]:
        listed = await resources.list_resources(NO_CONTEXT, None)
        named = await prompts.list_prompts(NO_CONTEXT, None)
        return [r.uri for r in listed.resources], [p.name for p in named.prompts]

    caplog.set_level(logging.INFO, logger="gateway.catalog")
    served = (["up://doc", "shared://readme", "evh://doc"], ["up__greet", "evh__greet"])
    assert await list_both() == served
    clash = "resource 'shared://readme' is listed by nodes 'up' and 'evh'; serving 'up''s"
    assert said(caplog) == [(logging.WARNING, clash)]
    caplog.clear()
    evh.down = True
    for _ in range(20):  # a client listing again and again while the server is down
        assert await list_both() == (["up://doc", "shared://readme"], ["up__greet"])
    assert said(caplog) == [
        (
            logging.WARNING,
            "node 'evh': cannot list its resources (left out until it can; said once): "
            "MCP server 'evh' is unavailable",
        ),
        (
            logging.WARNING,
            "node 'evh': cannot list its prompts (left out until it can; said once): "
            "MCP server 'evh' is unavailable",
        ),
    ]
    caplog.clear()
    evh.down = False
    for _ in range(3):
        assert await list_both() == served
    assert said(caplog) == [  # the clash, the same as before the outage, is not said again
        (logging.INFO, "node 'evh': lists its resources again"),
        (logging.INFO, "node 'evh': lists its prompts again"),
    ]
    caplog.clear()
    evh.down = True  # a new outage is warned of again
    await list_both()
    assert [level for level, _ in said(caplog)] == [logging.WARNING, logging.WARNING]
