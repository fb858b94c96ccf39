"""The `notifications/tasks/status` a server sends on one session, to the calls following
those tasks (`task_calls`).

The mcp 2.3 SDK client drops that notification at 2025-11-25: it is not in its tables for that
version (its `_on_notify` logs it at DEBUG), and only a client extension's binding would take
it, an extension the client would have to advertise to the server. Our transports see every
message before the SDK's session does (`watch_transport`), so `heard` takes a task's status
there, as the server sent it, and hands it to whoever listens for that task; the message goes
on to the session as before. A session made in-process (an SDK `Server` as a node's target) has
no transport of ours: its calls only poll.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager, suppress

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import ValidationError

__all__ = ["TASK_STATUS", "TaskStatuses"]

TASK_STATUS = "notifications/tasks/status"
_KEPT = 16
"""Statuses kept for a listener that has not taken them yet; more are dropped (its poll
sees the task's latest)."""


class TaskStatuses:
    """The listeners of one session's tasks, by task id."""

    def __init__(self) -> None:
        self._listeners: dict[str, MemoryObjectSendStream[mcp_types.Task]] = {}

    def heard(self, message: mcp_types.JSONRPCMessage) -> None:
        """A message read on the session: a status of a task listened to goes to its listener.
        Never waits (the transport's reader calls it)."""
        if not self._listeners or not isinstance(message, mcp_types.JSONRPCNotification):
            return  # the usual case, for every message: nobody listens
        if message.method != TASK_STATUS or message.params is None:
            return
        listener = self._listeners.get(str(message.params.get("taskId")))
        if listener is None:
            return
        try:
            task = mcp_types.TaskStatusNotificationParams.model_validate(
                message.params, by_name=False
            )
        except ValidationError:
            return  # not worth a word: the poll tells the task's status
        # Full (its listener is slow) or gone (its call ended): the poll tells the latest.
        with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            listener.send_nowait(task)

    @contextmanager
    def listening(self, task_id: str) -> Generator[MemoryObjectReceiveStream[mcp_types.Task]]:
        """The statuses heard of `task_id` while the block runs."""
        send, receive = anyio.create_memory_object_stream[mcp_types.Task](_KEPT)
        self._listeners[task_id] = send
        try:
            with send, receive:
                yield receive
        finally:
            if self._listeners.get(task_id) is send:
                del self._listeners[task_id]
