"""The journal of a run executing as a DBOS workflow: each model and tool call a DBOS step."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from dbos import DBOS
from pydantic import JsonValue

from .status import call_name, journal_name

__all__ = ["DbosJournal"]

_log = logging.getLogger(__name__)


class DbosJournal:
    """Answers calls recorded by an earlier execution of this workflow by their names; runs
    the others as DBOS steps named after them, and keeps what each returned in `made` (by
    call name), if given: what this process knows of the run when the store is away."""

    def __init__(
        self, recorded: dict[str, JsonValue], made: dict[str, JsonValue] | None = None
    ) -> None:
        self._recorded = recorded
        self._made = made

    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        name = journal_name(name)  # never one of the store's own names
        if name in self._recorded:
            return self._recorded[name]
        # A nested call (an agent) runs outside any step, and only its result is recorded:
        # DBOS would run a step's own steps as plain calls, unrecorded.
        done: JsonValue = await call() if nested else None

        async def step() -> JsonValue:
            return done if nested else await call()

        result: JsonValue = await DBOS.run_step_async({"name": name}, step)
        _log.info("recorded %s", name)
        if self._made is not None:
            self._made[call_name(name)] = result
        return result
