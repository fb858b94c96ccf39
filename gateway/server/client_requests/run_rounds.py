"""Multi-round tool calls (2026-07-28): a run's state travels through the client, sealed.

When an agent on the client's model needs an answer from a 2026-07-28 client, the tool call
ends with an `InputRequiredResult`; its `requestState` is the run's last checkpoint (a
`RunState`), and the client's retry resumes the run from it. The SDK's
`RequestStateBoundary` encrypts the state on the way out and verifies it on the way back
(bound to the tool, its arguments and the bearer token), so handlers only see state they
minted. Replicas behind a load balancer must share the key (`[gateway] state_key_env`).
"""

from __future__ import annotations

import os

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from pydantic import ValidationError

from ...errors import ConfigError
from ...run_state import RunState

__all__ = ["STATE_TTL", "decode_state", "encode_state", "state_boundary"]

STATE_TTL = 1800.0
"""Seconds a client may take to answer one round (a person may approve each sampling)."""


def state_boundary(server_name: str, key_env: str | None) -> RequestStateBoundary:
    """The middleware sealing `requestState`, keyed from `key_env` or per process."""
    if key_env is None:
        return RequestStateBoundary(
            RequestStateSecurity.ephemeral(ttl=STATE_TTL), default_audience=server_name
        )
    key = os.environ.get(key_env, "")
    if not key:
        raise ConfigError(f"gateway.state_key_env: the environment variable {key_env} is not set")
    try:
        security = RequestStateSecurity(keys=[key], ttl=STATE_TTL)
    except ValueError as exc:
        raise ConfigError(f"gateway.state_key_env: {key_env}: {exc}") from exc
    return RequestStateBoundary(security, default_audience=server_name)


def encode_state(state: RunState) -> str:
    return state.model_dump_json()


def decode_state(text: str, agent: str) -> RunState | None:
    """The run to resume, or None when the state is not one of this agent's runs."""
    try:
        state = RunState.model_validate_json(text)
    except ValidationError:
        return None
    return state if state.agent == agent else None
