"""A URL's credentials, in its user info or its query, are found and shown as `***`; what
else it says is shown as written."""

from __future__ import annotations

import pytest

from agent.url_credentials import (
    is_credential_name,
    redacted,
    url_credentials,
    without_credentials_of,
)
from toolkits.mcp import sent_credentials


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bob:PW@h:5432/db", "postgresql://bob:***@h:5432/db"),
        ("redis://:PW@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://bob@h/db?password=PW", "postgresql://bob@h/db?password=***"),
        (
            "postgresql://bob@h/db?sslmode=require&sslpassword=PW&connect_timeout=5",
            "postgresql://bob@h/db?sslmode=require&sslpassword=***&connect_timeout=5",
        ),
        ("redis://h:1/0?password=PW", "redis://h:1/0?password=***"),
        ("unix:///run/redis.sock?db=0&password=PW", "unix:///run/redis.sock?db=0&password=***"),
        (
            "http://h/v1?api-version=preview&api_key=PW",
            "http://h/v1?api-version=preview&api_key=***",
        ),
        ("http://h/v1?Token=PW&sig=PW", "http://h/v1?Token=***&sig=***"),
        ("http://h/v1?%70assword=PW", "http://h/v1?%70assword=***"),  # percent-encoded name
        ("postgresql://bob@h/db?password=", "postgresql://bob@h/db?password="),  # none given
        ("postgresql://bob@h/db?sslmode=require", "postgresql://bob@h/db?sslmode=require"),
        ("sqlite:////var/lib/gw/store.sqlite3", "sqlite:////var/lib/gw/store.sqlite3"),
    ],
)
def test_a_urls_credentials_are_shown_as_stars(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_a_drivers_words_quoting_the_credentials_say_them_as_stars() -> None:
    url = "postgresql://bob:p%40ss@h/db?sslpassword=k%2Bey&password=q+w"
    assert sorted(url_credentials(url)) == sorted(
        ["p%40ss", "p@ss", "k%2Bey", "k+ey", "q+w", "q w"]
    )
    said = "no luck with password 'p@ss' (p%40ss), sslpassword k+ey, q w, as user bob"
    assert without_credentials_of(url, said) == (
        "no luck with password '***' (***), sslpassword ***, ***, as user bob"
    )


def test_a_url_that_cannot_be_parsed_is_not_shown() -> None:
    assert redacted("postgresql://bob:PW@[::1/db") == "<a URL that cannot be parsed>"
    assert url_credentials("postgresql://bob:PW@[::1/db") == []


@pytest.mark.parametrize(
    "name",
    [
        *("api_key", "api-key", "Token", "access_token", "sig", "sslpassword", "pwd", "Auth"),
        *("%70ass", "x-credential", "client_secret", "v", "page", "api-version", "user", "code"),
    ],
)
def test_an_mcp_servers_url_and_a_models_call_the_same_query_names_credentials(
    name: str,
) -> None:
    """Two copies of one rule (`toolkits/` cannot import `agent/`): they must not drift."""
    assert sent_credentials.is_credential_name(name) is is_credential_name(name)
