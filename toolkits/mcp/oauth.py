"""MCP authorization for HTTP nodes: the SDK's OAuth client, with our storage, modes and limits.

The flow is the SDK's `OAuthClientProvider` (an `httpx2.Auth`): on a 401 it discovers the
protected resource metadata (the `resource_metadata` hint, then path-based, then root), the
authorization server's metadata (OAuth and OpenID variants), registers (a pre-registered
client, a client ID metadata document, or dynamic registration), runs the authorization code
flow with PKCE S256 and the `resource` parameter, and refreshes. On top of it:

- the `resource` is the server's canonical URI (RFC 8707 §2, which the MCP spec names): the
  one its protected resource metadata declares, else its URL without the query the config
  gave it (`?api_key=`), which the SDK would send the authorization server (`_Resource`);
- tokens and registrations live in the user's store (`oauth_store`), keyed by server name and
  URL, with the access token's expiry, so a restarted process refreshes an expired token
  before using it;
- a 401 to a token we hold first tries the refresh token (a revoked or early-expired access
  token) before a new authorization;
- the store is shared by every process of the user, and authorization servers rotate refresh
  tokens: a refresh is decided under the entry's lock, with the tokens stored now (another
  process's newer ones are taken instead of refreshing ours); only `invalid_grant` says the
  refresh token is dead, and then only those tokens are dropped. Any other failure of a
  refresh (a 5xx) keeps them: `AuthorizationServerFailed`, and the node tries again later;
- `auth login` (`fresh`) authorizes anew without dropping what is stored first: the new
  tokens replace the old once they arrive, so a login that fails or is interrupted leaves
  the old authorization as it was. It asks for the scopes the stored token had and those a
  step-up asked for that nobody could authorise then (recorded in the store);
- step-up re-authorizations (403 `insufficient_scope`) are limited: after `STEP_UP_LIMIT`
  for the same challenged scope, the 403 goes back to the caller; a step-up the authorization
  server did not grant in full fails the call saying so (what was needed, what was granted);
- who may start an authorization is the `mode`: `refuse` (a run or `serve`: put the page to
  the caller of the call in flight as a URL-mode elicitation when that caller takes requests,
  the served gateway's MCP client; else raise `AuthorizationRequired`, which names the command
  to run), `browser` (`auth login`: open the
  page, wait for the loopback redirect), `fetch` (tests and CI, with
  `AGENT_GATEWAY_OAUTH_REDIRECT=fetch`: GET the authorization URL ourselves and follow its
  redirects to the loopback callback; works with servers that approve without a person);
- `auth login` looks at a page before sending a person to it (`oauth_page`): a server
  that refuses the request itself no longer knows our client (it restarted and forgot a
  dynamic registration), so the registration is dropped and made afresh, once; a refusal
  that stays is an error with the server's own words.
"""

from __future__ import annotations

import logging
import os
import secrets
import webbrowser
from collections.abc import AsyncGenerator, Callable
from typing import Literal
from urllib.parse import parse_qs, urlsplit, urlunsplit

import anyio
import anyio.to_thread
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult, ErrorData
from pydantic import AnyUrl

from ..errors import (
    LOGIN_COMMAND,
    AuthorizationRequired,
    AuthorizationServerFailed,
    ServerConfigError,
    find_error,
)
from .config import McpServerConfig
from .oauth_callback import free_loopback_port, receive_callback, redirect_uri
from .oauth_clients import (
    CLIENT_NAME,
    auth_method,
    client_secret,
    pre_registered,
    registered_port,
)
from .oauth_lazy import LazyOAuth, is_step_up
from .oauth_page import AuthorizationPageRefused, fetch_authorization, probe_authorization_page
from .oauth_store import OAuthEntry, ServerTokens, TokenStore, default_store, same_tokens
from .server_requests import CallsInFlight
from .token_requests import TOKEN_SECONDS, TokenRequests, oauth_error

