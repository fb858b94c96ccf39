"""`tools` lists what the config provides; `call` calls one tool (or agent) through the gateway."""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import anyio
from mcp_types import CallToolResult
from pydantic import JsonValue

from agent import AgentError, AgentItem
from agent.model_json import NotModelJson, read_model_json
from agent.models.schema import unexpressed
from agent.names import did_you_mean, listed_names
from toolkits import (
    ConnectionLost,
    HasHealth,
    NodeHealth,
    Tool,
    ToolkitError,
    error_result,
    result_text,
)
from toolkits.errors import RECONNECTING
from toolkits.printable import encodes_all, printable

from ..assembly import open_gateway
from ..config import Config
from ..console import RunConsole, open_terminal_console
from ..engine import AgentSpec, Gateway
from ..errors import GatewayError, UnknownTool
from ..run_state import RunState
from ..tool_limits import max_tools, too_many_tools, tools_offered
from ..trace import new_id
from .ask_here import TerminalApprover, call_unasked, can_ask
from .common import (
    Commands,
    add_context_option,
    add_model_options,
    add_strict_option,
    add_trace_options,
    check_runnable,
    check_servers,
    check_session_id,
    config_of,
    name_width,
    plural,
    read_context,
    trace_hooks,
    with_steps,
)
from .exits import BAD_INPUT, FAILED, OK, RunFailed, exit_code, report
from .output import result_json, result_stdout
from .results import print_result, run_error_json
from .signals import stopping_shown
from .stdin_text import stdin_lines
from .stored import interrupted_at_start, terminal_console

__all__ = ["register"]

log = logging.getLogger(__name__)


def register(commands: Commands) -> None:
    tools = commands.add("tools", _tools)
    tools.add_argument("--json", action="store_true", help="print one JSON object")
    call = commands.add("call", _call)
    call.add_argument("tool", help="a tool's name as `tools` lists it, or an agent's")
    call.add_argument(
        "--args", default="{}", help='the arguments as a JSON object (an agent: {"prompt": ...})'
    )
    call.add_argument(
        "--json", action="store_true", help="print the whole MCP result (or run) as JSON"
    )
    add_context_option(call, ", for an agent called (its `context` argument)")
    add_model_options(call, agent=False, settings=False)  # an agent's model, as `run --model`
    add_strict_option(call)
    add_trace_options(call)


def status_console() -> AbstractAsyncContextManager[RunConsole]:
    """The status line alone, on stderr when it is a terminal: stdout is the command's."""
    return stopping_shown(open_terminal_console(io.StringIO(), sys.stderr))


async def _tools(args: argparse.Namespace) -> int:
    config = config_of(args)
    if not (config.mcp_servers or config.tools or config.agents):
        where = str(config.source) if config.source is not None else "the config"
        print(f"no servers, tools or agents configured in {where}", file=sys.stderr)
        return OK
    async with (
        status_console() as console,
        open_gateway(config, on_waiting=console.waiting_for) as gateway,
    ):
        tools = sorted((await gateway.list_tools()).values(), key=lambda t: (t.source_node, t.name))
        offered = {
            name: await tools_offered(gateway, spec) for name, spec in gateway.agents.items()
        }
        for name, spec in gateway.agents.items():
            if (said := too_many_tools(name, spec.model, offered[name])) is not None:
                log.warning("%s", said)
        gated = {name: await _gated(gateway, spec) for name, spec in gateway.agents.items()}
        # Read while the servers run: once closed, every one of them is "stopped". Said
        # before they stop, too: a stdio server may take its 2 s grace to exit.
        health = _health(gateway)
        _print_listing(gateway, tools, health, _Agents(offered, gated), as_json=args.json)
    return FAILED if any(server.state != "ready" for server in health) else OK


