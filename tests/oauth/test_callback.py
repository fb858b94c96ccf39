"""The loopback callback of an authorization, over real HTTP on 127.0.0.1: only the redirect
that brings back the awaited `state` ends the wait; anything else any local process (or web
page) sends there is refused and changes nothing."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthFlowError

from toolkits.mcp.oauth_callback import free_loopback_port, receive_callback, redirect_uri

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

STATE = "the-awaited-state"


async def test_a_callback_without_the_awaited_state_is_refused_and_the_wait_goes_on() -> None:
    port = free_loopback_port()
    answers: list[tuple[int, str]] = []

    async def visit() -> None:
        async with httpx2.AsyncClient() as http:
            for query in (
                "code=forged&state=attacker",
                "error=access_denied",  # an <img src=...> on any page the user has open
                "error=access_denied&state=attacker",
                "code=forged",
                f"code=real&state={STATE}&iss=https://as.example.com",
            ):
                answer = await http.get(f"{redirect_uri(port)}?{query}")
                answers.append((answer.status_code, answer.text))

    with anyio.fail_after(10):
        result = await receive_callback(port, visit, state=STATE, within=10)
    assert (result.code, result.state, result.iss) == ("real", STATE, "https://as.example.com")
    assert [status for status, _ in answers] == [400, 400, 400, 400, 200]
    for _, page in answers[:4]:
        assert "This is not the authorization agent-gateway awaits." in page
        assert "Authorised" not in page
    assert "Authorised." in answers[4][1]
    assert all(STATE not in page for _, page in answers)


async def test_an_error_that_brings_the_awaited_state_ends_the_wait() -> None:
    port = free_loopback_port()

    async def visit() -> None:
        async with httpx2.AsyncClient() as http:
            await http.get(f"{redirect_uri(port)}?error=access_denied&state={STATE}")

    with anyio.fail_after(10), pytest.raises(OAuthFlowError) as refused:
        await receive_callback(port, visit, state=STATE, within=10)
    assert str(refused.value) == "the authorization server refused: access_denied"
