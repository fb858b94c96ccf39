"""Who is calling is one identity per caller, across issuers and kinds of credential: an
OAuth subject is qualified by its issuer, a client acting for itself is marked as one, a
static token is its name or its digest's label (`token-<hex>`), and none of them can spell another's. Runs, their handles and
decisions, and chat memory sessions are keyed by it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.durable.tree import call_tree
from gateway.errors import ConfigError
from gateway.server.transports.auth import oauth_caller
from gateway.server.transports.static_tokens import token_label
from tests.servers.openai_stub import openai_stub

from .test_resource_server import client, gateway_behind_oauth, post, text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

A = "https://a.example.com"
B = "https://b.example.com/realms/b"


def test_an_oauth_caller_is_qualified_by_its_issuer_and_spells_no_other_kind() -> None:
    assert oauth_caller(A, "alice", "claude") == f"{A}#alice"
    assert oauth_caller(f"{A}/", "alice", None) == f"{A}#alice"  # one issuer, one spelling
    assert oauth_caller(A, None, "svc") == f"{A}#client:svc"
    callers = [
        oauth_caller(A, "alice", None),
        oauth_caller(B, "alice", None),
        oauth_caller(A, None, "svc"),
        oauth_caller(A, "client:svc", None),  # a subject posing as a client
        oauth_caller(A, "client%3Asvc", None),  # ... or as that subject, escaped
        oauth_caller(B, token_label("static-token-9f2e"), None),  # ... or as a static token
        token_label("static-token-9f2e"),
        oauth_caller(B, "ann", None),  # ... or a named one
        "ann",
    ]
    assert len(set(callers)) == len(callers), callers
    assert oauth_caller(A, "client:svc", None) == f"{A}#client%3Asvc"
    with pytest.raises(ValueError, match="neither a subject"):
        oauth_caller(A, None, None)


def test_an_issuer_with_a_fragment_is_refused() -> None:
    oauth = {"resource": "https://gw.example.com/mcp", "authorization_servers": [f"{A}#x"]}
    with pytest.raises(ConfigError, match="no fragment"):
        parse_config({"gateway": {"oauth": oauth}})


def _gated(tmp_path: Path, runs: int) -> dict[str, Any]:
    """The assistant's table: each of `runs` runs calls the calculator, which needs a person's
    approval; the first approved answers."""
    script = tmp_path / "gated.json"
    call = {"name": "calculator", "arguments": {"expression": "6 * 7"}}
    answers = [{"tool_calls": [call]}] * runs + [{"content": "It is 42."}]
    script.write_text(json.dumps(answers))
    return {"model": f"scripted:{script}", "require_approval": ["calculator"]}


async def _start(url: str, token: str) -> str:
    async with client(url, token) as session:
        handle = await session.call_tool("assistant", {"prompt": "What is 6 * 7?"})
    assert handle.structured_content is not None, handle
    assert handle.structured_content["run"]["status"] == "waiting_approval"
    return str(handle.structured_content["run"]["run_id"])


async def _refused(url: str, token: str, run_id: str) -> None:
    async with client(url, token) as session:
        for tool in ("get_run", "approve_run"):
            refused = await session.call_tool(tool, {"run_id": run_id})
            assert refused.is_error, tool
            assert text(refused) == f"no run {run_id!r} started by this client"


async def test_no_caller_reaches_a_run_of_another_issuer_or_kind_with_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(
        tmp_path, monkeypatch, assistant=_gated(tmp_path, 3), stored=True, issuers=2
    ) as served:
        a, b = served.issuer, served.others[0]
        alice_at_a = a.token(served.url, sub="alice")
        svc_at_a = a.token(served.url, sub=None, client_id="svc")  # a client for itself
        alices_run = await _start(served.url, alice_at_a)
        static_run = await _start(served.url, served.static)
        svc_run = await _start(served.url, svc_at_a)

        await _refused(served.url, b.token(served.url, sub="alice"), alices_run)
        await _refused(served.url, b.token(served.url, sub=token_label(served.static)), static_run)
        for issuer in (a, b):
            await _refused(served.url, issuer.token(served.url, sub="client:svc"), svc_run)

        # The owners still reach their runs, and a decision says who made it.
        async with client(served.url, svc_at_a) as session:
            seen = await session.call_tool("get_run", {"run_id": svc_run})
            assert not seen.is_error, text(seen)
        async with client(served.url, alice_at_a) as session:
            approved = await session.call_tool("approve_run", {"run_id": alices_run})
            assert text(approved) == "It is 42."
        assert served.runs is not None
        state = await served.runs.state(alices_run)
        steps = await served.runs.steps(alices_run)
    [calculator] = [call for call in call_tree(steps) if call.kind == "tool"]
    assert state is not None
    assert state.started_by == f"{a.url}#alice"
    assert calculator.approval is not None
    assert calculator.approval["by"] == f"MCP client {a.url}#alice"


async def test_the_same_subject_of_two_issuers_has_two_chat_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = ["Noted.", "I know no secret of yours.", "It is PINEAPPLE-42."]
    with openai_stub(answers) as model:
        async with gateway_behind_oauth(
            tmp_path, monkeypatch, assistant={"model": model.spec}, issuers=2
        ) as served:
            a, b = served.issuer, served.others[0]
            for issuer, question in (
                (a, "my secret is PINEAPPLE-42"),
                (b, "what is my secret?"),
                (a, "what is my secret?"),
            ):
                async with client(served.url, issuer.token(served.url, sub="alice")) as c:
                    arguments = {"prompt": question, "session_id": "diary"}
                    assert not (await c.call_tool("assistant", arguments)).is_error
    sent = [[m["content"] for m in model.messages(n)[1:]] for n in range(3)]
    assert sent[1] == ["what is my secret?"]
    assert sent[2] == ["my secret is PINEAPPLE-42", "Noted.", "what is my secret?"]


async def test_an_introspected_token_naming_nobody_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Such tokens would all be one caller, sharing each other's runs and sessions."""
    async with gateway_behind_oauth(tmp_path, monkeypatch) as served:
        good = {"active": True, "scope": "mcp", "exp": int(time.time()) + 60, "aud": served.url}
        served.issuer.opaque = {"nobody": good, "a-client": good | {"client_id": "svc"}}
        assert (await post(served.url, "nobody")).status_code == 401
        assert (await post(served.url, "a-client")).status_code not in (401, 403)
