"""The command line, in process and as the installed console script."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import COMMANDS, event_loop_options, main, parser
from gateway.cli.demo import DEMO_QUESTION
from gateway.config import TOOLBOX_SERVER, load_config
from tests.durable.cli_runs import REPO, cli

TOOLBOX = TOOLBOX_SERVER.model_dump(exclude_defaults=True)
"""The MCP server shipped with the package, as a client's config names a stdio server."""


def write_script(path: Path, answers: object) -> Path:
    path.write_text(json.dumps(answers))
    return path


def test_run_prints_the_answer_and_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(
        tmp_path / "answers.json",
        [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "It is 42."},
        ],
    )
    code = main(["run", "What is 6 * 7?", "--model", f"scripted:{script}", "--trace"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "It is 42.\n"
    assert 'calculator   in={"expression":"6 * 7"} out={"response":"42"}' in err
    assert "agent assistant" in err


def test_run_without_a_model_explains_how_to_set_one(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "hello"])
    assert code == 2
    assert "agent 'assistant' has no model" in capsys.readouterr().err


def test_a_run_that_hits_max_iterations_exits_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]}] * 3
    script = write_script(tmp_path / "loop.json", loop)
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.looper]\nmodel = "scripted:{script}"\ntools = ["calculator"]\nmax_iterations = 2\n'
    )
    assert main(["run", "loop", "--config", str(config)]) == 1
    assert "Max iterations (2) reached" in capsys.readouterr().err
    assert main(["run", "loop", "--config", str(config), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["error"].startswith("Max iterations (2) reached")
    assert (printed["iterations"], printed["usage"]["requests"]) == (2, 2)  # not 3


def test_bad_script_and_bad_config_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad.json"
    script.write_text('[{"content": 1, "extra": true}]')
    assert main(["run", "q", "--model", f"scripted:{script}"]) == 2
    assert "invalid script" in capsys.readouterr().err
    config = tmp_path / "c.toml"
    config.write_text("[agents.a]\nmax_iterations = -1\n")
    assert main(["tools", "--config", str(config)]) == 2
    assert "agents.a.max_iterations" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("scripted:missing.json", "cannot read script {dir}/missing.json"),
        ("scripted:bad.json", "invalid script {dir}/bad.json"),
        ("nope:x", "unknown model spec 'nope:...'"),
    ],
)
def test_a_model_spec_at_fault_is_reported_with_its_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, said: str
) -> None:
    (tmp_path / "bad.json").write_text("{")
    config = tmp_path / "c.toml"
    config.write_text(f'[agents.a]\nmodel = "{model}"\n')
    assert main(["run", "q", "--config", str(config), "--no-store"]) == 2
    err = capsys.readouterr().err
    assert f"error: {config}: agents.a.model: {said.format(dir=tmp_path)}" in err


