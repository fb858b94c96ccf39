"""What a node sends as its credentials is masked in each form a server may say it back."""

from __future__ import annotations

import base64
import json

import pytest

from toolkits.mcp import McpServerConfig
from toolkits.mcp.sent_credentials import SentCredentials


def test_basic_auth_is_masked_as_sent_and_decoded() -> None:
    token = base64.b64encode(b"bob:pa55word").decode()
    config = McpServerConfig(url="http://h/mcp", headers={"Authorization": f"Basic {token}"})
    said = f"Basic {token} {token.rstrip('=')} user bob:pa55word, password pa55word"
    assert SentCredentials.of(config).mask(said) == "Basic *** *** user ***, password ***"


def test_a_requests_own_token_is_masked_too_and_a_known_one_adds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("T", "static-token")
    sent = SentCredentials.of(McpServerConfig(url="http://h/mcp", bearer_token_env="T"))
    assert sent.with_authorization("Bearer static-token") is sent
    refreshed = sent.with_authorization("Bearer oauth-access-token")
    assert refreshed.mask("Bearer oauth-access-token, was static-token") == "Bearer ***, was ***"


def test_a_secret_header_is_masked_json_escaped_and_others_stay_said() -> None:
    config = McpServerConfig(
        url="http://u%40x:p%2Fw@h/mcp",
        headers={"X-Key": 'k"ey\\1', "X-Team": "blue"},
        secret_headers=["x-key"],
    )
    page = json.dumps({"x-key": 'k"ey\\1', "x-team": "blue", "url": "http://u%40x:p%2Fw@h/"})
    assert SentCredentials.of(config).mask(page + " u@x:p/w") == (
        '{"x-key": "***", "x-team": "blue", "url": "http://***@h/"} ***'
    )


def test_a_query_credential_is_masked_as_written_sent_decoded_and_encoded() -> None:
    """`?api_key=` and other names that say credential: the value as the URL has it, as httpx2
    sends it (non-ASCII percent-encoded), decoded (`+` a space or not), and encoded again.
    Other parameters, and a credential's name, stay said."""
    config = McpServerConfig(url="http://h/mcp?v=2&api_key=k%2By+z/é&Token=t0k3n&keyless=&p=1")
    said = (
        "POST /mcp?v=2&api_key=k%2By+z/%C3%A9&Token=t0k3n&keyless=&p=1 (written "
        "k%2By+z/é), key k+y z/é or k+y+z/é, in a link k%2By%2Bz%2F%C3%A9, "
        '{"api_key": "k+y z/\\u00e9"}'
    )
    assert SentCredentials.of(config).mask(said) == (
        "POST /mcp?v=2&api_key=***&Token=***&keyless=&p=1 (written ***), key *** or ***, "
        'in a link ***, {"api_key": "***"}'
    )
