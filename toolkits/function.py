"""Local Python functions as tool nodes.

`@function_tool` reads a typed function's signature into a pydantic model: that gives the JSON
schema the model sees and validates the arguments it sends. Any parameter name works (`_x`,
`schema`, `model_config`): the model's fields carry the real names as aliases. A
`functools.partial` offers the parameters it leaves open (those it binds are not the model's
to choose), a callable object its `__call__`'s. A node holding one function is a plain tool
(called with its arguments); a node holding several is a toolkit (routed by name). A parameter
annotated `CallInfo` (or `CallInfo | None`) is no argument: the call's `CallInfo` (from its
`CallContext`, else an empty one) fills it.

What a function returns becomes JSON once, by pydantic's rules (`to_jsonable_python`: models
and dataclasses as objects, datetimes ISO 8601, `Decimal` and `UUID` as strings, tuples and
sets as lists, enums as their values, dict keys as strings, NaN and infinities as null, bytes
inside a value as URL-safe base64); the result's text and its structured content are that one
value (a dict as itself, anything else as `{"response": value}`; a string's text is the string).
Bytes returned alone are an MCP image when they are a PNG, JPEG, GIF or WebP, else
`{"base64url": ...}`. An MCP content block (or a list of them) is the result's content, a
`CallToolResult` the result itself. A value that cannot be made JSON is the tool's error
result, naming its type.

A node's results are read by the model up to its `max_output` characters (`HasOutputCap`), as
an MCP server's are.

A tool with a `timeout` that gives no result in time raises `ToolTimeout`, as an MCP server's
tool does: a coroutine function is cancelled; a plain (blocking) function cannot be stopped, so
its call ends and its worker thread is left to finish alone (`running_threads` names such
threads: a process leaving need not wait for them); a non-blocking plain function runs on the
event loop, where nothing can interrupt it (no timeout applies).
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import UnionType
from typing import Annotated, Any, Union, cast, get_args, get_origin, get_type_hints, overload

import anyio.to_thread
from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind
from pydantic_core import to_jsonable_python

from .base import CallContext, CallInfo, Tool, error_result, validation_brief
from .errors import NoSuchTool, ToolTimeout
from .observation import DEFAULT_MAX_CHARS

__all__ = ["FunctionTool", "FunctionToolkit", "function_tool", "running_threads"]

logger = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every provider accepts (as mcp.naming)
_CONTENT_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


_running: set[threading.Thread] = set()
"""The worker threads running a plain function's call now."""


def running_threads() -> frozenset[threading.Thread]:
    """The threads running a plain (blocking) function's call now. Once the event loop the
    calls were made on has ended, each runs a call given up on (cancelled, timed out) that is
    left to finish alone."""
    return frozenset(_running)


def _in_worker(call: Callable[[], Any]) -> Any:
    """`call()`, its thread among `running_threads` meanwhile."""
    thread = threading.current_thread()
    _running.add(thread)
    try:
        return call()
    finally:
        _running.discard(thread)


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
    injected: tuple[str, ...] = ()
    """Parameters annotated `CallInfo`: not arguments, each given the call's `CallInfo`."""
    _is_async: bool = field(init=False, repr=False, compare=False)
    _positional: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Parameters passed by position (positional-only ones), in order."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_is_async", _is_async(self.function))
        object.__setattr__(self, "_positional", _positional_only(self.function))

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema(schema_generator=_ToolSchema)
        schema.pop("title", None)
        return schema

    async def __call__(
        self, arguments: Mapping[str, Any], *, node: str | None = None, info: CallInfo | None = None
    ) -> CallToolResult:
        """Call the function with `arguments` (of node `node`, by default the tool's name),
        and `info` (else an empty `CallInfo`) for its `injected` parameters. Raises
        `ToolTimeout` past `timeout`."""
        try:
            parsed = self.arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            return error_result(
                f"invalid arguments for {self.name}: {validation_brief(exc, 'arguments')}"
            )
        # Fields may be stand-ins for names pydantic keeps for itself: the alias is the real one.
        kwargs = {
            declared.alias or name: getattr(parsed, name)
            for name, declared in type(parsed).model_fields.items()
        }
        for name in self.injected:
            kwargs[name] = info or CallInfo()
        args = [kwargs.pop(name) for name in self._positional if name in kwargs]
        if self.timeout is None:
            return await self._call(args, kwargs)
        with anyio.move_on_after(self.timeout) as scope:
            return await self._call(args, kwargs)
        assert scope.cancelled_caught  # every other way out returned or raised
        threaded = self.blocking and not self._is_async
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

    async def _call(self, args: list[Any], kwargs: dict[str, Any]) -> CallToolResult:
        try:
            if self._is_async:
                value = await cast(Callable[..., Awaitable[Any]], self.function)(*args, **kwargs)
            elif self.blocking:
                # A plain function may block: keep it off the event loop. It cannot be
                # stopped; cancelled, its call ends at once and the thread runs out alone.
                call = partial(self.function, *args, **kwargs)
                value = await anyio.to_thread.run_sync(_in_worker, call, abandon_on_cancel=True)
            else:
                value = self.function(*args, **kwargs)
            if inspect.isawaitable(value):  # a plain function (a decorator's) that returns one
                value = await value
        except Exception as exc:
            return error_result(f"{type(exc).__name__}: {exc}")
        except SystemExit as exc:
            # A tool built on argparse or click exits on bad arguments: that is the tool's
            # failure for the model to read, not the process's end.
            return error_result(f"the tool exited (sys.exit({exc.code!r}))")
        return _result(value, self.name)


