"""MCP clients' own config files, read as the clients read them: a server they mark disabled, an
env file they load, variables that cannot expand, a working directory that is gone, and the
values of variables in a server's URL, secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gateway.config import load_config, parse_config, with_default_agent
from gateway.errors import ConfigError


def test_a_server_a_client_marks_disabled_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cline's and Windsurf's `disabled` was refused: `mcpServers.off.disabled: unknown key`."""
    monkeypatch.delenv("UNSET_ONE", raising=False)
    servers = {
        "on": {"command": "srv", "disabled": False},
        "off": {"command": "srv", "args": ["${UNSET_ONE}"], "disabled": True},  # not expanded
        "plain": {"command": "srv"},
    }
    config = with_default_agent(parse_config({"mcpServers": servers}, source="c.json"))
    assert list(config.mcp_servers) == ["on", "plain"]
    assert config.agents["assistant"].tools == ["on", "plain"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"mcpServers": {"s": {"command": "srv", "disabled": "yes"}}},
            "c.json: mcpServers.s.disabled: true or false, not 'yes'",
        ),
        (
            {
                "mcpServers": {"Google Drive": {"command": "srv", "disabled": True}},
                "agents": {"a": {"tools": ["Google_Drive"]}},
            },
            "c.json: agents.a.tools: server 'Google_Drive' is disabled in this file: enable it, "
            "or leave it out of the agent's tools",
        ),
    ],
)
def test_a_disabled_server_said_wrong_or_still_used_is_a_clear_error(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="c.json")
    assert str(caught.value) == message


def test_the_values_of_the_variables_in_a_url_are_marked_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a `${VAR}` in a header marks it secret: each variable's value (a default's too) but
    a folder's, after the parts the entry marks itself, which cannot unmark them."""
    monkeypatch.setenv("ZAPIER_KEY", "zk-abcdefghij")
    monkeypatch.setenv("REGION", "eu-west-1")
    monkeypatch.delenv("TENANT", raising=False)
    web: dict[str, object] = {
        "url": "https://${REGION}.example.com/s/${ZAPIER_KEY}/mcp?t=${TENANT:-acme}&d=${PWD}",
        "url_secrets": [],
    }
    config = parse_config({"mcpServers": {"web": web, "plain": {"url": "https://h/mcp"}}})
    assert config.mcp_servers["web"].url_secrets == ["eu-west-1", "zk-abcdefghij", "acme"]
    assert config.mcp_servers["plain"].url_secrets == []


def test_an_env_file_a_client_names_gives_the_server_its_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursor's and VS Code's `envFile` was refused: `mcpServers.s.envFile: unknown key`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("# the server's\nexport TOKEN='t0k'\nMODE=file\n")
    (tmp_path / ".cursor").mkdir()
    path = tmp_path / ".cursor" / "mcp.json"
    servers = {
        "s": {"command": "srv", "envFile": "${workspaceFolder}/.env", "env": {"MODE": "own"}},
        "r": {"command": "srv", "envFile": ".env"},  # the working directory's, as in Cursor
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    config = load_config(path)
    assert config.mcp_servers["s"].env == {"TOKEN": "t0k", "MODE": "own"}
    assert config.mcp_servers["r"].env == {"TOKEN": "t0k", "MODE": "file"}
    (tmp_path / ".env").unlink()
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(
        f"{path}: mcpServers.s.envFile: cannot read env file {tmp_path}/.env: "
    )


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "large"])
def test_an_env_file_that_no_env_file_is_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """`/dev/zero` was read until memory ran out (a MemoryError, or the process killed), a
    FIFO until a writer came (for ever)."""
    monkeypatch.chdir(tmp_path)
    env = {"device": "/dev/zero", "directory": "dir"}.get(kind, kind)
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
    if kind == "directory":
        (tmp_path / "dir").mkdir()
    if kind == "large":
        (tmp_path / "large").write_text(f"A={'x' * 1024 * 1024}\n")
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "srv", "envFile": env}}}))
    with pytest.raises(ConfigError) as caught:  # the FIFO's open returns: no writer awaited
        load_config(path)
    said = "larger than 1024 kB" if kind == "large" else "not a regular file"
    assert str(caught.value) == (
        f"{path}: mcpServers.s.envFile: cannot read env file {env}: {said}"
        + (", not a .env file of KEY=VALUE lines" if kind == "large" else "")
    )


def test_a_variable_in_a_variables_default_is_refused_not_passed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`${TAG:-${OTHER:-z}}` reached the server as the literal `${OTHER:-z}`."""
    monkeypatch.delenv("TAG", raising=False)
    server = {"command": "srv", "args": ["--tag=${TAG:-${OTHER:-z}}!"]}
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"s": server}}, source="c.json")
    assert str(caught.value) == (
        "c.json: mcpServers.s.args: cannot expand ${TAG:-${OTHER:-z}}: a default "
        "(${VAR:-default}) cannot hold another variable here; give it as text"
    )


@pytest.fixture
def gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory deleted under the process (a shell left in a removed folder)."""
    place = tmp_path / "gone"
    place.mkdir()
    monkeypatch.chdir(place)
    place.rmdir()
    return tmp_path


def test_with_the_working_directory_gone_what_needs_it_says_so(gone: Path) -> None:
    """Each ended in a FileNotFoundError traceback."""
    (gone / "c.toml").write_text('[tools.c]\nbuiltin = "calculator"\n')
    with pytest.raises(ConfigError) as caught:
        load_config("../c.toml")
    assert str(caught.value) == (
        "../c.toml: a path relative to the working directory, which is gone (deleted?): name "
        "the config by its absolute path, or run from a directory that exists"
    )
    assert list(load_config(gone / "c.toml").tools) == ["c"]
    client = gone / ".mcp.json"
    server = {"command": "srv", "args": ["${workspaceFolder}/x"]}
    client.write_text(json.dumps({"mcpServers": {"s": server}}))
    with pytest.raises(ConfigError) as caught:
        load_config(client)
    assert str(caught.value) == (
        f"{client}: mcpServers.s.args: cannot expand ${{workspaceFolder}}: the working directory "
        "is gone (deleted?): run from a directory that exists"
    )


def test_an_entry_serving_the_gateway_on_the_file_itself_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Such an entry (written by hand, or by an older `install`) started the gateway again
    from inside the gateway, five levels deep."""
    monkeypatch.chdir(tmp_path)
    itself = ["serve", "--stdio", "--config", str(tmp_path / ".mcp.json")]
    servers = {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "agent-gateway": {"command": "agent-gateway", "args": itself},
        "relative": {"command": "agent-gateway", "args": ["serve", "--config=.mcp.json"]},
        "another": {"command": "agent-gateway", "args": ["serve", "--config", "other.toml"]},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    config = load_config(".mcp.json")
    assert list(config.mcp_servers) == ["time", "another"]
    assert [r.getMessage() for r in caplog.records] == [
        f".mcp.json: mcpServers.{name} serves the gateway on this same file: left out (it "
        "would start itself, over and over)"
        for name in ("agent-gateway", "relative")
    ]
