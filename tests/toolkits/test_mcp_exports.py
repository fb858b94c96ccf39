from __future__ import annotations

import toolkits.mcp


def test_the_package_exports_what_we_mean() -> None:
    assert toolkits.mcp.__all__ == sorted(toolkits.mcp.__all__, key=lambda n: (not n.isupper(), n))
    assert set(toolkits.mcp.__all__) == {
        "DEFAULT_MAX_OUTPUT",
        "DEFAULT_MAX_SAMPLING",
        "DEFAULT_TIMEOUT",
        "uses_oauth",
        "oauth_for",
        "default_store",
        "TokenStore",
        "TokenEndpointAuth",
        "RedirectMode",
        "McpOAuth",
        "KeyringStore",
        "FileStore",
        "Forward",
        "Backoff",
        "McpCatalog",
        "McpServerConfig",
        "McpToolkit",
        "McpToolkitGroup",
        "NodeTools",
        "PrefixPolicy",
        "ProtocolErrorResult",
        "ProtocolMode",
        "Target",
        "TransportFactory",
        "TransportKind",
        "is_offered",
        "is_plain_text",
        "load_mcp_servers",
        "plain_for_era",
        "protocol_error",
        "protocol_error_result",
        "resolve_tool_names",
        "sanitize_name",
        "readable_result",
        "too_deep_text",
    }
    for name in toolkits.mcp.__all__:
        assert getattr(toolkits.mcp, name) is not None
