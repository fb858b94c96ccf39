"""A trace hook that tells the MCP client how a run is going, while it runs.

The run's start (naming the run), every model call and tool call (start, end, a tool's own
progress), an item handed off to another agent, and the run's end (finished, failed, or
paused for an answer: the call's last progress) become a `notifications/progress` for the
request being served, so a client with a
read cut-off (Claude Desktop's is about 60 s) sees the call alive; the SDK sends nothing
when the client asked for no progress. The work of an agent that the run's agent called
says whose it is, by the agents that led to it (`inner: model ...: thinking`, deeper
`mid > inner: ...`; a second call of an agent at work already is `inner#2`), also for a request that follows a stored run under way (`joined`).
The run's milestones also go out as log messages (`notifications/message`): on
handshake-era connections from info up, on 2026-07-28 ones at the level the request opted in
to. A downstream server's log message during a tool call (a `note` with a `log` level) goes
out as the server sent it.

Events alone leave long calls silent (a model thinking for a minute sends none, a person
takes their time to approve a call), so `keep_alive` sends a progress notification whenever
`heartbeat` seconds (15 by default) passed without one, saying what the run waits on and for
how long: the model or tool call in flight (text a model streams meanwhile is counted in it:
`writing, 1234 chars`), the call waiting for a person's approval or for a slot of its node
(`node_slots`), else the last thing said.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from pydantic import JsonValue

from ...item_results import handed_off_to
from ...trace import OpenSpan, ToolProgress, TraceEvent
from .log_messages import NOTIFY_TIMEOUT, client_log_levels, send_log

__all__ = ["HEARTBEAT_SECONDS", "LOGGER_NAME", "McpNotifier", "describe"]

LOGGER_NAME = "agent-gateway"
MAX_DETAIL = 500
HEARTBEAT_SECONDS = 15.0
"""The longest a client waits for a progress notification while a served call runs."""
APPROVAL_WAIT = "waiting for a person's approval"

log = logging.getLogger(__name__)


class McpNotifier:
    """Maps one run's trace events to progress and log notifications of one MCP request."""

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        stored: bool = False,
    ) -> None:
        """`stored`: the run is kept in a run store, where one that raised is `stopped`
        (resumable), and its last progress says so, as its result does."""
        self._ctx = ctx
        self._stored = stored
        self._session = ctx.session
        self._request_id = ctx.request_id
        self._levels = client_log_levels(ctx)
        self._progress = 0
        self._heartbeat = heartbeat
        self._last_sent = time.monotonic()
        self._in_flight: dict[str, _InFlight] = {}
        self._parents: dict[str, str | None] = {}
        """The open spans' parents, to find the agent a span is under."""
        self._agents: dict[str, str] = {}
        """The open agent spans' agents."""
        self._last_said = _Said("the call began")

    async def keep_alive(self) -> None:
        """Until cancelled: a progress notification whenever `heartbeat` seconds passed
        without one, saying what the run waits on."""
        while True:
            wait = self._last_sent + self._heartbeat - time.monotonic()
            if wait > 0:
                await anyio.sleep(wait)
            elif self._in_flight:
                latest = next(reversed(self._in_flight.values()))
                await self._report(latest.describe(), heartbeat=True)
            else:  # between calls, or waiting on what sends no event (a stored run's store)
                await self._report(self._last_said.describe(), heartbeat=True)

    def joined(self, open_spans: Sequence[OpenSpan]) -> None:
        """Following a run under way (`JoinsMidway`): the spans open, learnt as if seen to
        start (not told again), so that the work to come is named by its agents."""
        for span in open_spans:
            self._follow(span.start, since=span.since)

    async def __call__(self, event: TraceEvent) -> None:
        self._follow(event)
        if event.phase == "error" and event.error == "cancelled":
            # The client cancelled: nobody reads this request's stream any more.
            return
        server_log = event.server_log
        if server_log is not None:
            if server_log.level in self._levels:
                await send_log(self._ctx, server_log)
            return
        described = describe(event, stored=self._stored)
        if described is None:
            return
        level, text = described
        agent = self._nested_agent(event)
        if agent is not None:
            text = f"{agent}: {text}"
        if (
            event.kind in ("model", "tool", "run")
            or handed_off_to(event.output) is not None
            or _session_waits(event) is not None
        ):
            # The run's start names it: a client whose connection breaks (its replica died,
            # say) can still find the run by that id (`get_run`, `runs show`). Its end is the
            # call's last progress: what the client heard last says the run finished.
            await self._report(text)
        if level in self._levels:
            detail = _detail(event)
            data = f"{text} {detail}" if detail else text
            params = types.LoggingMessageNotificationParams(
                level=level, logger=LOGGER_NAME, data=data
            )
            await send_log(self._ctx, params)

    def _follow(self, event: TraceEvent, *, since: float | None = None) -> None:
        """Keep track of the open spans, the model and tool calls in flight (a call waiting
        for approval too), and of the text streamed. `since`: when a span started, if not
        now."""
        if event.phase == "start":
            self._parents[event.id] = event.parent_id
            if event.kind == "agent":
                self._agents[event.id] = self._label(event.name)
        if event.kind not in ("model", "tool"):
            if event.phase in ("end", "error"):
                self._parents.pop(event.id, None)
                self._agents.pop(event.id, None)
            return
        noted = event.output if isinstance(event.output, dict) else {}
        approval, slot = noted.get("approval"), noted.get("slot")
        if event.phase == "note" and isinstance(approval, str):  # the gate (`step_loop`)
            key = f"approval {noted.get('call')}"
            if approval == "waiting":
                self._in_flight[key] = _InFlight(
                    event.kind, event.name, self._nested_agent(event), waits=APPROVAL_WAIT
                )
            else:  # approved, denied, or refused (nobody to ask)
                self._in_flight.pop(key, None)
        elif event.phase == "note" and isinstance(slot, str):  # the limits (`node_slots`)
            key = f"slot {noted.get('call')} {event.name}"
            waits = noted.get("waits")
            if slot == "waiting" and isinstance(waits, str):
                self._in_flight[key] = _InFlight(
                    event.kind, event.name, self._nested_agent(event), waits=f"waiting for {waits}"
                )
            else:
                self._in_flight.pop(key, None)
        elif event.phase == "start":
            call = _InFlight(event.kind, event.name, self._nested_agent(event))
            if since is not None:
                call.started = since
            self._in_flight[event.id] = call
        elif event.phase in ("end", "error"):
            self._in_flight.pop(event.id, None)
            self._parents.pop(event.id, None)
        elif event.phase == "token" and event.parent_id in self._in_flight:
            text = event.output.get("text") if isinstance(event.output, dict) else None
            if isinstance(text, str):
                self._in_flight[event.parent_id].chars += len(text)

    def _label(self, agent: str) -> str:
        """How progress names an agent starting: by its name, and a number if the same agent
        is at work already (two calls of it at once: `helper`, `helper#2`), so that the two
        read apart."""
        working = set(self._agents.values())
        label, number = agent, 1
        while label in working:
            number += 1
            label = f"{agent}#{number}"
        return label

    def _nested_agent(self, event: TraceEvent) -> str | None:
        """Whose work `event` is, when not the run's own agent's: the agents from the one it
        called down to the one at work (`mid > inner`). Progress names them, since their
        models and tools are not the run's, and one agent may be called by two others."""
        agents: list[str] = []  # the nearest first, the run's own agent last
        parent = event.parent_id if event.kind != "agent" else None
        while parent is not None:
            if parent in self._agents:
                agents.append(self._agents[parent])
            parent = self._parents.get(parent)
        return " > ".join(reversed(agents[:-1])) or None

    async def _report(self, text: str, *, heartbeat: bool = False) -> None:
        if not heartbeat:
            self._last_said = _Said(text)
        self._progress += 1
        self._last_sent = time.monotonic()
        with anyio.move_on_after(NOTIFY_TIMEOUT) as scope:
            await self._session.report_progress(self._progress, None, text)
        if scope.cancelled_caught:
            log.warning(
                "dropped a progress notification for request %s: the client is not reading",
                self._request_id,
            )


