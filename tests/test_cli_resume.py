"""Stored runs from the command line: they resume on the config and model they started with."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from gateway import RunState
from gateway.cli import main, parser
from gateway.cli.origin import resume_config
from gateway.durable import DurableRuns, open_runs
from gateway.durable.endings import taken
from gateway.run_state import RunOrigin
from gateway.store_config import default_store_url
from tests.servers.openai_stub import Refusal, openai_stub
from tests.servers.responses_stub import responses_stub

REPO = Path(__file__).resolve().parents[1]
STOP_AFTER_THE_TOOL = [
    {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}
]
"""A script that calls the calculator, then has nothing more to say: the run stops there."""


def write(path: Path, content: object) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def stopped_run(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """Run until the model stops it; the resume command the error printed, as arguments."""
    assert main(["run", "What is 6 * 7?", *args]) == 1
    err = capsys.readouterr().err
    match = re.search(r"the run is stored: agent-gateway (resume .*)$", err, re.MULTILINE)
    assert match is not None, err
    return match.group(1).split()


def stopped_on_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, Path, list[str]]:
    """A run on `c.toml` with `--model scripted:first.json` that stopped: the script, the
    config, and the resume command."""
    script = write(tmp_path / "first.json", STOP_AFTER_THE_TOOL)
    config = write(tmp_path / "c.toml", '[tools.calculator]\nbuiltin = "calculator"\n')
    state_dir = str(tmp_path / "runs")
    model = f"scripted:{script}"
    return (
        script,
        config,
        stopped_run(capsys, "--config", str(config), "--model", model, "--state-dir", state_dir),
    )


def test_resume_uses_the_config_the_run_started_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "first.json", STOP_AFTER_THE_TOOL)
    config = write(
        tmp_path / "helper.toml",
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.helper]\nmodel = "scripted:first.json"\ntools = ["calculator"]\n',
    )
    resume = stopped_run(capsys, "--config", str(config), "--state-dir", str(tmp_path / "runs"))
    assert "--config" not in resume  # the state knows it
    write(tmp_path / "first.json", [{"content": "It is 42."}])  # what the model says next
    monkeypatch.chdir(tmp_path.parent)  # elsewhere: no config to find here
    assert main([*resume, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert out == "It is 42.\n"
    assert "agent helper" in err
    assert "calculator" not in err  # it ran before the stop


def test_a_relative_scripted_model_is_recorded_so_resume_finds_it_from_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model scripted:REL.json` was recorded as given: resumed from another folder, the
    script was looked for there, and the error blamed the config file."""
    write(tmp_path / "first.json", STOP_AFTER_THE_TOOL)
    config = write(tmp_path / "c.toml", '[tools.calculator]\nbuiltin = "calculator"\n')
    monkeypatch.chdir(tmp_path)
    state = ["--state-dir", str(tmp_path / "runs")]
    resume = stopped_run(capsys, "--config", str(config), "--model", "scripted:first.json", *state)
    write(tmp_path / "first.json", [{"content": "It is 42."}])
    monkeypatch.chdir(tmp_path.parent)
    assert main(resume) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == "It is 42.\n"
    assert main(["run", "hi", "--config", str(config), "--model", "scripted:gone.json"]) == 2
    err = capsys.readouterr().err  # a command-line value at fault is not the file's fault
    assert err.startswith("error: model scripted:gone.json: cannot read script gone.json")
    assert str(config) not in err


