"""`OAuthTokens` against a real issuer over HTTP: a slow or unreachable JWKS holds up no token
whose key is known, refetches for unknown keys are rate-limited and time-limited, and
introspection answers are kept a while, on one HTTP client."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from gateway.resource_server import ResourceServerSettings
from gateway.server.transports.auth import OAuthTokens
from gateway.server.transports.oauth_tokens import IssuerUnreachable, KeyNotFetchedYet
from tests.servers.asgi import serve_on_loopback
from toolkits.mcp.oauth_callback import free_loopback_port

from .test_resource_server import Issuer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

RESOURCE = "https://gw.example.com/mcp"


@asynccontextmanager
async def issuer_serving(monkeypatch: pytest.MonkeyPatch) -> AsyncGenerator[Issuer]:
    monkeypatch.setenv("GW_INTROSPECT", "introspection-secret")
    issuer = Issuer()
    try:
        async with serve_on_loopback(issuer.app()) as url:
            issuer.url = url
            yield issuer
    finally:
        for held in (issuer.jwks_held, issuer.introspection_held):
            if held is not None:
                held.set()


def settings(issuer: Issuer) -> ResourceServerSettings:
    return ResourceServerSettings(
        resource=RESOURCE,
        authorization_servers=[issuer.url],
        introspection_endpoint=f"{issuer.url}/introspect",
        introspection_client_id="gateway",
        introspection_client_secret_env="GW_INTROSPECT",
    )


async def test_a_known_key_is_checked_at_once_while_a_refetch_for_an_unknown_one_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer), refetch_after=0)
        async with tokens.running():
            assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
            assert issuer.jwks_asked == 1
            held = issuer.jwks_held = anyio.Event()
            unknown = [issuer.token(RESOURCE, kid=f"rotated-{n}") for n in range(5)]
            refused: list[bool] = []

            async def check(token: str) -> None:
                refused.append(await tokens.verify_token(token) is None)

            async with anyio.create_task_group() as group:
                for token in unknown:
                    group.start_soon(check, token)
                await issuer.jwks_waiting.wait()  # a refetch is under way, and hangs
                with anyio.fail_after(2):
                    for _ in range(3):
                        assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
                held.set()
        assert refused == [True] * 5
        assert issuer.jwks_asked == 2  # five unknown keys waited for one refetch


async def test_a_refetch_for_an_unknown_key_comes_at_most_once_a_minute(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.server.transports.oauth_tokens")
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
            for n in range(10):
                with pytest.raises(KeyNotFetchedYet) as unchecked:
                    await tokens.verify_token(issuer.token(RESOURCE, kid=f"k{n}"))
                assert 55 <= unchecked.value.retry_after <= 60  # when they may be fetched
        assert issuer.jwks_asked == 1
    assert (
        f"could not check a bearer token: signing key 'k9' is not among the keys of {issuer.url}"
        " fetched 0 s ago; they may be fetched again in "
    ) in caplog.text


async def test_a_token_of_a_key_rotated_in_is_unchecked_until_the_keys_are_fetched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not refused: the client would throw the token away, and get another like it. A key ID
    that keys fetched since its token came lack is refused."""
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            before = issuer.token(RESOURCE)
            assert await tokens.verify_token(before) is not None
            issuer.rotate()
            rotated = issuer.token(RESOURCE)
            with pytest.raises(KeyNotFetchedYet, match="signing key 'key-2' is not among"):
                await tokens.verify_token(rotated)
            assert issuer.jwks_asked == 1
            tokens.refetch_after = 0  # a minute on: the keys may be fetched again
            assert await tokens.verify_token(rotated) is not None
            assert await tokens.verify_token(before) is not None
            assert issuer.jwks_asked == 2
            assert await tokens.verify_token(issuer.token(RESOURCE, kid="key-9")) is None
            assert issuer.jwks_asked == 3


async def test_a_refetch_that_does_not_come_gives_up_after_fetch_seconds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer), refetch_after=0, fetch_seconds=0.2)
        async with tokens.running():
            assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
            issuer.jwks_held = anyio.Event()
            with anyio.fail_after(2):
                with pytest.raises(IssuerUnreachable, match="could not be fetched again"):
                    await tokens.verify_token(issuer.token(RESOURCE, kid="new"))
                # The keys it had still serve.
                assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
    assert f"the signing keys of {issuer.url} did not come within 0.2 s" in caplog.text


