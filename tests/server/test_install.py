"""`agent-gateway install claude-desktop`: merging our entry into the client's config."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import main
from gateway.install import claude_desktop_config_path

EXISTING: dict[str, Any] = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "agent-gateway": {"command": "old", "args": [], "env": {"LOG": "1"}},
    },
}


@pytest.fixture
def gateway_config(tmp_path: Path) -> Path:
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.calculator]\nbuiltin = "calculator"\n')
    return config


def install(config: Path, client: Path, *extra: str) -> int:
    return main(
        [
            "install",
            "claude-desktop",
            "--config",
            str(config),
            "--client-config",
            str(client),
            *extra,
        ]
    )


def test_the_entry_is_merged_keeping_everything_else(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(json.dumps(EXISTING))
    assert install(gateway_config, client) == 0
    written = json.loads(client.read_text())
    assert written["globalShortcut"] == "Ctrl+Space"
    assert written["mcpServers"]["time"] == EXISTING["mcpServers"]["time"]
    entry = written["mcpServers"]["agent-gateway"]
    assert entry["command"] == str(Path(sys.executable).parent / "agent-gateway")
    assert entry["args"] == ["serve", "--stdio", "--config", str(gateway_config.resolve())]
    assert entry["env"] == {"LOG": "1"}  # a key we do not set stays
    assert json.loads((tmp_path / "claude_desktop_config.json.bak").read_text()) == EXISTING
    assert "installed 'agent-gateway'" in capsys.readouterr().out


def test_installing_twice_changes_nothing(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "nested" / "claude_desktop_config.json"
    assert install(gateway_config, client, "--name", "gw") == 0
    first = client.read_text()
    assert not (client.parent / "claude_desktop_config.json.bak").exists()  # nothing to back up
    (client.parent / "claude_desktop_config.json.bak").write_text("sentinel")
    assert install(gateway_config, client, "--name", "gw") == 0
    assert client.read_text() == first
    assert (client.parent / "claude_desktop_config.json.bak").read_text() == "sentinel"
    assert "'gw' is already installed" in capsys.readouterr().out
    assert list(json.loads(first)["mcpServers"]) == ["gw"]


def test_dry_run_prints_and_writes_nothing(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(json.dumps(EXISTING))
    assert install(gateway_config, client, "--dry-run") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["mcpServers"]["agent-gateway"]["args"][:2] == ["serve", "--stdio"]
    assert json.loads(client.read_text()) == EXISTING
    assert not (tmp_path / "claude_desktop_config.json.bak").exists()


def test_a_broken_client_config_is_left_alone(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text("{not json")
    assert install(gateway_config, client) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert client.read_text() == "{not json"
    client.write_text('{"mcpServers": []}')
    assert install(gateway_config, client) == 2
    assert "mcpServers is not an object" in capsys.readouterr().err


def test_install_needs_a_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    client = tmp_path / "claude.json"
    assert main(["install", "claude-desktop", "--client-config", str(client)]) == 2
    assert "pass --config FILE" in capsys.readouterr().err
    assert not client.exists()


def test_the_default_client_config_path_follows_the_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("APPDATA", str(tmp_path / "Roaming"))
    assert claude_desktop_config_path("darwin") == (
        tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert (
        claude_desktop_config_path("win32")
        == tmp_path / "Roaming/Claude/claude_desktop_config.json"
    )
    assert (
        claude_desktop_config_path("linux")
        == tmp_path / ".config/Claude/claude_desktop_config.json"
    )