__all__ = [
    "OAUTH_REDIRECT_ENV",
    "STEP_UP_LIMIT",
    "LazyOAuth",
    "McpOAuth",
    "RedirectMode",
    "find_authorization_required",
    "oauth_for",
    "redirect_mode_from_env",
    "uses_oauth",
]

RedirectMode = Literal["refuse", "browser", "fetch"]

OAUTH_REDIRECT_ENV = "AGENT_GATEWAY_OAUTH_REDIRECT"
STEP_UP_LIMIT = 2
"""Re-authorizations for one challenged scope (per connection) before its 403 is final."""

_BROWSER_TIMEOUT = 300.0
_FETCH_TIMEOUT = 30.0

log = logging.getLogger(__name__)


class _NotOurRefusals(logging.Filter):
    """The SDK logs whatever leaves its flow as "OAuth flow error", with a traceback, and
    raises it on. An `AuthorizationRequired` is raised on purpose (nobody to authorise), and
    an `OAuthFlowError` says what went wrong in its message: both are reported where they are
    handled (`auth login`, a node's connection), once."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, AuthorizationRequired | OAuthFlowError)


logging.getLogger("mcp.client.auth.oauth2").addFilter(_NotOurRefusals())


def redirect_mode_from_env(default: RedirectMode) -> RedirectMode:
    """`fetch` when `AGENT_GATEWAY_OAUTH_REDIRECT=fetch`, else `default`."""
    value = os.environ.get(OAUTH_REDIRECT_ENV, "").strip().lower()
    if value == "fetch":
        return "fetch"
    if value not in ("", "browser"):
        raise ServerConfigError(f"{OAUTH_REDIRECT_ENV} must be 'fetch' or 'browser', not {value!r}")
    return default


def uses_oauth(config: McpServerConfig) -> bool:
    """Whether the node answers a 401 with the authorization flow (HTTP/SSE, no static token)."""
    has_token = config.bearer_token_env is not None or any(
        key.lower() == "authorization" for key in config.headers
    )
    return config.kind != "stdio" and config.oauth and not has_token


def find_authorization_required(exc: BaseException) -> AuthorizationRequired | None:
    """The `AuthorizationRequired` in `exc`, looking through groups and causes."""
    return find_error(exc, AuthorizationRequired)


async def oauth_for(
    name: str,
    config: McpServerConfig,
    *,
    mode: RedirectMode,
    store: TokenStore | None = None,
    announce: Callable[[str], None] | None = None,
    in_flight: CallsInFlight | None = None,
    fresh: bool = False,
    token_seconds: float = TOKEN_SECONDS,
) -> McpOAuth:
    """The auth provider of node `name` (reads its stored registration for the callback port).
    In `refuse` mode, an authorization asked for during one of the node's calls `in_flight`
    is put to its caller when it can take it. `fresh`: a new authorization (`auth login`).
    `token_seconds`: how long a token request may take (`token_requests`).

    Raises `ServerConfigError` for an unset client secret variable or a bad metadata document URL.
    """
    assert config.url is not None
    secret = client_secret(name, config)
    tokens = ServerTokens(store or default_store(), name, config.url)
    stored = (await tokens.load()).client_info
    port = config.oauth_callback_port or registered_port(stored) or free_loopback_port()
    callback = AnyUrl(redirect_uri(port))
    auth = auth_method(config, secret)
    if config.oauth_client_id is not None:
        fixed = pre_registered(config.oauth_client_id, secret, auth, callback)
        tokens = ServerTokens(tokens.store, name, config.url, fixed_client=fixed)
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[callback],
        token_endpoint_auth_method=auth,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    try:
        return McpOAuth(
            name,
            config.url,
            tokens,
            metadata,
            port=port,
            mode=mode,
            client_metadata_url=config.oauth_client_metadata_url,
            announce=announce,
            in_flight=in_flight,
            fresh=fresh,
            token_seconds=token_seconds,
        )
    except ValueError as exc:  # the SDK's check of the metadata document URL
        raise ServerConfigError(f"mcpServers.{name}.oauth_client_metadata_url: {exc}") from exc


class _Resource(OAuthContext):
    """The SDK's flow context, naming the server by its canonical URI (module docstring)."""

    def get_resource_url(self) -> str:
        canonical = urlsplit(resource_url_from_server_url(self.server_url))
        ours = urlunsplit(canonical._replace(query=""))
        declared = self.protected_resource_metadata
        if declared is not None and check_resource_allowed(ours, str(declared.resource)):
            return str(declared.resource)  # the server's own word, a query it needs and all
        return ours


