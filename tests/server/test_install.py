"""`agent-gateway install claude-desktop`: merging our entry into the client's config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import main
from gateway.install import claude_desktop_config_path, server_entry

REPO = Path(__file__).resolve().parents[2]

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
    client.parent.mkdir()
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


def test_env_from_options_and_a_file_is_merged_into_the_entry_and_never_printed(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(json.dumps(EXISTING))
    env_file = tmp_path / "keys.env"
    env_file.write_text('# keys\nexport OPENAI_API_KEY="sk-from-file"\n\nREGION=eu\n')
    extra = ["--env-file", str(env_file), "--env", "REGION=us", "--env", "EMPTY="]
    assert install(gateway_config, client, *extra, "--dry-run") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["mcpServers"]["agent-gateway"]["env"] == {
        "LOG": "***", "OPENAI_API_KEY": "***", "REGION": "***", "EMPTY": "***"
    }  # fmt: skip
    assert install(gateway_config, client, *extra) == 0
    out = capsys.readouterr().out
    assert "with env EMPTY, LOG, OPENAI_API_KEY, REGION" in out
    assert "sk-from-file" not in out
    entry = json.loads(client.read_text())["mcpServers"]["agent-gateway"]
    assert entry["env"] == {
        "LOG": "1",
        "OPENAI_API_KEY": "sk-from-file",
        "REGION": "us",
        "EMPTY": "",
    }
    assert client.stat().st_mode & 0o777 == 0o600  # it holds secrets
    backup = client.with_name(client.name + ".bak")
    assert backup.stat().st_mode & 0o777 == 0o600  # the old file: the same secrets, as kept


def test_a_private_file_stays_private_and_a_link_is_followed(
    tmp_path: Path, gateway_config: Path
) -> None:
    real = tmp_path / "dotfiles" / "claude_desktop_config.json"
    real.parent.mkdir()
    real.write_text(json.dumps(EXISTING))
    real.chmod(0o600)  # the other servers' secrets are in it
    link = tmp_path / "claude_desktop_config.json"
    link.symlink_to(real)
    assert install(gateway_config, link) == 0
    assert link.is_symlink()  # still the link: the file it names got the entry
    assert "agent-gateway" in json.loads(real.read_text())["mcpServers"]
    for written in (real, real.with_name(real.name + ".bak")):
        assert written.stat().st_mode & 0o777 == 0o600


def test_a_bad_env_line_is_a_clear_error_that_does_not_quote_it(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file = tmp_path / "keys.env"
    env_file.write_text("A=1\nsk-secret-without-a-name\n")
    client = tmp_path / "c.json"
    assert install(gateway_config, client, "--env-file", str(env_file)) == 2
    err = capsys.readouterr().err
    assert f"{env_file}:2: expected KEY=VALUE" in err
    assert "sk-secret" not in err
    assert not client.exists()


def test_a_provider_key_the_client_will_not_pass_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-in-this-shell")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[agents.a]\nmodel = ["openai:gpt-4.1-mini", "gemini:gemini-2.5-flash"]\n'
        '[agents.b]\nmodel = "openai:gpt-4.1-mini"\n'
        '[agents.local]\nmodel = "openai-compatible:http://127.0.0.1:8080/v1#qwen"\n'
        '[agents.local_responses]\nmodel = "openai-responses:http://127.0.0.1:8000/v1#gpt-oss"\n'
    )
    desktop = tmp_path / "claude.json"
    assert install(config, desktop) == 0
    err = capsys.readouterr().err
    assert (
        "warning: agent 'a' (openai:gpt-4.1-mini) and agent 'b' (openai:gpt-4.1-mini) need "
        "OPENAI_API_KEY, which is not set in the entry's env (Claude Desktop does not pass on "
        "your shell's environment): add --env OPENAI_API_KEY=VALUE or --env-file FILE"
    ) in err
    assert "agent 'a' (gemini:gemini-2.5-flash) needs GEMINI_API_KEY or GOOGLE_API_KEY" in err
    assert "local" not in err  # a local server needs no key (OPENAI_API_KEY is never its)
    assert install(config, desktop, "--env", "OPENAI_API_KEY", "--env", "GEMINI_API_KEY=g") == 0
    assert capsys.readouterr().err == ""
    assert json.loads(desktop.read_text())["mcpServers"]["agent-gateway"]["env"] == {
        "OPENAI_API_KEY": "sk-in-this-shell",  # KEY alone: this shell's value
        "GEMINI_API_KEY": "g",
    }
    # Claude Code starts its servers with the environment it was started in.
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["install", "claude-code", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" not in err
    assert "needs GEMINI_API_KEY or GOOGLE_API_KEY, which is not set in the entry's env nor" in err


def test_claude_code_and_cursor_get_their_own_files(
    tmp_path: Path,
    gateway_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(home))
    command = ["install", "--config", str(gateway_config)]
    assert main([command[0], "claude-code", *command[1:]]) == 0
    assert "restart Claude Code to use it" in capsys.readouterr().out
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["agent-gateway"]
    assert entry["type"] == "stdio"
    assert entry["args"] == ["serve", "--stdio", "--config", str(gateway_config.resolve())]
    assert main([command[0], "cursor", *command[1:]]) == 0
    assert "agent-gateway" in json.loads((home / ".cursor/mcp.json").read_text())["mcpServers"]
    assert main([command[0], "cursor", "--project", *command[1:]]) == 0
    cursor_entry = json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]
    assert "type" not in cursor_entry["agent-gateway"]


def test_variables_the_config_expands_must_reach_the_gateway_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-in-this-shell")
    monkeypatch.delenv("ONLY_IN_THE_ENTRY", raising=False)
    config = tmp_path / "gw.json"
    servers = {
        "github": {
            "command": "gh-mcp",
            "args": ["--home", "${HOME}"],
            "env": {"T": "${GITHUB_TOKEN}"},
        },
        "other": {"command": "x", "args": ["${ONLY_IN_THE_ENTRY}", "${MODE:-fast}"]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    client = tmp_path / "claude.json"
    assert install(config, client, "--env", "ONLY_IN_THE_ENTRY=1") == 0
    err = capsys.readouterr().err
    assert "warning: server 'github' needs GITHUB_TOKEN, which is not set in the entry's env" in err
    assert "HOME" not in err  # every client passes it on
    assert "ONLY_IN_THE_ENTRY" not in err
    assert "MODE" not in err
    # Without the entry's env, ${ONLY_IN_THE_ENTRY} is unset: a warning naming the fix (the
    # client may have it), not an error; --dry-run too.
    fresh = tmp_path / "fresh.json"
    for extra in (["--dry-run"], []):
        assert install(config, fresh, *extra) == 0
        assert (
            "warning: server 'other' needs ONLY_IN_THE_ENTRY, which is not set in the entry's "
            "env (Claude Desktop does not pass on your shell's environment): add --env "
            "ONLY_IN_THE_ENTRY=VALUE or --env-file FILE"
        ) in capsys.readouterr().err
    assert "agent-gateway" in json.loads(fresh.read_text())["mcpServers"]


def test_a_projects_file_gets_references_not_the_secrets_given(
    tmp_path: Path,
    gateway_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    command = ["install", "claude-code", "--config", str(gateway_config)]
    given = ["--env", "OPENAI_API_KEY=sk-live-xyz", "--env", "NOTES_DIR=/srv/notes"]
    assert main([*command, *given]) == 0
    mcp = project / ".mcp.json"
    assert "sk-live-xyz" not in mcp.read_text()
    entry = json.loads(mcp.read_text())["mcpServers"]["agent-gateway"]
    # Claude Code expands ${VAR} in .mcp.json env values; a path is no secret.
    assert entry["env"] == {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "NOTES_DIR": "/srv/notes"}
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY as ${OPENAI_API_KEY}" in err
    assert "warning: OPENAI_API_KEY is not set in this shell" in err
    assert "sk-live-xyz" not in err
    # Again, with the key this shell has: no backup holds it, no warning.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-xyz")
    monkeypatch.setenv("DS_TOKEN", "t0k")
    assert main([*command, *given, "--env", "DS_TOKEN"]) == 0
    assert "sk-live-xyz" not in (project / ".mcp.json.bak").read_text()
    assert "t0k" not in mcp.read_text()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert [line for line in warnings if "has no model" not in line] == []
    # Cursor's project file: ${env:VAR}; its global file keeps the value (readable by you only).
    cursor = [*command[:1], "cursor", *command[2:], *given]
    assert main([*cursor, "--project"]) == 0
    project_entry = json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]
    assert project_entry["agent-gateway"]["env"]["OPENAI_API_KEY"] == "${env:OPENAI_API_KEY}"
    assert main(cursor) == 0
    user_file = tmp_path / "home/.cursor/mcp.json"
    user_entry = json.loads(user_file.read_text())["mcpServers"]["agent-gateway"]
    assert user_entry["env"]["OPENAI_API_KEY"] == "sk-live-xyz"
    assert user_file.stat().st_mode & 0o777 == 0o600


def test_a_secret_known_by_its_value_or_a_tokens_name_is_a_reference_in_a_projects_file(
    tmp_path: Path,
    gateway_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A URL's password, a `*_PAT` and a token under a plain name went in as given."""
    monkeypatch.chdir(tmp_path)
    given = {
        "DATABASE_URL": "postgresql://u:DBPW@h/db",
        "CACHE_URL": "redis://h:6379/0?password=RDPW",
        "PG_CONN": "host=h dbname=gw password=PGPW",
        "GITHUB_PAT": "PATVALUE",
        "GH": "ghp_0123456789abcdefGHPW",
        "SLACK": "xoxb-1234-5678-SLACKPW",
        "UPSTREAM_URL": "postgresql://u@h/db?sslmode=require",  # no credential in it
        "NOTES_DIR": "/srv/npm_cache/asia",
    }
    options = [f"--env={name}={value}" for name, value in given.items()]
    assert main(["install", "claude-code", "--config", str(gateway_config), *options]) == 0
    text = (tmp_path / ".mcp.json").read_text()
    for secret in ("DBPW", "RDPW", "PGPW", "PATVALUE", "GHPW", "SLACKPW"):
        assert secret not in text
    env = json.loads(text)["mcpServers"]["agent-gateway"]["env"]
    plain = {"UPSTREAM_URL", "NOTES_DIR"}
    assert env == {name: given[name] if name in plain else f"${{{name}}}" for name in given}
    err = capsys.readouterr().err
    assert "warning: DATABASE_URL is not set in this shell" in err
    assert "DBPW" not in err


