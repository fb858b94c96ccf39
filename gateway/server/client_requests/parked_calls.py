"""Proxied requests that outlive a round: a downstream server's questions for 2026-07-28 clients.

A 2026-07-28 client cannot be sent requests: a server that needs its answer ends the request
with an `InputRequiredResult`, and the client retries the request with the answers. But a
downstream server that asks during a proxied call (sampling, elicitation, roots) keeps waiting
for its answer, so for these clients the proxied request runs in a task of its own, owned by
the serving run rather than by one round:

- a round waits for the request's next event: a question ends the round with an
  `InputRequiredResult` whose `requestState` names the parked request (the state boundary
  seals it, bound to the request and the caller); the result ends the last round;
- the client's retry brings answers to the questions still open, then waits again; the
  downstream server's progress and log messages go to whichever round is waiting, and those
  that arrive while none waits go out, in order, at the start of the next round.

Behind a load balancer the retry may reach another replica: the state names the replica that
runs the request (`Here`), and another replica sends the round on to it (`forwarding`).
A retry that reaches no replica running its request is refused with a clear error, and the
client calls again. A question left unanswered for
`ANSWER_TIMEOUT` s is refused to the downstream server, or after `yield_after` s once another
caller's question waits on it (`CallContext.yield_after`: a client that gave up a round says
nothing); a result nobody collects is dropped after `KEEP_RESULT` s; cancelling a round (the
client gave up) cancels the request.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolkits import CallContext, ProgressCallback, ServerLogHandler
from toolkits.mcp.server_requests import refusal

from .forwarding import Here

__all__ = ["ANSWER_TIMEOUT", "KEEP_RESULT", "STATE_PREFIX", "ParkedCalls"]

STATE_PREFIX = "agent-gateway/parked:"
ANSWER_TIMEOUT = 600.0
"""Seconds a question may wait for the client's retry: a person may have to answer it."""
KEEP_RESULT = 600.0
MAX_BACKLOG = 10_000
"""Notifications kept for the next round; past this the oldest go, with a warning."""

log = logging.getLogger(__name__)

_R = TypeVar("_R")

Work = Callable[[CallContext], Awaitable[_R]]
"""The proxied request, given the context to call its node with."""
Elsewhere = Callable[[str, str], Awaitable[Any]]
"""A round of a request parked on another replica (its URL, the request's state), answered
there."""


_Note = tuple[float, float | None, str | None] | types.LoggingMessageNotificationParams
"""A progress report (done, total, message) or a log message of the downstream server."""


@dataclass
class _Question:
    request: types.InputRequest
    answered: anyio.Event
    answer: types.InputResponse | None = None


class _Parked(Generic[_R]):
    """One proxied request running across rounds."""

    def __init__(
        self,
        check: Callable[[types.InputRequest], str | None],
        register: Callable[[_Parked[Any]], str],
        scope: anyio.CancelScope,
        yield_after: float | None,
    ) -> None:
        self._yield_after = yield_after
        self._token: str | None = None
        self._register = register
        self._check = check
        self._scope = scope
        self._questions: dict[str, _Question] = {}
        self._keys = itertools.count(1)
        self._changed: anyio.Event | None = None
        """Set when a question or the outcome comes; made by a round that waits for one."""
        self._outcome: tuple[_R] | BaseException | None = None
        self._taken = False
        self._was_taken: anyio.Event | None = None
        self._report: ProgressCallback | None = None
        self._log: ServerLogHandler | None = None
        self._backlog: deque[_Note] = deque(maxlen=MAX_BACKLOG)

    @property
    def token(self) -> str:
        """The state a retry names it by: made when first needed (most requests finish in
        their first round, and nothing retries them)."""
        if self._token is None:
            self._token = self._register(self)
        return self._token

    @property
    def registered(self) -> str | None:
        """The token, if one was made (only then can a retry find it)."""
        return self._token

    async def run(
        self,
        work: Work[_R],
        meta: Mapping[str, Any],
        answerable: Mapping[str, Any],
        forget: Callable[[], None],
    ) -> None:
        context = CallContext(
            on_progress=self.progress,
            meta=meta,
            on_log=self.log,
            answer=self.ask,
            owner=self,
            answerable=answerable,
            yield_after=self._yield_after,
        )
        try:
            with self._scope:
                try:
                    self._outcome = (await work(context),)
                except Exception as exc:  # delivered to the round, which raises it
                    self._outcome = exc
            if self._outcome is None:
                self._outcome = MCPError(types.REQUEST_TIMEOUT, "the request was cancelled")
            self._wake()
            if self._report is not None or self._taken:  # a round waits: it takes the outcome
                return
            self._was_taken = anyio.Event()
            with anyio.move_on_after(KEEP_RESULT):
                await self._was_taken.wait()
        finally:
            forget()

    def cancel(self) -> None:
        self._scope.cancel()
        self._take()

    def _take(self) -> None:
        self._taken = True
        if self._was_taken is not None:
            self._was_taken.set()

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """The downstream server's question: asked of the client in the next round."""
        problem = self._check(request)
        if problem is not None:
            return refusal(request, problem)
        key = f"{request.method}#{next(self._keys)}"
        question = self._questions[key] = _Question(request, anyio.Event())
        self._wake()
        try:
            with anyio.move_on_after(ANSWER_TIMEOUT):
                await question.answered.wait()
        finally:
            del self._questions[key]
        if question.answer is None:
            return refusal(request, f"the client gave no answer within {ANSWER_TIMEOUT:g} s")
        return question.answer

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        await self._notify((done, total, message))

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._notify(params)

    async def _notify(self, note: _Note) -> None:
        """Send `note` through the waiting round; between rounds, keep it for the next one."""
        if self._report is None or self._backlog:
            if len(self._backlog) == MAX_BACKLOG:
                log.warning(
                    "%s: %d notifications wait for a round; dropping the oldest",
                    self.token,
                    MAX_BACKLOG,
                )
            self._backlog.append(note)
            return
        await self._send(note, self._report, self._log)

    @staticmethod
    async def _send(note: _Note, report: ProgressCallback, log: ServerLogHandler | None) -> None:
        if isinstance(note, tuple):
            await report(*note)
        elif log is not None:
            await log(note)

    def deliver(self, answers: Mapping[str, types.InputResponse]) -> None:
        for key, answer in answers.items():
            question = self._questions.get(key)
            if question is not None and not question.answered.is_set():
                question.answer = answer
                question.answered.set()

    async def round(
        self, report: ProgressCallback, log: ServerLogHandler
    ) -> _R | types.InputRequiredResult:
        self._report, self._log = report, log
        try:
            while self._backlog:  # what arrived between rounds, in order, before anything new
                await self._send(self._backlog.popleft(), report, log)
            while True:
                changed = self._changed
                if changed is None:
                    changed = self._changed = anyio.Event()
                open_questions = {
                    key: q.request for key, q in self._questions.items() if not q.answered.is_set()
                }
                if open_questions:
                    return types.InputRequiredResult(
                        input_requests=open_questions, request_state=self.token
                    )
                outcome = self._outcome
                if outcome is not None:
                    self._take()
                    if isinstance(outcome, BaseException):
                        raise outcome
                    return outcome[0]
                await changed.wait()
        except anyio.get_cancelled_exc_class():
            self.cancel()  # the client gave up on the request
            raise
        finally:
            self._report = self._log = None

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


