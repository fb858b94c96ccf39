"""The command line against a server that sends what SDK servers would not
(`tests/servers/odd_stdio.py`, a real subprocess): `call`, `call --json`, and a stored run; and
against one that leaves a child behind as it exits (`tests/servers/parent_stdio.py`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main

pytestmark = pytest.mark.integration

ODD = Path(__file__).parent / "servers" / "odd_stdio.py"
PARENT = Path(__file__).parent / "servers" / "parent_stdio.py"
REPO = Path(__file__).parents[1]


def odd_config(tmp_path: Path, agent: str = "", gateway: str = "") -> Path:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        gateway
        + f"[mcpServers.odd]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(ODD))}]\n"
        + agent
    )
    return config


BOTH_PATHS = pytest.mark.parametrize(
    "gateway", ["", "[gateway]\npass_through = false\n"], ids=["raw", "sdk"]
)


@BOTH_PATHS
@pytest.mark.parametrize("depth", [101, 500, 5000])
def test_call_of_a_result_nested_too_deeply_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway: str, depth: int
) -> None:
    config = odd_config(tmp_path, gateway=gateway)
    call = ["call", "odd__deep", "--config", str(config), "--args", json.dumps({"depth": depth})]
    assert main(call) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        f"error: MCP server 'odd' sent a result nested too deeply ({depth} levels; at most 100)\n"
    )
    assert main([*call[:-1], json.dumps({"depth": 100})]) == 0
    assert capsys.readouterr().out == "deep\n"


@pytest.mark.parametrize("depth", [150, 5000])
def test_a_run_reads_a_result_nested_too_deeply_as_that_calls_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    script = tmp_path / "answers.json"
    calls: list[dict[str, object]] = [
        {"id": "c1", "name": "odd__deep", "arguments": {"depth": depth}},
        {"id": "c2", "name": "odd__deep", "arguments": {"depth": depth, "in": "_meta"}},
        {"id": "c3", "name": "odd__plain", "arguments": {}},
    ]
    script.write_text(json.dumps([{"tool_calls": calls}, {"content": "done"}]))
    agent = f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["odd"]\n'
    config = odd_config(tmp_path, agent)
    state = tmp_path / "state"
    run = ["run", "go", "--config", str(config), "--state-dir", str(state), "--json"]
    assert main(run) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"] == "done"
    too_deep = (
        f"Error: MCP server 'odd' sent a result nested too deeply ({depth} levels; at most 100)"
    )
    assert [step["observation"] for step in printed["steps"]] == [too_deep, too_deep, "plain"]
    assert main(["runs", "show", printed["run_id"], "--state-dir", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"


def test_call_prints_a_lone_surrogate_as_u_fffd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = odd_config(tmp_path)
    assert main(["call", "odd__cut", "--config", str(config)]) == 0
    assert capsys.readouterr().out == "bad\ufffdx\n"
    assert main(["call", "odd__cut", "--config", str(config), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["content"] == [{"type": "text", "text": "bad\ufffdx"}]


def test_call_json_prints_the_result_as_the_server_sent_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = odd_config(tmp_path)
    assert main(["call", "odd__plain", "--config", str(config), "--json"]) == 0
    # No "isError": false nor "resultType": "complete", which the server did not send.
    assert json.loads(capsys.readouterr().out) == {"content": [{"type": "text", "text": "plain"}]}
    assert main(["call", "odd__echo", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "content": [{"type": "text", "text": "echo: {}"}],
        "isError": False,
    }


@BOTH_PATHS
def test_call_json_of_a_result_the_gateway_refuses_prints_no_field_of_2026_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway: str
) -> None:
    config = odd_config(tmp_path, gateway=gateway)
    call = ["call", "odd__malformed", "--config", str(config), "--json"]
    assert main(call) == 1
    printed = json.loads(capsys.readouterr().out)
    # An error result of the gateway's own: no "resultType": "complete" of 2026-07-28.
    assert sorted(printed) == ["content", "isError"]
    assert printed["isError"] is True
    [said] = printed["content"]
    assert said["text"].startswith(
        "MCP server 'odd' sent a malformed result: content.0.TextContent.text: Field required"
    )


def test_a_stored_run_reads_a_lone_surrogate_as_u_fffd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"id": "c1", "name": "odd__cut", "arguments": {}}]},
                {"content": "done"},
            ]
        )
    )
    agent = f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["odd"]\n'
    config = odd_config(tmp_path, agent)
    state = tmp_path / "state"
    run = ["run", "go", "--config", str(config), "--state-dir", str(state), "--json"]
    assert main(run) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"] == "done"
    assert printed["steps"][0]["observation"] == "bad\ufffdx"
    assert main(["runs", "show", printed["run_id"], "--state-dir", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"


def test_a_clients_file_with_a_server_key_that_is_no_node_name_works_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = {"command": sys.executable, "args": [str(ODD)]}
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"Odd Server": server}}))
    assert main(["tools", "--config", str(config), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed["servers"]] == ["Odd_Server"]
    assert "Odd_Server__plain" in [tool["name"] for tool in listed["tools"]]
    assert main(["call", "Odd_Server__plain", "--config", str(config)]) == 0
    assert capsys.readouterr().out == "plain\n"


def test_tools_says_what_a_tools_schema_asks_that_no_model_can_be_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = odd_config(tmp_path)
    assert main(["tools", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    said = "  a model cannot be told all its input schema asks: the `not` at its root\n"
    assert re.search(
        rf"^odd__exclusive +node=odd \(exclusive\)  a or b\n{re.escape(said)}", out, re.M
    )
    assert out.count("a model cannot be told") == 1
    assert main(["tools", "--config", str(config), "--json"]) == 0
    listed = {tool["name"]: tool for tool in json.loads(capsys.readouterr().out)["tools"]}
    assert listed["odd__exclusive"]["untold_to_models"] == ["the `not` at its root"]
    assert listed["odd__echo"]["untold_to_models"] == []


def test_call_leaves_nothing_of_a_servers_process_group_running(tmp_path: Path) -> None:
    # The server exits at its stdin's end; the child it started (as npx starts node) would
    # live on for ever, after `call` returned.
    pids = tmp_path / "pids"
    config = tmp_path / "agent-gateway.toml"
    args = json.dumps([str(PARENT), str(pids)])
    config.write_text(f"[mcpServers.p]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n")
    script = str(Path(sys.executable).parent / "agent-gateway")
    done = subprocess.run(
        [script, "call", "p__hello", "--config", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "hello\n"), done.stderr
    child = int(pids.read_text().split()[1])
    try:
        stat = Path(f"/proc/{child}/stat").read_bytes()
    except FileNotFoundError:
        return  # gone, and reaped
    assert stat[stat.rindex(b")") + 2 :][:1] == b"Z", "the server's child is still running"


def test_call_of_a_server_that_crashes_mid_call_says_so_without_reconnecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node reconnects to a server that died; a one-shot `call` exits instead, so its
    error does not say "reconnecting"."""
    config = tmp_path / "agent-gateway.toml"
    args = json.dumps([str(PARENT), str(tmp_path / "pids")])
    config.write_text(f"[mcpServers.p]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n")
    assert main(["call", "p__crash", "--config", str(config)]) == 1
    assert capsys.readouterr().err == (
        "error: MCP server 'p' went away: the connection closed during a call to 'p__crash'; "
        "it exited with status 3\n"
    )
