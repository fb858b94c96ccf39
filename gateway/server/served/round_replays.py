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
  tool again and is asked again.

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
    ) -> Answer:
        """`await answer()` for the first round sent under `key`; a round sent again gets
        that answer, or an error result saying why it cannot (naming the `what`, `agent` or
        `tool`, called)."""
        self._forget_expired()
        state, answers = key
        first = self._rounds.get(state)
        if first is None:
            first = self._rounds[state] = _Round(answers)
            try:
                first.answer = await answer()
            finally:
                first.done.set()
            self._keep_answer(first)
            return first.answer
        if first.answers != answers:
            return error_result(
                f"{what} {agent!r}: this round was answered already, with other answers, and "
                "its decision stands. Call the tool again to start over."
            )
        await first.done.wait()
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
