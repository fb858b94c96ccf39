"""Config files: both formats, Claude Desktop's shape, and errors that name the bad key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.app import open_gateway
from gateway.config import DEFAULT_CONFIG, load_config, parse_config
from gateway.errors import ConfigError

pytestmark = pytest.mark.anyio

TOML = """
[gateway]
max_concurrency = 4

[mcpServers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]

[tools.calc]
builtin = "calculator"

[agents.assistant]
model = "scripted:answers.json"
system = "Be brief."
tools = ["calc", "time"]
max_iterations = 3
"""


def test_toml_and_json_with_the_same_keys_give_the_same_config(tmp_path: Path) -> None:
    import tomllib

    toml_file = tmp_path / "agent-gateway.toml"
    toml_file.write_text(TOML)
    json_file = tmp_path / "agent-gateway.json"
    json_file.write_text(json.dumps(tomllib.loads(TOML)))
    from_toml, from_json = load_config(toml_file), load_config(json_file)
    assert from_toml == from_json
    assert from_toml.gateway.max_concurrency == 4
    assert from_toml.agents["assistant"].tools == ["calc", "time"]
    assert from_toml.mcp_servers["time"].args == ["--local-timezone", "UTC"]


def test_a_claude_desktop_file_is_read_for_its_servers(tmp_path: Path) -> None:
    desktop = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"memory": {"command": "npx", "args": ["-y", "server-memory"]}},
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(desktop))
    assert list(load_config(path).mcp_servers) == ["memory"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agnts": {}}, "agnts: unknown key"),
        ({"agents": {"a": {"max_iterations": 0}}}, "agents.a.max_iterations:"),
        ({"agents": {"a": {"tools": ["nope"]}}}, "agents.a.tools: no node named 'nope'"),
        ({"tools": {"c": {"builtin": "abacus"}}}, "tools.c: unknown builtin 'abacus'"),
        ({"tools": {"c": {}}}, "tools.c: set exactly one of `builtin` or `python`"),
        ({"tools": {"c": {"python": "no colon"}}}, "tools.c: `python` must look like"),
        ({"mcpServers": {"s": {"command": "x", "tmeout": 1}}, "agents": {}}, "mcpServers.s.tmeout"),
        (
            {"tools": {"x": {"builtin": "calculator"}}, "agents": {"x": {}}},
            "agents.x: the name is already used in tools",
        ),
        ({"agents": {"has space": {}}}, "agents.has space: names may use"),
    ],
)
def test_bad_config_errors_name_the_key(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.toml")
    assert str(caught.value).startswith("cfg.toml: ")
    assert message in str(caught.value)


def test_unreadable_and_malformed_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[agents\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: not valid TOML"):
        load_config(broken)


def test_no_file_means_the_built_in_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config() == DEFAULT_CONFIG
    (tmp_path / "agent-gateway.toml").write_text(TOML)
    assert load_config() != DEFAULT_CONFIG


async def test_a_python_function_becomes_a_tool_named_after_its_node() -> None:
    config = parse_config(
        {
            "tools": {"shout": {"python": "tests.sample_tools:shout", "description": "Loud."}},
            "agents": {"a": {"tools": ["shout"]}},
        }
    )
    async with open_gateway(config) as gateway:
        tools = await gateway.list_tools()
        assert tools["shout"].description == "Loud."
        assert tools["shout"].input_schema["required"] == ["text"]
        result = await gateway.call_tool("shout", {"text": "hi", "times": 2})
    assert result.structured_content == {"response": "HI HI"}


async def test_an_unimportable_python_tool_is_a_config_error() -> None:
    config = parse_config({"tools": {"t": {"python": "tests.sample_tools:missing"}}})
    with pytest.raises(ConfigError, match=r"tools\.t\.python: cannot import"):
        async with open_gateway(config):
            pass
