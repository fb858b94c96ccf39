"""The format of what the run store keeps: JSON, never Python's pickle.

DBOS keeps workflow inputs, outputs, errors, events, messages and step outputs as text, each
row tagged with its format, and reads each row by its tag whatever this process was set up
with: a row tagged `py_pickle` is unpickled, and unpickling runs whatever code the row names.
Anyone who can write the store could then run code in every process that reads it (`runs
list`, a replica taking runs over). So here:

- everything is written as DBOS's portable JSON (`STORED_FORMAT`): what a run keeps is JSON
  already (its state as JSON text, its result, events as dicts, step outputs as JSON values);
  an error keeps its type's name and its message;
- a pickled row is refused unread (`PickledRecord`, naming the run where it is known), unless
  the store was opened with `read_pickled` (`[store] read_pickled = true`, or
  `AGENT_GATEWAY_READ_PICKLED=1`): a store written by an older agent-gateway, whose every
  writer is trusted. DBOS has no setting for this: its pickle serializer
  (`dbos._serialization.DBOSDefaultSerializer`, which its readers look up at each read) is
  replaced by `_PickleGuard`, which also refuses to write pickle (DBOS ends an old run in
  its own format) unless opted in.

A decision (`runs approve|deny`) an older agent-gateway sent to a run is pickled too, even to a
run stored as JSON: refused the same way, but saying so (`pickled_decision`), since the run
takes the first decision sent on a call, and nothing else of it can be decided before.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import dbos._serialization as dbos_serialization
from dbos import DBOSPortableJSONSerializer, PortableWorkflowError, Serializer

from ..errors import PickledDecision, PickledRecord

__all__ = [
    "READ_PICKLED_ENV",
    "STORED_FORMAT",
    "pickled",
    "pickled_decision",
    "pickled_read",
    "read_pickled_from_env",
    "reading_pickled",
    "refusals",
    "refusing_for",
    "stored_as",
]

READ_PICKLED_ENV = "AGENT_GATEWAY_READ_PICKLED"
STORED_FORMAT: Serializer = DBOSPortableJSONSerializer()
_PICKLE = "py_pickle"
"""DBOS's name for the format of a row it pickled."""

_refused: ContextVar[list[None] | None] = ContextVar("agent_gateway_refused", default=None)
"""Counts the pickled rows refused in the block of `refusals` (a list: a worker thread DBOS
reads in gets a copy of the context, and appends to the same list)."""


def pickled(run_id: str | None = None) -> PickledRecord:
    """The refusal of a pickled record, of run `run_id` if known."""
    what = f"run {run_id}" if run_id else "a record of the run store"
    return PickledRecord(
        f"{what} is stored in Python's pickle format (by an older agent-gateway, or by "
        "someone who can write the store): it is not read, as reading it could run any code. "
        "If an older agent-gateway wrote this store and you trust everyone who can write to "
        f"it, set `read_pickled = true` under [store] in the config (or {READ_PICKLED_ENV}=1)"
    )


def pickled_decision(run_id: str | None = None) -> PickledDecision:
    """The refusal of a decision an older agent-gateway sent to run `run_id` (if known)."""
    what = f"run {run_id}" if run_id else "the run"
    return PickledDecision(
        f"{what} has a decision (approve or deny) from an older agent-gateway, stored in "
        "Python's pickle format: it is not read, as reading it could run any code, and no "
        "call of the run is decided or resumed before it is. If you trust everyone who can "
        "write the store, set `read_pickled = true` under [store] in the config (or "
        f"{READ_PICKLED_ENV}=1) to take it; and upgrade the agent-gateway that sent it"
    )


def pickled_read() -> bool:
    """Whether a pickled record is read now (`reading_pickled`)."""
    return _guard().allowed


class _PickleGuard(dbos_serialization.DefaultSerializer):
    """DBOS's pickle serializer, that neither reads nor writes unless `allowed`."""

    allowed = False

    def serialize(self, data: Any) -> str:
        if not self.allowed:
            raise pickled()
        return super().serialize(data)

    def deserialize(self, serialized_data: str) -> Any:
        if not self.allowed:
            found = _refused.get()
            if found is not None:  # DBOS's listings log a refusal and go on: it is counted
                found.append(None)
            raise pickled()
        return super().deserialize(serialized_data)


def _guard() -> _PickleGuard:
    """The guard, in DBOS's pickle serializer's place (put there on first use)."""
    current = getattr(dbos_serialization, "DBOSDefaultSerializer", None)
    if isinstance(current, _PickleGuard):
        return current
    if not isinstance(current, dbos_serialization.DefaultSerializer) or current.name() != _PICKLE:
        # Another DBOS version, that reads pickle elsewhere: no store is opened unguarded.
        raise RuntimeError("this DBOS version's pickle serializer cannot be guarded")
    guard = _PickleGuard()
    dbos_serialization.DBOSDefaultSerializer = guard
    return guard


def read_pickled_from_env() -> bool:
    return os.environ.get(READ_PICKLED_ENV, "").strip().lower() in ("1", "true", "yes")


@contextmanager
def reading_pickled(allowed: bool) -> Generator[None]:
    """Pickled records are read in the block only if `allowed` (else refused); the setting
    before is back after."""
    guard = _guard()
    before = guard.allowed
    guard.allowed = allowed
    try:
        yield
    finally:
        guard.allowed = before


@contextmanager
def refusals() -> Generator[list[None]]:
    """The pickled records refused in the block, even those DBOS only logged: its listings
    hand a row they cannot read on as its raw text."""
    found: list[None] = []
    token = _refused.set(found)
    try:
        yield found
    finally:
        _refused.reset(token)


@contextmanager
def refusing_decisions() -> Generator[None]:
    """Reads of decisions in the block: a pickled one raises `PickledDecision`."""
    try:
        yield
    except PickledDecision:
        raise
    except PickledRecord:
        raise pickled_decision() from None


@contextmanager
def refusing_for(run_id: str) -> Generator[None]:
    """Reads of run `run_id`'s records in the block: a pickled one raises `PickledRecord`
    (a decision: `PickledDecision`) naming the run."""
    with refusals() as found:
        try:
            yield
        except PickledDecision:
            raise pickled_decision(run_id) from None
        except PickledRecord:
            raise pickled(run_id) from None
    if found:
        raise pickled(run_id)


def stored_as(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` is a `kind`, raised here or read back from the store (DBOS reads an error
    back as a `PortableWorkflowError` with its type's name)."""
    if isinstance(exc, kind):
        return True
    return isinstance(exc, PortableWorkflowError) and exc.name == kind.__name__
