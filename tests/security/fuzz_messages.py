"""Hypothesis strategies for JSON-RPC messages, each with what the gateway must answer.

A drawn `Fuzz` is rendered with a number unique in the run (ids never repeat, so answers on
a pipelined stdio connection can be told apart) and says what it expects:

- `reply`:   a response or an error with its id (a valid request);
- `error`:   an error with its id (an unknown method, bad params, no 2026-07-28 envelope);
- `refuse`:  a -32700/-32600 error with its id if that id is valid, else null;
- `silent`:  nothing (HTTP 202): a notification, or a response to no request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

from .wire import MODERN, Era, modern_params

__all__ = ["REFUSAL_CODES", "Expect", "Fuzz", "fuzz_messages"]

Transport = Literal["http", "stdio"]
Category = Literal["reply", "error", "refuse", "silent"]
REFUSAL_CODES = (-32700, -32600)

REAL_METHODS = frozenset(
    [
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "subscriptions/listen",
        "sampling/createMessage",
        "elicitation/create",
        "roots/list",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "tasks/cancel",
    ]
)
"""Never drawn as 'unknown': `subscriptions/listen` alone would hold its request open."""


@dataclass(frozen=True)
class Expect:
    category: Category
    id: object = None


@dataclass(frozen=True)
class _Id:
    """How a message's id is made from the run's unique number."""

    kind: Literal["int", "huge", "negative", "string", "bool", "float", "array", "object", "null"]
    text: str = ""
    magnitude: int = 0

    def make(self, n: int) -> object:
        match self.kind:
            case "int":
                return n
            case "huge":
                return 10**self.magnitude + n
            case "negative":
                return -n
            case "string":
                return f"{self.text}#{n}"
            case "bool":
                return n % 2 == 0
            case "float":
                return n + 0.5
            case "array":
                return [n]
            case "object":
                return {"id": n}
            case "null":
                return None

    @property
    def valid(self) -> bool:
        return self.kind in ("int", "huge", "negative", "string")


@dataclass(frozen=True)
class Fuzz:
    """One message: a JSON body with an id to fill in, or raw bytes."""

    label: str
    category: Category
    body: dict[str, Any] | list[Any] | None = None
    id: _Id | None = None
    raw: bytes = b""
    ascii_only: bool = True
    envelope: bool = False
    """A request of 2026-07-28: its params get the per-request envelope."""

    def render(self, n: int, era: Era, transport: Transport) -> tuple[bytes, Expect]:
        if self.body is None:
            return self.raw, Expect("refuse")
        if isinstance(self.body, list):
            return json.dumps(self.body).encode(), Expect("refuse")
        body = dict(self.body)
        request_id = None
        if self.id is not None:
            request_id = self.id.make(n)
            body["id"] = request_id
        if self.envelope and era == MODERN:
            params: dict[str, Any] = body.get("params") or {}
            body["params"] = modern_params(params)
        data = json.dumps(body, ensure_ascii=self.ascii_only).encode()
        category = self.category
        if category == "silent" and "method" not in body and era == MODERN and transport == "http":
            category = "refuse"  # a 2026-07-28 POST carries one request or notification
            request_id = None
        if category == "refuse" and not (self.id is not None and self.id.valid):
            request_id = None
        return data, Expect(category, request_id)


_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(max_size=10), _json, max_size=4)
_not_objects = _json.filter(lambda value: not isinstance(value, dict))
_not_strings = _json.filter(lambda value: not isinstance(value, str))


def _repeated(char: str, times: int) -> str:
    return char * times


_long_text = st.builds(_repeated, st.characters(), st.integers(1000, 5000))
"""Long but cheap to draw: a long drawn text would overrun hypothesis's data budget."""
_valid_ids = st.one_of(
    st.just(_Id("int")),
    st.builds(_Id, kind=st.just("huge"), magnitude=st.integers(18, 80)),
    st.just(_Id("negative")),
    st.builds(_Id, kind=st.just("string"), text=st.text(max_size=30) | _long_text),
)
_invalid_ids = st.sampled_from(
    [_Id("bool"), _Id("float"), _Id("array"), _Id("object"), _Id("null")]
)
_any_ids = _valid_ids | _invalid_ids

_unknown_methods = (
    st.text(max_size=40)
    | st.sampled_from(["", "tools/", "TOOLS/LIST", "tools/list ", "rpc.discover", "../..", "\x00"])
).filter(lambda method: method not in REAL_METHODS and not method.startswith("notifications/"))


