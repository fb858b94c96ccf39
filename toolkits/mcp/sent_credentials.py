"""The credentials a node sends its HTTP server, shown `***` in text made of that server's answers.

A server, or a proxy in front of it, may repeat a request's headers in an error page (a debug
page, a proxy's 502). The text made of such an answer (`http_refusal`), and the reason a
connection failed, reach remote clients, models, the run store, logs and traces, none of which
may learn what the gateway sends the server. Masked, in each form a server may say it back (as
sent, JSON-escaped, a Basic token decoded, percent-encoded or not): the Authorization value
(the bearer token, a configured header, the URL's user and password, an OAuth access token),
the configured headers marked secret (`secret_headers`; the config marks every one with a
`${VAR}`), the values of the URL's query parameters named as credentials (`?api_key=`), and the
secrets in the URL's path (`url_secrets`): each segment that looks like a key
(`looks_like_a_key`: `https://mcp.zapier.com/api/mcp/s/KEY/mcp`) and the parts the config marks
(`McpServerConfig.url_secrets`: a config file marks each `${VAR}`'s value).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable
from urllib.parse import quote, unquote, unquote_plus, urlsplit

import httpx2

from .config import McpServerConfig

__all__ = ["MASK", "SentCredentials", "is_credential_name", "looks_like_a_key", "url_secrets"]

MASK = "***"
_KEY_LENGTH = 16
"""The fewest characters of a path segment taken for a key (with letters and digits both)."""
_SHORTEST_SECRET = 8
"""The fewest characters of a marked part of a URL that is masked, and of a credential masked
inside words: no secret is shorter, and masking a port, `v1` or `x` everywhere would garble
every message."""

_CREDENTIAL_WORDS = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential", re.IGNORECASE)
"""In a query parameter's name: its value is a credential (`api_key`, `token`, `sig`). The
model URLs' rule (`agent/url_credentials.py`, a layer this one does not import; a test holds
the two alike)."""


def is_credential_name(name: str) -> bool:
    """Whether a query parameter named `name` (as written, percent-encoded or not) holds one."""
    return _CREDENTIAL_WORDS.search(unquote_plus(name)) is not None


def looks_like_a_key(segment: str) -> bool:
    """Whether a URL's path segment (decoded) is taken for a key: 16 or more characters, with
    letters and digits both among them (`s/NzY2ZjI3YjAtMTQ0Ni00ZjQz`, a UUID), as no word of
    an endpoint's path is (`api`, `mcp`, `v2`, `streamable-http`)."""
    return (
        len(segment) >= _KEY_LENGTH
        and any(char.isalpha() for char in segment)
        and any(char.isdigit() for char in segment)
    )


def url_secrets(config: McpServerConfig) -> list[str]:
    """The secrets in `config.url`, in each form a server or a log line may say them: its user
    info and its query's credentials, its path's segments that look like keys, and the parts
    `config.url_secrets` marks (but one shorter than `_SHORTEST_SECRET`, and one that is a
    URL itself, `${SERVER_URL}`, whose secrets those rules find)."""
    if config.url is None:
        return []
    forms = _url_forms(config.url) + _path_forms(config.url)
    for part in config.url_secrets:
        if len(part) >= _SHORTEST_SECRET and "://" not in part:
            forms += _encoded_forms(part)
    return forms


