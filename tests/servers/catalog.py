"""An in-process MCP server with resources, templates, prompts and completions, for tests.

`CatalogServer` holds what a test gives it (and may change it while clients are connected,
announcing the change in either protocol era), and has tools and a prompt that ask the client
(sampling, elicitation, roots) the way the client's era allows: a request over the back-channel
on handshake-era connections, an input-required round on 2026-07-28 ones. `pipe` serves a
server over plain memory streams, which, like stdio, say nothing about which call a request
from the server belongs to.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client import Transport
from mcp.client._transport import TransportStreams
from mcp.server import Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.shared.uri_template import UriTemplate
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .inprocess import Context, text_result

__all__ = [
    "ASKS",
    "ELICITATION_ID",
    "CatalogServer",
    "pipe",
    "sampling_request",
    "url_elicitation",
]

ListKind = Literal["tools", "prompts", "resources"]

ASKS = ("sample", "elicit", "roots")
"""The tools that ask the client something during the call."""


def sampling_request(text: str = "hello") -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(text=text))],
            max_tokens=20,
        )
    )


ELICIT = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="Your name?",
        requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )
)
ROOTS = types.ListRootsRequest()
ELICITATION_ID = "eid-42"
"""The id of a handshake-era server's URL-mode elicitation (`asks_by_url`)."""
UNASKED_ID = "eid-never-asked"
"""An elicitation id `asks_by_url` says is complete without having asked it of this call."""


def url_elicitation(protocol_version: str | None) -> types.ElicitRequest:
    """A URL-mode elicitation as a server of `protocol_version` sends it: with its id in the
    handshake era (2025-11-25 requires one), without in 2026-07-28 (which removed it)."""
    modern = protocol_version in MODERN_PROTOCOL_VERSIONS
    return types.ElicitRequest(
        params=types.ElicitRequestURLParams(
            message="Sign in",
            url="https://example.com/sign-in",
            elicitation_id=None if modern else ELICITATION_ID,
        )
    )


_RESULT_TYPES: dict[str, type[Any]] = {
    "sampling/createMessage": types.CreateMessageResult,
    "elicitation/create": types.ElicitResult,
    "roots/list": types.ListRootsResult,
}


def describe(answer: types.InputResponse) -> str:
    """What the asking tools and prompt report of the client's answer."""
    match answer:
        case types.CreateMessageResult():
            text = answer.content.text if isinstance(answer.content, types.TextContent) else "?"
            return f"sampled {text!r} from {answer.model}"
        case types.CreateMessageResultWithTools():
            texts = [b.text for b in answer.content_as_list if isinstance(b, types.TextContent)]
            return f"sampled {''.join(texts)!r} from {answer.model}"
        case types.ElicitResult():
            return f"elicited {answer.action} {answer.content}"
        case types.ListRootsResult():
            return f"roots {[str(root.uri) for root in answer.roots]}"


