"""Local Python functions as tool nodes.

`@function_tool` reads a typed function's signature into a pydantic model: that gives the JSON
schema the model sees and validates the arguments it sends. A node holding one function is a
plain tool (called with its arguments); a node holding several is a toolkit (routed by name).

A tool with a `timeout` that gives no result in time raises `ToolTimeout`, as an MCP server's
tool does: a coroutine function is cancelled; a plain (blocking) function cannot be stopped, so
its call ends and its worker thread is left to finish alone; a non-blocking plain function runs
on the event loop, where nothing can interrupt it (no timeout applies).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast, get_type_hints, overload

import anyio.to_thread
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .base import CallContext, Tool, error_result
from .errors import NoSuchTool, ToolTimeout

__all__ = ["FunctionTool", "FunctionToolkit", "function_tool"]


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A Python function with the schema of its arguments."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    blocking: bool = True
    """Run a plain function in a worker thread; False for quick pure functions (saves ~150 us)."""
    timeout: float | None = None
    """Seconds a call may take (None: no limit); then it fails with `ToolTimeout`."""

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return schema

    async def __call__(
        self, arguments: Mapping[str, Any], *, node: str | None = None
    ) -> CallToolResult:
        """Call the function with `arguments` (of node `node`, by default the tool's name).
        Raises `ToolTimeout` past `timeout`."""
        try:
            parsed = self.arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            return error_result(f"invalid arguments for {self.name}: {_brief(exc)}")
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.timeout is None:
            return await self._call(kwargs)
        with anyio.move_on_after(self.timeout) as scope:
            return await self._call(kwargs)
        assert scope.cancelled_caught  # every other way out returned or raised
        threaded = self.blocking and not inspect.iscoroutinefunction(self.function)
        ending = (
            "its thread could not be stopped and was left to finish alone"
            if threaded
            else "the call was cancelled"
        )
        raise ToolTimeout(
            f"local tool {self.name!r} timed out (no result within {self.timeout:g} s); {ending}",
            node=node or self.name,
            tool=self.name,
            seconds=self.timeout,
        )

    async def _call(self, kwargs: dict[str, Any]) -> CallToolResult:
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await cast(Callable[..., Awaitable[Any]], self.function)(**kwargs)
            elif self.blocking:
                # A plain function may block: keep it off the event loop. It cannot be
                # stopped; cancelled, its call ends at once and the thread runs out alone.
                value = await anyio.to_thread.run_sync(
                    partial(self.function, **kwargs), abandon_on_cancel=True
                )
            else:
                value = self.function(**kwargs)
        except Exception as exc:
            return error_result(f"{type(exc).__name__}: {exc}")
        return _result(value)


@overload
def function_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
    timeout: float | None = None,
) -> FunctionTool: ...


@overload
def function_tool(
    function: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
    timeout: float | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a `FunctionTool` of a typed function; usable as `@function_tool` or with options."""

    def wrap(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            name=name or fn.__name__,
            description=description or inspect.cleandoc(fn.__doc__ or ""),
            function=fn,
            arguments=_arguments_model(fn),
            blocking=blocking,
            timeout=timeout,
        )

    return wrap(function) if function is not None else wrap


class FunctionToolkit:
    """A node of local function tools (a `Toolkit`)."""

    def __init__(self, name: str, tools: Sequence[FunctionTool]) -> None:
        if not tools:
            raise ValueError(f"node {name!r} has no tools")
        self._name = name
        self._tools = {tool.name: tool for tool in tools}
        if len(self._tools) != len(tools):
            raise ValueError(f"node {name!r} has two tools with the same name")
        many = len(tools) > 1
        self._listed = tuple(  # a tuple: unchanged for as long as the node lives
            Tool(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema,
                source_node=name,
                is_from_toolkit=many,
            )
            for t in tools
        )

    @property
    def name(self) -> str:
        return self._name

    async def list_tools(self) -> Sequence[Tool]:
        return self._listed

    def tools_at_hand(self) -> Sequence[Tool]:
        return self._listed

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        context: CallContext | None = None,
    ) -> CallToolResult:
        tool = self._tools.get(name)
        if tool is None:
            raise NoSuchTool(f"node {self._name!r} has no tool {name!r}")
        return await tool(arguments, node=self._name)


def _arguments_model(fn: Callable[..., Any]) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{fn.__name__}: *args and **kwargs cannot become tool arguments")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    config = ConfigDict(extra="forbid")
    return create_model(f"{fn.__name__}_arguments", __config__=config, **fields)


def _result(value: Any) -> CallToolResult:
    if isinstance(value, CallToolResult):
        return value
    structured = cast(dict[str, Any], value) if isinstance(value, dict) else {"response": value}
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def _brief(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    )
