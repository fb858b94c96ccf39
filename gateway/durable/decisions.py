"""One decision per call waiting for approval, whoever sends it, from wherever, whenever.

A decision is a DBOS message to its run (topic `approval`, see `approvals`), sent with an
idempotency key named after the call. DBOS stores a message once per key and destination (the
key makes the row's primary key, and a second insert of it is dropped), so of any number of
decisions on one call, sent from any processes at any moment, while the run's process lives or
not, exactly one is stored, and it is the one the run takes. The sender then reads the run's
stored decisions back (DBOS's `notifications` table, in its system schema): if the one on its
call is not its own (each carries an id), another came first, and the sender is told whose
(`AlreadyDecided`).

An older agent-gateway sent a decision pickled, with no key: a run takes it all the same if it
came first (DBOS takes a run's messages oldest first). So decisions are read in every format,
as the run reads them (a pickled one only where the store may be read so, else
`PickledDecision` refuses the run's calls), and a decision is refused before it is sent too,
not only after, as the key cannot keep a second one out then.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import anyio
from dbos import DBOSClient, WorkflowSerializationFormat
from dbos._serialization import deserialize_value
from pydantic import JsonValue

from ..approval import Decision, short_call
from ..errors import AlreadyDecided
from .approvals import APPROVAL_TOPIC, decision_message
from .changes import system_rows
from .record_format import STORED_FORMAT, pickled_decision, pickled_read
from .replicas import on_postgres

__all__ = ["decisions_in", "send_decision", "stored_decisions", "this_person"]

_PORTABLE = "portable_json"
"""DBOS's name for a message stored as JSON (`WorkflowSerializationFormat.PORTABLE`)."""
_SQLITE_QUERY = (
    "SELECT message, serialization FROM notifications WHERE destination_uuid = ? "
    "AND topic = ? ORDER BY created_at_epoch_ms, message_uuid"
)
_POSTGRES_QUERY = (
    "SELECT message, serialization FROM dbos.notifications WHERE destination_uuid = %s "
    "AND topic = %s ORDER BY created_at_epoch_ms, message_uuid"
)
"""DBOS's system tables are in the schema `dbos` unless told otherwise (we never do)."""


def this_person() -> str:
    """Who decides from this process, as a decision records it: `user@host`."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment (a container, say)
        user = "someone"
    return f"{user}@{socket.gethostname()}"


async def send_decision(
    client: DBOSClient, url: str, run_id: str, call: str, decision: Decision, *, by: str
) -> None:
    """Send `decision` on `call` to the run, unless another decision on it was sent first.

    Raises `AlreadyDecided` (naming that decision: approved or denied, by whom, when) if one
    was, `PickledDecision` if an older version's may have been, `StoreError` if the store
    cannot be read."""
    earlier = await anyio.to_thread.run_sync(_stored_decision, url, run_id, call)
    if earlier is not None:  # sent by an older version, which no key keeps out: say so first
        raise AlreadyDecided(already_decided(run_id, call, earlier))
    message = decision_message(
        call, decision, by=by, at_ms=int(time.time() * 1000), decision_id=uuid.uuid4().hex
    )
    await client.send_async(
        run_id,
        message,
        APPROVAL_TOPIC,
        idempotency_key=f"approval {call}",
        serialization_type=WorkflowSerializationFormat.PORTABLE,
    )
    stored = await anyio.to_thread.run_sync(_stored_decision, url, run_id, call)
    if stored is not None and stored.get("id") != message["id"]:
        raise AlreadyDecided(already_decided(run_id, call, stored))


def already_decided(run_id: str, call: str, stored: dict[str, Any]) -> str:
    verdict = "approved" if stored.get("approved") is True else "denied"
    who = stored.get("by")
    at_ms = stored.get("at_ms")
    by = (
        f", by {who}"
        if isinstance(who, str)
        else ", by an older agent-gateway"
        if "id" not in stored  # each decision sent since has its own
        else ""
    )
    at = (
        f" at {datetime.fromtimestamp(at_ms / 1000, UTC):%Y-%m-%d %H:%M:%S} UTC"
        if isinstance(at_ms, int)
        else ""
    )
    return f"call {short_call(call)} of run {run_id} is already decided ({verdict}{by}{at})"


def _stored_decision(url: str, run_id: str, call: str) -> dict[str, JsonValue] | None:
    """The first decision on `call` stored for the run (the one it takes), if any."""
    return stored_decisions(url, run_id).get(call)


def stored_decisions(url: str, run_id: str) -> dict[str, dict[str, JsonValue]]:
    """The decisions stored for the run, taken by it or not yet: the first on each call (the
    one it takes), by call. Raises `StoreError` if the store cannot be read, `PickledDecision`
    if a decision is pickled (an older version's) and the store is not read so."""
    query = _POSTGRES_QUERY if on_postgres(url) else _SQLITE_QUERY
    return decisions_in(system_rows(url, query, (run_id, APPROVAL_TOPIC)), run_id)


def decisions_in(rows: Iterable[Sequence[Any]], run_id: str) -> dict[str, dict[str, JsonValue]]:
    """`stored_decisions` of the run, from its messages on the approval topic as stored
    (message, serialization), oldest first."""
    found: dict[str, dict[str, JsonValue]] = {}
    for text, serialization in rows:
        if serialization == _PORTABLE:
            message: Any = json.loads(str(text))
        elif pickled_read():  # as the run reads it (DBOS's pickle, the store's writers trusted)
            message = deserialize_value(text, serialization, STORED_FORMAT)
        else:  # unread: it may be on any call, and the run would take it first
            raise pickled_decision(run_id)
        call = cast(dict[str, Any], message).get("call") if isinstance(message, dict) else None
        if isinstance(call, str) and call not in found:
            found[call] = cast(dict[str, JsonValue], message)
    return found
