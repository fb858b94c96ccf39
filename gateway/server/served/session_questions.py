"""A server's questions during a call passed through on a 2025-era session, put to the
session's client as the SDK's session path puts them (`ask_client.relay_to_client`).

A question goes out on the call's own answer (an event stream from then on) under an id of
ours, a string, which the SDK's own requests (numbered) never take. The client POSTs its
answer on the session; `PassThrough` hands it here before the SDK could see it, and drop it as
the answer to a request it never sent. A client that lacks the capability is not asked (the
usual path's refusal), nor waited on past `ANSWER_TIMEOUT`, nor once the connection that
carried the question closed (the client went: without an event store, nothing it might answer
could reach the call's own answer again). A call that ends meanwhile (cancelled, its session
gone), or a wait that times out, withdraws its question, as the SDK's session path does: the
client is sent `notifications/cancelled` for it (on the call's answer, before it ends), so it
can close the form it shows; a late answer goes to the SDK, which ignores it as it ignores any
answer it no longer waits for.
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio
import mcp_types as types
from mcp_types.methods import validate_client_result
from pydantic import ValidationError

from toolkits import validation_brief
from toolkits.mcp.server_requests import refusal

from ..client_requests.ask_client import answer_type, in_era, missing_capability
from ..client_requests.parked_calls import ANSWER_TIMEOUT

__all__ = ["Asking", "SessionQuestions"]

JsonObject = dict[str, Any]


class Asking(Protocol):
    """The answer of the call that asks: where its question goes to the client."""

    async def message(self, message: JsonObject) -> None:
        """Send one message to the client on the call's answer."""
        ...

    def awaiting_client(self) -> AbstractContextManager[bool]:
        """The block waits on the client: cancelled if the client goes meanwhile; it gets
        False if the client is gone already."""
        ...


_ids = itertools.count(1)
_WITHDRAW_SECONDS = 2.0
"""How long telling the client that a question is withdrawn may take."""


@dataclass(slots=True)
class _Waiting:
    arrived: anyio.Event
    answer: JsonObject | None = None


class SessionQuestions:
    """The questions of one session's calls that wait on its client."""

    __slots__ = ("_capabilities", "_closed", "_version", "_waiting")

    def __init__(self, capabilities: types.ClientCapabilities, version: str) -> None:
        self._capabilities = capabilities
        self._version = version
        self._waiting: dict[str, _Waiting] = {}
        self._closed: types.ErrorData | None = None

    async def ask(
        self, on: Asking, request: types.InputRequest
    ) -> types.InputResponse | types.ErrorData:
        """The client's answer to `request`, or why it was not asked or did not answer."""
        problem = missing_capability(self._capabilities, request)
        if problem is not None:
            return refusal(request, problem)
        if self._closed is not None:
            return self._closed
        question_id = f"agent-gateway-question-{next(_ids)}"
        waiting = self._waiting[question_id] = _Waiting(anyio.Event())
        wire = in_era(request, self._version).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        asked = False
        try:
            with anyio.fail_after(ANSWER_TIMEOUT), on.awaiting_client() as there:
                if there:
                    await on.message({"jsonrpc": "2.0", "id": question_id, **wire})
                    asked = True
                    await waiting.arrived.wait()
        except TimeoutError:
            why = f"the upstream client gave no answer within {ANSWER_TIMEOUT:g} s"
            if asked:
                await _withdraw(on, question_id)
            return refusal(request, why)
        except anyio.get_cancelled_exc_class():
            if asked and waiting.answer is None:
                await _withdraw(on, question_id)
            raise
        finally:
            del self._waiting[question_id]
        if waiting.answer is None:
            return refusal(request, "the upstream client went away before it answered")
        return self._read(request, waiting.answer)

    def close(self, answer: types.ErrorData) -> None:
        """The client can answer nothing more (over stdio, its input ended): the questions
        waiting, and those asked from now on, get `answer` as its refusal."""
        self._closed = answer
        error = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        for question_id in list(self._waiting):
            self.answered({"jsonrpc": "2.0", "id": question_id, "error": error})

    def answered(self, message: JsonObject) -> bool:
        """Take `message`, POSTed by the client, if it answers a question waiting here."""
        question_id = message.get("id")
        waiting = self._waiting.get(question_id) if isinstance(question_id, str) else None
        if waiting is None or waiting.answer is not None or "method" in message:
            return False
        waiting.answer = message
        waiting.arrived.set()
        return True

    def _read(
        self, request: types.InputRequest, message: JsonObject
    ) -> types.InputResponse | types.ErrorData:
        """The answer as the SDK reads it (`ServerSession.send_request`)."""
        try:
            if "error" in message:  # the client's own refusal, passed on as it is
                return types.ErrorData.model_validate(message["error"], by_name=False)
            result = message.get("result")
            if not isinstance(result, dict):
                raise TypeError("it has no result")
            with suppress(KeyError):  # a method this version has no surface for: the model judges
                validate_client_result(request.method, self._version, cast(JsonObject, result))
            return answer_type(request).model_validate(result, by_name=False)
        except (ValidationError, TypeError) as exc:
            brief = validation_brief(exc, "it") if isinstance(exc, ValidationError) else str(exc)
            return refusal(request, f"the upstream client's answer is malformed: {brief}")


async def _withdraw(on: Asking, question_id: str) -> None:
    """Tell the client that question `question_id` is void, as the SDK's session path does
    (in its words)."""
    params = {"requestId": question_id, "reason": "caller cancelled"}
    with anyio.move_on_after(_WITHDRAW_SECONDS, shield=True):
        await on.message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
