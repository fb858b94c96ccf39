"""Approval of a stored run's calls as DBOS messages: a durable wait any process can end.

A call waiting for approval is listed in the run's `approvals` event (what `runs list` and
`runs approve` read); a decision is a message on the run's `approval` topic,
`{"call": ..., "approved": ..., "message": ..., "refused_as": ..., "by": ..., "at_ms": ...,
"id": ...}`, sent by
`runs approve|deny` from any process, once per call (`decisions`). DBOS records each message
the workflow received, so a run resumed after a crash finds the decisions it had already
received in its records, and waits only for the others (a message sent while no process ran
the run waits in the store).

Before a call is listed, every decision the store holds for the run is taken in (sent while
no process ran it), unless a wait for one is on (it takes them in as they come): a resumed run
never lists, or announces, a call that is decided already. The calls of one step (`expect`)
are all listed before anyone is asked about one of them (`on_wait`), so a run stopped at its
first wait (`--no-wait`) leaves each of them listed, to be decided on its own.

A driver that will not wait for a person (`--no-wait`) has the run `leave` its waits: each
call waiting, and each asked after, stays listed and ends with `WaitLeft`, while the other
calls of its step run to their end (`StepLoop.dispatch`), so none of them runs again.

A call still listed when an execution ends (the run stopped while it waited: `--no-wait`, a
kill) is a question left open, which the next execution takes over (`earlier`). An older
agent-gateway named a call inside an agent run as a tool without the run's item (`h1/tool 0
c2` for item 1's call, `1:h1/tool 0 c2` now), so two items' calls could share a name: a
question it left open keeps its name for the one call that asks the same question (a
decision sent on it decides that call), and a call whose name it listed for another question
is asked under its name with its item said (`0:h1/tool 0 c2`), taking no decision meant for
that one. An agent
served by another gateway starts its run over then, and asks the same call under a new name:
it gets the open question's name (`asked_again`), so a decision made meanwhile decides it.
A question whose decision was handed on is no longer listed: it is never handed on twice.

Where the run can ask someone itself (`on_wait`: a form shown to the MCP client that started
it), it asks while it waits for the message: whichever comes first decides, and the other is
dropped (the form is withdrawn; a decision the form sends after another is refused).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import nullcontext
from functools import partial
from typing import Any, cast

import anyio
from dbos import DBOS
from pydantic import JsonValue, ValidationError

from toolkits import in_background

from ..approval import ApprovalRequest, Decision, WaitLeft
from .record_format import refusing_decisions

__all__ = [
    "APPROVALS_EVENT",
    "APPROVAL_TOPIC",
    "DbosApprovals",
    "decision_message",
    "open_questions",
]

APPROVALS_EVENT = "approvals"
APPROVAL_TOPIC = "approval"
RECV_SECONDS = 3600.0
"""One wait for a message; a run waits for as many as it takes."""

OnWait = Callable[[ApprovalRequest], Awaitable[None]]
"""Asks someone about a call waiting for approval, and sends their decision (as `runs approve`
would); cancelled when a decision came from elsewhere first."""

_log = logging.getLogger(__name__)


def decision_message(
    call: str, decision: Decision, *, by: str, at_ms: int, decision_id: str
) -> dict[str, JsonValue]:
    """A decision on `call` as its message: who sent it (`by`), when, and its own id."""
    return {
        "call": call,
        **decision.model_dump(mode="json"),
        "by": by,
        "at_ms": at_ms,
        "id": decision_id,
    }


class DbosApprovals:
    """The approver of one execution of a stored run's workflow."""

    def __init__(
        self,
        received: Iterable[Any],
        on_wait: OnWait | None = None,
        *,
        pending: dict[str, ApprovalRequest] | None = None,
        on_change: Callable[[], None] | None = None,
        earlier: Mapping[str, ApprovalRequest] | None = None,
    ) -> None:
        """`pending` is kept up to date with the calls waiting; `on_change` is called when
        one starts or stops waiting. `earlier`: the calls listed as waiting when the run's
        last execution ended."""
        self._decided: dict[str, Decision] = {}
        for message in received:
            self._take(message)
        self._pending: dict[str, ApprovalRequest] = {} if pending is None else pending
        self._earlier = dict(earlier or {})
        """Questions left open, not asked again yet: listed still, for `runs approve`."""
        self._before = dict(self._earlier)
        self._named: dict[str, str] = {}
        """The name each call is asked under, by its own (`_as_listed_before`)."""
        self._listed = set(self._earlier)
        """The calls the store lists as waiting now."""
        self._on_wait = on_wait
        self._on_change = on_change
        self._receiving = anyio.Lock()
        """One `recv` at a time: a message for another call is kept for it."""
        self._waiting = 0
        """Calls waiting for their decisions: whichever holds `_receiving` takes the messages
        in for all of them, as they come."""
        self._catch_ups = 0
        """How many catch-ups (`_catch_up`) have begun."""
        self._publishing = anyio.Lock()
        self._unsettled: set[str] = set()
        """Calls asked together (a step's, `expect`) neither listed as waiting nor decided yet:
        nobody is asked about a call before they are, so a run stopped at its first wait
        (`--no-wait`) leaves every one of them listed."""
        self._settled: anyio.Event | None = None
        self._leaving = False
        self._waits: set[anyio.CancelScope] = set()
        """The waits for a decision now: `leave` ends them."""
        self._left: dict[str, ApprovalRequest] = {}
        """Calls whose wait was left (or interrupted): listed still, for `runs approve`."""

    def leave(self) -> None:
        """Wait for no decision from now on (`--no-wait`): each call waiting, and each asked
        later, stays listed as waiting and raises `WaitLeft`."""
        self._leaving = True
        for wait in self._waits:
            wait.cancel()

    def expect(self, requests: Iterable[ApprovalRequest]) -> None:
        asked = (self._as_listed_before(r).call for r in requests)
        self._unsettled.update(call for call in asked if call not in self._decided)

    def _as_listed_before(self, request: ApprovalRequest) -> ApprovalRequest:
        """`request` under the name an older agent-gateway gave it, if that one left it open
        (see the module's docstring); each older name goes to one call."""
        name = self._named.get(request.call)
        if name is None:
            name = request.call
            older = _older_name(name)
            listed = self._before.get(older)
            taken = older in self._named.values()
            if listed is not None and _same_call(listed, request) and not taken:
                name = older
            elif older == name and (listed is not None or taken):  # it was another call's
                name = _item_said(name)
            self._named[request.call] = name
        return request if name == request.call else request.model_copy(update={"call": name})

    def asked_again(self, request: ApprovalRequest, under: str) -> ApprovalRequest | None:
        for call, asked in self._earlier.items():
            if call.startswith(under) and _same_question(asked, request):
                del self._earlier[call]
                return request.model_copy(update={"call": call})
        return None

    async def decide(self, request: ApprovalRequest) -> Decision:
        request = self._as_listed_before(request)
        call = request.call
        self._earlier.pop(call, None)  # asked again by its name (the same call resumed)
        self._unsettled.add(call)  # questions of one round come in one by one, unannounced
        try:
            if call not in self._decided and not self._waiting:
                # Nobody takes messages in now: a decision sent meanwhile (while no process
                # ran the run, or before this call was asked) is still in the store.
                await self._catch_up()
            if call not in self._decided:
                await self._wait_for(request)
        finally:
            self._settle(call)
        if call in self._listed:
            # Not listed once its decision is handed on (before: a run stopped after it is
            # not handed it again for a call asked anew).
            await self._publish()
        return self._decided[call]

    async def _catch_up(self) -> None:
        """Take in every decision the store holds for the run, unless one begun since this
        call was asked did (one after another, each call of a step would take its own)."""
        begun = self._catch_ups
        async with self._receiving:
            if self._catch_ups > begun:
                return
            self._catch_ups += 1
            with refusing_decisions():  # an older version's, pickled: said as such
                while (message := await DBOS.recv_async(APPROVAL_TOPIC, 0)) is not None:
                    self._take(message)

    async def _wait_for(self, request: ApprovalRequest) -> None:
        """List `request` as waiting, and wait for its decision; raises `WaitLeft` once the
        wait is left (`leave`), and it stays listed."""
        call = request.call
        self._pending[call] = request
        self._waiting += 1
        try:
            await self._publish()
            self._settle(call)
            if self._leaving:
                await self._ask(request)  # said, not waited for
            else:
                await self._wait(request)
        finally:
            # Left, or interrupted (Ctrl-C, a signal), the call still waits in the store, where
            # `runs approve` finds it, and the run resumed later takes the decision.
            self._waiting -= 1
            del self._pending[call]
            if call not in self._decided:
                self._left[call] = request
        if call not in self._decided:
            raise WaitLeft(call)

    async def _wait(self, request: ApprovalRequest) -> None:
        """Wait for `request`'s decision, asking `on_wait` meanwhile, unless `leave` ends it."""
        # Asked of nobody (a run handle's client), the wait takes no task group.
        asking = (
            in_background(partial(self._ask, request), wait_started=False)
            if self._on_wait is not None
            else nullcontext()
        )
        with anyio.CancelScope() as wait:
            self._waits.add(wait)
            try:
                async with asking:
                    while request.call not in self._decided:
                        await self._receive(request.call, wait_seconds=RECV_SECONDS)
            finally:
                self._waits.discard(wait)

    def _settle(self, call: str) -> None:
        """`call` is listed as waiting, or decided."""
        self._unsettled.discard(call)
        if not self._unsettled and self._settled is not None:
            self._settled.set()
            self._settled = None

    async def _all_settled(self) -> None:
        while self._unsettled:
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()

    async def _ask(self, request: ApprovalRequest) -> None:
        """Ask `on_wait` while the decision may come from elsewhere too (then this is
        cancelled). Its failure is no answer: the call waits for a decision all the same."""
        if self._on_wait is None:
            return
        await self._all_settled()  # the calls asked with it are listed first
        try:
            await self._on_wait(request)
        except Exception:
            _log.exception("asking about %s failed; it waits for `runs approve`", request.call)

    async def _receive(self, call: str, *, wait_seconds: float) -> None:
        """Take the next message (for any call), unless `call`'s decision came meanwhile."""
        async with self._receiving:
            if call not in self._decided:
                with refusing_decisions():  # an older version's, pickled: said as such
                    self._take(await DBOS.recv_async(APPROVAL_TOPIC, wait_seconds))

    def _take(self, message: Any) -> None:
        if not isinstance(message, dict):
            return  # a wait that timed out (None), or not one of ours
        data = cast(dict[str, Any], message)
        try:  # who sent it, and when, are for people
            decision = Decision.model_validate(
                {
                    "approved": data.get("approved"),
                    "message": data.get("message"),
                    "refused_as": data.get("refused_as"),
                }
            )
        except ValidationError:
            return
        call = data.get("call")
        if isinstance(call, str) and call not in self._decided:  # the first decision stands
            self._decided[call] = decision

    async def _publish(self) -> None:
        async with self._publishing:
            listed = {**self._earlier, **self._left, **self._pending}
            waiting = {call: r.model_dump(mode="json") for call, r in listed.items()}
            await DBOS.set_event_async(APPROVALS_EVENT, waiting)
            self._listed = set(listed)
        if self._on_change is not None:  # once what it reads in the store is there
            self._on_change()