class _ToolSchema(GenerateJsonSchema):
    """A default that is no JSON (a sentinel such as `object()`) is left out of the schema
    without a warning: the parameter stays optional, which is all the model needs to know."""

    def emit_warning(self, kind: JsonSchemaWarningKind, detail: str) -> None:
        if kind != "non-serializable-default":
            super().emit_warning(kind, detail)


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
    """Make a `FunctionTool` of a typed function; usable as `@function_tool` or with options.

    Also takes a `functools.partial` or a callable object. The tool is named `name`, else
    after the function (a partial's function, a callable object's class); a name models
    refuse (a lambda's `<lambda>`; anything but letters, digits, `_` and `-`, 1-64) is a
    `ValueError` asking for `name=`. A callable whose parameters cannot become arguments
    (`*args`, `**kwargs`, type hints that do not resolve) is a `TypeError`."""

    def wrap(fn: Callable[..., Any]) -> FunctionTool:
        tool_name = _tool_name(fn, name)
        arguments, injected = _arguments_model(fn, tool_name)
        return FunctionTool(
            name=tool_name,
            description=description or _description(fn),
            function=fn,
            arguments=arguments,
            blocking=blocking,
            timeout=timeout,
            injected=injected,
        )

    return wrap(function) if function is not None else wrap


class FunctionToolkit:
    """A node of local function tools (a `Toolkit`)."""

    def __init__(
        self,
        name: str,
        tools: Sequence[FunctionTool | Callable[..., Any]],
        *,
        max_output: int = DEFAULT_MAX_CHARS,
    ) -> None:
        """`tools`: `FunctionTool`s, or typed functions made tools with `function_tool`'s
        defaults. `max_output`: characters of a result the model reads (the result itself
        is kept)."""
        tools = [t if isinstance(t, FunctionTool) else function_tool(t) for t in tools]
        if not tools:
            raise ValueError(f"node {name!r} has no tools")
        if max_output <= 0:
            raise ValueError(f"node {name!r}: max_output must be positive, not {max_output}")
        self._name = name
        self._max_output = max_output
        self._tools = {tool.name: tool for tool in tools}
        if len(self._tools) != len(tools):
            raise ValueError(f"node {name!r} has two tools with the same name")
        many = len(tools) > 1
        for tool in tools:
            _warn_if_stripped(tool)
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

    @property
    def max_output(self) -> int:
        """The observation cap for this node's results (`HasOutputCap`)."""
        return self._max_output

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
        return await tool(arguments, node=self._name, info=context.info if context else None)


def _innermost(fn: Callable[..., Any]) -> tuple[Callable[..., Any], frozenset[str]]:
    """The callable a chain of partials wraps, and the keywords the partials bind."""
    bound: set[str] = set()
    while isinstance(fn, partial):
        wrapped = cast(partial[Any], fn)
        bound |= wrapped.keywords.keys()
        fn = wrapped.func
    return fn, frozenset(bound)


def _is_routine(fn: object) -> bool:
    return inspect.isroutine(fn) or isinstance(fn, type)


def _is_async(fn: Callable[..., Any]) -> bool:
    target, _ = _innermost(fn)
    if _is_routine(target):
        return inspect.iscoroutinefunction(target)
    return inspect.iscoroutinefunction(type(target).__call__)


def _positional_only(fn: Callable[..., Any]) -> tuple[str, ...]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature: pass by keyword
        return ()
    return tuple(p.name for p in parameters if p.kind is p.POSITIONAL_ONLY)


def _tool_name(fn: Callable[..., Any], name: str | None) -> str:
    target, _ = _innermost(fn)
    chosen = name or getattr(target, "__name__", None) or type(target).__name__
    if not _TOOL_NAME.match(chosen):
        given = "" if name else " (taken from the function; pass name=)"
        raise ValueError(
            f"{chosen!r} is not a valid tool name{given}: "
            "tool names use letters, digits, '_' and '-' (1-64 characters)"
        )
    return chosen


_warned_undescribed: set[str] = set()


