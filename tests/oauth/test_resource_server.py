"""`serve --http` as an OAuth 2.1 resource server: protected resource metadata, JWT access
tokens checked against a real issuer's JWKS over HTTP, opaque tokens by introspection, scopes
mapped to agents and nodes, no token passthrough, the subject on the run and in its trace."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import mcp_types as types
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.durable import DurableRuns, open_runs
from gateway.errors import ConfigError
from gateway.run_state import RunOrigin
from gateway.server import build_server, http_app, http_options
from gateway.server.transports.static_tokens import token_label
from gateway.trace import TraceEvent
from tests.servers.asgi import RecordHeaders, serve_on_loopback
from tests.servers.inprocess import ToyServer
from tests.servers.openai_stub import openai_stub
from toolkits.mcp.oauth_callback import free_loopback_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


ORIGIN = RunOrigin(config="/srv/agent-gateway.toml", config_sha256="0" * 64, model="scripted:x")
INTROSPECTION_CLIENT = "Basic " + base64.b64encode(b"gateway:introspection-secret").decode()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64_int(value: int) -> str:
    return b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class Issuer:
    """An identity provider's token side: signing keys (JWKS), metadata, introspection."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.published = {self.kid: self.key}
        """The keys its JWKS lists: `key` and those it signed with before (`rotate`)."""
        self.url = ""
        self.opaque: dict[str, dict[str, Any]] = {}
        self.introspections = 0
        self.introspected_from: set[int] = set()
        """The client ports introspection requests came from (one: one connection)."""
        self.jwks_asked = 0
        self.jwks_held: anyio.Event | None = None
        """While set and not yet set off, the JWKS is not answered (a slow endpoint)."""
        self.jwks_waiting = anyio.Event()
        """Set when a JWKS request is held."""
        self.jwks_status = 200
        """Anything else: the JWKS answers that, with no keys (an issuer down)."""
        self.introspection_status = 200
        """Anything else: introspection answers that, with no answer (an endpoint down)."""
        self.introspection_held: anyio.Event | None = None
        """While set and not yet set off, introspection is not answered (a slow endpoint)."""
        self.metadata_status = 200
        """Anything else: the metadata answers that, with no metadata."""

    def app(self) -> Starlette:
        async def metadata(_request: Request) -> JSONResponse:
            if self.metadata_status != 200:
                return JSONResponse({}, status_code=self.metadata_status)
            return JSONResponse(
                {
                    "issuer": self.url,
                    "authorization_endpoint": f"{self.url}/authorize",
                    "token_endpoint": f"{self.url}/token",
                    "jwks_uri": f"{self.url}/jwks",
                }
            )

        async def jwks(_request: Request) -> JSONResponse:
            self.jwks_asked += 1
            if self.jwks_status != 200:
                return JSONResponse({}, status_code=self.jwks_status)
            if self.jwks_held is not None:
                self.jwks_waiting.set()
                await self.jwks_held.wait()
            listed: list[dict[str, str]] = []
            for kid, key in self.published.items():
                numbers = key.public_key().public_numbers()
                public = {"kty": "RSA", "n": b64_int(numbers.n), "e": b64_int(numbers.e)}
                listed.append(public | {"kid": kid, "use": "sig"})
            return JSONResponse({"keys": listed})

        async def introspect(request: Request) -> Response:
            self.introspections += 1
            if request.client is not None:
                self.introspected_from.add(request.client.port)
            if self.introspection_status != 200:
                return JSONResponse({}, status_code=self.introspection_status)
            if self.introspection_held is not None:
                await self.introspection_held.wait()
            if request.headers.get("authorization") != INTROSPECTION_CLIENT:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            token = str((await request.form()).get("token"))
            # json.dumps, not JSONResponse: an answer may hold NaN, as a broken server's may.
            answer = json.dumps(self.opaque.get(token, {"active": False}))
            return Response(answer, media_type="application/json")

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", metadata),
                Route("/jwks", jwks),
                Route("/introspect", introspect, methods=["POST"]),
            ]
        )

    def rotate(self) -> None:
        """Sign with a new key from now on, listed beside the old ones."""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = f"key-{len(self.published) + 1}"
        self.published[self.kid] = self.key

    def token(
        self, resource: str, *, key: Any = None, kid: str | None = None, **claims: Any
    ) -> str:
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": resource,
            "sub": "alice",
            "client_id": "claude",
            "scope": "mcp",
            "iat": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
        } | claims
        body = {k: v for k, v in body.items() if v is not None}
        headers = {"kid": kid or self.kid}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers=headers)


@dataclass
class Served:
    url: str
    issuer: Issuer
    events: list[TraceEvent]
    downstream: RecordHeaders
    static: str = "static-token-9f2e"
    tokens_seen: list[str] = field(default_factory=list[str])
    others: list[Issuer] = field(default_factory=list[Issuer])
    """The configured issuers after the first (`issuers`)."""
    runs: DurableRuns | None = None
    """The run store (`stored`)."""


