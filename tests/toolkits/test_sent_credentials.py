"""What a node sends as its credentials is masked in each form a server may say it back."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

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


ZAPIER_KEY = "NzY2ZjI3YjAtMTQ0Ni00ZjQz+OjE2MDY5ZGU4"
"""A key as Zapier puts it in its MCP URL's path: base64, `+` and all."""


def test_a_path_segment_that_looks_like_a_key_is_masked_and_the_endpoints_words_stay() -> None:
    """16 or more characters with letters and digits both: a key, as written, decoded and
    percent-encoded (inside a `resource` parameter, a link). `api`, `mcp`, a version, a long
    word, a short id: said."""
    url = f"https://mcp.zapier.com/api/v2/mcp/s/{ZAPIER_KEY}/mcp/streamable-http/user42"
    sent = SentCredentials.of(McpServerConfig(url=url))
    said = f"404 for {url} (resource={quote(url, safe='')})"
    assert sent.mask(said) == (
        "404 for https://mcp.zapier.com/api/v2/mcp/s/***/mcp/streamable-http/user42 "
        f"(resource={quote('https://mcp.zapier.com/api/v2/mcp/s/', safe='')}***"
        f"{quote('/mcp/streamable-http/user42', safe='')})"
    )
    uuid = "7a1c3e20-1a2b-4c5d-9e8f-0123456789ab"  # Composio's, a webhook's
    hook = SentCredentials.of(McpServerConfig(url=f"https://h/server/{uuid}/mcp"))
    assert hook.mask(f"no server {uuid}") == "no server ***"


def test_the_parts_a_config_marks_are_masked_but_a_short_one_or_a_whole_url() -> None:
    """`url_secrets` (a config file's `${VAR}` values in `url`): a letters-only key the rule
    above would miss is masked; a port or `v1` (under 8 characters) would garble every
    message; a URL given whole is masked by the rules for URLs, its host and words said."""
    whole = f"https://mcp.zapier.com/api/mcp/s/{ZAPIER_KEY}/mcp"
    config = McpServerConfig(
        url=f"{whole}?tenant=acmecorporation&v=v1",
        url_secrets=[whole, "acmecorporation", "v1", "3001"],
    )
    said = f"{whole}?tenant=acmecorporation&v=v1 on port 3001"
    assert SentCredentials.of(config).mask(said) == (
        "https://mcp.zapier.com/api/mcp/s/***/mcp?tenant=***&v=v1 on port 3001"
    )


def test_a_short_token_is_masked_only_as_a_word_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local server's dummy token (`x`) was masked inside every word: `Child e***ited`."""
    monkeypatch.setenv("T", "x")
    sent = SentCredentials.of(McpServerConfig(url="http://h/mcp", bearer_token_env="T"))
    said = "Child exited: the token x (Bearer x) was refused"
    assert sent.mask(said) == "Child exited: the token *** (Bearer ***) was refused"
    monkeypatch.setenv("T", "x1234567")  # 8 characters: a secret wherever it appears
    sent = SentCredentials.of(McpServerConfig(url="http://h/mcp", bearer_token_env="T"))
    assert sent.mask("tokx1234567en") == "tok***en"