class SentCredentials:
    """What a node sends as its credentials; `mask` hides them in a text."""

    __slots__ = ("_alone", "_said")

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms = {form for value in values if value for form in (value, _json_escaped(value))}
        # Longest first: a password inside `user:password` must not leave `user:***`.
        self._said = tuple(sorted(forms, key=len, reverse=True))
        self._alone = {
            form: re.compile(rf"(?<!\w){re.escape(form)}(?!\w)")
            for form in self._said
            if len(form) < _SHORTEST_SECRET
        }

    @classmethod
    def of(cls, config: McpServerConfig) -> SentCredentials:
        """Those `config` has a node send (its bearer token read from the environment now)."""
        secret = {name.lower() for name in config.secret_headers}
        values: list[str] = []
        for name, value in config.headers.items():
            if name.lower() == "authorization":
                values += _authorization_forms(value)
            elif name.lower() in secret:
                values.append(value)
        if config.bearer_token_env is not None:
            values.append(os.environ.get(config.bearer_token_env, ""))
        values += url_secrets(config)
        return cls(values)

    def with_authorization(self, value: str | None) -> SentCredentials:
        """These and the Authorization `value` a request went with (an OAuth access token)."""
        forms = _authorization_forms(value) if value else []
        if all(form in self._said for form in forms):
            return self
        return SentCredentials([*self._said, *forms])

    def __bool__(self) -> bool:
        return bool(self._said)

    def mask(self, text: str) -> str:
        """`text` with each credential `***`: wherever it appears, or, one shorter than 8
        characters, where it stands as a word of its own (a local server's dummy token, `x`,
        masked inside words garbled every message: `Child e***ited`), as a model's key is."""
        for value in self._said:
            if value in text:
                alone = self._alone.get(value)
                text = alone.sub(MASK, text) if alone else text.replace(value, MASK)
        return text


def _json_escaped(value: str) -> str:
    """`value` as it reads inside a JSON string: how a page repeating the headers says it."""
    return json.dumps(value)[1:-1]


def _authorization_forms(value: str) -> list[str]:
    """The credential of an Authorization value (`Bearer TOKEN`: `TOKEN`, so that the scheme
    stays said), and of HTTP Basic auth, `user:password` and the password too."""
    scheme, _, credential = value.strip().partition(" ")
    credential = credential.strip() or scheme
    forms = [credential]
    if scheme.lower() == "basic" and credential != scheme:
        try:
            pair = base64.b64decode(credential, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return forms
        user, colon, password = pair.partition(":")
        forms += [pair, credential.rstrip("=")]
        forms.append(password if colon and password else user)
    return forms


def _url_forms(url: str) -> list[str]:
    """The credentials in `url`'s user info, as written and decoded, and as the Basic token
    sent for them (a user without a password is itself the secret: `https://TOKEN@host`); and
    the values of its query's credential parameters (`_query_forms`)."""
    try:
        parts = urlsplit(url)
        raw_user, raw_password = parts.username, parts.password
    except ValueError:
        return []
    forms = _query_forms(url, parts.query)
    if raw_user is None and raw_password is None:
        return forms
    user, password = unquote(raw_user or ""), unquote(raw_password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    if raw_password is None:
        return [raw_user or "", user, token, *forms]
    pairs = [f"{raw_user or ''}:{raw_password}", f"{user}:{password}"]
    return [raw_password, password, *pairs, token, *forms]


def _query_forms(url: str, query: str) -> list[str]:
    """The values of `query`'s credential parameters (`?api_key=KEY`): as written, as httpx2
    sends them (`a b` as `a%20b`), decoded (`+` as a space or not), and percent-encoded."""
    try:
        sent = httpx2.URL(url).query.decode("ascii")
    except (httpx2.InvalidURL, UnicodeDecodeError):
        sent = query
    forms: list[str] = []
    for pair in {*query.split("&"), *sent.split("&")}:
        name, _, value = pair.partition("=")
        if value and is_credential_name(name):
            decoded = {unquote(value), unquote_plus(value)}
            forms += [value, *decoded, *(quote(each, safe="") for each in decoded)]
    return forms


def _path_forms(url: str) -> list[str]:
    """The segments of `url`'s path that look like keys (`looks_like_a_key`), in each form."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return []
    forms: list[str] = []
    for segment in path.split("/"):
        if looks_like_a_key(unquote(segment)):
            forms += _encoded_forms(segment)
    return forms


def _encoded_forms(part: str) -> list[str]:
    """A part of a URL as written, decoded, and percent-encoded: as a query's value carries it
    (the URL in a `resource` parameter, a link on an error page)."""
    decoded = unquote(part)
    return [part, decoded, quote(decoded, safe=""), quote(part, safe="")]
