"""A run recorded before tool results were made well-formed resumes (`ScopedJournal`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from pydantic import JsonValue

from gateway.journal import ScopedJournal

pytestmark = pytest.mark.anyio


class Recorded:
    """A journal holding what an earlier execution of the run recorded."""

    def __init__(self, recorded: dict[str, JsonValue]) -> None:
        self.recorded = recorded

    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        del nested
        return self.recorded[name] if name in self.recorded else await call()


async def _not_again() -> JsonValue:
    raise AssertionError("a recorded call ran again")


async def test_a_lone_surrogate_recorded_is_read_as_u_fffd() -> None:
    # JSON's "\ud800" from a server, recorded as read: no checkpoint of the run could store it.
    journal = ScopedJournal(Recorded({"a/tool 0 c1": {"observation": ["bad\ud800x", 1]}}), "a/")
    recorded = await journal.record("tool 0 c1", _not_again)
    assert recorded == {"observation": ["bad\ufffdx", 1]}