@asynccontextmanager
async def gateway_behind_oauth(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    assistant: dict[str, Any] | None = None,
    stored: bool = False,
    issuers: int = 1,
    **oauth: Any,
) -> AsyncGenerator[Served]:
    """The gateway serving `assistant` (a script saying hello, with what `assistant` sets in
    its table; chat memory in this process) and the calculator and toy servers behind OAuth;
    with `stored`, its runs in a run store (and the run handles served); `issuers`
    authorization servers, each with keys of its own."""
    issuer, *others = [Issuer() for _ in range(issuers)]
    monkeypatch.setenv("GW_TOKENS", "static-token-9f2e")
    monkeypatch.setenv("GW_INTROSPECT", "introspection-secret")
    toy = ToyServer("toy")
    toy.add_echo("echo")
    downstream = RecordHeaders(toy.server.streamable_http_app(host="127.0.0.1"))
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "hello from the agent"}]))
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with AsyncExitStack() as stack:
        for each in (issuer, *others):
            each.url = await stack.enter_async_context(serve_on_loopback(each.app()))
        issuer_url = issuer.url
        toy_url = await stack.enter_async_context(serve_on_loopback(downstream))
        port = free_loopback_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        settings: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": [each.url for each in (issuer, *others)],
            "required_scopes": ["mcp"],
            "introspection_endpoint": f"{issuer_url}/introspect",
            "introspection_client_id": "gateway",
            "introspection_client_secret_env": "GW_INTROSPECT",
        } | oauth
        config = parse_config(
            {
                "gateway": {
                    "expose_tools": True,
                    "tokens_env": "GW_TOKENS",
                    "oauth": settings,
                    "memory": "memory://",
                },
                "mcpServers": {"toy": {"url": f"{toy_url}/mcp"}},
                "tools": {"calculator": {"builtin": "calculator"}},
                "agents": {
                    "assistant": {"model": f"scripted:{script}", "tools": ["calculator"]}
                    | (assistant or {})
                },
            }
        )
        async with (
            open_gateway(config, hooks=[record]) as gateway,
            open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs,
        ):
            if stored:
                runs.use(gateway)
            server, _router = build_server(
                gateway, config.gateway, runs=runs if stored else None, origin=ORIGIN
            )
            app = http_app(server, http_options(f"127.0.0.1:{port}", config.gateway))
            async with serve_on_loopback(app, port=port) as base:
                assert base.endswith(str(port))
                yield Served(
                    url=resource,
                    issuer=issuer,
                    events=events,
                    downstream=downstream,
                    others=others,
                    runs=runs if stored else None,
                )


@asynccontextmanager
async def client(url: str, token: str, mode: str = "legacy") -> AsyncGenerator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as c:
        yield c


async def post(url: str, token: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx2.AsyncClient() as http:
        return await http.post(url, json=body, headers=headers)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_metadata_is_published_and_a_401_points_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        refused = await post(served.url, None)
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        metadata_url = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        # No credentials sent: no error code (RFC 6750 §3.1), what to ask for and where.
        assert challenge == f'Bearer scope="mcp", resource_metadata="{metadata_url}"'
        async with httpx2.AsyncClient() as http:
            for url in (
                metadata_url,
                served.url.replace("/mcp", "/.well-known/oauth-protected-resource"),
            ):
                document = (await http.get(url)).json()
                assert document["resource"] == served.url
                assert document["authorization_servers"] == [served.issuer.url]
                assert document["scopes_supported"] == ["mcp"]


async def test_a_valid_jwt_calls_an_agent_and_its_subject_is_on_the_run_and_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        token = served.issuer.token(served.url)
        async with client(served.url, token) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"assistant", "calculator", "toy__echo"} <= names
            answer = await session.call_tool("assistant", {"prompt": "hi"})
            assert text(answer) == "hello from the agent"
            echoed = await session.call_tool("toy__echo", {"a": 1})
            assert not echoed.is_error
    [run_id] = {e.run_id for e in served.events if e.kind == "run"}
    assert {e.subject for e in served.events if e.run_id == run_id} == {
        f"{served.issuer.url}#alice"
    }
    # The client's token went nowhere downstream: the toy server saw no Authorization at all.
    assert all("authorization" not in seen for seen in served.downstream.seen)


