"""A tool that runs only as a task (`execution.taskSupport: "required"`, 2025-11-25), called
as any other tool: the node makes the task and waits for its end within the call.

    tools/call with `task`  the server answers at once with the task (id, status, poll interval)
    tasks/result            waits for the task's end: its `CallToolResult` (the server's
                            requests meanwhile, an elicitation say, come on it: to the caller)
    tasks/get               beside it, at the server's poll interval: each new status or status
                            message is progress for the caller, and restarts the call's clock
    notifications/tasks/status  the server's word of each change, if it sends them: told at
                            once (`task_statuses`), as a poll's; a status heard and polled (the
                            same `lastUpdatedAt`) is told once, an older one not at all
    tasks/cancel            when the caller cancels the call or the call times out

The clock is the tool's, as for a plain call: `timeout` without a new status (stopped while the
server waits on the caller's answer), and never past the absolute cap. The creating request goes
raw (the SDK session's own stamp and dispatcher): the SDK client takes a `tools/call` answer
only as a `CallToolResult`. (2026-07-28 has no tasks in the protocol, an extension there that
the SDK does not speak: its listings carry no `execution`, so no tool of such a connection
comes here.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime
from typing import Any, cast

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import ObjectReceiveStream
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..base import CallContext, ProgressCallback, error_result, validation_brief
from .connection import Connection, lost_during
from .deadline import Deadline, timed_out
from .error_text import protocol_error_result
from .server_requests import CallsInFlight, InFlightCall

__all__ = ["TaskCalls"]

log = logging.getLogger(__name__)

_TTL_MS = 3_600_000
"""How long we ask the server to keep a task: past any call's cap, which ends it first."""
_CANCEL_SECONDS = 2.0
"""How long telling the server that a task was cancelled may take."""
_POLL_SECONDS = (0.1, 1.0)
"""The shortest interval between two `tasks/get`, and the one when the server suggests none."""
_ENDED = ("completed", "failed", "cancelled")
_RELATED_TASK = "io.modelcontextprotocol/related-task"


class TaskCalls:
    """Calls of one node's task-only tools, on its live connection (see the module)."""

    def __init__(self, node: str, calls: CallsInFlight) -> None:
        self._node = node
        self._calls = calls

    async def call(
        self,
        conn: Connection,
        name: str,
        original: str,
        arguments: Mapping[str, Any],
        context: CallContext | None,
        clock: tuple[float, float],
    ) -> mcp_types.CallToolResult:
        """The task's result. Raises `ToolTimeout`, or `ConnectionLost` when the server went
        away; the server's error answers are error results."""
        client = conn.client
        assert client is not None
        session = client.session
        deadline = Deadline(*clock)
        task_id: str | None = None
        what = f"the task of {name!r}"
        with deadline.scope:
            tracked: InFlightCall | None = None
            try:
                with self._calls.track(context or CallContext(), deadline.waiting) as tracked:
                    created: mcp_types.CreateTaskResult | mcp_types.CallToolResult | None = None
                    # Shielded: a task the server makes is one we know of, to cancel with the call.
                    with anyio.CancelScope(shield=True, deadline=deadline.scope.deadline):
                        created = await _create(session, original, arguments, context)
                    if created is None:
                        raise timed_out(deadline, name, self._node)
                    if isinstance(created, mcp_types.CallToolResult):
                        return created  # answered at once (a refusal of its arguments, say)
                    task_id = created.task.task_id
                    await anyio.lowlevel.checkpoint()  # a cancellation meanwhile comes now
                    on_progress = context.on_progress if context else None
                    told = _Told(deadline, on_progress)
                    with conn.tasks.listening(task_id) as heard:
                        return await _outcome(session, created.task, told, heard)
            except anyio.get_cancelled_exc_class():
                # The caller's cancellation, or the clock's (then the scope ends it below).
                if tracked is not None:
                    await tracked.unwound()  # its client told of its questions withdrawn first
                if task_id is not None:
                    await _cancel(session, task_id)
                raise
            except MCPError as exc:
                lost = lost_during(self._node, conn, exc, what)
                if lost is not None:
                    raise lost from exc
                return protocol_error_result(exc.error)
            except ValidationError as exc:
                said = validation_brief(exc, "the answer")
                return error_result(f"MCP server {self._node!r} sent a malformed {what}: {said}")
        raise timed_out(deadline, name, self._node)


async def _create(
    session: ClientSession,
    original: str,
    arguments: Mapping[str, Any],
    context: CallContext | None,
) -> mcp_types.CreateTaskResult | mcp_types.CallToolResult:
    """The server's answer to the `tools/call` asking for a task: the task, or a result."""
    meta = (
        cast(mcp_types.RequestParamsMeta, dict(context.meta)) if context and context.meta else None
    )
    request = mcp_types.CallToolRequest(
        params=mcp_types.CallToolRequestParams(
            name=original,
            arguments=dict(arguments),
            task=mcp_types.TaskMetadata(ttl=_TTL_MS),
            _meta=meta,
        )
    )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: CallOptions = {}
    session._stamp(data, options)  # pyright: ignore[reportPrivateUsage]
    dispatcher = session._dispatcher  # pyright: ignore[reportPrivateUsage]
    raw = await dispatcher.send_raw_request(data["method"], data.get("params"), options)
    if "task" in raw:
        return mcp_types.CreateTaskResult.model_validate(raw, by_name=False)
    return mcp_types.CallToolResult.model_validate(raw, by_name=False)


