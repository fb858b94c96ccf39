from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolkits.errors import ServerConfigError
from toolkits.mcp import McpServerConfig, load_mcp_servers

CLAUDE_DESKTOP = {
    "mcpServers": {
        "memory": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": "/tmp/memory.json"},
        },
        "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Team": "a"}},
        "legacy": {"type": "sse", "url": "https://example.com/sse"},
    },
    "globalShortcut": "Ctrl+Space",
}


def test_claude_desktop_entries_validate_unchanged() -> None:
    servers = load_mcp_servers(CLAUDE_DESKTOP)
    assert list(servers) == ["memory", "remote", "legacy"]
    assert servers["memory"].kind == "stdio"
    assert servers["memory"].env == {"MEMORY_FILE_PATH": "/tmp/memory.json"}
    assert servers["remote"].kind == "http"
    assert servers["remote"].headers == {"X-Team": "a"}
    assert servers["legacy"].kind == "sse"


def test_defaults() -> None:
    config = McpServerConfig(command="mcp-server-time")
    assert (config.prefix, config.timeout, config.max_output, config.protocol) == (
        "always",
        60,
        100_000,
        "auto",
    )
    assert config.include is None
    assert config.max_sampling == 10  # sampling requests an agent's model answers per call
    assert config.exclude == []
    assert config.call_cap == 600


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"url": "http://127.0.0.1:1/mcp"}, "http"),
        ({"transport": "streamable-http", "url": "http://127.0.0.1:1/mcp"}, "http"),
        ({"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"}, "http"),
        ({"type": "stdio", "command": "x", "transport": "stdio"}, "stdio"),
        ({"transport": "sse", "url": "http://127.0.0.1:1/sse"}, "sse"),
    ],
)
def test_transport_is_read_from_type_or_transport_or_inferred(
    entry: dict[str, object], kind: str
) -> None:
    assert McpServerConfig.model_validate(entry).kind == kind


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "http", "transport": "sse", "url": "http://x"}, "disagree"),
        ({"command": "x", "colour": "red"}, "Extra inputs are not permitted"),
        (
            {"args": ["x"]},
            "a server needs `command` \\(a stdio server\\) or `url` \\(an HTTP server\\)",
        ),
        ({"type": "stdio"}, "a stdio server needs `command`"),
        ({"type": "http"}, "an http server needs `url`"),
        (
            {"command": "x", "url": "http://x"},
            "give `command` \\(a stdio server\\) or `url` \\(an HTTP server\\), not both",
        ),
        (
            {"command": "x", "url": "http://x", "type": "stdio"},
            "'url' does not apply to a stdio server",
        ),
        (
            {"command": "x", "url": "http://x", "headers": {"A": "1"}, "type": "stdio"},
            "'url', 'headers' do not apply to a stdio server",
        ),
        ({"url": "http://x", "env": {"A": "1"}}, "'env' does not apply to an http server"),
        ({"command": "x", "timeout": 10, "max_timeout": 5}, "must not be shorter"),
        ({"command": "x", "prefix": "sometimes"}, "prefix"),
        ({"command": "x", "protocol": "2025-11-25"}, "protocol"),
        ({"command": "x", "timeout": 0}, "greater than 0"),
        ({"command": "x", "max_sampling": -1}, "greater than or equal to 0"),
        (
            {"url": "127.0.0.1:3001/mcp"},
            "`url` must be an http\\(s\\) URL like http://127.0.0.1:3001/mcp, not "
            "'127.0.0.1:3001/mcp'",
        ),
        ({"url": "localhost:3001/mcp"}, "not 'localhost:3001/mcp'"),
        ({"type": "sse", "url": "ws://127.0.0.1:1/sse"}, "not 'ws://127.0.0.1:1/sse'"),
        ({"url": "https:///mcp?token=hunter2"}, "not 'https:///mcp'"),  # no host; no query shown
    ],
)
def test_invalid_entries_are_refused_clearly(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        McpServerConfig.model_validate(entry)


def test_a_tools_own_timeout_sets_its_clock_by_name_then_by_the_first_glob() -> None:
    config = McpServerConfig(
        command="x",
        timeout=10,
        tool_timeouts={"export_*": 300, "*": 30, "export_all": 900, "quick": 2.5},
    )
    # (idle timeout, absolute cap): a tool's cap is 10 x its own timeout without `max_timeout`.
    assert config.clock_of("export_all") == (900, 9000)  # its name, before any glob
    assert config.clock_of("export_csv") == (300, 3000)  # the first glob that matches
    assert config.clock_of("search") == (30, 300)
    assert config.clock_of("quick") == (2.5, 25)
    assert McpServerConfig(command="x", timeout=10).clock_of("search") == (10, 100)
    capped = McpServerConfig(command="x", max_timeout=600, tool_timeouts={"slow": 120})
    assert capped.clock_of("slow") == (120, 600)
    assert capped.clock_of("other") == (60, 600)


@pytest.mark.parametrize(
    ("timeouts", "message"),
    [
        ({"slow": 0}, r"tool_timeouts\.slow\n.*greater than 0"),
        ({"slow": -5}, "greater than 0"),
        ({"slow": float("inf")}, "finite number"),
        ({"slow": float("nan")}, "finite number"),
        ({"slow": "120"}, "valid number"),
        ({"slow": True}, "valid number"),
        ({"slow": 700, "fast": 1, "big*": 601}, r"`tool_timeouts` 'slow', 'big\*': longer than"),
    ],
)
def test_a_tool_timeout_must_be_a_positive_finite_number_within_max_timeout(
    timeouts: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        McpServerConfig.model_validate(
            {"command": "x", "max_timeout": 600, "tool_timeouts": timeouts}
        )


def test_secrets_stay_out_of_the_repr() -> None:
    config = McpServerConfig(
        url="http://127.0.0.1:1/mcp", headers={"X-Api-Key": "hunter2"}, bearer_token_env="TOKEN_VAR"
    )
    stdio = McpServerConfig(command="x", env={"API_KEY": "hunter2"})
    assert "hunter2" not in repr(config)
    assert "hunter2" not in repr(stdio)
    assert "TOKEN_VAR" in repr(config)


def test_load_accepts_text_and_paths(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP))
    assert (
        load_mcp_servers(path)
        == load_mcp_servers(json.dumps(CLAUDE_DESKTOP))
        == load_mcp_servers(CLAUDE_DESKTOP)
    )
    assert load_mcp_servers({}) == {}


def test_load_errors_name_the_server_and_key(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match=r"mcpServers\.bad\.timeout"):
        load_mcp_servers({"mcpServers": {"bad": {"command": "x", "timeout": "soon"}}})
    with pytest.raises(ServerConfigError, match="not valid JSON"):
        load_mcp_servers("{nope")
    with pytest.raises(ServerConfigError, match="cannot read"):
        load_mcp_servers(tmp_path / "missing.json")


def test_a_file_name_given_as_text_is_told_to_be_a_path(tmp_path: Path) -> None:
    """A str is JSON text: a file's name in one is refused saying so, not as bad JSON."""
    hint = "looks like a file name, but a str is JSON text; pass a pathlib.Path for a file"
    with pytest.raises(ServerConfigError, match=f"'claude_desktop_config.json' {hint}"):
        load_mcp_servers("claude_desktop_config.json")  # need not exist: the name says it
    existing = tmp_path / "servers.conf"
    existing.write_text(json.dumps(CLAUDE_DESKTOP))
    with pytest.raises(ServerConfigError, match=hint):
        load_mcp_servers(f" {existing}\n")
    assert load_mcp_servers(existing) == load_mcp_servers(CLAUDE_DESKTOP)
    with pytest.raises(ServerConfigError, match="not valid JSON"):
        load_mcp_servers("servers")  # neither JSON nor a file
