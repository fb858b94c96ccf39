"""Static bearer tokens (`[gateway] tokens_env`): how they are written, and who each one is.

The variable holds entries separated by commas, each a token (`TOKEN`) or a token with the
operator's name for its holder (`NAME=TOKEN`). A caller's identity (`authenticated_subject`:
run ownership, chat memory keys, approvals' `by`) is its token's label: the name given, or
`token-` and 12 hex digits of the token's SHA-256 digest. Either survives removing,
reordering or inserting tokens; a label by position (`token-N`, before) handed a revoked
token's runs and chat sessions to the token that moved into its place. No label now has the
`token-N` form, so what was stored under one is reached by no client.

A bearer token is token68 (RFC 6750: letters, digits, `-._~+/`, then only `=` padding), so
`=` followed by anything but `=` can only be a name's: `abc==` is a token, `ann=abc` Ann's.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from mcp.server.auth.provider import AccessToken

__all__ = ["StaticToken", "StaticTokens", "parse_tokens", "token_label"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_RESERVED = "token-"
"""Unnamed tokens' labels, and the old positional ones: no name may spell one."""
_DIGEST_DOMAIN = b"agent-gateway static token\x00"


@dataclass(frozen=True, slots=True)
class StaticToken:
    label: str
    secret: str

    def __repr__(self) -> str:  # the secret is a secret
        return f"StaticToken(label={self.label!r})"


def token_label(secret: str) -> str:
    """An unnamed token's label: 48 bits of a SHA-256 digest. It tells tokens apart without
    saying one: a token has at least 16 characters off loopback (a random one, as the README
    makes them, 190 bits and more), so countless tokens share each label, and what the label
    names cannot be worked back to from it. Labels show in logs, stores and traces."""
    digest = hashlib.sha256(_DIGEST_DOMAIN + secret.encode()).hexdigest()
    return _RESERVED + digest[:12]


def parse_tokens(entries: tuple[str, ...], env: str) -> tuple[StaticToken, ...]:
    """The tokens of `entries` (`TOKEN` or `NAME=TOKEN`, as `env` holds them); ValueError,
    naming the entry by its position and never showing it, for one that is not either."""
    tokens: dict[str, StaticToken] = {}
    for position, entry in enumerate(entries, 1):
        name, sep, secret = entry.partition("=")
        if not sep or not secret.strip("="):  # no name; `=` is only padding
            token = StaticToken(token_label(entry), entry)
        elif not _NAME.fullmatch(name) or name.lower().startswith(_RESERVED):
            raise ValueError(
                f"entry #{position} in {env} is not TOKEN or NAME=TOKEN: a name is letters, "
                f"digits, '.', '_' and '-' (at most 64), not beginning {_RESERVED!r}"
            )
        else:
            token = StaticToken(name, secret)
        same = tokens.get(token.secret)
        if same is not None and same.label != token.label:
            raise ValueError(
                f"entry #{position} in {env} repeats a token of another name: one token is "
                "one caller"
            )
        tokens[token.secret] = token
    return tuple(tokens.values())


class StaticTokens:
    """A `TokenVerifier` for a fixed set of tokens: a match is known by its label. Two tokens
    may share a name (one holder's new and old token, while rotating)."""

    def __init__(self, tokens: tuple[StaticToken, ...]) -> None:
        self._tokens = [(t.secret.encode(), t.label) for t in tokens]

    async def verify_token(self, token: str) -> AccessToken | None:
        given = token.encode()
        found: str | None = None
        for known, label in self._tokens:
            # Compare with every token, so timing says nothing about which one (or none).
            if hmac.compare_digest(given, known):
                found = label
        if found is None:
            return None
        # The token itself is kept nowhere: the session owner is its label.
        return AccessToken(token=found, client_id=found, scopes=[])
