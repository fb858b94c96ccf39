"""`[gateway.oauth]`: serving over HTTP as an OAuth 2.1 resource server behind an identity provider.

    [gateway.oauth]
    resource = "https://gw.example.com/mcp"          # this gateway's URL: the tokens' audience
    authorization_servers = ["https://idp.example.com"]
    # jwks_uri = "..."                 # default: from the issuer's metadata
    # introspection_endpoint = "..."   # opaque tokens (RFC 7662), with:
    # introspection_client_id = "gw"; introspection_client_secret_env = "GW_INTROSPECT_SECRET"
    required_scopes = ["mcp"]          # needed for any request
    [gateway.oauth.scopes]             # what a scope lets a client call (agents, exposed nodes)
    "tools:fs" = ["filesystem"]
    "agents" = ["assistant"]
    "admin" = ["*"]

Kept apart from the serving code so that reading a config needs none of it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ALL_NODES", "ASYMMETRIC_ALGORITHMS", "ResourceServerSettings"]

ALL_NODES = "*"
"""In a scope's list of nodes: every node, and the served resources, prompts and completions."""
ASYMMETRIC_ALGORITHMS = (
    *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    *("ES256", "ES256K", "ES384", "ES512", "ES521", "EdDSA"),
)
"""The JWT signature algorithms `algorithms` may name: signed with the issuer's private key."""


class ResourceServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    resource: str
    """This gateway's MCP endpoint as clients reach it (`https://host/mcp`): published as the
    protected resource, and the audience every token must name."""
    authorization_servers: list[str] = Field(min_length=1)
    """The issuers whose tokens are taken (published in the resource metadata)."""
    jwks_uri: str | None = None
    """Where the issuers' signing keys are; default: each issuer's metadata (`jwks_uri`)."""
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256", "EdDSA"])
    """JWT signature algorithms accepted (never `none`, never HMAC with a public key)."""
    introspection_endpoint: str | None = None
    """For opaque (non-JWT) tokens: the RFC 7662 endpoint to ask."""
    introspection_client_id: str | None = None
    introspection_client_secret_env: str | None = None
    required_scopes: list[str] = Field(default_factory=list[str])
    """Scopes every token must carry."""
    scopes: dict[str, list[str]] = Field(default_factory=dict[str, list[str]])
    """Scope → the agents and exposed nodes it lets a client call (`"*"`: all of them, and the
    exposed servers' resources, prompts and completions). Empty: any valid token calls
    everything."""
    leeway: float = Field(default=30.0, ge=0)
    """Seconds of clock skew allowed on `exp`, `nbf` and `iat`."""

    @field_validator("resource", "authorization_servers", "jwks_uri", "introspection_endpoint")
    @classmethod
    def _absolute_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        for url in [value] if isinstance(value, str) else value or []:
            parts = urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.netloc:
                raise ValueError(f"{url!r} is not an absolute http(s) URL")
            if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
                raise ValueError(f"{url!r}: use https (http only on loopback)")
            if "#" in url:
                # Never meaningful here, and a caller's identity is `<issuer>#<sub>`.
                raise ValueError(f"{url!r}: a URL here has no fragment (#...)")
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_algorithms(cls, value: list[str]) -> list[str]:
        # `none` proves nothing, and HMAC would take the issuer's public key as its secret.
        refused = [a for a in value if a not in ASYMMETRIC_ALGORITHMS]
        if refused or not value:
            raise ValueError(
                f"not accepted: {refused or 'none listed'}; take any of "
                f"{', '.join(ASYMMETRIC_ALGORITHMS)} (never none, never HMAC: HS256, ...)"
            )
        return value

    @model_validator(mode="after")
    def _introspection_client(self) -> ResourceServerSettings:
        if self.introspection_client_secret_env and not self.introspection_client_id:
            raise ValueError("`introspection_client_secret_env` needs `introspection_client_id`")
        return self

    def nodes_granted(self, scopes: list[str]) -> frozenset[str] | None:
        """What `scopes` let a client call: node names, or None for everything."""
        if not self.scopes:
            return None
        granted: set[str] = set()
        for scope in scopes:
            granted.update(self.scopes.get(scope, ()))
        return None if ALL_NODES in granted else frozenset(granted)

    def scopes_for(self, node: str) -> list[str]:
        """The scopes that would let a client call `node` (for a refusal's message)."""
        return sorted(s for s, nodes in self.scopes.items() if node in nodes or ALL_NODES in nodes)