class McpOAuth(OAuthClientProvider):
    """The SDK's OAuth provider for one node; see the module docstring."""

    def __init__(
        self,
        name: str,
        server_url: str,
        tokens: ServerTokens,
        client_metadata: OAuthClientMetadata,
        *,
        port: int,
        mode: RedirectMode,
        client_metadata_url: str | None = None,
        announce: Callable[[str], None] | None = None,
        in_flight: CallsInFlight | None = None,
        fresh: bool = False,
        token_seconds: float = TOKEN_SECONDS,
    ) -> None:
        super().__init__(
            server_url,
            client_metadata,
            tokens,
            redirect_handler=self._keep_authorization_url,
            callback_handler=self._await_callback,
            client_metadata_url=client_metadata_url,
        )
        self.context = _Resource(
            server_url=server_url,
            client_metadata=client_metadata,
            storage=tokens,
            redirect_handler=self._keep_authorization_url,
            callback_handler=self._await_callback,
            client_metadata_url=client_metadata_url,
        )
        self.name = name
        self.tokens = tokens
        self.mode: RedirectMode = mode
        self._port = port
        self._announce: Callable[[str], None] = announce or _say_nothing
        self._in_flight = in_flight
        self._wanted_scope: str | None = None
        """The scope a step-up asks for (for the caller's page message)."""
        self._authorization_url: str | None = None
        self._step_ups: dict[str, int] = {}
        """Re-authorizations asked for by 403 `insufficient_scope`, by the scope challenged."""
        self.authorized = False
        """Set once this provider obtained tokens through an authorization (not a refresh)."""
        self.token_requests = TokenRequests(token_seconds)
        self._fresh = fresh
        self._more_scope: str | None = None
        """What a fresh authorization asks for beyond the challenge (module docstring)."""

    async def _initialize(self) -> None:
        # The SDK keeps a token's expiry in memory only; ours survives a restart.
        entry = await self.tokens.load()
        context = self.context
        if self._fresh:  # once: a re-initialization reads what this login stored
            self._fresh = False
            context.current_tokens = context.token_expiry_time = None
            granted = entry.tokens.scope if entry.tokens is not None else None
            self._more_scope = union_scopes(granted, entry.wanted_scope)
        else:
            context.current_tokens = entry.tokens
            context.token_expiry_time = entry.expires_at
        context.client_info = self._usable_client(entry)
        # Without what discovery found, the SDK would refresh at the resource's own origin.
        if context.oauth_metadata is None and entry.server_metadata is not None:
            context.oauth_metadata = entry.server_metadata
            context.protected_resource_metadata = entry.resource_metadata
            if entry.resource_metadata is not None:
                context.auth_server_url = str(entry.resource_metadata.authorization_servers[0])
        self._initialized = True

    def _usable_client(self, entry: OAuthEntry) -> OAuthClientInformationFull | None:
        """The registration to use: the config's, else the stored one, unless the config names
        a client ID metadata document that the authorization server takes (or may: its
        metadata is not stored) and the stored client is another (registered before the
        config named the document): then none, so the next authorization uses the document."""
        client = self.tokens.client_of(entry)
        document = self.context.client_metadata_url
        if client is None or document is None or self.tokens.pre_registered:
            return client
        metadata = entry.server_metadata
        takes = metadata is None or metadata.client_id_metadata_document_supported is True
        return None if takes and client.client_id != document else client

    def _token_endpoint(self) -> str:
        metadata = self.context.oauth_metadata
        endpoint = metadata.token_endpoint if metadata is not None else None
        return f"the token endpoint {endpoint}" if endpoint else "the authorization server"

    def _bound(self, outgoing: httpx2.Request) -> httpx2.Request:
        return self.token_requests.bound(outgoing, self._get_token_endpoint())

    def _refresh_due(self) -> bool:
        return not self.context.is_token_valid() and self.context.can_refresh_token()

    async def _take_stored(self) -> None:
        """Use what is stored now when it is not what we hold: another process refreshed (the
        refresh token we hold may be spent), logged in again, or logged out."""
        entry = await self.tokens.load()
        ours, stored = self.context.current_tokens, entry.tokens
        if stored is None and ours is None:
            return
        if stored is not None and ours is not None and same_tokens(stored, ours):
            return
        self.context.current_tokens = stored
        self.context.token_expiry_time = entry.expires_at if stored is not None else None
        self.context.client_info = self._usable_client(entry)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        """Keep the new tokens; on `invalid_grant` drop the dead ones (only if they are still
        the stored ones); on any other failure keep them and raise `AuthorizationServerFailed`."""
        sent = self.context.current_tokens
        if response.status_code == 200:
            if sent is None:  # the SDK refreshes only tokens it holds
                return await super()._handle_refresh_response(response)
            with self.tokens.refreshing(sent):
                refreshed = await super()._handle_refresh_response(response)
            if refreshed and self.tokens.refresh_dropped:
                log.warning(
                    "%s: a token refresh answered after the stored tokens were replaced or "
                    "forgotten (auth logout); its tokens are not kept",
                    self.name,
                )
                await self._take_stored()
                return self.context.is_token_valid()
            if refreshed:
                return True
            self.context.current_tokens = sent  # the SDK dropped them for a malformed answer
            raise AuthorizationServerFailed(
                f"MCP server {self.name!r}: its authorization server's answer to a token "
                "refresh was malformed; the stored tokens are kept",
                node=self.name,
            )
        error = await oauth_error(response)
        said = f"HTTP {response.status_code}" + (f" ({error})" if error else "")
        if error != "invalid_grant":
            refused = 400 <= response.status_code < 500
            what = "refused a token refresh:" if refused else "answered a token refresh with"
            login = LOGIN_COMMAND.format(node=self.name)
            raise AuthorizationServerFailed(
                f"MCP server {self.name!r}: its authorization server {what} {said}; the stored "
                "tokens are kept, and the refresh is tried again"
                + (f" (if it goes on refusing: {login})" if refused else ""),
                node=self.name,
            )
        # RFC 6749 §5.2: the refresh token is invalid, expired or revoked; the grant is over.
        log.info("%s: the authorization server refused the refresh token (%s)", self.name, said)
        self.context.clear_tokens()
        if sent is not None and not await self.tokens.drop_tokens(sent):
            await self._take_stored()  # another process stored newer ones meanwhile
        return self.context.is_token_valid()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self.authorized = True
        await self.tokens.set_discovery(
            self.context.protected_resource_metadata, self.context.oauth_metadata
        )

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        if self._more_scope is not None:
            scope = self.context.client_metadata.scope
            self.context.client_metadata.scope = union_scopes(scope, self._more_scope)
        return await super()._perform_authorization_code_grant()

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        refreshed_after_401 = stepped_up = registered_afresh = False
        while True:
            async with self.context.lock:
                if not self._initialized:
                    await self._initialize()
                if self._refresh_due():
                    # Decided with what is stored now, under its lock (module docstring); the
                    # SDK's flow then finds a valid token, or none to refresh. Cut off (the
                    # connection's deadline), it says what it waited for: the session's
                    # error can only say it did not connect.
                    waiting = "another refresh of its tokens (another process holds their lock)"
                    try:
                        async with self.tokens.locked():
                            await self._take_stored()
                            if self._refresh_due():
                                waiting = f"an answer from {self._token_endpoint()} to a refresh"
                                refreshed = yield self._bound(await self._refresh_token())
                                self.token_requests.answered()
                                waiting = ""
                                await self._handle_refresh_response(refreshed)
                    except (anyio.get_cancelled_exc_class(), GeneratorExit):
                        if waiting:
                            log.warning("%s: cut off waiting for %s", self.name, waiting)
                        raise
            flow = super()._auth_flow(request)
            retry_with_refresh = stepping_up = False
            answered = False  # whether the last response the flow took was the request's
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield self._bound(outgoing)
                    self.token_requests.answered()
                    answered = outgoing is request
                    if outgoing is request:
                        if response.status_code == 401:
                            if not refreshed_after_401 and self.context.can_refresh_token():
                                # The server refused a token we hold (revoked, or expired
                                # early): a refresh may fix it without a person.
                                refreshed_after_401 = retry_with_refresh = True
                                break
                            if self.mode == "refuse" and not self._can_ask():
                                raise AuthorizationRequired(self.name)
                            self._wanted_scope = None
                        elif is_step_up(response):
                            # The SDK re-authorizes once per request; we bound it per scope.
                            scope = extract_field_from_www_auth(response, "scope") or ""
                            stepping_up = True  # a refusal of this call: the grant still holds
                            tried = self._step_ups.get(scope, 0)
                            if stepped_up or tried >= STEP_UP_LIMIT:
                                self._not_granted(scope)
                                return  # the 403 is the request's answer
                            stepped_up = True
                            if self.mode == "refuse" and not self._can_ask():
                                await self.tokens.want_scope(scope)  # for the next `auth login`
                                raise AuthorizationRequired(
                                    self.name,
                                    why=f"needs authorisation for more scopes ({scope or 'unnamed'})",
                                )
                            self._wanted_scope = scope or None
                            self._step_ups[scope] = tried + 1
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except AuthorizationPageRefused as refused:
                if registered_afresh:
                    raise AuthorizationPageRefused(
                        refused.status, refused.detail, why="even with a new client registration"
                    ) from None
                cannot = self._cannot_register_again()
                if cannot:
                    raise AuthorizationPageRefused(
                        refused.status, refused.detail, why=cannot
                    ) from None
                log.info(
                    "%s: the authorization server refused our client registration (%s); "
                    "registering again",
                    self.name,
                    refused.detail or f"HTTP {refused.status}",
                )
                self.context.client_info = None
                self.context.clear_tokens()  # issued to the client it forgot
                await self.tokens.forget_client()
                registered_afresh = True
            except AuthorizationRequired as refused:
                call = self._in_flight.current_call() if self._in_flight is not None else None
                if call is None:
                    raise  # connecting: the session reports it
                call.failed_authorization = refused
                if not stepping_up:
                    raise  # the grant is dead: the node reconnects, and says it needs a login
                # The grant still serves the server's other tools: only this call fails, with
                # the server's own 403 (sent again if discovery answered since).
                if not answered:
                    yield request
                return
            finally:
                await flow.aclose()
            if retry_with_refresh:
                self.context.token_expiry_time = 1.0  # long past: the next pass refreshes first

    def _not_granted(self, scope: str) -> None:
        """The server refused the call for want of `scope` after a re-authorization asked for
        it: the authorization server granted less (a new login would get no more). The call
        in flight fails saying so."""
        tokens = self.context.current_tokens
        granted = (tokens.scope if tokens is not None else None) or "none named"
        log.info("%s: scopes %r still refused after re-authorization", self.name, scope)
        call = self._in_flight.current_call() if self._in_flight is not None else None
        if call is not None:
            call.failed_authorization = AuthorizationRequired(
                self.name,
                why=(
                    f"refused the call: insufficient_scope (it needs `{scope or 'unnamed'}`; "
                    f"the authorization server granted `{granted}`)"
                ),
                login=False,
            )

    def _cannot_register_again(self) -> str | None:
        """Why the client refused at the authorization page cannot be registered afresh (its
        ID comes from the config), or None."""
        if self.tokens.pre_registered:
            return f"is mcpServers.{self.name}.oauth_client_id registered there?"
        client = self.context.client_info
        if client is not None and client.client_id == self.context.client_metadata_url:
            return f"does it accept mcpServers.{self.name}.oauth_client_metadata_url?"
        return None

    async def _probe(self, url: str) -> None:
        """Look at the page before a person is sent to it, unless our client was registered
        just now (then the server knows it): a page that refuses us is no page for a person."""
        client = self.context.client_info
        if client is None or client.client_id not in self.tokens.registered_now:
            await probe_authorization_page(url)

    def _can_ask(self) -> bool:
        """Whether a call in flight has a caller to put the authorization to."""
        return self._in_flight is not None and self._in_flight.asking_call() is not None

    async def _keep_authorization_url(self, url: str) -> None:
        if self.mode == "refuse" and not self._can_ask():
            raise AuthorizationRequired(self.name)
        self._authorization_url = url

    async def _await_callback(self) -> AuthorizationCodeResult:
        url = self._authorization_url
        if url is None:
            raise OAuthFlowError("no authorization URL to visit")
        self._authorization_url = None
        if self.mode == "refuse":
            return await self._ask_caller(url)
        state = _state_of(url)
        if self.mode == "fetch":
            return await receive_callback(
                self._port, lambda: fetch_authorization(url), state=state, within=_FETCH_TIMEOUT
            )
        await self._probe(url)

        async def open_browser() -> None:
            self._announce(
                f"Authorise agent-gateway at MCP server {self.name!r} in your browser. "
                f"If it did not open, visit:\n{url}"
            )
            await anyio.to_thread.run_sync(webbrowser.open, url)

        return await receive_callback(
            self._port, open_browser, state=state, within=_BROWSER_TIMEOUT
        )

    async def _ask_caller(self, url: str) -> AuthorizationCodeResult:
        """Put the authorization page to the caller of the call in flight (URL-mode
        elicitation: its client opens the page, its person approves) and wait for the redirect.
        The tokens are the gateway's own; the caller never sees them."""
        call = self._in_flight.asking_call() if self._in_flight is not None else None
        if call is None or call.answer is None:
            raise AuthorizationRequired(self.name)
        ask = call.answer
        more = f" for more access (scopes: {self._wanted_scope})" if self._wanted_scope else ""
        request = ElicitRequest(
            params=ElicitRequestURLParams(
                message=(
                    f"agent-gateway needs your authorisation at MCP server {self.name!r}"
                    f"{more} to go on with this call: open the page and approve."
                ),
                url=url,
                elicitation_id=secrets.token_urlsafe(16),
            )
        )

        async def visit() -> None:
            answer = await ask(request)
            if isinstance(answer, ErrorData):
                raise AuthorizationRequired(
                    self.name,
                    why=f"needs authorisation, and its caller was not asked ({answer.message})",
                )
            if not isinstance(answer, ElicitResult) or answer.action != "accept":
                action = answer.action if isinstance(answer, ElicitResult) else "no answer"
                raise AuthorizationRequired(
                    self.name, why=f"needs authorisation, which its caller refused ({action})"
                )

        with call.waiting():  # a person is at work: the call's idle clock stops meanwhile
            return await receive_callback(
                self._port, visit, state=_state_of(url), within=_BROWSER_TIMEOUT
            )


def _say_nothing(_line: str) -> None:
    pass


def _state_of(url: str) -> str:
    """The `state` of the SDK's authorization URL (the callback must bring it back)."""
    state = parse_qs(urlsplit(url).query).get("state")
    if not state:
        raise OAuthFlowError("the authorization URL carries no state")
    return state[0]
