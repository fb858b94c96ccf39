"""A stored run's checkpoints: each writes what its step added, not the whole state again.

The state is cut into content-addressed chunks and a skeleton that names them (`chunks`). A
checkpoint is one DBOS step named `CHECKPOINT_STEP` returning the skeleton and the chunks no
earlier checkpoint of the run wrote; the run's state is its last checkpoint's skeleton, read
with the chunks of them all. So the run's records grow with what it did, where the whole
state kept as its `state` event each time (as earlier versions did) grew with the square of
its steps: DBOS keeps every value an event had. A step is written whole or not at all, so a
process killed at any moment leaves a state to resume.

A run an earlier version stored has its state in its `state` event: read as it is until the
run's first checkpoint here, after which the event says `MOVED`, so that an earlier version
refuses the run (`MOVED` is no state) instead of finding none and starting it over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import anyio
from dbos import DBOS
from pydantic import JsonValue

from toolkits.json_bytes import json_bytes

from ..errors import UnreadableRun
from ..run_state import RunState, stored_state
from .chunks import ChunkError, Packer, unpack
from .status import CHECKPOINT_STEP, STATE_EVENT

__all__ = ["MOVED", "Checkpoints", "state_of"]

MOVED = '{"moved":"to the checkpoint steps of a newer agent-gateway"}'
"""The `state` event of a run checkpointed by this version."""


class Checkpoints:
    """The checkpoints of one execution of a run's workflow (a `run_state.Checkpoint`),
    given the run's step records so far and its `state` event."""

    def __init__(self, steps: Iterable[Mapping[str, Any]], saved: object) -> None:
        self._written = set(_checkpoints(steps)[1])
        """The hashes of the chunks the run's records hold."""
        self._moved = saved == MOVED
        self._packer = Packer()
        self._lock = anyio.Lock()

    async def __call__(self, state: RunState) -> None:
        # One at a time: the last one written is the latest state.
        async with self._lock:
            skeleton, chunks = self._packer.pack(state.model_dump(mode="json"))
            new = {digest: c for digest, c in chunks.items() if digest not in self._written}

            async def checkpoint() -> JsonValue:
                return {"state": skeleton, "chunks": new}

            await DBOS.run_step_async({"name": CHECKPOINT_STEP}, checkpoint)
            self._written.update(new)
            if not self._moved:  # after a checkpoint: until then, an earlier one is the state
                await DBOS.set_event_async(STATE_EVENT, MOVED)
                self._moved = True


def state_of(run_id: str, saved: object, steps: Iterable[Mapping[str, Any]]) -> RunState | None:
    """A run's state: its last checkpoint's among its step records (`list_workflow_steps`),
    else the one its `state` event holds (`saved`: an earlier version's); None if neither.
    Raises `UnreadableRun` if its records lack what its state names (a damaged store) or
    its state does not validate."""
    skeleton, chunks = _checkpoints(steps)
    if skeleton is None and isinstance(saved, str) and saved != MOVED:
        return stored_state(saved, run_id)
    if skeleton is None and saved != MOVED:
        return None
    try:
        if skeleton is None:
            raise ChunkError("its checkpoints are missing")
        state = unpack(skeleton, chunks)
    except ChunkError as exc:
        raise UnreadableRun(f"the state of run {run_id} cannot be read: {exc}") from None
    return stored_state(json_bytes(state), run_id)


def _checkpoints(steps: Iterable[Mapping[str, Any]]) -> tuple[JsonValue, dict[str, JsonValue]]:
    """The last checkpoint's skeleton (None: no checkpoint) and every chunk, by hash."""
    skeleton: JsonValue = None
    chunks: dict[str, JsonValue] = {}
    ordered = sorted(steps, key=lambda step: cast(int, step["function_id"]))
    for step in ordered:
        output = step["output"]
        mine = step["function_name"] == CHECKPOINT_STEP and step["error"] is None
        if mine and isinstance(output, dict):
            checkpoint = cast(dict[str, Any], output)
            skeleton = checkpoint["state"]
            chunks.update(checkpoint["chunks"])
    return skeleton, chunks
