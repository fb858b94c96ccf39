"""Multi-round tool calls (2026-07-28): a run's state travels through the client, sealed.

When an agent on the client's model needs an answer from a 2026-07-28 client, the tool call
ends with an `InputRequiredResult`; its `requestState` is the run's last checkpoint (a
`RunState`), and the client's retry resumes the run from it. The SDK's
`RequestStateBoundary` encrypts the state on the way out and verifies it on the way back
(bound to the tool, its arguments and the bearer token), so handlers only see state they
minted. Replicas behind a load balancer must share the key (`[gateway] state_key_env`).

The variable may hold several keys, comma- or whitespace-separated: the first seals, every
one opens, so the key can change with no round refused (`state_keys`). A round sealed with a
key this process does not hold (replicas with different keys, a roll-out step skipped, a
restart without a shared key) is refused as the SDK refuses any bad state, and the log says
which setting to mend (`StateBoundary`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import (
    InvalidRequestState,
    RequestStateBoundary,
    RequestStateCodec,
    RequestStateSecurity,
)
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ...errors import ConfigError
from ...run_state import RunState

__all__ = [
    "STATE_TTL",
    "StateBoundary",
    "decode_state",
    "encode_state",
    "state_boundary",
    "state_keys",
]

log = logging.getLogger(__name__)

STATE_TTL = 1800.0
"""Seconds a client may take to answer one round (a person may approve each sampling)."""


def state_boundary(server_name: str, key_env: str | None) -> StateBoundary:
    """The middleware sealing `requestState`, keyed from `key_env` or per process."""
    if key_env is None:
        security = RequestStateSecurity.ephemeral(ttl=STATE_TTL)
        return StateBoundary(security, default_audience=server_name, key_env=None)
    keys = state_keys(os.environ.get(key_env, ""))
    if not keys:
        raise ConfigError(f"gateway.state_key_env: the environment variable {key_env} is not set")
    try:
        # The messages name a key by its position (`keys[1]`), never by its value.
        security = RequestStateSecurity(keys=keys, ttl=STATE_TTL)
    except ValueError as exc:
        raise ConfigError(f"gateway.state_key_env: {key_env}: {exc}") from exc
    return StateBoundary(security, default_audience=server_name, key_env=key_env)


class StateBoundary(RequestStateBoundary):
    """The SDK's boundary, which also tells the operator when a retry's state was sealed with
    a key this process does not hold. The SDK logs only "unknown key", and its client's error
    stays the SDK's ("Invalid or expired requestState": a client cannot mend the keys)."""

    def __init__(
        self, security: RequestStateSecurity, *, default_audience: str, key_env: str | None
    ) -> None:
        super().__init__(security, default_audience=default_audience)
        self._codec: RequestStateCodec = security.codec
        self._key_env = key_env

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            return await super().__call__(ctx, call_next)
        except MCPError as exc:
            wire = ctx.params.get("requestState") if ctx.params is not None else None
            if isinstance(wire, str) and exc.error.message == _REFUSED and self._unknown(wire):
                log.warning(_unknown_key(ctx.method, self._key_env))
            raise

    def _unknown(self, wire: str) -> bool:
        try:
            self._codec.unseal(wire)
        except InvalidRequestState as exc:
            return str(exc) == "unknown key"
        return False


_REFUSED = "Invalid or expired requestState"
"""The SDK's one message for every state it refuses."""


_LEFT_WAITING = (
    ". A stored run the round was for stays waiting for its decisions, which its client "
    "cannot send now (the state names the run, and could not be opened here): `agent-gateway "
    "runs list --status waiting_approval` lists it, `runs approve|deny|cancel RUN` ends its wait"
)
"""Said after either: the client's error names no run, and the run has no end of its own."""


def _unknown_key(method: str, key_env: str | None) -> str:
    refused = f"a 2026-07-28 client's {method} round was refused ('{_REFUSED}'): its requestState"
    if key_env is None:
        return (
            f"{refused} was sealed with a key this process does not hold: [gateway] "
            "state_key_env is not set, so each process seals with a key of its own, and a "
            "round another replica (or this gateway before a restart) sealed is refused. Set "
            f"state_key_env to a variable holding the same key on every replica{_LEFT_WAITING}"
        )
    return (
        f"{refused} was sealed with a key that is not in {key_env} ([gateway] state_key_env) "
        f"here: another replica seals with another key. Give every replica the same keys in "
        f"{key_env}; to change the key with no round refused, roll out OLD,NEW, then NEW,OLD, "
        f"then NEW, each step to every replica before the next{_LEFT_WAITING}"
    )


def state_keys(value: str) -> list[str]:
    """The keys in a `state_key_env` variable, comma- or whitespace-separated: the first
    seals, all open. Rotation, each step on every replica before the next: `old,new`, then
    `new,old`, then `new` once a round's time (`STATE_TTL`) has passed."""
    return value.replace(",", " ").split()


def encode_state(state: RunState) -> str:
    return state.model_dump_json()


def decode_state(text: str, agent: str) -> RunState | None:
    """The run to resume, or None when the state is not one of this agent's runs."""
    try:
        state = RunState.model_validate_json(text)
    except ValidationError:
        return None
    return state if state.agent == agent else None