class ParkedCalls:
    """The parked requests of one serving run; their tasks live in its task group. `here`
    says where other replicas reach this one (its tokens name it); `yield_after`, how long a
    request's open question may hold up another caller's (`CallContext.yield_after`)."""

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        here: Here | None = None,
        yield_after: float | None = None,
    ) -> None:
        self._tg = task_group
        self._yield_after = yield_after
        self._parked: dict[str, _Parked[Any]] = {}
        self._here = here
        self._scope_type = type(task_group.cancel_scope)
        """The backend's: `anyio.CancelScope()` asks which library runs first, every time."""

    def new_scope(self) -> anyio.CancelScope:
        """A cancel scope for `serve`'s request to run in."""
        return self._scope_type()

    def _register(self, parked: _Parked[Any]) -> str:
        here = self._here.url if self._here is not None else None
        token = STATE_PREFIX + secrets.token_urlsafe(16) + (f"@{here}" if here else "")
        self._parked[token] = parked
        return token

    async def serve(
        self,
        params: types.InputResponseRequestParams,
        work: Work[_R],
        *,
        meta: Mapping[str, Any],
        check: Callable[[types.InputRequest], str | None],
        answerable: Mapping[str, Any],
        report: ProgressCallback,
        log: ServerLogHandler,
        elsewhere: Elsewhere | None = None,
        scope: anyio.CancelScope | None = None,
    ) -> _R | types.InputRequiredResult:
        """Run `work` (first round) or continue it (a retry naming it), for one round; a
        retry of a request parked on another replica goes to `elsewhere(owner, state)`.

        `meta` is the `_meta` the request's node call carries. The round's `report` and `log`
        take the request's progress and log messages. `check` says why the client cannot
        answer a question (None: it can); `answerable`, what it answers, as client
        capabilities (`CallContext.answerable`). Raises what `work` raised, or `MCPError` for a
        retry whose request is not running here. `scope` (from `new_scope`): the one the
        request runs in, for `work` to set deadlines on (a node call's clock); cancelled when
        a round is (the client gave up).
        """
        state = params.request_state
        if state is None:
            parked: _Parked[_R] = _Parked(
                check, self._register, scope or self.new_scope(), self._yield_after
            )

            def forget() -> None:
                token = parked.registered
                if token is not None:
                    self._parked.pop(token, None)

            # Started from this task, so the request's context variables carry over.
            self._tg.start_soon(parked.run, work, meta, answerable, forget)
        else:
            found = self._parked.get(state)
            owner = state.partition("@")[2]
            here = self._here.url if self._here is not None else None
            if found is None and elsewhere is not None and owner and owner != here:
                answer: _R | types.InputRequiredResult = await elsewhere(owner, state)
                return answer
            if found is None:
                raise MCPError(
                    types.INVALID_PARAMS,
                    "the request this retry continues is not running here any more (it finished, "
                    f"waited more than {ANSWER_TIMEOUT:g} s, or ran on another replica); "
                    "send it again",
                )
            parked = found
            parked.deliver(params.input_responses or {})
        return await parked.round(report, log)