async def _call(args: argparse.Namespace) -> int:
    try:
        # As a model's arguments are read: a lone surrogate (`"\ud800"`) as U+FFFD, which a
        # Python MCP server's reader would have dropped the call for (the call then waited
        # out its timeout); `NaN` and nesting past 100 levels refused.
        arguments: Any = read_model_json(args.args)
    except NotModelJson as exc:
        raise GatewayError(f"--args: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GatewayError(f"--args is not valid JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise GatewayError("--args must be a JSON object")
    arguments = cast(dict[str, Any], arguments)
    config = config_of(args)
    if args.context is not None:
        arguments = _with_context(args.tool, arguments, read_context(args.context), config)
    # A local tool needs no MCP server: the call does not wait for theirs to start.
    local = args.tool in config.tools and not args.strict
    # An agent's `--json` object, as `run`'s, also when interrupted before the servers are up.
    starting = (
        interrupted_at_start(
            args,
            None,
            RunState(run_id=new_id(), agent=args.tool, items=[]),
            status="failed",
            run_id=None,
        )
        if args.tool in config.agents
        else nullcontext(_nothing)
    )
    async with (
        starting as began,
        # As `run`'s: on a terminal, the calls in flight on stderr, an agent's answer streamed.
        terminal_console(args, asks=args.tool in config.agents and can_ask()) as console,
        open_gateway(
            config,
            model=args.model,
            hooks=trace_hooks(args, console),
            start_wait=0 if local else None,
            wait_for=None if args.strict else _servers_used(config, args.tool),
            on_waiting=console.waiting_for,
        ) as gateway,
    ):
        began()
        check_servers(gateway, strict=args.strict)
        if args.tool in gateway.agents:
            return await _call_agent(gateway, args.tool, arguments, console, as_json=args.json)
        tools = await gateway.list_tools()
        tool = tools.get(args.tool)
        try:
            if tool is None:
                _no_such_tool(args.tool, tools, gateway.agents, _health(gateway))
            result = await gateway.call_tool(tool, arguments)
        except (ToolkitError, GatewayError) as exc:
            exc = _once(exc)
            if args.json and exit_code(exc) != BAD_INPUT:  # the error result `serve` answers
                print(_mcp_json(error_result(str(exc))), flush=True, file=result_stdout())
            # Said before the servers stop, as a result is: a server that no longer reads its
            # stdin (hung) takes its 2 s grace to exit, which made a 5 s timeout 7 s.
            report(exc)
            sys.stderr.flush()
            return exit_code(exc)
        # Said before the servers stop: a stdio server may take its 2 s grace to exit.
        if args.json:
            print(_mcp_json(result), flush=True, file=result_stdout())
        elif result.is_error:  # an error, said where errors go: stdout is for results
            print(printable(f"error: {result_text(result)}"), file=sys.stderr, flush=True)
        else:  # as `run`'s answer: exactly the tool's when piped, its escapes text on a terminal
            out = result_stdout()
            text = result_text(result)
            print(printable(text) if out.isatty() else text, flush=True, file=out)
    return FAILED if result.is_error else OK


def _once(exc: ToolkitError | GatewayError) -> ToolkitError | GatewayError:
    """`exc` as a one-shot command says it: it exits, so no "reconnecting" to the server gone."""
    if not isinstance(exc, ConnectionLost) or not str(exc).endswith(RECONNECTING):
        return exc
    said = type(exc)(str(exc).removesuffix(RECONNECTING), node=exc.node)
    for note in getattr(exc, "__notes__", ()):
        said.add_note(note)
    return said


def _nothing() -> None:
    """A tool's call says nothing of being interrupted at its start (no run to tell of)."""


async def _call_agent(
    gateway: Gateway,
    name: str,
    arguments: Mapping[str, Any],
    console: RunConsole,
    *,
    as_json: bool,
) -> int:
    prompt = arguments.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise GatewayError(f'agent {name!r} takes --args \'{{"prompt": "..."}}\'')
    check_runnable(gateway, name)
    if as_json:
        with_steps(gateway, name)
    session = arguments.get("session_id")
    if session is not None and not isinstance(session, str):
        raise GatewayError(f"agent {name!r}: `session_id` must be a string")
    context = arguments.get("context")
    if context is not None and not isinstance(context, dict):
        raise GatewayError(f"agent {name!r}: `context` must be a JSON object")
    item = AgentItem(
        prompt=prompt,
        # Bad input (exit 2), as `run --session`'s: no run would cure it.
        session_id=session if session is None else check_session_id(session),
        context=cast(dict[str, JsonValue] | None, context),
    )
    state = RunState(run_id=new_id(), agent=name, items=[item])
    latest: list[RunState] = []

    async def keep(saved: RunState) -> None:  # what a failed run did so far, for --json
        latest[:] = [saved]

    # Not stored (`call` has no run store): `--json` says so with `run_id` null, as `run
    # --no-store`; its id names the run in traces only. A call that needs approval is asked
    # about on the terminal, as `chat` asks.
    try:
        async with stdin_lines() as lines:
            approver = TerminalApprover(console, lines) if can_ask() else call_unasked(name)
            checkpoint = keep if as_json else None
            result = await gateway.resume(
                state, checkpoint=checkpoint, stream=True, approver=approver
            )
    except (AgentError, ToolkitError, GatewayError) as exc:
        if as_json and exit_code(exc) != BAD_INPUT:  # one JSON object, as `run --json`
            shown = run_error_json(None, name, exc, latest[-1] if latest else state)
            print(shown, file=result_stdout())
        raise
    except anyio.get_cancelled_exc_class():  # Ctrl-C, a signal: the object `--json` promises
        if as_json:
            interrupted = GatewayError("interrupted: the run was not stored (call stores none)")
            shown = run_error_json(None, name, interrupted, latest[-1] if latest else state)
            print(shown, file=result_stdout(), flush=True)
        raise
    return print_result(result, as_json=as_json, stored=False, shown=console.streamed)


def _with_context(
    name: str, arguments: dict[str, Any], context: dict[str, JsonValue], config: Config
) -> dict[str, Any]:
    """An agent's `--args` with `--context` as its `context`; `GatewayError` (bad input) for a
    tool (its arguments are all in `--args`) or a context given twice."""
    if name not in config.agents:
        raise GatewayError(
            f"--context is the run context of an agent called; {name!r} is no agent of the "
            "config: give a tool's arguments in --args"
        )
    if "context" in arguments:
        raise GatewayError("give the context once: in --args or with --context, not both")
    return {**arguments, "context": context}


def _mcp_json(result: CallToolResult) -> str:
    """`result` as an MCP `CallToolResult`: the fields that were set (a server's result as it
    sent it, with no defaults of the SDK's such as `resultType`), and every content block's
    `type`, which MCP requires and a block made here (a local tool's, an error result's)
    leaves to its default."""
    typed = [block.model_copy(update={"type": block.type}) for block in result.content]
    shown = result.model_copy(update={"content": typed})
    ascii_only = not encodes_all(result_stdout())  # `\\u` escapes: JSON in any encoding
    return shown.model_dump_json(by_alias=True, exclude_unset=True, ensure_ascii=ascii_only)


def _servers_used(config: Config, name: str) -> set[str] | None:
    """The servers a call of `name` needs started, when its name tells (an agent's, or a tool
    named `SERVER__TOOL`); None: every server, one of them may offer it."""
    if name in config.agents:
        return config.nodes_of(name)
    server, separator, _ = name.partition("__")
    if separator and server in config.mcp_servers:
        return {server}
    return None


def _no_such_tool(
    name: str, tools: Mapping[str, Tool], agents: Iterable[str], health: list[NodeHealth]
) -> NoReturn:
    """Raise the most useful error for a tool name that is not offered: its server is down
    (exit 1), or the name is close to one that is (exit 2)."""
    for server in health:
        if server.state != "ready" and name.startswith(f"{server.node}__"):
            raise RunFailed(f"tool {name!r}: its server is down: {server}")
    same = [t.name for t in tools.values() if name in (t.original_name, t.name.split("__")[-1])]
    if same:
        raise UnknownTool(f"no tool named {name!r}; did you mean {' or '.join(map(repr, same))}?")
    # A server still making its first attempt is not down: `call` did not wait for it (the
    # name said which server it needs), and dozens of those said "connecting" hid the few
    # that failed.
    starting = [s for s in health if s.state == "connecting" and not s.retrying]
    down = [str(s) for s in health if s.state != "ready" and s not in starting]
    known = listed_names(sorted(tools))
    message = f"no tool named {name!r}{did_you_mean(name, [*tools, *agents])} (available: {known})"
    if down:
        shown = down[:_DOWN_SHOWN]
        if len(down) > _DOWN_SHOWN:
            shown.append(f"and {len(down) - _DOWN_SHOWN} more (`tools` lists them)")
        message += "; servers down, so their tools are not listed:\n  " + "\n  ".join(shown)
    if starting:
        message += (
            f"\n{plural(len(starting), 'server')} still starting (not waited for), so their "
            "tools are not listed either"
        )
    raise UnknownTool(message)


_DOWN_SHOWN = 10


async def _gated(gateway: Gateway, spec: AgentSpec) -> dict[str, str]:
    """The agent's tools whose calls a person must approve, each with the rule that says so
    (the one its runs go by: `Gateway.approval_rule`)."""
    tools = await gateway.tools_for(spec)
    rules = {name: gateway.approval_rule(spec, tool) for name, tool in sorted(tools.items())}
    return {name: rule for name, rule in rules.items() if rule is not None}


@dataclass(frozen=True, slots=True)
class _Agents:
    """What the listing says of each agent, by name, besides its config."""

    offered: Mapping[str, int]
    """How many tools its model is offered."""
    gated: Mapping[str, Mapping[str, str]]
    """Its tools that need a person's approval, each with the rule (`_gated`)."""


def _print_listing(
    gateway: Gateway,
    tools: list[Tool],
    health: list[NodeHealth],
    agents: _Agents,
    *,
    as_json: bool,
) -> None:
    if as_json:
        print(
            result_json(_listing(gateway, tools, health, agents)),
            flush=True,
            file=result_stdout(),
        )
        return
    offered = agents.offered
    width = name_width(tool.name for tool in tools)
    for tool in tools:
        summary = (tool.description.strip().splitlines() or [""])[0]
        origin = f" ({tool.original_name})" if tool.original_name else ""
        # A server names and describes its tools: shown as text, its escapes never obeyed.
        print(
            printable(f"{tool.name:<{width}} node={tool.source_node}{origin}  {summary}"),
            file=result_stdout(),
        )
        lost = unexpressed(tool.input_schema)
        if lost:  # said here too, not only when an agent is first given the tool
            print(
                printable(f"  a model cannot be told all its input schema asks: {'; '.join(lost)}"),
                file=result_stdout(),
            )
        if (rule := gateway.node_rule(tool)) is not None:  # whoever calls it: agents, clients
            print(printable(f"  needs approval: {rule}"), file=result_stdout())
    for name, agent in gateway.agents.items():
        count = plural(offered[name], "tool")
        limit = max_tools(agent.model)
        if limit is not None and offered[name] > limit:
            count += f", more than its model takes: {limit}"
        handing = f" handoffs={list(agent.handoffs)}" if agent.handoffs else ""
        print(
            printable(
                f"agent {name}: model={agent.model.name} tools={list(agent.tools)}{handing} "
                f"({count})"
            ),
            file=result_stdout(),
        )
        for tool_name, rule in agents.gated[name].items():
            print(printable(f"  {tool_name} needs approval: {rule}"), file=result_stdout())
    for server in health:
        print(printable(f"server {server}"), file=result_stdout())
    result_stdout().flush()


def _health(gateway: Gateway) -> list[NodeHealth]:
    return [node.health for node in gateway.nodes.values() if isinstance(node, HasHealth)]


def _listing(
    gateway: Gateway, tools: list[Tool], health: list[NodeHealth], agents: _Agents
) -> dict[str, Any]:
    return {
        "tools": [
            {
                "name": tool.name,
                "node": tool.source_node,
                "original_name": tool.original_name,
                "description": tool.description,
                "input_schema": dict(tool.input_schema),
                "untold_to_models": list(unexpressed(tool.input_schema)),
                "approval": gateway.node_rule(tool),
            }
            for tool in tools
        ],
        "agents": [
            {
                "name": name,
                "model": spec.model.name,
                "tools": list(spec.tools),
                "handoffs": list(spec.handoffs),
                "tool_count": agents.offered[name],
                "max_tools": max_tools(spec.model),
                "approval": dict(agents.gated[name]),
            }
            for name, spec in gateway.agents.items()
        ],
        "servers": [
            {
                "name": server.node,
                "state": server.shown_state,
                "tools": server.tool_count,
                "protocol_version": server.protocol_version,
                "error": server.last_error if server.state != "ready" else None,
            }
            for server in health
        ],
    }