async def test_each_subjects_sessions_are_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob naming alice's `session_id` gets a conversation of his own: his model is sent none
    of hers, and his turns are not added to hers."""
    answers = ["Noted.", "I know no secret of yours.", "It is PINEAPPLE-42."]
    with openai_stub(answers) as model:
        async with gateway_behind_oauth(
            tmp_path, monkeypatch, assistant={"model": model.spec}
        ) as served:
            for subject, question in (
                ("alice", "my secret is PINEAPPLE-42"),
                ("bob", "what is my secret?"),
                ("alice", "what is my secret?"),
            ):
                async with client(served.url, served.issuer.token(served.url, sub=subject)) as c:
                    arguments = {"prompt": question, "session_id": "shared1"}
                    assert not (await c.call_tool("assistant", arguments)).is_error
    sent = [[m["content"] for m in model.messages(n)[1:]] for n in range(3)]
    assert sent[1] == ["what is my secret?"]
    assert sent[2] == ["my secret is PINEAPPLE-42", "Noted.", "what is my secret?"]


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_proxied_call_records_the_callers_subject_on_its_trace(
    era: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        for token in (served.issuer.token(served.url, sub="bob"), served.static):
            async with client(served.url, token, era) as session:
                assert not (await session.call_tool("toy__echo", {"a": 1})).is_error
    calls = [e for e in served.events if e.kind == "tool" and e.name == "toy__echo"]
    by_run = {e.run_id: e.subject for e in calls}
    assert sorted(by_run.values(), key=str) == [
        f"{served.issuer.url}#bob",
        token_label(served.static),
    ]
    assert {e.phase for e in calls} == {"start", "end"}


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("expired", {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}),
        ("wrong audience", {"aud": "https://elsewhere.example.com/mcp"}),
        ("no audience", {"aud": None}),
        ("wrong issuer", {"iss": "https://idp.evil.example.com"}),
    ],
)
async def test_a_jwt_that_is_not_for_this_gateway_is_refused(
    case: str, claims: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        refused = await post(served.url, served.issuer.token(served.url, **claims))
        assert refused.status_code == 401, case
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
        accepted = await post(served.url, served.issuer.token(served.url))
        assert accepted.status_code not in (401, 403)  # past auth: the MCP layer answers


async def test_a_token_expired_within_the_leeway_is_taken_and_one_past_it_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`exp` is allowed 30 s of clock skew (`leeway`), for JWTs and introspected tokens alike;
    a token past that is refused with the reason in the log, as every refused token is."""
    caplog.set_level(logging.INFO, logger="gateway.server.transports.oauth_tokens")
    now = int(time.time())
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        good = {"active": True, "sub": "bob", "scope": "mcp", "aud": served.url}
        served.issuer.opaque = {
            "opaque-skewed": good | {"exp": now - 10},
            "opaque-expired": good | {"exp": now - 100},
        }
        skewed = served.issuer.token(served.url, exp=now - 10, iat=now - 310)
        for token in (skewed, "opaque-skewed"):
            assert (await post(served.url, token)).status_code not in (401, 403), token
        assert "refused a bearer token" not in caplog.text
        expired = served.issuer.token(served.url, exp=now - 100, iat=now - 400)
        for token in (expired, "opaque-expired"):
            assert (await post(served.url, token)).status_code == 401, token
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert refusals == [
        "refused a bearer token: Signature has expired",
        "refused a bearer token: the token has expired",
    ]


async def test_a_forged_or_unsigned_jwt_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        forged = served.issuer.token(served.url, key=other_key)
        assert (await post(served.url, forged)).status_code == 401
        header, body, _ = served.issuer.token(served.url).split(".")
        unsigned = b64(b'{"alg":"none","typ":"JWT"}') + f".{body}."
        assert (await post(served.url, unsigned)).status_code == 401
        assert (await post(served.url, f"{header}.{body}.")).status_code == 401


async def test_a_token_without_a_required_scope_is_forbidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        refused = await post(served.url, served.issuer.token(served.url, scope="other"))
        assert refused.status_code == 403
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


async def test_scopes_decide_which_agents_and_nodes_a_client_sees_and_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes = {"agents": ["assistant"], "tools:toy": ["toy"], "admin": ["*"]}
    async with gateway_behind_oauth(tmp_path, monkeypatch, scopes=scopes) as served:
        narrow = served.issuer.token(served.url, scope="mcp agents")
        async with client(served.url, narrow) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {"assistant"}
            assert not (await session.call_tool("assistant", {"prompt": "hi"})).is_error
            # Answered with a 403 a client can step up from (test_scope_challenge); a client
            # holding a fixed token can only fail.
            with pytest.raises(MCPError):
                await session.call_tool("toy__echo", {"a": 1})
        wide = served.issuer.token(served.url, scope="mcp admin")
        async with client(served.url, wide) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"assistant", "calculator", "toy__echo"} <= names
        # A static token is the operator's: it sees everything.
        async with client(served.url, served.static) as session:
            assert not (await session.call_tool("toy__echo", {"a": 1})).is_error