def test_tools_and_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools"]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("calculator")
    assert "node=calculator" in listing
    assert main(["call", "calculator", "--args", '{"expression": "2 ** 10"}']) == 0
    assert capsys.readouterr().out == "1024\n"
    assert main(["call", "calculator", "--args", '{"expression": "1/0"}']) == 1
    # A tool's error is an error: said on stderr, as every other one; stdout is for results.
    assert capsys.readouterr() == ("", "error: CalculatorError: division by zero\n")
    assert main(["call", "calculator", "--args", '{"expression": "1/0"}', "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["isError"] is True
    assert "division by zero" in printed["content"][0]["text"]
    assert main(["call", "calculator", "--args", '{"nope": 1}']) == 1
    failed = capsys.readouterr()
    assert (failed.out, failed.err.startswith("error: invalid arguments for calculator")) == (
        "",
        True,
    )
    assert main(["call", "abacus"]) == 2
    assert "no tool named 'abacus' (available: calculator, toolbox__convert_units," in (
        capsys.readouterr().err
    )


@pytest.mark.integration
@pytest.mark.parametrize("serve", [False, True])
def test_the_demo_goes_through_an_mcp_server_from_the_installed_console_script(
    tmp_path: Path, serve: bool
) -> None:
    executable = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
    assert executable is not None, "the package is not installed (pip install -e .)"
    done = subprocess.run(
        [executable, "demo", *(["--serve"] if serve else [])],
        cwd=tmp_path, capture_output=True, text=True, timeout=45, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "SCRIPTED demo model" in out
    assert re.search(
        r"node toolbox: ready .*, 4 tools, .*\(an MCP server this gateway started\)", out
    )
    assert "node calculator: local Python function" in out
    mcp_call = (
        'toolbox__convert_units via toolbox in={"value":26.2,"from_unit":"mi","to_unit":"km"}'
    )
    assert f'{mcp_call} out={{"value":42.164813,"unit":"km"}}' in out
    assert 'calculator   in={"expression":"42.164813 * 6"} out={"response":"252.988878"}' in out
    answer = "A marathon is 42.16 km; at 6 minutes per kilometre it takes about 253 minutes"
    if serve:
        assert "client -> tools/list: assistant\n" in out
        assert re.search(r"client <- progress 1: agent assistant: started \(run \w+\)", out)
        assert "client <- progress 4: tool toolbox__convert_units: running" in out
        assert f"client <- result: {answer}" in out
    else:
        assert out.endswith(f"answer: {answer} (4 h 13 min).\n")


def test_the_scripted_demo_refuses_a_config_without_its_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.calculator]\nbuiltin = "calculator"\n')
    refused = (
        "error: agent 'assistant' has no model, and the scripted demo model calls tools it does "
        "not have (toolbox__convert_units): pass --model SPEC, or "
    )
    assert main(["demo", "--config", str(config)]) == 2
    assert capsys.readouterr().err == refused + "run the demo without --config\n"
    # Found in the folder, not given: there is no --config to leave out.
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 2
    said = "run the demo in a folder without agent-gateway.toml (found in this one)\n"
    assert capsys.readouterr().err == refused + said


def test_a_stored_run_stopped_by_its_model_resumes_with_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_script(
        tmp_path / "first.json",
        [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}],
    )  # then it has nothing more to say: the run stops after the tool ran
    state_dir = tmp_path / "runs"
    args = ["--model", f"scripted:{first}", "--state-dir", str(state_dir)]
    assert main(["run", "What is 6 * 7?", *args]) == 1  # the run failed: its model did
    err = capsys.readouterr().err
    assert "has 1 answers and was asked for answer 2" in err
    match = re.search(r"agent-gateway resume (\w+) --state-dir (\S+)", err)
    assert match is not None
    run_id = match.group(1)
    assert main(["runs", "list", "--state-dir", str(state_dir)]) == 0
    listed = capsys.readouterr().out
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"  # when it last changed
    assert re.match(rf"{run_id}  stopped          {when}  assistant  scripted:", listed), listed

    second = write_script(tmp_path / "second.json", [{"content": "It is 42."}])
    resume = ["resume", run_id, "--state-dir", str(state_dir), "--model", f"scripted:{second}"]
    assert main([*resume, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert out == "It is 42.\n"
    assert "calculator" not in err  # the tool ran before the stop: it is not run again
    assert main(resume) == 2  # it has ended: it is kept, and not run again
    assert f"run {run_id!r} has ended (succeeded)" in capsys.readouterr().err


def test_a_client_config_of_servers_only_runs_with_a_default_assistant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(
        json.dumps(
            {
                "globalShortcut": "Ctrl+Space",
                "preferences": {"quickEntry": False},
                "mcpServers": {"toolbox": TOOLBOX},
            }
        )
    )
    script = write_script(
        tmp_path / "answers.json",
        [
            {"tool_calls": [{"name": "toolbox__text_stats", "arguments": {"text": "a b c"}}]},
            {"content": "Three words."},
        ],
    )
    code = main(
        ["run", "Count", "--config", str(desktop), "--model", f"scripted:{script}", "--trace"]
    )
    out, err = capsys.readouterr()
    assert (code, out) == (0, "Three words.\n"), err
    assert '"words":3' in err
    assert "agent assistant" in err


@pytest.mark.parametrize("command", [["run", "hi"], ["demo"], ["serve", "--stdio"]])
def test_an_unknown_agent_is_a_clear_error_listing_the_agents(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--agent", "nope"]) == 2
    assert "error: no agent named 'nope' (configured: assistant)" in capsys.readouterr().err


def test_tools_exits_0_when_every_server_is_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX}}))
    assert main(["tools", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "toolbox__convert_units" in out
    assert "server toolbox: ready" in out
    assert "agent assistant: model=none tools=['toolbox']" in out


@pytest.mark.integration
def test_serve_warns_when_it_serves_nothing_or_an_agent_without_a_model(tmp_path: Path) -> None:
    executable = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
    assert executable is not None
    empty = tmp_path / "empty.toml"
    empty.write_text("[gateway]\nmax_depth = 3\n")
    done = subprocess.run(
        [executable, "serve", "--stdio", "--config", str(empty)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: serving nothing: no agents and no tools" in done.stderr
    done = subprocess.run(
        [executable, "serve", "--stdio"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert "warning: agent 'assistant' has no model, so calls to it fail" in done.stderr
    assert "serving nothing" not in done.stderr
    assert "expose_tools" not in done.stderr  # the built-in config's agent is no proxy's
    # A client's file of servers alone, as FastMCP's proxy takes it: the default agent has no
    # model, and the warning says how to serve the servers' own tools instead, in the file's
    # own form (a JSON file had been told of TOML tables it does not have).
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX}}))
    done = subprocess.run(
        [executable, "serve", "--stdio", "--config", str(servers)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "warning: agent 'assistant' has no model, so calls to it fail: set its model in the "
        'file ("agents": {"assistant": {"model": "SPEC"}}) or pass --model SPEC; or, to serve '
        'the servers\' own tools (a proxy), set "gateway": {"expose_tools": true}'
    ) in done.stderr
    assert "[gateway]" not in done.stderr
    servers = tmp_path / "servers.toml"
    # JSON strings and lists of them are TOML values too.
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in TOOLBOX.items())
    servers.write_text(f"[mcpServers.toolbox]\n{table}")
    done = subprocess.run(
        [executable, "serve", "--stdio", "--config", str(servers)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "warning: agent 'assistant' has no model, so calls to it fail: set `model` in "
        "[agents.assistant] or pass --model SPEC; or, to serve the servers' own tools (a "
        "proxy), set [gateway] expose_tools = true"
    ) in done.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    done = subprocess.run(
        [executable, "serve", "--stdio", "--config", str(empty)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        'serving nothing: no agents and no tools (add "agents" or "mcpServers" to the file, '
        'or "gateway": {"expose_tools": true})'
    ) in done.stderr


BROKEN = {"command": "/nonexistent/mcp-server"}
"""A stdio server that cannot start."""


def test_exit_codes_tell_a_failed_run_from_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = write_script(tmp_path / "empty.json", [])
    assert main(["run", "hi", "--model", f"scripted:{empty}"]) == 1  # the model failed
    assert "has 0 answers" in capsys.readouterr().err
    assert main(["run", "hi"]) == 2  # no model configured
    assert "agent 'assistant' has no model" in capsys.readouterr().err
    assert main(["run", "hi", "--model", "nope:x"]) == 2
    assert "unknown model spec 'nope:...'" in capsys.readouterr().err


def test_strict_fails_when_a_configured_server_is_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps({"mcpServers": {"broken": BROKEN}, "tools": {"calc": {"builtin": "calculator"}}})
    )
    script = write_script(tmp_path / "a.json", [{"content": "fine"}])
    run = ["run", "hi", "--config", str(config), "--model", f"scripted:{script}"]
    assert main(run) == 0  # the agent still runs on what is up
    assert capsys.readouterr().out == "fine\n"
    assert main([*run, "--strict"]) == 1
    err = capsys.readouterr().err
    assert "--strict: 1 server(s) down" in err
    assert "broken: failed" in err
    assert "No such file or directory" in err


def test_run_json_is_one_object_with_output_usage_steps_and_run_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(
        tmp_path / "a.json",
        [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "42"},
        ],
    )
    assert main(["run", "6*7?", "--model", f"scripted:{script}", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"] == "42"
    assert printed["error"] is None
    assert re.fullmatch(r"[0-9a-f]{12}", printed["run_id"])
    assert printed["usage"]["requests"] == 2
    assert printed["steps"] == [
        {
            "call_id": "call_1",
            "tool": "calculator",
            "input": {"expression": "6 * 7"},
            "observation": "42",
        }
    ]
    empty = write_script(tmp_path / "empty.json", [])
    assert main(["run", "hi", "--model", f"scripted:{empty}", "--json"]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert "has 0 answers" in failed["error"]
    assert failed["run_id"]


def test_tools_json_lists_tools_agents_and_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX, "broken": BROKEN}}))
    assert main(["tools", "--config", str(config), "--json"]) == 1  # a server is down
    listing = json.loads(capsys.readouterr().out)
    names = {tool["name"]: tool for tool in listing["tools"]}
    assert names["toolbox__text_stats"]["original_name"] == "text_stats"
    assert names["toolbox__text_stats"]["input_schema"]["required"] == ["text"]
    assert listing["agents"] == [
        {
            "name": "assistant",
            "model": "none",
            "tools": ["toolbox", "broken"],
            "handoffs": [],
            "tool_count": 4,  # the toolbox's: broken's are not known
            "max_tools": None,
            "approval": {},  # no call of its needs a person's approval
        }
    ]
    states = {server["name"]: server["state"] for server in listing["servers"]}
    assert states == {"toolbox": "ready", "broken": "failed"}


def test_tools_says_which_of_an_agents_tools_hand_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[agents.triage]\nhandoffs = ["billing"]\n[agents.billing]\n')
    assert main(["tools", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "agent triage: model=none tools=['billing'] handoffs=['billing'] (1 tool)" in out
    assert main(["tools", "--config", str(config), "--json"]) == 0
    agents = {a["name"]: a for a in json.loads(capsys.readouterr().out)["agents"]}
    assert (agents["triage"]["tools"], agents["triage"]["handoffs"]) == (["billing"], ["billing"])
    assert agents["billing"]["handoffs"] == []


def test_version_verbose_after_the_command_and_a_question_from_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert re.fullmatch(r"agent-gateway \S+\n", capsys.readouterr().out)
    script = write_script(tmp_path / "a.json", [{"content": "from stdin"}])
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is asked?\n"))
    assert main(["run", "-", "--model", f"scripted:{script}", "-v", "--trace-json"]) == 0
    out, err = capsys.readouterr()
    assert out == "from stdin\n"
    assert '"input":"What is asked?"' in err


def test_tools_lines_up_its_columns_past_a_long_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name of 33 characters or more pushed its line's `node=` out of the column."""
    long_name = "a_calculator_named_at_great_length_here"  # 39 characters
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[tools.calculator]\nbuiltin = "calculator"\n[tools.{long_name}]\nbuiltin = "calculator"\n'
    )
    assert main(["tools", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = [line for line in lines if " node=" in line]
    assert [line.split()[0] for line in listed] == [long_name, "calculator"]
    assert {line.index(" node=") for line in listed} == {len(long_name)}


def test_call_explains_unprefixed_names_down_servers_and_calls_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX, "broken": BROKEN}}))
    call = ["call", "--config", str(config)]
    assert main([*call, "text_stats", "--args", '{"text": "x"}']) == 2
    assert (
        "no tool named 'text_stats'; did you mean 'toolbox__text_stats'?" in capsys.readouterr().err
    )
    assert main([*call, "broken__anything"]) == 1
    err = capsys.readouterr().err
    assert "tool 'broken__anything': its server is down: broken: failed" in err
    assert "No such file or directory" in err
    # With --json, the error result an MCP client of `serve` gets; bad input prints none.
    assert main([*call, "broken__anything", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["isError"] is True
    assert "its server is down: broken: failed" in printed["content"][0]["text"]
    assert main([*call, "nothing", "--json"]) == 2
    assert capsys.readouterr().out == ""
    assert main([*call, "nothing"]) == 2
    assert (
        "servers down, so their tools are not listed:\n  broken: failed" in capsys.readouterr().err
    )
    script = write_script(tmp_path / "a.json", [{"content": "I am the assistant."}])
    agent = ["call", "assistant", "--args", '{"prompt": "who?"}']
    assert main([*agent, "--config", str(config)]) == 2  # the default assistant has no model
    assert "has no model" in capsys.readouterr().err
    # What that error says to do works for `call` as for `run`.
    assert main([*agent, "--config", str(config), "--model", f"scripted:{script}"]) == 0
    assert capsys.readouterr().out == "I am the assistant.\n"
    with_model = tmp_path / "agent.toml"
    with_model.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    assert main([*agent, "--config", str(with_model)]) == 0
    assert capsys.readouterr().out == "I am the assistant.\n"


def test_call_args_are_read_as_a_models_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lone surrogate (`"\\ud800"`) went to the MCP server as that escape, which its
    reader dropped the call for: the call waited out the server's timeout. NaN went as null."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": {**TOOLBOX, "timeout": 10}}}))
    call = ["call", "toolbox__text_stats", "--config", str(config), "--json", "--args"]
    assert main([*call, '{"text": "a\\ud800b"}']) == 0
    assert json.loads(capsys.readouterr().out)["structuredContent"]["characters"] == 3
    assert main([*call, '{"text": NaN}']) == 2
    assert capsys.readouterr().err == "error: --args: not valid JSON (NaN is not a JSON number)\n"


def test_a_call_typo_does_not_call_servers_it_did_not_wait_for_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`call SERVER__typo` waits for SERVER alone: the others still starting are no failure,
    and the tools listed are a few dozen, not thousands."""
    config = tmp_path / "c.toml"
    calculators = "".join(f'[tools.calc{n:02}]\nbuiltin = "calculator"\n' for n in range(60))
    config.write_text(
        calculators
        + f'[mcpServers.toolbox]\ncommand = "{sys.executable}"\nargs = {TOOLBOX["args"]!r}\n'
        + f'[mcpServers.stuck]\ncommand = "{sys.executable}"\n'
        + 'args = ["-c", "import time; time.sleep(600)"]\nconnect_timeout = 600\n'
    )
    assert main(["call", "toolbox__text_stat", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "no tool named 'toolbox__text_stat'; did you mean 'toolbox__text_stats'?" in err
    assert " and 14 more)" in err  # 50 of the 64 tools (60 local, 4 of the toolbox)
    assert "down" not in err
    assert err.endswith(
        "\n1 server still starting (not waited for), so their tools are not listed either\n"
    )


def test_call_json_of_a_local_tool_or_a_down_server_is_a_valid_mcp_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every content block has the `type` MCP requires (a local tool's block left it to its
    # default); no field of one protocol era alone (`resultType`) that nothing sent.
    assert main(["call", "calculator", "--args", '{"expression": "2 + 3"}', "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "content": [{"type": "text", "text": "5"}],
        "structuredContent": {"response": "5"},
    }
    assert main(["call", "calculator", "--args", '{"expression": "1/0"}', "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "content": [{"type": "text", "text": "CalculatorError: division by zero"}],
        "isError": True,
    }
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"broken": BROKEN}}))
    assert main(["call", "broken__anything", "--config", str(config), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed.keys() == {"content", "isError"}
    assert [block["type"] for block in printed["content"]] == ["text"]
    assert printed["content"][0]["text"].startswith("tool 'broken__anything': its server is down")


def test_bad_files_are_clear_errors_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes("[agents.caf\xe9]\n".encode("latin-1"))
    assert main(["tools", "--config", str(latin1)]) == 2
    assert (
        "latin1.toml: not UTF-8 text (byte 11); save the config as UTF-8" in capsys.readouterr().err
    )
    assert main(["tools", "--config", str(tmp_path)]) == 2
    assert "cannot read config" in capsys.readouterr().err
    binary = tmp_path / "binary.sqlite"
    binary.write_bytes(bytes(range(256)) * 8)
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    for store, message in [(binary, "file is not a database"), (folder, "unable to open")]:
        assert main(["resume", "r1", "--store", f"sqlite:///{store}"]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert err.count("\n") == 1  # one line, no traceback
    script = write_script(tmp_path / "a.json", [{"content": "x"}])
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert main(["run", "q", "--model", f"scripted:{script}", "--state-dir", str(not_a_dir)]) == 2
    assert capsys.readouterr().err == f"error: --state-dir {not_a_dir}: not a directory\n"


def test_user_code_that_fails_to_import_is_a_one_line_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in one's own tool or validator module, or a module that raises or exits as it
    is imported, was a traceback and exit 1 for every command: it is the config's fault."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder is put on it
    stem = f"mod_{tmp_path.name.replace('-', '_')}"
    modules = {
        "syntax": ("def broken(:\n", "SyntaxError: invalid syntax", 1),
        "raises": (
            "x = 1\nraise RuntimeError('boom at import')\n",
            "RuntimeError: boom at import",
            2,
        ),
        "exits": ("import sys\nsys.exit(3)\n", "SystemExit: 3", 2),
    }
    script = write_script(tmp_path / "a.json", [{"content": "x"}])
    for kind, (source, error, line) in modules.items():
        (tmp_path / f"{stem}_{kind}.py").write_text(source)
        where = f"({tmp_path / f'{stem}_{kind}.py'}, line {line})"
        for key, toml, command in [
            ("tools.t.python", f'[tools.t]\npython = "{stem}_{kind}:f"\n', ["tools"]),
            (
                "agents.a.output_validator",
                f'[agents.a]\nmodel = "scripted:{script}"\n'
                f'output_validator = "{stem}_{kind}:check"\n',
                ["run", "q", "--no-store"],
            ),
        ]:
            config = tmp_path / "agent-gateway.toml"
            config.write_text(toml)
            assert main([*command, "--config", str(config)]) == 2
            target = f"{stem}_{kind}:{'f' if key.startswith('tools') else 'check'}"
            assert capsys.readouterr().err == (
                f"error: {config}: {key}: cannot import {target!r}: {error} {where}\n"
            )


def test_the_cli_runs_on_uvloop_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_GATEWAY_EVENT_LOOP", raising=False)
    assert event_loop_options() == {"use_uvloop": True}  # installed with the package on Linux
    monkeypatch.setenv("AGENT_GATEWAY_EVENT_LOOP", "asyncio")
    assert event_loop_options() == {"use_uvloop": False}


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "list"],
        ["runs", "show", "r1"],
        ["runs", "resume", "r1"],
        ["runs", "cancel", "r1"],
        ["runs", "approve", "r1"],
        ["auth", "status"],
        ["auth", "login", "s"],
    ],
)
def test_verbose_goes_after_an_action_too(command: list[str]) -> None:
    assert parser().parse_args([*command, "-v"]).verbose == 1
    assert parser().parse_args(["-v", *command]).verbose == 1
    assert parser().parse_args([*command, "-vv"]).verbose == 2
    assert parser().parse_args(["-vv", *command]).verbose == 2
    assert parser().parse_args(command).verbose == 0


def test_verbose_after_an_action_in_the_installed_console_script(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'none.sqlite'}"  # no run is stored yet
    done = cli("runs", "list", "-v", "--store", store)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"no runs are stored in {store}\n"  # and no log line


def test_a_stdio_server_that_cannot_start_is_named(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    missing = {"command": "no-such-mcp-server-4f1c", "args": ["x"]}
    elsewhere = {"command": sys.executable, "cwd": str(tmp_path / "gone")}
    servers = {"broken": BROKEN, "missing": missing, "elsewhere": elsewhere}
    config.write_text(json.dumps({"mcpServers": servers}))
    done = cli("tools", "--config", str(config))  # on uvloop, whose errors name nothing
    assert done.returncode == 1
    health = {line.split(":")[0]: line for line in done.stdout.splitlines()}
    assert health["server broken"].endswith(
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/mcp-server'"
    )
    assert health["server missing"].endswith(
        "FileNotFoundError: command 'no-such-mcp-server-4f1c' not found on PATH"
    )
    gone = str(tmp_path / "gone")
    assert health["server elsewhere"].endswith(
        f"FileNotFoundError: the server's working directory {gone!r} does not exist"
    )


def test_output_piped_to_a_reader_that_left_is_no_traceback(tmp_path: Path) -> None:
    # As `agent-gateway tools | head -1`: the reader goes before all is written.
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "agent-gateway"), "tools"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stdout is not None
    process.stdout.close()  # before it writes a line: every write meets a closed pipe
    _, err = process.communicate(timeout=40)
    assert process.returncode == 128 + signal.SIGPIPE
    assert b"Traceback" not in err


def test_a_local_tool_is_called_without_waiting_for_a_server_that_hangs(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[mcpServers.stuck]\ncommand = "{sys.executable}"\n'
        'args = ["-c", "import time; time.sleep(600)"]\nconnect_timeout = 600\n'
    )
    script = str(Path(sys.executable).parent / "agent-gateway")
    call = [script, "call", "calculator", "--args", '{"expression": "6 * 7"}']
    done = subprocess.run(  # its server's handshake never comes: 600 s if it were waited for
        [*call, "--config", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr


JOINER = "a session id has a zero width joiner or non-joiner"
JOINED = "only between two letters, marks or symbols beyond ASCII"


def test_a_bad_session_id_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = write_script(tmp_path / "answers.json", [{"content": "never asked"}])
    state = ["--state-dir", str(tmp_path / "state")]
    run = ["run", "hi", "--model", f"scripted:{script}", *state]
    for bad, problem in (
        ("", "a session id has 1 to 256 characters"),
        ("s" * 5000, "a session id has 1 to 256 characters"),
        ("a\nb", "a session id has no control characters"),
        ("\x7f\u200b", "a session id has no control characters"),  # DEL and C1 were taken
        ("a\u2028b\x85c", "a session id has no control characters"),
        # Taken and listed as they are, so `ab` and `a\u200bb` looked alike
        ("a\u200bb", "a session id has no invisible format characters or line separators (U+200B)"),
        ("a\ufeffb", "a session id has no invisible format characters or line separators (U+FEFF)"),
        (
            "x\u202eevil",
            "a session id has no invisible format characters or line separators (U+202E)",
        ),
        ("a\u2028b", "a session id has no invisible format characters or line separators (U+2028)"),
        ("a\u2029b", "a session id has no invisible format characters or line separators (U+2029)"),
        ("a\u2067b", "a session id has no invisible format characters or line separators (U+2067)"),
        ("a\x00b", "a session id has no control characters"),
        # A joiner joins letters, marks or symbols beyond ASCII: `a<ZWJ>b` would list as `ab`
        ("a\u200db", f"{JOINER} (U+200D) {JOINED}"),
        ("\u0645\u06cc\u200c", f"{JOINER} (U+200C) {JOINED}"),  # at the end: joins nothing
        ("\U0001f469\u200d\u200d\U0001f4bb", f"{JOINER} (U+200D) {JOINED}"),
    ):
        for command in (
            [*run, "--session", bad],
            ["chat", "--model", f"scripted:{script}", *state, "--session", bad],
            ["sessions", "show", bad, *state],
            # `call` too, in --args: bad input, not a failed run (which exits 1)
            [
                "call", "assistant", "--model", f"scripted:{script}", "--json",
                "--args", json.dumps({"prompt": "hi", "session_id": bad}),
            ],
        ):  # fmt: skip
            assert main(command) == 2, command
            err = capsys.readouterr().err
            assert err.startswith(f"error: bad session id {bad[:40]!r}: {problem}"), err
    assert not (tmp_path / "state").exists()  # refused before anything ran


def test_an_interruption_wrapped_in_a_task_group_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second Ctrl-C raised inside a task reaches the top wrapped in the task group's
    `BaseExceptionGroup`: it was printed as a traceback, exit 1."""

    async def interrupted(_args: object) -> object:
        raise BaseExceptionGroup("unhandled errors in a TaskGroup", [KeyboardInterrupt()])

    monkeypatch.setattr("gateway.cli.run._items", interrupted)
    assert main(["run", "hi", "--no-store"]) == 130
    assert capsys.readouterr().err == ""


def test_an_empty_config_says_it_configures_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said `choose an agent with --agent (configured: none)`, and `tools` printed nothing."""
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    for command in (["run", "hi", "--no-store"], ["demo"]):
        assert main([*command, "--config", str(empty)]) == 2
        assert capsys.readouterr().err == (
            f"error: {empty} defines no agents, nor any MCP server or tool for a default one: "
            "add [agents.NAME] (or [mcpServers.NAME])\n"
        )
    assert main(["tools", "--config", str(empty)]) == 0
    assert capsys.readouterr() == ("", f"no servers, tools or agents configured in {empty}\n")


def test_the_command_line_says_what_to_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2  # the help, not argparse's "the following arguments are required"
    err = capsys.readouterr().err
    assert err.startswith("usage: agent-gateway")
    assert "Agents on MCP tools, served over MCP." in err
    for command, said in (
        ("auth", "say what to do: agent-gateway auth login NAME | status | logout NAME"),
        (
            "sessions",
            "say what to do: agent-gateway sessions list | show ID | delete ID | "
            "prune --older-than DAYS",
        ),
    ):
        assert main([command]) == 2
        assert capsys.readouterr().err == f"error: {said}\n"
    for command in (["call", "calculator", "--bogus"], ["runs", "list", "--bogus"]):
        with pytest.raises(SystemExit) as refused:
            main(command)
        assert refused.value.code == 2
        err = capsys.readouterr().err  # the command's own usage, naming it
        name = " ".join(command[:-1] if command[0] == "runs" else command[:1])
        assert err.startswith(f"usage: agent-gateway {name} ")
        assert err.endswith(f"agent-gateway {name}: error: unrecognized arguments: --bogus\n")


def test_help_names_things_as_the_readme_does() -> None:
    top = parser()

    def help_of(*command: str) -> str:
        with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
            top.parse_args([*command, "--help"])
        return " ".join(out.getvalue().split())

    for command in (["chat"], ["sessions"], ["run"]):
        assert "--state-dir DIR" in help_of(*command)
        assert "STATE_DIR" not in help_of(*command)
    assert "/tools, /reset, /exit" in help_of("chat")  # what a line may say besides questions
    assert "--model SPEC" in help_of("call")
    assert "the one to resume the run on" in help_of("runs", "resume")
    assert "its `short` under `waiting` in `runs list --json`" in help_of("runs", "approve")
    for command in (["runs", "show"], ["runs", "cancel"], ["resume"], ["demo"]):
        positional = help_of(*command).split("positional arguments:")[1].split("options:")[0]
        assert "the " in positional  # each one has its help


def test_the_help_of_run_json_names_every_key_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
        parser().parse_args(["run", "--help"])
    said = " ".join(out.getvalue().split())
    named = said.split("print one JSON object: ")[1].split(" (")[0].split(", ")
    script = write_script(tmp_path / "answers.json", [{"content": "hello"}])
    config = tmp_path / "agent-gateway.toml"
    config.write_text("[agents.a]\n")
    command = ["run", "hi", "--config", str(config), "--model", f"scripted:{script}"]
    assert main([*command, "--json", "--no-store"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert named == list(printed)  # every key, in the order printed


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS), ["runs", "approve"]])
def test_the_help_read_with_only_the_chosen_commands_module_is_the_whole_ones(
    command: list[str],
) -> None:
    """`parse` imports only the module of the command given (`COMMANDS` names the others)."""

    def help_of(top: argparse.ArgumentParser) -> str:
        with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
            top.parse_args([*command, "--help"])
        return out.getvalue()

    assert help_of(parser(only=command[0] if command else "")) == help_of(parser())


def test_mistyped_names_get_a_suggestion_and_bad_paths_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", "calculater", "--args", '{"expression": "1"}']) == 2
    assert "no tool named 'calculater'; did you mean 'calculator'?" in capsys.readouterr().err
    config = tmp_path / "c.toml"
    config.write_text('[agents.researcher]\n[agents.writer]\nmodel = "scripted:x.json"\n')
    assert main(["run", "hi", "--config", str(config), "--agent", "reseacher"]) == 2
    assert capsys.readouterr().err == (
        "error: no agent named 'reseacher'; did you mean 'researcher'? "
        "(configured: researcher, writer)\n"
    )
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for command in (["run", "hi"], ["chat"], ["sessions", "list"]):
        assert main([*command, "--state-dir", str(a_file)]) == 2  # it said "File exists"
        assert capsys.readouterr().err == f"error: --state-dir {a_file}: not a directory\n"


def test_the_scripted_demo_says_it_answers_its_own_question(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A question of one's own was silently not asked: the script answered its own."""
    assert main(["demo", "What is the capital of France?"]) == 0
    out = capsys.readouterr().out
    assert "The scripted model answers only its own question" in out
    assert f"question: {DEMO_QUESTION}" in out
    assert "question: What is the capital of France?" not in out


def test_a_call_to_a_down_servers_tool_tells_the_model_its_server_is_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its tools were never listed; the model, told of them by its prompt, calls one."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[mcpServers.bad]\ncommand = "{sys.executable}"\nargs = ["-c", "raise SystemExit(3)"]\n'
        '[agents.a]\ntools = ["bad"]\n'
    )
    script = tmp_path / "answers.json"
    script.write_text(
        '[{"tool_calls": [{"name": "bad__count", "arguments": {}}]}, {"content": "sorry"}]'
    )
    command = ["run", "count", "--config", str(config), "--json", "--no-store"]
    code = main([*command, "--model", f"scripted:{script}"])
    assert code == 0
    [step] = json.loads(capsys.readouterr().out)["steps"]
    assert step["observation"].startswith(
        "Error: tool 'bad__count' is not available now: its server is not ready (bad: failed"
    ), step["observation"]
    assert step["observation"].endswith("This agent has no tools.")


def test_a_stored_run_over_its_token_budget_stops_before_the_tools_its_model_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tool ran (and wrote) after the model call that spent the budget; then the run
    stopped."""
    written = tmp_path / "written.txt"
    script = write_script(
        tmp_path / "answers.json",
        [{"tool_calls": [{"name": "append", "arguments": {"path": str(written), "line": "x"}}]}],
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.append]\npython = "tests.sample_tools:append_line"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["append"]\ntoken_budget = 5\n'
    )
    state_dir = ["--state-dir", str(tmp_path / "runs")]
    question = "Write an x into the file, please, right now."
    assert main(["run", question, "--config", str(config), *state_dir, "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["error"].startswith("Token budget (5) exceeded: the run used ")
    assert not written.exists()
    assert main(["runs", "show", printed["run_id"], "--json", *state_dir]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert state["response"] is None  # the call is kept as still to make
    assert [action["tool"] for action in state["request"]["actions"]] == ["append"]


def test_init_writes_the_default_config_and_keeps_a_file_that_is_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = tmp_path / "gw.toml"
    assert main(["init", str(written)]) == 0
    assert capsys.readouterr().err.startswith(f"wrote {written}: the built-in default")
    assert f"command = {json.dumps(sys.executable)}" in written.read_text()
    written.write_text("# mine\n")
    assert main(["init", str(written)]) == 2
    assert capsys.readouterr().err == f"error: {written} exists: --force replaces it\n"
    assert written.read_text() == "# mine\n"
    assert main(["init", str(written), "--force"]) == 0
    assert main(["init", "-"]) == 0
    assert capsys.readouterr().out == written.read_text()


def test_init_writes_json_for_a_json_name_the_same_config_that_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`init x.json` wrote TOML into it (exit 0), which every command then refused as JSON."""
    for name in ("gw.json", "gw.toml"):
        assert main(["init", str(tmp_path / name)]) == 0
    json.loads((tmp_path / "gw.json").read_text())
    as_json, as_toml = (load_config(tmp_path / name) for name in ("gw.json", "gw.toml"))
    assert as_json.model_dump() == as_toml.model_dump()
    capsys.readouterr()
    assert main(["demo", "--config", str(tmp_path / "gw.json")]) == 0
    assert "answer: A marathon is 42.16 km" in capsys.readouterr().out