async def test_introspection_answers_are_kept_a_while_on_one_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [time.time()]
    async with issuer_serving(monkeypatch) as issuer:
        active = {"active": True, "sub": "bob", "scope": "mcp", "aud": RESOURCE}
        issuer.opaque = {
            "good": active | {"exp": clock[0] + 3600},
            "ending": active | {"exp": clock[0] + 20},
        }
        tokens = OAuthTokens(settings(issuer), now=lambda: clock[0])

        async def asked(token: str, *, taken: bool) -> int:
            before = issuer.introspections
            assert (await tokens.verify_token(token) is not None) == taken, token
            return issuer.introspections - before

        async with tokens.running():
            assert await asked("good", taken=True) == 1
            for _ in range(20):
                assert await asked("good", taken=True) == 0
            assert await asked("unknown", taken=False) == 1
            assert await asked("unknown", taken=False) == 0
            assert await asked("ending", taken=True) == 1

            clock[0] += 9.5
            assert await asked("unknown", taken=False) == 0
            assert await asked("good", taken=True) == 0
            clock[0] += 1  # an inactive answer is kept 10 s
            assert await asked("unknown", taken=False) == 1

            clock[0] += 10  # 20.5 s: past the `exp` of "ending" (taken within the leeway)
            assert await asked("ending", taken=True) == 1
            assert await asked("good", taken=True) == 0

            clock[0] += 40  # 60.5 s: an active answer is kept a minute at most
            assert await asked("good", taken=True) == 1
        assert len(issuer.introspected_from) == 1  # every request on one connection


async def test_an_introspected_token_is_in_force_from_its_nbf_and_iat_as_a_jwt_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Introspected tokens follow a JWT's time rules, 30 s of leeway included; a kept answer
    is judged again at each use, so a token refused before its `nbf` is taken after it."""
    caplog.set_level(logging.INFO, logger="gateway.server.transports.oauth_tokens")
    now = int(time.time())
    clock = [float(now)]
    async with issuer_serving(monkeypatch) as issuer:
        good = {"active": True, "sub": "bob", "scope": "mcp", "aud": RESOURCE, "exp": now + 3600}
        issuer.opaque = {
            "nbf-to-come": good | {"nbf": now + 1000},
            "iat-to-come": good | {"iat": now + 1000},
            "nbf-skewed": good | {"nbf": now + 20, "iat": now + 20},
            "nbf-in-50": good | {"nbf": now + 50},
            "nbf-soon": good | {"nbf": "soon"},
            "iat-true": good | {"iat": True},
            "exp-nan": good | {"exp": math.nan},
            "nbf-nan": good | {"nbf": math.nan},
            "exp-inf": good | {"exp": math.inf},
        }
        tokens = OAuthTokens(settings(issuer), now=lambda: clock[0])
        async with tokens.running():
            for claim in ("nbf", "iat"):
                to_come: dict[str, Any] = {claim: now + 1000}
                signed = issuer.token(RESOURCE, **to_come)
                assert await tokens.verify_token(signed) is None, claim
                assert await tokens.verify_token(f"{claim}-to-come") is None, claim
            assert await tokens.verify_token(issuer.token(RESOURCE, nbf=now + 20)) is not None
            assert await tokens.verify_token("nbf-skewed") is not None
            assert await tokens.verify_token("nbf-soon") is None
            assert await tokens.verify_token("iat-true") is None
            for unending in ("exp-nan", "nbf-nan", "exp-inf"):  # JSON's NaN and Infinity
                assert await tokens.verify_token(unending) is None, unending
            assert await tokens.verify_token("nbf-in-50") is None
            asked = issuer.introspections
            clock[0] += 30  # 20 s before its nbf: in force, with the leeway
            assert await tokens.verify_token("nbf-in-50") is not None
            assert issuer.introspections == asked  # the kept answer, judged again
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert refused == [
        "refused a bearer token: The token is not yet valid (nbf)",
        "refused a bearer token: the token is not yet valid (nbf)",
        "refused a bearer token: The token is not yet valid (iat)",
        "refused a bearer token: the token is not yet valid (iat)",
        "refused a bearer token: the introspection answer's nbf is not a number: 'soon'",
        "refused a bearer token: the introspection answer's iat is not a number: True",
        "refused a bearer token: the introspection answer's exp is not a number: nan",
        "refused a bearer token: the introspection answer's nbf is not a number: nan",
        "refused a bearer token: the introspection answer's exp is not a number: inf",
        "refused a bearer token: the token is not yet valid (nbf)",
    ]


async def test_at_most_introspections_kept_answers_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer), introspections_kept=2)
        async with tokens.running():
            for token in ("t1", "t2", "t3", "t3", "t2", "t1"):
                assert await tokens.verify_token(token) is None
        assert issuer.introspections == 4  # t1 made room for t3, and was asked again


async def test_an_introspection_answer_of_the_wrong_shape_is_refused_not_a_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fail closed: an `exp` that is no number is no token "that never expires"."""
    async with issuer_serving(monkeypatch) as issuer:
        good = {"active": True, "sub": "bob", "scope": "mcp", "aud": RESOURCE}
        issuer.opaque = {
            "good": good | {"exp": time.time() + 60},
            "exp-soon": good | {"exp": "soon"},
            "exp-true": good | {"exp": True},
            "aud-number": good | {"aud": 123},
            "aud-mixed": good | {"aud": [RESOURCE, 5]},
            "scope-number": good | {"scope": 5},
            "scope-object": good | {"scope": {"mcp": True}},
        }
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            assert await tokens.verify_token("good") is not None
            for token in list(issuer.opaque)[1:]:
                assert await tokens.verify_token(token) is None, token