@dataclass
class _InFlight:
    kind: str
    name: str
    agent: str | None = None
    """The agents it works for, when not the run's own (`McpNotifier._nested_agent`)."""
    started: float = field(default_factory=time.monotonic)
    chars: int = 0
    waits: str | None = None
    """What the call waits for before it runs, if it does."""

    def describe(self) -> str:
        took = f"{time.monotonic() - self.started:.0f} s"
        whose = f"{self.agent}: " if self.agent else ""
        if self.waits is not None:
            return f"{whose}{self.kind} {self.name}: {self.waits} ({took})"
        if self.chars:
            return f"{whose}{self.kind} {self.name}: writing, {self.chars} chars ({took})"
        return f"{whose}{self.kind} {self.name}: still running ({took})"


@dataclass(frozen=True)
class _Said:
    """The last progress an event gave, and when."""

    text: str
    at: float = field(default_factory=time.monotonic)

    def describe(self) -> str:
        return f"still working, nothing new for {time.monotonic() - self.at:.0f} s ({self.text})"


def describe(event: TraceEvent, *, stored: bool = False) -> tuple[types.LoggingLevel, str] | None:
    """The log level and one-line text for an event; None for events not worth a message.
    A `stored` run that raised has stopped, not failed: it resumes."""
    took = f" in {event.duration_ms:.0f} ms" if event.duration_ms is not None else ""
    if event.paused is not None:
        # A pause for an answer from outside (the client's model, 2026-07-28), not a failure.
        return ("info", f"agent {event.name}: {event.paused}") if event.kind == "run" else None
    match event.kind, event.phase:
        case "run", "start":
            return "info", f"agent {event.name}: started (run {event.run_id})"
        case "run", "end":
            failed = _every_item_failed(event.output)
            if failed is not None:  # it ended, as a failure: said so, as its result is
                return "error", f"agent {event.name}: failed{took}: {failed}"
            return "info", f"agent {event.name}: finished{took}"
        case "run", "error":
            ended = "stopped" if stored else "failed"
            return "error", f"agent {event.name}: {ended}{took}: {event.error}"
        case "model", "start":
            return "debug", f"model {event.name}: thinking"
        case "model", "end":
            return "info", f"model {event.name}: answered{took}{_calls(event.output)}"
        case "model", "error":
            return "error", f"model {event.name}: failed{took}: {event.error}"
        case "tool", "start":
            return "debug", f"tool {event.name}: running"
        case "tool", "progress":
            return "debug", f"tool {event.name}: {_progress_text(event.progress)}"
        case "tool", "end":
            return "info", f"tool {event.name}: done{took}"
        case "tool", "error":
            return "warning", f"tool {event.name}: failed{took}: {event.error}"
        case "tool", "note" if _slot_waits(event.output) is not None:
            return "info", f"tool {event.name}: waiting for {_slot_waits(event.output)}"
        case "agent", "note" if _session_waits(event) is not None:
            waits = _session_waits(event)
            return (
                "info",
                f"agent {event.name}: waiting for the turn in progress on session {waits!r}",
            )
        case "agent", "note" if handed_off_to(event.output) is not None:
            return "info", f"agent {event.name}: handed off to {handed_off_to(event.output)}"
        case _:
            return None


