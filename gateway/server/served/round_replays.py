"""A 2026-07-28 round sent twice runs once (a served agent without a run store, or the
approval round of a proxied call: `proxied_approval`).

Without a store, a round's `requestState` is the run's checkpoint itself, sealed, and the
retry that carries the answers resumes the run from it. The same state sent again (a client
that lost the answer and retries) would run the step again: a tool a person approved once
would run twice. So each round is answered once in this process:

- the same state with the same answers gets the first answer (waiting for it while the
  first still runs), for as long as the state could be accepted (`STATE_TTL`: a state is
  refused after that anyway);
- the same state with other answers is refused: the round was decided;
- if the first ended without an answer (its request closed, which cancels a run without a
  store), a second is refused too: what it approved may have run, so the client calls the
  tool again and is asked again;
- a round whose answers answered nothing (none sent, or under keys it did not ask) only asks
  its questions again: it decided nothing, so it is not remembered, and the answers to the
  questions it asked again are taken.

A round that reaches another process (replicas behind a load balancer) is not known there:
replicas that must not run a round twice keep their runs in a run store, where a round names
its run (`stored_runs`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import anyio
import mcp_types as types

from toolkits import error_result

from ..client_requests.run_rounds import STATE_TTL

__all__ = ["KEPT_ANSWERS", "RoundReplays", "round_key"]

KEPT_ANSWERS = 256
"""Rounds whose answer is kept for a replay; older ones only remember that they ran."""

Answer = types.CallToolResult | types.InputRequiredResult


def round_key(
    agent: str,
    subject: str | None,
    request_state: str,
    answers: Mapping[str, types.InputResponse] | None,
) -> tuple[str, str]:
    """What identifies a round (the agent, the caller, the state), and its answers."""
    state = hashlib.sha256(f"{agent}\0{subject or ''}\0{request_state}".encode()).hexdigest()
    dumped = {
        key: answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        for key, answer in (answers or {}).items()
    }
    given = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return state, hashlib.sha256(given.encode()).hexdigest()


@dataclass
class _Round:
    answers: str
    started: float = field(default_factory=time.monotonic)
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None
    dropped: bool = False
    """Its answer was let go (`KEPT_ANSWERS`)."""


class RoundReplays:
    """The rounds this process answered lately, by `round_key`."""

    def __init__(self, keep: float = STATE_TTL, kept_answers: int = KEPT_ANSWERS) -> None:
        self._keep = keep
        self._kept_answers = kept_answers
        self._rounds: dict[str, _Round] = {}
        self._answered: list[_Round] = []
        """The rounds whose answer is kept, oldest first."""

    async def once(
        self,
        key: tuple[str, str],
        agent: str,
        answer: Callable[[], Awaitable[Answer]],
        *,
        what: str = "agent",
        decides: Callable[[Answer], bool] = lambda _: True,
    ) -> Answer:
        """`await answer()` for the first round sent under `key`; a round sent again gets
        that answer, or an error result saying why it cannot (naming the `what`, `agent` or
        `tool`, called). An answer that `decides` nothing (the round's questions asked again)
        is not remembered: the round stays open to its answers."""
        state, answers = key
        while True:
            self._forget_expired()
            first = self._rounds.get(state)
            if first is None:
                return await self._first(state, answers, answer, decides)
            await first.done.wait()
            if first.answers == answers or self._rounds.get(state) is first:
                break
            # Its first decided nothing (and is forgotten): these answers may decide it.
        if first.answers != answers:
            return error_result(
                f"{what} {agent!r}: this round was answered already, with other answers, and "
                "its decision stands. Call the tool again to start over."
            )
        if first.answer is not None:
            return first.answer
        why = (
            "its answer is no longer kept"
            if first.dropped
            else "its call ended before it answered (its request was closed), and what it "
            "approved may have run"
        )
        return error_result(
            f"{what} {agent!r}: this round was answered already, but {why}. Call the tool again "
            "to start over."
        )

    async def _first(
        self,
        state: str,
        answers: str,
        answer: Callable[[], Awaitable[Answer]],
        decides: Callable[[Answer], bool],
    ) -> Answer:
        first = self._rounds[state] = _Round(answers)
        try:
            first.answer = await answer()
        finally:
            first.done.set()
        if decides(first.answer):
            self._keep_answer(first)
        elif self._rounds.get(state) is first:
            del self._rounds[state]
        return first.answer

    @property
    def remembered(self) -> int:
        """Rounds remembered now (answered, or being answered)."""
        return len(self._rounds)

    def _keep_answer(self, answered: _Round) -> None:
        self._answered.append(answered)
        while len(self._answered) > self._kept_answers:
            oldest = self._answered.pop(0)
            oldest.answer, oldest.dropped = None, True

    def _forget_expired(self) -> None:
        """Forget rounds started longer ago than a state is accepted: a replay of one is
        refused before it gets here (the state was made before the round started)."""
        horizon = time.monotonic() - self._keep
        while self._rounds:
            state, known = next(iter(self._rounds.items()))  # the oldest
            if known.started > horizon:
                break
            del self._rounds[state]
            if known.answer is not None:
                self._answered.remove(known)
