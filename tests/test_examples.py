"""The examples and the README run exactly as written and print what they say they print.

Each documented command is taken from the document itself and run as the installed console
script; what the document shows as printed is compared with what is printed, timings, dates
and ports masked.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from agent import ScriptedModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.cli.init import default_config_text
from gateway.config import DEFAULT_CONFIG, load_config, parse_config
from tests.server.processes import untimed
from tests.servers.databases import free_port
from tests.servers.openai_stub import openai_stub
from tests.servers.real import TIME_SERVER, require

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.integration


def fenced(path: Path, language: str = "") -> list[str]:
    """The code blocks of a Markdown file in `language` ("": plain blocks), in order."""
    blocks: list[str] = []
    current: list[str] | None = None
    wanted = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("```"):
            if current is not None:
                current.append(line)
        elif current is None:
            current, wanted = [], line[3:].strip() == language
        else:
            if wanted:
                blocks.append("\n".join(current) + "\n")
            current = None
    return blocks


def commands(text: str) -> list[list[str]]:
    """The `agent-gateway ...` commands of a shell snippet (comments and `#` prefixes off,
    continuation lines joined)."""
    joined = re.sub(r"\\\n\s*(#\s*)?", " ", text)
    found: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip().removeprefix("#").strip()
        if line.startswith("agent-gateway "):
            found.append(shlex.split(line.split(" #")[0].removesuffix("&").strip()))
    return found


def masked(text: str) -> list[str]:
    """Lines with what changes from run to run masked: timings, dates, ports."""
    text = re.sub(r"\[\s*\d+ ms\]", "[ ms]", text)
    text = re.sub(r"\b\d+ ms\b", "N ms", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", "DATE", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "TIME", text)  # `serve`'s lines
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r"\(run [0-9a-f]{12}\)", "(run ID)", text)
    return text.splitlines()


def run(argv: list[str], *, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "agent-gateway"
    executable = shutil.which("agent-gateway", path=str(BIN))
    assert executable is not None, "the package is not installed (pip install -e .)"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [executable, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=50
    )


def test_the_demo_prints_what_the_readme_shows(tmp_path: Path) -> None:
    shown = next(b for b in fenced(REPO / "README.md") if b.startswith("No model configured"))
    done = run(["agent-gateway", "demo"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert masked(done.stdout) == masked(shown)


def test_the_researcher_example_runs_as_its_header_and_the_readme_say() -> None:
    config = EXAMPLES / "researcher/agent-gateway.toml"
    (command,) = commands(config.read_text(encoding="utf-8"))
    where = str(config.relative_to(REPO))
    in_readme = [c for b in fenced(REPO / "README.md", "sh") for c in commands(b) if where in c]
    assert in_readme == [command]
    done = run(command)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "17 shirts cost 425 dollars before tax, 459 dollars with 8% tax.\n"
    assert "      agent math" in done.stderr  # the sub-agent's span, nested in the tool call


def test_two_gateways_over_stdio_print_the_trace_their_readme_shows() -> None:
    readme = EXAMPLES / "two_gateways/README.md"
    stdio = next(b for b in fenced(readme, "sh") if "a.toml" in b)
    (command,) = commands(stdio)
    shown = fenced(readme)[0]
    done = run(command)
    assert done.returncode == 0, done.stderr
    assert masked(done.stderr + done.stdout) == masked(shown)
    header = commands((EXAMPLES / "two_gateways/a.toml").read_text(encoding="utf-8"))
    assert header == [command]


@pytest.mark.anyio
async def test_two_gateways_over_http_print_the_traces_their_readme_shows(tmp_path: Path) -> None:
    readme = EXAMPLES / "two_gateways/README.md"
    serve, command = commands(next(b for b in fenced(readme, "sh") if "a-http.toml" in b))
    shown_a, shown_b = fenced(readme)[1:3]
    # The documented port, 8765, may be taken on a shared machine: the same commands on a
    # free port, with A's config pointing there (a copy, beside its scripts).
    port = free_port()
    serve = [arg.replace("127.0.0.1:8765", f"127.0.0.1:{port}") for arg in serve]
    a_http = tmp_path / "a-http.toml"
    text = (EXAMPLES / "two_gateways/a-http.toml").read_text(encoding="utf-8")
    a_http.write_text(text.replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    shutil.copy(EXAMPLES / "two_gateways/assistant.json", tmp_path)
    command = [str(a_http) if arg.endswith("a-http.toml") else arg for arg in command]
    executable = shutil.which("agent-gateway", path=str(BIN))
    assert executable is not None
    with anyio.fail_after(50):
        async with await anyio.open_process([executable, *serve[1:]], cwd=REPO) as b:
            assert b.stderr is not None
            b_err = ""
            async for chunk in TextReceiveStream(b.stderr):
                b_err += chunk
                if "serving MCP on" in b_err:
                    break
            done = await anyio.to_thread.run_sync(run, command)
            b.send_signal(signal.SIGTERM)  # `kill %1`
            async for chunk in TextReceiveStream(b.stderr):
                b_err += chunk
            await b.wait()
    assert done.returncode == 0, done.stderr
    assert masked(done.stderr + done.stdout) == masked(shown_a)
    b_lines = [
        line for line in b_err.splitlines() if untimed(line).startswith(("[", "agent-gateway:"))
    ]
    assert masked("\n".join(b_lines)) == masked(shown_b)


def in_python(title: str = "In Python") -> list[str]:
    """The Python blocks of the README's section `title` ("In Python")."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_library_example_runs_an_agent_on_an_mcp_server_made_in_code(tmp_path: Path) -> None:
    """The README's "In code" once showed only local functions: no way to add MCP servers."""
    example = in_python()[0]
    assert "McpToolkitGroup(servers)" in example
    answers = [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}, "It is noon."]
    with openai_stub(answers) as model:
        env = {
            **os.environ,
            "PATH": f"{require(TIME_SERVER).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(REPO),  # this checkout's code
            "OPENAI_API_KEY": "sk-test-readme",
            "OPENAI_BASE_URL": model.url,
        }
        done = subprocess.run(
            [sys.executable, "-c", example],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=50,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("It is noon. input_tokens=")
    told = model.messages(1)[-1]  # the time server's answer, read by the model
    assert told["role"] == "tool"
    assert '"timezone":"UTC"' in told["content"]


@pytest.mark.anyio
async def test_the_library_streaming_example_passes_on_the_answer_not_a_sub_agents(
    capsys: pytest.CaptureFixture[str],
) -> None:
    streaming = in_python("Streaming answers")[0]
    asks = {"tool_calls": [{"name": "helper", "arguments": {"prompt": "and the date?"}}]}
    lead = AgentSpec("assistant", ScriptedModel([asks, "It is noon, on a Monday."]), ["helper"])
    helper = AgentSpec("helper", ScriptedModel(["Monday."]))
    scope: dict[str, Any] = {"gateway": Gateway([], [lead, helper]), "TraceEvent": TraceEvent}
    code = compile(streaming, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    with anyio.fail_after(10):
        await eval(code, scope)
    assert capsys.readouterr().out == "It is noon, on a Monday."
    assert scope["result"].items[0].output == "It is noon, on a Monday."


def test_the_readmes_python_type_checks_strictly_against_this_checkout(tmp_path: Path) -> None:
    """A user's pyright reads the README's Python as code of theirs: the streaming hook once
    called `.get` on `TraceEvent.output`, a `JsonValue` (a list, a string...), an error in
    pyright's standard mode too; and a `ChatMemory` of one's own needs `OnWait`, which only a
    private module exported."""
    (tmp_path / "in_python.py").write_text(in_python()[0])
    streaming = textwrap.indent(in_python("Streaming answers")[0], "    ")
    (tmp_path / "streaming.py").write_text(
        "from gateway import Gateway, TraceEvent\n\n\n"
        f"async def main(gateway: Gateway) -> None:\n{streaming}    print(result.output)\n"
    )
    (tmp_path / "own_memory.py").write_text(
        "from agent import OnWait\nfrom agent.memory import OnWait as Same\n\n\n"
        "async def heard(session_id: str) -> None:\n    print(session_id)\n\n\n"
        "waits: OnWait = heard\nsame: Same = waits\n"
    )
    pyright = shutil.which("pyright", path=str(BIN))
    assert pyright is not None, "pyright is a test dependency (pip install -e '.[test]')"
    prefix = Path(sys.prefix)
    config = {
        "typeCheckingMode": "strict",
        "pythonVersion": "3.11",
        "venvPath": str(prefix.parent),
        "venv": prefix.name,
        "extraPaths": [str(REPO)],  # this checkout's code, before the installed one
    }
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    checked = subprocess.run(
        [pyright, "--outputjson"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(checked.stdout)
    problems = [
        f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
    ]
    assert problems == []
    assert report["summary"]["filesAnalyzed"] == 3


def test_every_documented_config_is_valid() -> None:
    documents = [REPO / "README.md", *EXAMPLES.glob("*.md"), *EXAMPLES.glob("*/README.md")]
    blocks = [block for path in documents for block in fenced(path, "toml")]
    assert len(blocks) >= 5
    for block in blocks:
        parse_config(tomllib.loads(block), source=block.splitlines()[0])
    for path in EXAMPLES.glob("*/*.toml"):
        load_config(path)


def test_the_default_config_written_out_offers_the_defaults_tools(tmp_path: Path) -> None:
    """`agent-gateway init` writes the default out, run as an MCP client runs the command: by
    its path, the venv not activated (its `python` not on PATH). The README's block once said
    `command = "python"`, and the toolbox failed to start (`No module named 'gateway'`)."""
    path = os.pathsep.join(p for p in ("/usr/bin", "/bin") if Path(p).is_dir())
    env = {**os.environ, "PATH": path}
    done = subprocess.run(
        [str(BIN / "agent-gateway"), "init"], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    listed: list[list[str]] = []
    for where in (tmp_path, tmp_path / "empty"):  # the file written; none: the built-in default
        where.mkdir(exist_ok=True)
        done = subprocess.run(
            [str(BIN / "agent-gateway"), "tools", "--json"],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        listed.append(sorted(tool["name"] for tool in json.loads(done.stdout)["tools"]))
    written, default = listed
    assert written == default
    assert "toolbox__convert_units" in written
    written_agents = load_config(tmp_path / "agent-gateway.toml").agents
    # As data: a loaded config also knows its folder (where an output_validator's module is).
    assert {k: a.model_dump() for k, a in written_agents.items()} == {
        k: a.model_dump() for k, a in DEFAULT_CONFIG.agents.items()
    }
    # What the README shows is what init writes, but for the Python's path.
    block = next(b for b in fenced(REPO / "README.md", "toml") if "gateway.toolbox" in b)
    text = default_config_text("/path/to/.venv/bin/python")
    assert block == text[text.index("[tools.calculator]") :]
