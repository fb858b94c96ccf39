"""What this process's log lines never say: the secrets in the URLs its MCP clients use.

httpx2 logs every request's URL at INFO (`-v`), and the SDK's clients say a server's URL,
and what it answered, at DEBUG (`-vv`: `Connecting to StreamableHTTP endpoint: URL`, an OAuth
discovery URL built from its path, an error naming the URL). In every line of those loggers,
traceback included (`Unsaid`; the command line puts it on its log handler too, for every line):

- an OAuth flow's values are `[redacted]`: the authorization page's URL carries the flow's
  `state`, the callback's (fetched by `oauth_page`) the authorization code, and so does the
  redirect's `Location` header that httpcore2 shows at DEBUG (`-vv`);
- a URL's password, or a user alone (`https://TOKEN@host`), and the values of its query's
  credential parameters (`?api_key=`) are `***`;
- the URL secrets of every server a transport was made for (`keep_out_of_logs`: its path's
  key, a `${VAR}`'s value, `sent_credentials.url_secrets`) are `***` wherever the line has
  them, also inside another URL (a `resource` parameter, a metadata URL).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

import httpx2

from .config import McpServerConfig
from .sent_credentials import MASK, SentCredentials, is_credential_name, url_secrets

__all__ = ["Unsaid", "keep_out_of_logs"]

_SECRET_PARAMETERS = frozenset(
    {"code", "state", "code_verifier", "access_token", "refresh_token", "id_token", "client_secret"}
)
"""Query parameters of an OAuth flow whose values are never logged."""
_FLOW_VALUES = re.compile(
    r"([?&](?:" + "|".join(sorted(_SECRET_PARAMETERS)) + r")=)(?!\[redacted\])[^&#\s'\"]+"
)
"""Those values in a URL anywhere in a line (a header's, in httpcore2's)."""
_LOGGERS = (
    "httpcore2",
    "httpx2",
    "mcp.client.auth.oauth2",
    "mcp.client.session",
    "mcp.client.sse",
    "mcp.client.streamable_http",
    "mcp.shared.jsonrpc_dispatcher",
)
"""Those that say a server's URL or answers: httpx2's request lines, the SDK client's."""

_TRACEBACK = logging.Formatter()
_values: frozenset[str] = frozenset()
_known = SentCredentials()
"""The URL secrets of every server a transport was made for in this process."""


def keep_out_of_logs(config: McpServerConfig) -> None:
    """From now on, no line of `_LOGGERS` says a secret of `config`'s URL."""
    global _values, _known
    values = _values.union(url_secrets(config))
    if values != _values:  # a reconnect adds nothing
        _values, _known = values, SentCredentials(values)


class Unsaid(logging.Filter):
    """Leaves the secrets above out of each record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(arg, httpx2.URL) for arg in record.args
        ):
            record.args = tuple(
                _redacted(arg) if isinstance(arg, httpx2.URL) else arg for arg in record.args
            )
        known = _known
        said = record.getMessage()
        masked = _FLOW_VALUES.sub(r"\1[redacted]", said)
        if known:
            masked = known.mask(masked)
            if record.exc_info and not record.exc_text:  # what a formatter shows, made now
                record.exc_text = known.mask(_TRACEBACK.formatException(record.exc_info))
        if masked != said:
            record.msg, record.args = masked, ()
        return True


def _redacted(url: httpx2.URL) -> httpx2.URL | str:
    if url.userinfo:  # `user:***`; a user without a password is the secret (`TOKEN@host`)
        user, colon, _ = url.userinfo.partition(b":")
        url = url.copy_with(userinfo=user + b":***" if colon else b"***")
    parts = [part.partition("=") for part in url.query.decode("ascii", "replace").split("&")]
    shown = [
        f"{name}=[redacted]"
        if unquote_plus(name) in _SECRET_PARAMETERS
        else f"{name}={MASK}"
        if value and is_credential_name(name)
        else f"{name}{equals}{value}"
        for name, equals, value in parts
    ]
    if shown == ["".join(part) for part in parts]:
        return url
    return f"{url.copy_with(query=None)}?{'&'.join(shown)}"


for _name in _LOGGERS:
    logging.getLogger(_name).addFilter(Unsaid())