def open_questions(listed: Any) -> dict[str, ApprovalRequest]:
    """The calls a run's `approvals` event lists as waiting (what its last execution left)."""
    if not isinstance(listed, dict):
        return {}
    found: dict[str, ApprovalRequest] = {}
    for call, request in cast(dict[str, Any], listed).items():
        try:
            found[call] = ApprovalRequest.model_validate(request)
        except ValidationError:
            continue
    return found


def _same_question(a: ApprovalRequest, b: ApprovalRequest) -> bool:
    return (a.tool, a.input, a.agents, a.item) == (b.tool, b.input, b.agents, b.item)


def _same_call(listed: ApprovalRequest, request: ApprovalRequest) -> bool:
    """Whether an older agent-gateway listed `request` (it said item 0 for every call inside
    an agent run as a tool)."""
    return (listed.tool, listed.input, listed.agents) == (
        request.tool,
        request.input,
        request.agents,
    ) and listed.item in (0, request.item)


_ITEM_KEY = re.compile(r"^\d+:")
"""An item's tool call key in a call's path (`1:h1`, `journal.call_key`)."""


def _older_name(call: str) -> str:
    """`call`'s name as an older agent-gateway gave it: its path without items."""
    path, _, own = call.rpartition("/")
    if not path:
        return own
    return "/".join([*(_ITEM_KEY.sub("", key) for key in path.split("/")), own])


def _item_said(call: str) -> str:
    """The name of item 0's call `call` (`h1/tool 0 c2`) with its item said (`0:h1/...`):
    a name no call of this version has, for a call whose own an older one gave another."""
    return f"0:{call}" if "/" in call else call