async def _outcome(
    session: ClientSession,
    task: mcp_types.Task,
    told: _Told,
    heard: ObjectReceiveStream[mcp_types.Task],
) -> mcp_types.CallToolResult:
    """The task's result (`tasks/result`), its status followed meanwhile."""
    request = mcp_types.GetTaskPayloadRequest(
        params=mcp_types.GetTaskPayloadRequestParams(task_id=task.task_id)
    )
    outcome: mcp_types.CallToolResult | Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_follow, session, task, told)
        tg.start_soon(_hear, heard, told)
        try:
            outcome = await session.send_request(request, mcp_types.CallToolResult)
        except (MCPError, ValidationError) as exc:
            outcome = exc  # raised out of the group, not wrapped in an exception group
        tg.cancel_scope.cancel()  # the status is told no more
    if isinstance(outcome, Exception):
        raise outcome
    assert outcome is not None  # the group ends only after it is set, or raises
    return _untied(outcome)


def _untied(result: mcp_types.CallToolResult) -> mcp_types.CallToolResult:
    """`result` without its tie to the task (`tasks/result` carries the task's id in `_meta`):
    the task is the node's way of making the call, which its caller never made nor can ask of."""
    if not result.meta or _RELATED_TASK not in result.meta:
        return result
    meta = {key: value for key, value in result.meta.items() if key != _RELATED_TASK}
    return result.model_copy(update={"meta": meta or None})


class _Told:
    """What a call has told of its task's status: each change once, as progress, whether a
    poll found it or the server's notification said it, and none older than the last."""

    def __init__(self, deadline: Deadline, on_progress: ProgressCallback | None) -> None:
        self._deadline = deadline
        self._on_progress = on_progress
        self._step = 0
        self._last_at: datetime | None = None
        self._said: list[tuple[str, str | None]] = []
        """The statuses told as of `_last_at`, the last one last: a server may change a task
        twice within its clock's tick (one `lastUpdatedAt`), and both changes are news."""
        self._lock = anyio.Lock()  # reports in the order found, never two at once

    @property
    def timeout(self) -> float:
        return self._deadline.timeout

    async def tell(self, task: mcp_types.Task) -> None:
        async with self._lock:
            at = _when(task.last_updated_at)
            said = (task.status, task.status_message)
            if self._said:
                order = _order(at, self._last_at)
                if order is not None and order < 0:
                    return  # older than what was told
                # One as old: told already if said so then (heard, then polled). Of unknown
                # age: told already if it is the last one told.
                if said in (self._said if order == 0 else self._said[-1:]):
                    return
                if order == 0:
                    self._said.append(said)
                else:
                    self._said = [said]
            else:
                self._said = [said]
            self._last_at = at
            self._step += 1
            self._deadline.alive()
            if self._on_progress is not None:
                await _report(self._on_progress, self._step, task.status_message or task.status)


async def _follow(session: ClientSession, task: mcp_types.Task, told: _Told) -> None:
    """Poll the task's status until it ends: each change is progress (see the module)."""
    while task.status not in _ENDED:
        await told.tell(task)
        await anyio.sleep(_interval(task.poll_interval, told.timeout))
        try:
            task = await session.send_request(
                mcp_types.GetTaskRequest(
                    params=mcp_types.GetTaskRequestParams(task_id=task.task_id)
                ),
                mcp_types.GetTaskResult,
            )
        except (MCPError, ValidationError):
            return  # its status is no longer told; `tasks/result` still ends the call


async def _hear(heard: ObjectReceiveStream[mcp_types.Task], told: _Told) -> None:
    """Tell each status the server said of the task, as it comes (until the call ends)."""
    async for task in heard:
        if task.status not in _ENDED:
            await told.tell(task)


def _order(at: datetime | None, last: datetime | None) -> int | None:
    """Whether a status updated `at` is older (-1), as old (0) or newer (1) than one updated
    `last`; None when unknown (either has no time, or one a time zone and one none)."""
    if at is None or last is None:
        return None
    try:
        return (at > last) - (at < last)
    except TypeError:
        return None


def _when(stamp: str | None) -> datetime | None:
    """`lastUpdatedAt` as a time to compare (None: none, or not ISO 8601)."""
    try:
        return datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None


async def _report(on_progress: ProgressCallback, step: int, message: str) -> None:
    """One status as progress, whole: the result does not cut a report being relayed short
    (it would reach a client after the result, or half). A caller's bug does not fail the call."""
    with anyio.CancelScope(shield=True):
        try:
            await on_progress(step, None, message)
        except Exception:
            log.exception("progress callback raised")


def _interval(suggested_ms: int | None, timeout: float) -> float:
    """Seconds to the next poll: the server's suggestion, at least the shortest, and at most a
    quarter of the idle timeout (a change seen late would end the call for no reason)."""
    shortest, usual = _POLL_SECONDS
    seconds = suggested_ms / 1000 if suggested_ms is not None else usual
    return min(max(seconds, shortest), timeout / 4)


async def _cancel(session: ClientSession, task_id: str) -> None:
    """Tell the server the task is no longer wanted (bounded; a failure is its own business:
    the task ended meanwhile, or the server is gone)."""
    request = mcp_types.CancelTaskRequest(params=mcp_types.CancelTaskRequestParams(task_id=task_id))
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(_CANCEL_SECONDS),
        suppress(MCPError, ValidationError, RuntimeError),
    ):
        await session.send_request(request, mcp_types.CancelTaskResult)