async def test_a_check_that_fails_unforeseen_is_a_refusal_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        issuer.opaque = {"good": {"active": True, "sub": "bob", "aud": RESOURCE}}
        monkeypatch.delenv("GW_INTROSPECT")  # unset after serve's own check
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            assert await tokens.verify_token("good") is None
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [
        "refused a bearer token: its check failed: ServerConfigError: environment variable "
        "'GW_INTROSPECT' (the introspection client secret) is not set"
    ]
    assert warned[0].exc_info is None


async def test_an_introspection_endpoint_down_is_unreachable_not_an_invalid_token(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        issuer.introspection_status = 503
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            with pytest.raises(IssuerUnreachable, match="answered 503"):
                await tokens.verify_token("opaque")
    closed = f"http://127.0.0.1:{free_loopback_port()}"
    tokens = OAuthTokens(settings(issuer).model_copy(update={"introspection_endpoint": closed}))
    with pytest.raises(IssuerUnreachable, match="could not be reached"):
        await tokens.verify_token("opaque")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned[0] == f"the introspection endpoint {issuer.url}/introspect answered 503"
    assert warned[1].startswith(f"the introspection endpoint {closed} could not be reached")


async def test_an_introspection_endpoint_that_does_not_answer_in_time_is_said_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A read timeout's own message is empty: the warning and the 503 said "could not be
    reached: " and no more."""
    async with issuer_serving(monkeypatch) as issuer:
        issuer.introspection_held = anyio.Event()
        tokens = OAuthTokens(settings(issuer), http_seconds=0.2)
        async with tokens.running():
            with anyio.fail_after(5), pytest.raises(IssuerUnreachable) as unchecked:
                await tokens.verify_token("opaque")
    said = "the introspection endpoint did not answer within 0.2 s"
    assert str(unchecked.value) == said
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        f"the introspection endpoint {issuer.url}/introspect did not answer within 0.2 s"
    ]


async def test_an_issuer_whose_metadata_is_down_or_names_no_jwks_uri_is_said_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Metadata answering 503 was said to name no `jwks_uri`, sending an admin to set one."""
    async with issuer_serving(monkeypatch) as issuer:
        tokens = OAuthTokens(settings(issuer), refetch_after=0)
        async with tokens.running():
            for status in (503, 404):
                issuer.metadata_status = status
                with pytest.raises(IssuerUnreachable, match="could not be fetched"):
                    await tokens.verify_token(issuer.token(RESOURCE))
            issuer.metadata_status = 200
            assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
    url = issuer.url
    places = f"{url}/.well-known/oauth-authorization-server answered"
    openid = f"{url}/.well-known/openid-configuration answered 404"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        f"the signing keys of {url} could not be fetched: the metadata of {url} could not be"
        f" fetched ({places} 503; {openid})",
        f"the signing keys of {url} could not be fetched: the metadata of {url} names no"
        f" jwks_uri ({places} 404; {openid}; set [gateway.oauth] jwks_uri)",
    ]


async def test_an_issuer_down_is_asked_for_its_keys_at_most_once_a_minute_and_said_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Anyone can mint a JWT naming the issuer: while its keys cannot be fetched, each such
    token cost it two requests, and an admin saw nothing at the default level."""
    async with issuer_serving(monkeypatch) as issuer:
        issuer.jwks_status = 503
        tokens = OAuthTokens(settings(issuer))
        async with tokens.running():
            for _ in range(50):
                with pytest.raises(IssuerUnreachable, match="could not be fetched"):
                    await tokens.verify_token(issuer.token(RESOURCE))
            assert issuer.jwks_asked == 1
            issuer.jwks_status = 200  # back up: the next fetch is due a minute on
            tokens.refetch_after = 0
            assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
            assert issuer.jwks_asked == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert warned[0].startswith(f"the signing keys of {issuer.url} could not be fetched: ")