async def test_opaque_tokens_are_introspected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        now = int(time.time())
        good = {"active": True, "sub": "bob", "scope": "mcp", "exp": now + 60, "aud": served.url}
        served.issuer.opaque = {
            "opaque-good": good,
            "opaque-inactive": good | {"active": False},
            "opaque-elsewhere": good | {"aud": "https://elsewhere.example.com/mcp"},
            "opaque-expired": good | {"exp": now - 3600},
            "opaque-not-yet": good | {"nbf": now + 1000},
        }
        assert (await post(served.url, "opaque-good")).status_code not in (401, 403)
        refused = ["opaque-inactive", "opaque-elsewhere", "opaque-expired", "opaque-not-yet"]
        for token in [*refused, "opaque-unknown"]:
            assert (await post(served.url, token)).status_code == 401, token
        assert served.issuer.introspections == 6


def test_oauth_counts_as_protection_for_a_public_address_and_bad_urls_are_refused() -> None:
    oauth = {
        "resource": "https://gw.example.com/mcp",
        "authorization_servers": ["https://idp.example.com"],
    }
    settings = parse_config({"gateway": {"oauth": oauth}}).gateway
    options = http_options("0.0.0.0:8443", settings)
    assert options.oauth is not None
    with pytest.raises(ConfigError, match="use https"):
        parse_config({"gateway": {"oauth": oauth | {"resource": "http://gw.example.com/mcp"}}})


@pytest.mark.parametrize("algorithm", ["none", "HS256", "HS512", "RS1", ""])
def test_algorithms_take_only_signatures_by_the_issuers_private_key(algorithm: str) -> None:
    oauth = {
        "resource": "https://gw.example.com/mcp",
        "authorization_servers": ["https://idp.example.com"],
        "algorithms": ["RS256", algorithm],
    }
    with pytest.raises(ConfigError, match=r"algorithms: .*not accepted: \['" + algorithm):
        parse_config({"gateway": {"oauth": oauth}})
    with pytest.raises(ConfigError, match=r"not accepted: none listed"):
        parse_config({"gateway": {"oauth": oauth | {"algorithms": []}}})
    assert parse_config({"gateway": {"oauth": oauth | {"algorithms": ["ES256", "EdDSA"]}}})


def test_an_unset_introspection_secret_is_refused_at_startup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    oauth = {
        "resource": "https://gw.example.com/mcp",
        "authorization_servers": ["https://idp.example.com"],
        "introspection_endpoint": "https://idp.example.com/introspect",
        "introspection_client_id": "gateway",
        "introspection_client_secret_env": "GW_UNSET_INTROSPECT",
    }
    monkeypatch.delenv("GW_UNSET_INTROSPECT", raising=False)
    settings = parse_config({"gateway": {"oauth": oauth}}).gateway
    with pytest.raises(ConfigError, match=r"GW_UNSET_INTROSPECT is not set or empty"):
        http_options("127.0.0.1:8443", settings)
    monkeypatch.setenv("GW_UNSET_INTROSPECT", "s3cret")
    assert http_options("127.0.0.1:8443", settings).oauth is not None


async def test_a_token_signed_by_a_key_rotated_in_since_the_keys_were_fetched_gets_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its issuer's keys are fetched again at most once a minute: until then the token may be
    good, and a client told `invalid_token` would throw it away and get another like it."""
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        taken = await post(served.url, served.issuer.token(served.url))
        assert taken.status_code not in (401, 403, 503)  # past auth: the MCP layer answers
        served.issuer.rotate()
        refused = await post(served.url, served.issuer.token(served.url))
        assert refused.status_code == 503, refused.text
        assert 55 <= int(refused.headers["retry-after"]) <= 60
        said = refused.json()
        assert said["error"] == "temporarily_unavailable"
        assert re.match(  # a second or two ago on a loaded machine
            rf"signing key 'key-2' is not among the keys of {re.escape(served.issuer.url)}"
            r" fetched \d s ago; they may be fetched again in \d+ s$",
            said["error_description"],
        ), said["error_description"]
        assert served.issuer.jwks_asked == 1


async def test_a_token_whose_issuer_cannot_be_reached_gets_503_not_invalid_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = f"http://127.0.0.1:{free_loopback_port()}"
    async with gateway_behind_oauth(
        tmp_path, monkeypatch, introspection_endpoint=f"{closed}/introspect", jwks_uri=closed
    ) as served:
        # The keys are fetched again a minute after the fetch that failed.
        for token, retry in (
            ("opaque-token", (30, 30)),
            (served.issuer.token(served.url), (55, 60)),
        ):
            refused = await post(served.url, token)
            assert refused.status_code == 503, refused.text
            assert retry[0] <= int(refused.headers["retry-after"]) <= retry[1]
            assert refused.json()["error"] == "temporarily_unavailable"
        assert (await post(served.url, served.static)).status_code not in (401, 403, 503)