def _warn_if_stripped(tool: FunctionTool) -> None:
    """Under `python -OO` a tool described by its docstring reaches models with no description:
    said once for each such tool (a node made again is not said again)."""
    if tool.description or sys.flags.optimize < 2 or tool.name in _warned_undescribed:
        return
    _warned_undescribed.add(tool.name)
    logger.warning(
        "tool %r has no description: Python runs with -OO (or PYTHONOPTIMIZE=2), which strips "
        "the docstrings descriptions come from; give it one (description=, or `description` "
        "in its config), or run without -OO",
        tool.name,
    )


def _description(fn: Callable[..., Any]) -> str:
    target, _ = _innermost(fn)
    if _is_routine(target):
        doc = target.__doc__
    else:  # a callable object: its class says what it is, else its __call__
        doc = type(target).__doc__ or type(target).__call__.__doc__
    return inspect.cleandoc(doc or "")


def _arguments_model(
    fn: Callable[..., Any], tool_name: str
) -> tuple[type[BaseModel], tuple[str, ...]]:
    """The model of `fn`'s arguments, and its parameters the caller fills (`CallInfo`)."""
    target, bound = _innermost(fn)
    annotated: Any = target if _is_routine(target) else type(target).__call__
    if isinstance(annotated, type):
        annotated = annotated.__init__
    try:
        hints = get_type_hints(annotated, include_extras=True)
        parameters = inspect.signature(fn).parameters.values()
    except Exception as exc:  # a string annotation is its module's code, run now: any error
        raise TypeError(f"{tool_name}: cannot read its parameters' types: {exc}") from exc
    fields: dict[str, Any] = {}
    injected: list[str] = []
    for param in parameters:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{tool_name}: *args and **kwargs cannot become tool arguments")
        if param.name in bound:  # a partial fixed it: not the model's to choose
            continue
        annotation = hints.get(param.name, Any)
        if _is_call_info(annotation):  # filled per call, not the model's to give
            injected.append(param.name)
            continue
        default = ... if param.default is param.empty else param.default
        # Fields named apart from the parameters, which pydantic might refuse (`model_dump`),
        # keep private (`_x`, `model_config`) or warn about (`schema`); the alias is the name
        # the model sees, validation takes and errors report.
        fields[f"p{len(fields)}"] = (annotation, Field(default, alias=param.name))
    config = ConfigDict(extra="forbid")
    model = create_model(f"{tool_name}_arguments", __config__=config, **fields)
    return model, tuple(injected)


def _is_call_info(annotation: Any) -> bool:
    """`CallInfo`, `CallInfo | None` (or `Optional`, `Annotated` around either)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is CallInfo:
        return True
    if get_origin(annotation) in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return members == [CallInfo]
    return False


def _result(value: Any, tool_name: str) -> CallToolResult:
    """What the function returned, as a tool result (see the module's docstring)."""
    if isinstance(value, CallToolResult):
        return value
    blocks = _content_blocks(value)
    if blocks is not None:
        return CallToolResult(content=blocks)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(cast("bytes | bytearray | memoryview[int]", value))
        mime_type = _image_type(data)
        if mime_type is not None:
            encoded = base64.b64encode(data).decode("ascii")
            return CallToolResult(content=[ImageContent(data=encoded, mime_type=mime_type)])
        value = {"base64url": base64.urlsafe_b64encode(data).decode("ascii")}
    try:
        # One JSON value for both views, so the text and the structured content agree; its
        # text is written here too, as an int past Python's 4,300 digits is a value only
        # until then.
        data_value: Any = to_jsonable_python(value, bytes_mode="base64", inf_nan_mode="null")
        text = (
            data_value
            if isinstance(data_value, str)
            else json.dumps(data_value, ensure_ascii=False, allow_nan=False)
        )
    except (ValueError, TypeError, RecursionError) as exc:
        message = (
            f"local tool {tool_name!r} returned a {_type_name(value)}, "
            f"which cannot be made JSON ({exc}); a tool returns JSON-like data, a pydantic "
            "model or dataclass, bytes, MCP content, or a CallToolResult"
        )
        logger.warning("%s", message)
        return error_result(message)
    structured = (
        cast(dict[str, Any], data_value)
        if isinstance(data_value, dict)
        else {"response": data_value}
    )
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def _content_blocks(value: object) -> list[ContentBlock] | None:
    """`value` as MCP content: one content block, or a non-empty list of nothing else."""
    if isinstance(value, _CONTENT_BLOCKS):
        return [value]
    if not isinstance(value, list) or not value:
        return None
    items = cast(list[object], value)
    if all(isinstance(item, _CONTENT_BLOCKS) for item in items):
        return cast(list[ContentBlock], items)
    return None


def _type_name(value: object) -> str:
    kind = type(value)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def _image_type(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _IMAGE_SIGNATURES if data.startswith(magic)), None)
