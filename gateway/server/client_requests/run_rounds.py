"""Multi-round tool calls (2026-07-28): a run's state travels through the client, sealed.

When an agent on the client's model needs an answer from a 2026-07-28 client, the tool call
ends with an `InputRequiredResult`; its `requestState` is the run's last checkpoint (a
`RunState`), and the client's retry resumes the run from it. The SDK's
`RequestStateBoundary` encrypts the state on the way out and verifies it on the way back
(bound to the tool, its arguments and the bearer token), so handlers only see state they
minted. Replicas behind a load balancer must share the key (`[gateway] state_key_env`).

The variable may hold several keys, comma- or whitespace-separated: the first seals, every
one opens, so the key can change with no round refused (`state_keys`).
"""

from __future__ import annotations

import os

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from pydantic import ValidationError

from ...errors import ConfigError
from ...run_state import RunState

__all__ = ["STATE_TTL", "decode_state", "encode_state", "state_boundary", "state_keys"]

STATE_TTL = 1800.0
"""Seconds a client may take to answer one round (a person may approve each sampling)."""


def state_boundary(server_name: str, key_env: str | None) -> RequestStateBoundary:
    """The middleware sealing `requestState`, keyed from `key_env` or per process."""
    if key_env is None:
        return RequestStateBoundary(
            RequestStateSecurity.ephemeral(ttl=STATE_TTL), default_audience=server_name
        )
    keys = state_keys(os.environ.get(key_env, ""))
    if not keys:
        raise ConfigError(f"gateway.state_key_env: the environment variable {key_env} is not set")
    try:
        # The messages name a key by its position (`keys[1]`), never by its value.
        security = RequestStateSecurity(keys=keys, ttl=STATE_TTL)
    except ValueError as exc:
        raise ConfigError(f"gateway.state_key_env: {key_env}: {exc}") from exc
    return RequestStateBoundary(security, default_audience=server_name)


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