class CatalogServer:
    """A low-level server whose catalog a test defines (see the module docstring)."""

    def __init__(self, name: str = "catalog", *, page_size: int | None = None) -> None:
        self.page_size = page_size
        self.resources: dict[str, tuple[types.Resource, str]] = {}
        self.blobs: dict[str, tuple[str, bytes]] = {}
        """Resources read as blobs (listed with the others): by URI, their type and bytes."""
        self.templates: dict[str, types.ResourceTemplate] = {}
        self.prompts: dict[str, types.Prompt] = {}
        self.completions: dict[str, list[str]] = {}
        self.tools: dict[str, types.Tool] = {
            tool: types.Tool(name=tool, input_schema={"type": "object"})
            for tool in (*ASKS, "change")
        }
        self.seen_meta: list[dict[str, Any]] = []
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server(
            name,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_completion=self._complete,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    def asks_by_url(self) -> None:
        """Add `elicit_url`: a tool that asks a URL-mode elicitation (`url_elicitation`); on a
        handshake-era session it then says, on the call, that `UNASKED_ID` and its own
        elicitation are complete (the page's flow ended out of band), in that order."""
        self.tools["elicit_url"] = types.Tool(name="elicit_url", input_schema={"type": "object"})

    def add_resource(self, uri: str, text: str) -> None:
        name = uri.rsplit("/", 1)[-1]
        self.resources[uri] = (types.Resource(uri=uri, name=name, mime_type="text/plain"), text)

    def add_blob(self, uri: str, mime_type: str, data: bytes) -> None:
        name = uri.rsplit("/", 1)[-1]
        self.resources[uri] = (types.Resource(uri=uri, name=name, mime_type=mime_type), "")
        self.blobs[uri] = (mime_type, data)

    def add_template(self, uri_template: str, name: str = "template") -> None:
        self.templates[uri_template] = types.ResourceTemplate(uri_template=uri_template, name=name)

    def add_prompt(self, name: str, *arguments: str, description: str = "") -> None:
        self.prompts[name] = types.Prompt(
            name=name,
            description=description or None,
            arguments=[types.PromptArgument(name=arg, required=True) for arg in arguments],
        )

    async def announce(self, ctx: Context, kind: ListKind) -> None:
        """Tell the client one of the lists changed, the way its protocol era expects."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            event = {
                "tools": ToolsListChanged(),
                "prompts": PromptsListChanged(),
                "resources": ResourcesListChanged(),
            }[kind]
            await self.bus.publish(event)
        elif kind == "tools":
            await ctx.session.send_tool_list_changed()
        elif kind == "prompts":
            await ctx.session.send_prompt_list_changed()
        else:
            await ctx.session.send_resource_list_changed()

    def _page(
        self, items: list[Any], params: types.PaginatedRequestParams | None
    ) -> tuple[list[Any], str | None]:
        if self.page_size is None:
            return items, None
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        return items[start:end], str(end) if end < len(items) else None

    async def _ask(
        self,
        ctx: Context,
        params: types.InputResponseRequestParams,
        request: types.InputRequest,
    ) -> types.InputResponse | types.InputRequiredResult | MCPError:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (params.input_responses or {}).get("q")
            if answer is not None:
                return answer
            return types.InputRequiredResult(input_requests={"q": request}, request_state="asked")
        try:
            return await ctx.session.send_request(
                request,
                _RESULT_TYPES[request.method],
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except MCPError as exc:
            return exc

    async def _list_tools(
        self, _ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.tools.values()))

    async def _call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        args = params.arguments or {}
        if params.name == "change":
            # Several changes at once, each announced: a relay should coalesce them.
            for kind in args.get("lists", ["tools", "tools"]):
                if kind == "tools":
                    name = f"added_{len(self.tools)}"
                    self.tools[name] = types.Tool(name=name, input_schema={"type": "object"})
                elif kind == "prompts":
                    self.add_prompt(f"added_{len(self.prompts)}")
                else:
                    self.add_resource(f"memo://added/{len(self.resources)}", "added")
                await self.announce(ctx, kind)
            return text_result("changed")
        request = {
            "sample": sampling_request(str(args.get("text", "hello"))),
            "elicit": ELICIT,
            "elicit_url": url_elicitation(ctx.protocol_version),
        }.get(params.name, ROOTS)
        answer = await self._ask(ctx, params, request)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        if params.name == "elicit_url" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            for done in (UNASKED_ID, ELICITATION_ID):
                await ctx.session.send_elicit_complete(done, related_request_id=ctx.request_id)
        if isinstance(answer, MCPError):
            return types.CallToolResult(
                content=[types.TextContent(text=f"the client refused: {answer.error.message}")],
                is_error=True,
            )
        return text_result(describe(answer))

    async def _list_resources(
        self, _ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        page, cursor = self._page([r for r, _ in self.resources.values()], params)
        return types.ListResourcesResult(resources=page, next_cursor=cursor)

    async def _list_templates(
        self, _ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        page, cursor = self._page(list(self.templates.values()), params)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def _read(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        self.seen_meta.append(dict(params.meta or {}))
        found = self.resources.get(params.uri)
        if params.uri in self.blobs:
            mime_type, data = self.blobs[params.uri]
            blob = base64.b64encode(data).decode()
            contents = types.BlobResourceContents(uri=params.uri, mime_type=mime_type, blob=blob)
            return types.ReadResourceResult(contents=[contents])
        if found is not None:
            text = found[1]
        elif any(UriTemplate.parse(t).match(params.uri) for t in self.templates):
            text = f"{self.server.name} made {params.uri}"
        else:
            raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=text, mime_type="text/plain")]
        )

    async def _list_prompts(
        self, _ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        page, cursor = self._page(list(self.prompts.values()), params)
        return types.ListPromptsResult(prompts=page, next_cursor=cursor)

    async def _get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        if params.name not in self.prompts:
            raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name}")
        if params.name == "ask":
            answer = await self._ask(ctx, params, sampling_request("for a prompt"))
            if isinstance(answer, types.InputRequiredResult):
                return answer
            text = answer.error.message if isinstance(answer, MCPError) else describe(answer)
        else:
            text = f"{self.server.name}/{params.name} {sorted((params.arguments or {}).items())}"
        return types.GetPromptResult(
            description=f"prompt {params.name}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
        )

    async def _complete(
        self, _ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        key = ref.name if isinstance(ref, types.PromptReference) else ref.uri
        values = [
            value
            for value in self.completions.get(f"{key}:{params.argument.name}", [])
            if value.startswith(params.argument.value)
        ]
        return types.CompleteResult(completion=types.Completion(values=values))


@asynccontextmanager
async def _pipe(server: Server[Any]) -> AsyncGenerator[TransportStreams]:
    server_send, client_receive = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    client_send, server_receive = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    async with (
        server_send,
        client_receive,
        client_send,
        server_receive,
        anyio.create_task_group() as tg,
    ):
        options = server.create_initialization_options()
        tg.start_soon(server.run, server_receive, server_send, options)
        yield client_receive, client_send  # pyright: ignore[reportReturnType]
        tg.cancel_scope.cancel()


def pipe(server: Server[Any]) -> Transport:
    """`server` over plain memory streams, like a stdio pipe (a fresh one per call)."""
    return _pipe(server)