def _session_waits(event: TraceEvent) -> str | None:
    """The session whose turn in progress an agent's turn waits for (`step_loop`), if so."""
    output = event.output
    if event.kind != "agent" or event.phase != "note" or not isinstance(output, dict):
        return None
    waits = output.get("session_waits")
    return waits if isinstance(waits, str) else None


def _slot_waits(output: JsonValue) -> str | None:
    """What a call waits for before it is made, from a `slot` note (`node_slots`)."""
    if not isinstance(output, dict) or output.get("slot") != "waiting":
        return None
    waits = output.get("waits")
    return waits if isinstance(waits, str) else None


def _calls(output: JsonValue) -> str:
    calls = output.get("tool_calls") if isinstance(output, dict) else None
    if not isinstance(calls, list) or not calls:
        return ""
    names = [call.get("name") for call in calls if isinstance(call, dict)]
    return f", calling {', '.join(str(name) for name in names)}"


def _progress_text(report: ToolProgress | None) -> str:
    if report is None:
        return "working"
    if report.message:
        return report.message
    return f"{report.progress}/{report.total}" if report.total is not None else f"{report.progress}"


def _detail(event: TraceEvent) -> str:
    """The event's input or output, cut short: for debugging from the client's log view."""
    if event.kind != "tool" or event.phase not in ("start", "end"):
        return ""
    value = event.input if event.phase == "start" else event.output
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    label = "in" if event.phase == "start" else "out"
    return f"{label}={text[:MAX_DETAIL]}{'...' if len(text) > MAX_DETAIL else ''}"


def _every_item_failed(output: JsonValue) -> str | None:
    """The first item's error when a run's every item failed (its output: `outputs`)."""
    if not isinstance(output, list) or not output:
        return None
    errors = [item.get("error") if isinstance(item, dict) else None for item in output]
    if any(not isinstance(error, str) for error in errors):
        return None
    return str(errors[0])