def test_a_secret_an_older_install_left_in_a_projects_file_is_replaced(
    tmp_path: Path,
    gateway_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-old")
    mcp = tmp_path / ".mcp.json"
    old = {"agent-gateway": {"command": "x", "env": {"OPENAI_API_KEY": "sk-old", "LOG": "1"}}}
    mcp.write_text(json.dumps({"mcpServers": old}))
    assert main(["install", "claude-code", "--config", str(gateway_config), "--dry-run"]) == 0
    printed = json.loads(capsys.readouterr().out)["mcpServers"]["agent-gateway"]["env"]
    assert printed == {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "LOG": "***"}
    assert main(["install", "claude-code", "--config", str(gateway_config)]) == 0
    entry = json.loads(mcp.read_text())["mcpServers"]["agent-gateway"]
    assert entry["env"] == {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "LOG": "1"}
    backup = tmp_path / ".mcp.json.bak"
    assert f"warning: {backup} holds the old value of OPENAI_API_KEY" in capsys.readouterr().err
    assert backup.stat().st_mode & 0o777 == 0o600


def test_a_client_config_in_a_folder_that_does_not_exist_is_refused(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --client-config made its folders and a file no client reads, silently."""
    client = tmp_path / "no-such-dir" / "claude.json"
    assert install(gateway_config, client) == 2
    err = capsys.readouterr().err
    assert f"--client-config {client}: there is no folder {client.parent}" in err
    assert "Claude Desktop's own file is" in err
    assert not client.parent.exists()
    client = tmp_path / "claude.json"  # a folder that exists: the new file is said
    assert install(gateway_config, client) == 0
    assert capsys.readouterr().out.startswith(f"{client} (a new file): installed 'agent-gateway'")


@pytest.mark.integration
def test_without_a_console_script_the_entry_runs_this_pythons_gateway_wherever_it_starts(
    tmp_path: Path, gateway_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m gateway.cli` put the folder the client starts it in first on the path: a
    `gateway` package there ran instead."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))  # no script beside
    entry = server_entry(gateway_config)
    assert entry["command"] == str(tmp_path / "bin" / "python")
    assert entry["args"][:3] == ["-P", "-m", "gateway.cli"]
    monkeypatch.undo()
    decoy = tmp_path / "client-cwd" / "gateway" / "cli"
    decoy.mkdir(parents=True)
    (decoy.parent / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "__main__.py").write_text("print('not agent-gateway')\n")
    done = subprocess.run(
        [sys.executable, *entry["args"][:3], "--version"],
        cwd=decoy.parent.parent,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("agent-gateway "), (done.stdout, done.stderr)


def test_the_clients_own_file_as_the_config_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README says a client's file works unchanged as a config: installed on itself, the
    client's start of the gateway started the gateway again, five levels deep."""
    monkeypatch.chdir(tmp_path)
    servers = {"mcpServers": {"toolbox": {"command": "python", "args": ["-m", "toolbox"]}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(servers))
    assert main(["install", "claude-code", "--config", ".mcp.json"]) == 2
    assert capsys.readouterr().err == (
        "error: .mcp.json is Claude Code's own file, which the entry goes into: the gateway run "
        "on it would start itself, over and over; copy the servers to put behind the gateway "
        "into a file of their own (or write one with `agent-gateway init`) and install that\n"
    )
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(json.dumps(servers))
    assert install(desktop, tmp_path / "." / desktop.name) == 2  # however it is spelled
    assert json.loads(desktop.read_text()) == servers
    assert json.loads((tmp_path / ".mcp.json").read_text()) == servers


def test_an_agent_without_a_model_is_warned_about(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`init` then `install` gave the client a gateway whose only tool always failed."""
    assert install(gateway_config, tmp_path / "claude.json") == 0
    assert capsys.readouterr().err == (
        "warning: agent 'assistant' has no model, so every call Claude Desktop makes to it "
        "fails: set `model` in [agents.assistant]; or, to serve the servers' own tools (a "
        "proxy), set [gateway] expose_tools = true\n"
    )
    gateway_config.write_text('[agents.a]\nmodel = "scripted:s.json"\n')
    assert install(gateway_config, tmp_path / "claude.json") == 0
    assert capsys.readouterr().err == ""


def test_an_entry_of_the_name_that_ran_another_config_is_named_as_replaced(
    tmp_path: Path, gateway_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    other = tmp_path / "other.toml"
    other.write_text(gateway_config.read_text())
    assert install(other, client) == 0
    first = json.loads(client.read_text())["mcpServers"]["agent-gateway"]
    capsys.readouterr()
    assert install(gateway_config, client, "--env", "LOG=1") == 0
    assert (
        f": installed 'agent-gateway' with env LOG, replacing the one that ran "
        f"{first['command']} serve --stdio --config {other.resolve()} (backup: "
    ) in capsys.readouterr().out
    assert install(gateway_config, client, "--env", "LOG=2") == 0  # the same gateway, new env
    assert "replacing" not in capsys.readouterr().out


def test_a_projects_file_names_the_config_portably_where_the_client_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project's file is checked in: the config by this machine's absolute path was wrong
    on every other machine. Cursor says the project's folder as `${workspaceFolder}`; what
    stays this machine's (the command, Claude Code's config path) is said."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "gw.toml").write_text('[agents.a]\nmodel = "scripted:s.json"\n')
    assert main(["install", "cursor", "--project", "--config", "tools/gw.toml"]) == 0
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]
    command = entry["agent-gateway"]["command"]
    assert entry["agent-gateway"]["args"][-2:] == ["--config", "${workspaceFolder}/tools/gw.toml"]
    assert capsys.readouterr().err == (
        f"note: mcp.json is meant to be shared, but holds this machine's {command}: on another "
        "machine, run `agent-gateway install` there\n"
    )
    assert main(["install", "claude-code", "--config", "tools/gw.toml"]) == 0
    config = tmp_path.resolve() / "tools" / "gw.toml"
    assert f"holds this machine's {command} and {config}: on" in capsys.readouterr().err
    assert main(["install", "cursor", "--config", "tools/gw.toml"]) == 0  # ~/.cursor: not shared
    assert "note" not in capsys.readouterr().err
    assert (tmp_path / "home" / ".cursor" / "mcp.json").is_file()