def _request(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    return body if params is None else {**body, "params": params}


@st.composite
def _valid_request(draw: st.DrawFn) -> Fuzz:
    ident = draw(_valid_ids)
    ascii_only = draw(st.booleans())
    choice = draw(st.sampled_from(["ping", "tools/list", "calculator", "any tool"]))
    if choice == "calculator":
        arguments = {"expression": draw(st.text(max_size=30) | st.just("6 * 7"))}
        body = _request("tools/call", {"name": "calculator", "arguments": arguments})
    elif choice == "any tool":
        name = draw(st.text(max_size=20))
        body = _request("tools/call", {"name": name, "arguments": draw(_objects)})
    else:
        empty: dict[str, Any] = {}
        body = _request(choice, draw(st.sampled_from([None, empty])))
    return Fuzz(f"request {choice}", "reply", body, ident, ascii_only=ascii_only, envelope=True)


@st.composite
def _failing_request(draw: st.DrawFn) -> Fuzz:
    """Valid JSON-RPC that the server must answer with an error."""
    ident = draw(_valid_ids)
    choice = draw(st.sampled_from(["unknown method", "bad name", "bad arguments", "bad uri"]))
    if choice == "unknown method":
        body = _request(draw(_unknown_methods), draw(st.none() | _objects))
    elif choice == "bad name":
        body = _request(
            draw(st.sampled_from(["tools/call", "prompts/get"])), {"name": draw(_not_strings)}
        )
    elif choice == "bad arguments":
        body = _request(
            "tools/call",
            {"name": "calculator", "arguments": draw(_not_objects.filter(lambda v: v is not None))},
        )
    else:
        body = _request("resources/read", {"uri": draw(_not_strings)})
    return Fuzz(f"request {choice}", "error", body, ident, envelope=True)


@st.composite
def _silent(draw: st.DrawFn) -> Fuzz:
    choice = draw(st.sampled_from(["notification", "cancel", "result", "error"]))
    if choice == "notification":
        method = "notifications/" + draw(st.text(max_size=20))
        return Fuzz("notification", "silent", _request(method, draw(st.none() | _objects)))
    if choice == "cancel":
        # Ids of this namespace are never sent: a cancel must not hit a fuzzed request.
        params = {"requestId": f"never-{draw(st.text(max_size=8))}"}
        return Fuzz("cancel", "silent", _request("notifications/cancelled", params))
    ident = draw(_valid_ids)
    if choice == "result":
        return Fuzz("response", "silent", {"jsonrpc": "2.0", "result": draw(_objects)}, ident)
    error = {"code": draw(st.integers(-40000, 40000)), "message": draw(st.text(max_size=20))}
    return Fuzz("error response", "silent", {"jsonrpc": "2.0", "error": error}, ident)


@st.composite
def _invalid_envelope(draw: st.DrawFn) -> Fuzz:
    choice = draw(
        st.sampled_from(
            [
                "bad id",
                "method not a string",
                "params not an object",
                "bad jsonrpc",
                "no jsonrpc",
                "batch",
                "not an object",
                "nothing to do",
                "result and error",
                "result not an object",
                "bad error",
                "null id request",
            ]
        )
    )
    ident = draw(_any_ids)
    base = _request("tools/list")
    if choice == "bad id":
        return Fuzz(choice, "refuse", base, draw(_invalid_ids.filter(lambda i: i.kind != "null")))
    if choice == "null id request":
        return Fuzz(choice, "refuse", base, _Id("null"))
    if choice == "method not a string":
        return Fuzz(choice, "refuse", {**base, "method": draw(_not_strings)}, ident)
    if choice == "params not an object":
        return Fuzz(
            choice,
            "refuse",
            {**base, "params": draw(_not_objects.filter(lambda v: v is not None))},
            ident,
        )
    if choice == "bad jsonrpc":
        return Fuzz(
            choice, "refuse", {**base, "jsonrpc": draw(_json.filter(lambda v: v != "2.0"))}, ident
        )
    if choice == "no jsonrpc":
        return Fuzz(choice, "refuse", {"method": "tools/list"}, ident)
    if choice == "batch":
        members = draw(st.lists(st.just(base) | _objects, max_size=3))
        return Fuzz(choice, "refuse", members)
    if choice == "not an object":
        return Fuzz(choice, "refuse", raw=json.dumps(draw(_not_objects)).encode())
    if choice == "nothing to do":
        return Fuzz(choice, "refuse", {"jsonrpc": "2.0", "params": draw(_objects)}, ident)
    if choice == "result and error":
        error = {"code": 1, "message": "x"}
        return Fuzz(choice, "refuse", {"jsonrpc": "2.0", "result": {}, "error": error}, ident)
    if choice == "result not an object":
        result = draw(_not_objects)
        return Fuzz(choice, "refuse", {"jsonrpc": "2.0", "result": result}, ident)
    error = draw(
        _not_objects
        | st.fixed_dictionaries(
            {
                "code": _not_strings.filter(
                    lambda v: not isinstance(v, int) or isinstance(v, bool)
                ),
                "message": _json,
            }
        )
    )
    return Fuzz(choice, "refuse", {"jsonrpc": "2.0", "error": error}, ident)


@st.composite
def _not_json(draw: st.DrawFn) -> Fuzz:
    choice = draw(st.sampled_from(["bytes", "cut short", "not UTF-8", "NaN", "deep"]))
    whole = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "y"}})
    if choice == "bytes":
        raw = draw(st.binary(min_size=1, max_size=200))
    elif choice == "cut short":
        raw = whole[: draw(st.integers(1, len(whole) - 1))].encode()
    elif choice == "not UTF-8":
        at = draw(st.integers(0, len(whole)))
        bad = draw(
            st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
        )
        raw = whole[:at].encode() + bad + whole[at:].encode()
    elif choice == "NaN":
        raw = whole.replace('"y"', draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))).encode()
    else:
        depth = draw(st.integers(100, 5000))
        raw = b"[" * depth + b"]" * depth
    # Lines on stdio: no newline inside, and an empty line frames no message.
    raw = raw.replace(b"\n", b" ")
    if not raw.strip():
        raw = b"x"
    return Fuzz(choice, "refuse", raw=raw)


def fuzz_messages() -> st.SearchStrategy[Fuzz]:
    return st.one_of(
        _valid_request(),
        _failing_request(),
        _silent(),
        _invalid_envelope(),
        _not_json(),
    )
