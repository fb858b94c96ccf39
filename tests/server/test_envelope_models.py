"""The envelope's own checks let through only what the SDK's message models take: the HTTP
layer checks a POST without the models (the SDK validates the message when it serves it), so
a message the checks pass must never be one the models refuse (whose dump would echo it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.server.transports.envelope import Refusal, check_message, decode_message, too_long
from toolkits import json_bytes

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
IDS = st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=5) | JSON
FIELD = {
    "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON,
    "id": IDS,
    "method": st.text(max_size=8) | JSON,
    "params": st.dictionaries(st.text(max_size=5), JSON, max_size=3) | JSON,
    "result": st.dictionaries(st.text(max_size=5), JSON, max_size=3) | JSON,
    "error": st.fixed_dictionaries(
        {},
        optional={
            "code": st.integers() | JSON,
            "message": st.text(max_size=5) | JSON,
            "data": JSON,
        },
    )
    | JSON,
}


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.sets(st.sampled_from(sorted(FIELD)), min_size=1))
    message = {name: draw(FIELD[name]) for name in names}
    if draw(st.booleans()):
        message["jsonrpc"] = "2.0"
    return message


@settings(max_examples=2000, deadline=None)
@given(message=messages())
def test_what_the_checks_pass_the_models_take(message: dict[str, Any]) -> None:
    checked = check_message(json_bytes(message))
    if isinstance(checked, Refusal):
        assert not checked.message.startswith("Invalid Request: not a JSON-RPC"), message


@pytest.mark.parametrize(
    ("head", "echoed"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"x": "', 7),
        (b' {"method":"ping","_meta":{"id":1},"id":"a\xc3\xa9"', "a\u00e9"),
        (b'{"params": {"id": 5, "pad": "xxxx', None),  # only the params' own id so far
        (b'{"jsonrpc": "2.0", "id": true, "params": {', None),
        (b'{"jsonrpc": "2.0", "id": 1.5, "params": {', None),
        (b'{"jsonrpc": "2.0", "id": "\xc3', None),  # cut inside the id
        (b'["id", 3]', None),
        (b'{"a": ' + b"[" * 5000, None),  # nested past the recursion limit
    ],
)
def test_an_over_long_message_echoes_the_id_it_starts_with(head: bytes, echoed: object) -> None:
    refusal = too_long(head, 100)
    assert refusal.id == echoed
    assert refusal.code == -32600
    assert refusal.message == "Invalid Request: the message is longer than 100 bytes"


@pytest.mark.parametrize("token", [True, None, 1.5, {"a": 1}, ["t"]])
def test_a_progress_token_is_a_string_or_an_integer(token: object) -> None:
    params = {"_meta": {"progressToken": token}}
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": params}
    refusal = decode_message(json.dumps(request).encode())
    assert isinstance(refusal, Refusal)
    assert (refusal.code, refusal.id) == (-32602, 3)
    # A notification is never answered, whatever it carries.
    notification = {key: value for key, value in request.items() if key != "id"}
    assert not isinstance(decode_message(json.dumps(notification).encode()), Refusal)