def test_a_resumed_run_keeps_the_context_it_started_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --context` is stored with the run: `resume`, in a new gateway, gives the same
    context to the tools its model calls (and to its system message)."""
    who = {"name": "who", "arguments": {"question": "q"}}
    script = write(tmp_path / "first.json", [{"tool_calls": [who]}])
    config = write(
        tmp_path / "c.toml",
        '[tools.who]\npython = "tests.sample_tools:whose_call"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["who"]\n'
        'system = "For {{ context.customer }}."\n',
    )
    context = '{"customer": "Ada"}'
    state = ["--state-dir", str(tmp_path / "runs")]
    resume = stopped_run(capsys, "--config", str(config), "--context", context, *state)
    assert "--context" not in resume  # the state has it
    write(script, [{"tool_calls": [who]}, {"content": "It is Ada."}])
    assert main([*resume, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == "It is Ada."
    told = [json.loads(step["observation"])["context"] for step in out["steps"]]
    assert told == [{"customer": "Ada"}, {"customer": "Ada"}]  # before the stop, and after


def test_a_changed_config_is_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, config, resume = stopped_on_a_config_file(tmp_path, capsys)
    write(config, '[tools.calculator]\nbuiltin = "calculator"\ndescription = "Sums."\n')
    write(script, [{"content": "It is 42."}])
    assert main(resume) == 2
    err = capsys.readouterr().err
    assert f"config {config} is not the one the run started with" in err
    assert "pass --force to resume on it anyway" in err
    assert main([*resume, "--force"]) == 0  # on the stored --model, too
    assert capsys.readouterr().out == "It is 42.\n"


def test_a_pending_call_whose_tool_left_the_config_is_told_to_the_model_not_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run stopped as its calculator call waited for approval (`--no-wait`); approved, it
    is resumed (`--force`) on its config without the calculator: the call is not made, the
    model is told why, and the run goes on to its answer."""
    script = write(tmp_path / "model.json", STOP_AFTER_THE_TOOL)
    agent = f'[agents.assistant]\nmodel = "scripted:{script}"\n'
    config = write(
        tmp_path / "c.toml",
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'{agent}tools = ["calculator"]\nrequire_approval = ["calculator"]\n',
    )
    store = ["--state-dir", str(tmp_path / "runs")]
    assert main(["run", "6 * 7?", "--config", str(config), *store, "--no-wait", "--json"]) == 3
    stopped = json.loads(capsys.readouterr().out)
    [waiting] = stopped["waiting"]
    assert main(["runs", "approve", stopped["run_id"], waiting["short"], *store]) == 0
    write(config, agent)
    write(script, [{"content": "I have no calculator now."}])
    assert main(["resume", stopped["run_id"], "--force", *store]) == 0
    assert capsys.readouterr().out.endswith("I have no calculator now.\n")
    assert main(["runs", "show", stopped["run_id"], "--json", *store]) == 0
    [call] = [c for c in json.loads(capsys.readouterr().out)["calls"] if c["call_id"]]
    assert (call["name"], call["approval"]["approved"]) == ("calculator", True)
    assert call["error"] == "tool 'calculator' is not offered by node 'calculator'"


def test_a_run_config_that_is_gone_says_how_to_name_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, config, resume = stopped_on_a_config_file(tmp_path, capsys)
    config.rename(tmp_path / "moved.toml")
    assert main(resume) == 2
    assert "name another with --config FILE" in capsys.readouterr().err
    write(script, [{"content": "It is 42."}])
    assert main([*resume, "--config", str(tmp_path / "moved.toml")]) == 0


def test_a_run_stopped_in_a_sub_agent_counts_its_calls_and_resumes_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead = write(
        tmp_path / "lead.json", [{"tool_calls": [{"name": "helper", "arguments": {"prompt": "x"}}]}]
    )
    helper = write(
        tmp_path / "helper.json",
        [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]},
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]},
        ],  # then nothing more to say: its model fails as a provider that is down would
    )
    config = write(
        tmp_path / "c.toml",
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.lead]\nmodel = "scripted:lead.json"\ntools = ["helper"]\n'
        '[agents.helper]\nmodel = "scripted:helper.json"\ntools = ["calculator"]\n',
    )
    state_dir = str(tmp_path / "runs")
    run = ["run", "go", "--config", str(config), "--agent", "lead", "--state-dir", state_dir]
    assert main([*run, "--json"]) == 1
    out, err = capsys.readouterr()
    shown = json.loads(out)
    assert shown["error"] == "scripted:helper.json has 2 answers and was asked for answer 3"
    assert shown["stopped_in"] == ["lead", "helper"]  # for a script: where, as stderr says
    assert "stopped in the sub-agent 'helper' (lead -> helper)" in err
    match = re.search(r"the run is stored: agent-gateway (resume .*)$", err, re.MULTILINE)
    assert match is not None, err
    resume = match.group(1).split()

    show = ["runs", "show", resume[1], "--state-dir", state_dir]
    assert main([*show, "--json"]) == 0
    billed = _model_usages(json.loads(capsys.readouterr().out)["calls"])
    assert len(billed) == 3  # the lead's call and the helper's two
    used = {key: sum(u[key] for u in billed) for key in ("input_tokens", "output_tokens")}
    assert shown["usage"]["requests"] == 3
    assert {key: shown["usage"][key] for key in used} == used
    assert main(show) == 0
    said = f"usage so far: {used['input_tokens']} in / {used['output_tokens']} out tokens, 3 model"
    assert said in capsys.readouterr().out

    write(lead, [{"content": "The helper says 2 and 4."}])  # what the models say next
    write(helper, [{"content": "2 and 4"}])
    assert main([*resume, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert out == "The helper says 2 and 4.\n"
    assert "calculator" not in err  # both calls ran before the stop
    assert 'scripted:helper.json out={"content":"2 and 4"' in err  # it went on inside


def _model_usages(calls: list[Any]) -> list[dict[str, int]]:
    """The usage of every model call of a `runs show --json` tree, sub-agents' included."""
    found: list[dict[str, int]] = []
    for node in calls:
        if node["kind"] == "model" and node["usage"]:
            found.append(node["usage"])
        found += _model_usages(node.get("calls", []))
    return found


@pytest.mark.anyio
@pytest.mark.integration
async def test_ctrl_c_during_a_stored_run_says_how_to_resume_it(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    script = write(
        tmp_path / "wait.json",
        [{"tool_calls": [{"name": "wait", "arguments": {"marker": str(marker)}}]}],
    )
    config = write(
        tmp_path / "c.toml",
        '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["wait"]\n',
    )
    state_dir = tmp_path / "runs"
    run = ["--config", str(config), "--state-dir", str(state_dir), "--json"]
    code, out, err = await _interrupted_run(run, once="wait_until_cancelled: started")
    assert code == 130, err
    printed = json.loads(out)  # --json: one object on stdout, also when interrupted
    assert printed["error"].startswith("interrupted: the run is stored: agent-gateway resume ")
    assert printed["stopped_in"] is None  # its own agent's run: no sub-agent's
    assert printed["usage"]["requests"] == 1  # what it did so far: the model was asked once
    assert marker.read_text() == "cancelled"  # the tool was cancelled, not left running
    match = re.search(
        r"interrupted: run (\w+) is stored: agent-gateway resume \1 --state-dir (\S+)", err
    )
    assert match is not None, err
    assert match.group(2) == str(state_dir)
    async with open_runs(default_store_url(state_dir), launch=False) as runs:
        assert (await runs.get(match.group(1))).status == "stopped"
        state = await runs.state(match.group(1))
    assert state is not None
    assert state.request is not None  # stopped with the tool call to run again
    assert state.origin is not None
    assert state.origin.config == str(config)


def test_resume_keeps_the_settings_the_run_was_given_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path / "first.json", STOP_AFTER_THE_TOOL)
    state_dir = tmp_path / "runs"
    settings = ["--system", "Be terse.", "--temperature", "0.1", "--max-tokens", "64"]
    resume = stopped_run(
        capsys, "--model", f"scripted:{script}", "--state-dir", str(state_dir), *settings
    )
    run_id = resume[1]
    assert main(["runs", "show", run_id, "--json", "--state-dir", str(state_dir)]) == 0
    state = RunState.model_validate(json.loads(capsys.readouterr().out)["state"])
    args = parser().parse_args(resume)
    config, origin, _model = resume_config(args, state.origin, state.agent)
    assert (origin.system, origin.temperature, origin.max_tokens) == ("Be terse.", 0.1, 64)
    agent = config.agents["assistant"]
    assert (agent.system, agent.temperature, agent.max_tokens) == ("Be terse.", 0.1, 64)


@pytest.mark.anyio
@pytest.mark.integration
async def test_ctrl_c_during_a_blocking_python_tool_exits_at_once(tmp_path: Path) -> None:
    script = write(
        tmp_path / "sleep.json",
        [{"tool_calls": [{"name": "nap", "arguments": {"seconds": 600}}]}],
    )
    config = write(
        tmp_path / "c.toml",
        '[tools.nap]\npython = "tests.sample_tools:sleep_blocking"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["nap"]\n',
    )
    run = ["--config", str(config), "--state-dir", str(tmp_path / "runs")]
    # Within 30 s, not the tool's 600 s: its thread is not waited for.
    code, _, err = await _interrupted_run(run, once="sleep_blocking: started")
    assert code == 130, err
    assert "interrupted: run " in err
    assert "Traceback" not in err


@pytest.mark.anyio
@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("command", ["run", "call"])
async def test_a_run_stopped_while_its_servers_start_says_nothing_ran(
    tmp_path: Path, signum: signal.Signals, command: str
) -> None:
    """SIGTERM there exited 143 saying nothing; `--json` printed no object on either (`call
    AGENT --json` printed none still)."""
    hangs = write(
        tmp_path / "hangs.py",
        "import sys, time\nprint('slow: started', file=sys.stderr, flush=True)\ntime.sleep(120)\n",
    )
    script = write(tmp_path / "never.json", [{"content": "never asked"}])
    config = write(
        tmp_path / "c.toml",
        f"[mcpServers.slow]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(hangs))}]\n"
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["slow"]\n',
    )
    options = ["--config", str(config), "--json", "-v"]
    if command == "run":
        run = ["run", "go", *options, "--state-dir", str(tmp_path / "runs")]
    else:
        run = ["call", "a", "--args", '{"prompt": "go"}', *options]
    code, out, err = await _interrupted_run(run, once="slow: started", signum=signum, command=[])
    assert code == 128 + signum, err
    assert "interrupted while waiting for MCP servers to start (slow): stopping them" in err
    assert re.search(r"stopped after \d+\.\d s: nothing ran", err), err
    printed = json.loads(out)  # one object on stdout, as --json promises
    assert (printed["run_id"], printed["status"]) == (None, "failed")
    assert printed["error"] == "interrupted while its MCP servers started: nothing ran"
    assert "Traceback" not in err


async def _interrupted_run(
    options: list[str],
    *,
    once: str,
    signum: signal.Signals = signal.SIGINT,
    command: Sequence[str] = ("run", "go"),
) -> tuple[int, str, str]:
    """`COMMAND OPTIONS` (`run go` unless told) in a process, sent `signum` once its stderr
    says `once`: its exit code, stdout and stderr (within 30 s)."""
    argv = [sys.executable, "-m", "gateway.cli", *command, *options]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with anyio.fail_after(30):
        async with await anyio.open_process(argv, env=env, stdin=None) as process:
            assert process.stderr is not None
            assert process.stdout is not None
            lines = TextReceiveStream(process.stderr)
            err = ""
            async for chunk in lines:
                err += chunk
                if once in err:
                    break
            process.send_signal(signum)
            async for chunk in lines:
                err += chunk
            code = await process.wait()
            out = "".join([chunk async for chunk in TextReceiveStream(process.stdout)])
    return code, out, err


def test_resume_in_a_store_that_does_not_exist_makes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "no-such-dir"
    assert main(["resume", "abc", "--state-dir", str(typo)]) == 2
    assert "error: no stored run 'abc': no runs are stored in sqlite:///" in capsys.readouterr().err
    assert not typo.exists()


def test_a_relative_store_is_named_absolute_in_the_resume_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = write(tmp_path / "first.json", STOP_AFTER_THE_TOOL)
    resume = stopped_run(capsys, "--model", f"scripted:{script}", "--store", "sqlite:///rel.db")
    assert resume[2:] == ["--store", f"sqlite:///{tmp_path / 'rel.db'}"]


def test_a_resume_another_process_took_says_so_without_a_hint_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loser of two `resume`s at once said where the run runs, then `the run is stored:
    agent-gateway resume RUN` for a run running elsewhere."""
    _, _, resume = stopped_on_a_config_file(tmp_path, capsys)
    run_id = resume[1]
    url = default_store_url(str(tmp_path / "runs"))  # the store it is in, named as one

    async def taken_meanwhile(self: DurableRuns, run: str, **_: object) -> None:
        raise taken(
            run, self.url
        )  # what DBOS's hand-over to the other process makes `resume` raise

    monkeypatch.setattr(DurableRuns, "resume", taken_meanwhile)
    assert main(resume) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: run {run_id!r} was resumed by another process at the same moment: it runs "
        f"there (`agent-gateway runs show {run_id} --store {url}`)\n"
    )


@pytest.mark.parametrize("command", [["resume"], ["runs", "resume"]])
def test_otel_on_the_command_line_applies_to_the_config_a_run_resumes_on(
    tmp_path: Path, command: list[str]
) -> None:
    """The run's own config file, one named with `--config`, and the built-in default all take
    `--otel`, as `run`'s config does (it is the command's, not the run's)."""
    config = write(tmp_path / "c.toml", '[tools.calculator]\nbuiltin = "calculator"\n')
    own = RunOrigin(
        config=str(config), config_sha256=hashlib.sha256(config.read_bytes()).hexdigest()
    )
    cases: list[tuple[RunOrigin, list[str]]] = [
        (own, []),
        (RunOrigin(), ["--config", str(config)]),
        (RunOrigin(), []),
    ]
    for origin, options in cases:
        for otel in (["--otel"], []):
            args = parser().parse_args([*command, "abc", *options, *otel])
            resumed, _origin, _model = resume_config(args, origin, "assistant")
            assert resumed.gateway.otel is bool(otel), (origin, options, otel)


@pytest.mark.integration
def test_resume_with_otel_exports_the_resumed_runs_spans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, _config, resume = stopped_on_a_config_file(tmp_path, capsys)
    write(script, [{"content": "It is 42."}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", *resume, "--otel"],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"
    assert '"name": "invoke_agent assistant"' in done.stderr  # the console exporter's spans
    assert '"name": "chat first.json"' in done.stderr


def test_approving_a_stopped_run_with_no_call_listed_says_to_resume_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that stopped listing no waiting call (an older version's, stopped while it
    waited: it cleared its list) is told how to be asked again, in its own store."""
    _, _, resume = stopped_on_a_config_file(tmp_path, capsys)
    run_id, state_dir = resume[1], resume[3]
    for verb in ("approve", "deny"):
        assert main(["runs", verb, run_id, "c1", "--state-dir", state_dir]) == 2
        assert capsys.readouterr().err == (
            f"error: run {run_id} has no call waiting for approval (stopped): if it stopped "
            f"waiting for one, resume it (agent-gateway resume {run_id} --state-dir "
            f"{state_dir}); it will ask again\n"
        )


@pytest.mark.parametrize(
    ("user", "query"),
    [
        ("bob:SECRETPASS@", ""),
        # A key in the query was in the hint, and stored 3 times: it is kept out as a password is.
        ("", "?api-version=1&api_key=SECRETPASS"),
    ],
)
def test_a_model_urls_password_is_never_stored_and_resume_asks_for_it_again(
    user: str, query: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runs show --json` printed `http://bob:PASS@...` (the run's origin), and the store's
    rows held it: now the store holds `bob:***`, and resume wants the model given again."""
    calculator = {"name": "calculator", "arguments": {"expression": "6 * 7"}}
    answers = [calculator, Refusal(401, "Incorrect API key provided"), "It is 42."]
    state_dir = tmp_path / "runs"
    with openai_stub(answers) as model:
        url = model.url.replace("http://", f"http://{user}") + query
        spec = f"openai-compatible:{url}#stub"
        hidden = spec.replace("SECRETPASS", "***")
        assert main(["run", "What is 6 * 7?", "--model", spec, "--state-dir", str(state_dir)]) == 1
        err = capsys.readouterr().err
        hint = re.search(r"the run is stored: agent-gateway (resume .*)$", err, re.MULTILINE)
        assert hint is not None, err
        resume = shlex.split(hint.group(1))
        assert resume[-2:] == ["--model", hidden]  # to fill in: the hint holds no secret
        run_id = resume[1]

        assert main(["runs", "show", run_id, "--json", "--state-dir", str(state_dir)]) == 0
        shown = capsys.readouterr().out
        assert json.loads(shown)["state"]["origin"]["model"] == hidden
        assert "SECRETPASS" not in shown
        stored = b"".join(_decoded(path) for path in state_dir.iterdir())
        assert hidden.partition(":")[2].encode() in stored  # the rows were read
        assert b"SECRETPASS" not in stored

        assert main(resume) == 2  # as hinted, *** and all
        assert capsys.readouterr().err == (
            f"error: --model {hidden} has *** where its URL's credentials go: write them in "
            "its place\n"
        )
        assert main(resume[:-2]) == 2
        assert capsys.readouterr().err == (
            f"error: the run started with --model {hidden}: the credentials in its URL are not "
            "stored; give the model again with --model, credentials included\n"
        )
        assert main([*resume[:-2], "--model", spec]) == 0
        assert capsys.readouterr().out == "It is 42.\n"
    stored = b"".join(_decoded(path) for path in state_dir.iterdir())
    assert b"SECRETPASS" not in stored  # the resumed run's origin neither


def test_a_servers_responses_api_run_stores_no_credentials_and_resumes_with_its_reasoning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`openai-responses:URL#MODEL` (vLLM's gpt-oss): the URL's password and query key stay out
    of the store and the hint, OpenAI's key never reaches the server, and the resumed run
    sends the first step's reasoning text back with its call, as vLLM reads it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    thought: dict[str, Any] = {
        "id": "rs_1",
        "summary": [],
        "type": "reasoning",
        "content": [{"text": "6 * 7: the calculator says.", "type": "reasoning_text"}],
        "encrypted_content": None,
        "status": None,
    }
    call: dict[str, Any] = {
        "arguments": '{"expression": "6 * 7"}',
        "call_id": "call_c1",
        "name": "calculator",
        "type": "function_call",
        "id": "fc_1",
        "status": "completed",
    }
    said: dict[str, Any] = {
        "id": "msg_3",
        "content": [{"annotations": [], "text": "It is 42.", "type": "output_text"}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }
    state_dir = tmp_path / "runs"
    with responses_stub([[thought, call], Refusal(401, "Unauthorized"), [said]]) as server:
        url = server.url.replace("http://", "http://bob:SECRETPASS@") + "?api_key=SECRETKEY"
        spec = f"openai-responses:{url}#openai/gpt-oss-20b"
        hidden = spec.replace("SECRETPASS", "***").replace("SECRETKEY", "***")
        assert main(["run", "What is 6 * 7?", "--model", spec, "--state-dir", str(state_dir)]) == 1
        err = capsys.readouterr().err
        hint = re.search(r"the run is stored: agent-gateway (resume .*)$", err, re.MULTILINE)
        assert hint is not None, err
        resume = shlex.split(hint.group(1))
        assert resume[-2:] == ["--model", hidden]
        assert main([*resume[:-2], "--model", spec]) == 0
        assert capsys.readouterr().out == "It is 42.\n"
    stored = b"".join(_decoded(path) for path in state_dir.iterdir())
    assert hidden.partition(":")[2].encode() in stored  # the rows were read
    assert b"SECRET" not in stored
    basic = "Basic " + base64.b64encode(b"bob:SECRETPASS").decode()
    assert server.seen == [("api_key=SECRETKEY", basic)] * 3
    first, _, resumed = server.requests
    assert first["model"] == "openai/gpt-oss-20b"
    output = {"type": "function_call_output", "call_id": "call_c1"}
    assert resumed["input"][-3:-1] == [thought, call]
    assert {key: resumed["input"][-1][key] for key in output} == output


def _decoded(path: Path) -> bytes:
    """A SQLite file's bytes, and its rows' base64 text decoded (DBOS stores pickles so)."""
    raw = path.read_bytes()
    if not path.name.endswith(".sqlite3"):
        return raw
    found = [raw]
    with sqlite3.connect(path) as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, str):
                        with contextlib.suppress(ValueError):
                            found.append(base64.b64decode(value, validate=True))
    return b"\n".join(found)


def test_a_model_tried_on_resume_that_refuses_the_request_leaves_the_run_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`resume --model` on another model whose provider refused the run's requests (Gemini 3
    a turn with another provider's calls, a window too small) failed the run for good: its
    own model could no longer take it. Now the run stays stopped, resumable on its own."""
    calculator = {"name": "calculator", "arguments": {"expression": "6 * 7"}}
    refused = Refusal(400, "Function call is missing a thought_signature in functionCall parts")
    state_dir = str(tmp_path / "runs")
    with (
        openai_stub([calculator, Refusal(401, "Incorrect API key"), "It is 42."]) as own,
        openai_stub([refused]) as other,
    ):
        spec = f"openai-compatible:{own.url}#stub"
        resume = stopped_run(capsys, "--model", spec, "--state-dir", state_dir)
        tried = f"openai-compatible:{other.url}#other"
        assert main([*resume, "--model", tried]) == 1
        err = capsys.readouterr().err
        assert "HTTP 400: Function call is missing a thought_signature" in err
        assert "the run is stored: agent-gateway resume" in err  # stopped, not failed
        assert main(["runs", "list", "--state-dir", state_dir]) == 0
        assert " stopped " in capsys.readouterr().out

        assert main([*resume, "--model", spec]) == 0
        assert capsys.readouterr().out == "It is 42.\n"
