"""The installed command started in a hostile way: stdin, stdout or stderr closed, output in
an encoding that cannot write every character, a command line in an ASCII locale; and quit
with Ctrl-\\ on a terminal."""

from __future__ import annotations

import json
import os
import pty
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import COMMANDS, main
from gateway.config import TOOLBOX_SERVER
from tests.durable.cli_runs import REPO, SCRIPT, cli_env
from tests.screen import read_all, read_until

TOOLBOX = TOOLBOX_SERVER.model_dump(exclude_defaults=True)
CLOSED = {0: "<&-", 1: ">&-", 2: "2>&-"}
"""How a shell starts a command with that file descriptor closed."""


def run_closed(fd: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` started with `fd` closed, as `agent-gateway ARGS >&-` does."""
    return subprocess.run(
        ["sh", "-c", f'exec "$0" "$@" {CLOSED[fd]}', str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
        timeout=60,
    )


@pytest.mark.integration
@pytest.mark.parametrize("fd", [0, 1, 2])
def test_a_closed_stdin_stdout_or_stderr_neither_aborts_a_command_nor_fails_its_servers(
    tmp_path: Path, fd: int
) -> None:
    """On uvloop, each aborted the command (`uv__close: Assertion 'fd > STDERR_FILENO'`, exit
    134), and the stdio servers failed to start: the next file opened took the closed number."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX}}))
    listed = run_closed(fd, "tools", "--config", str(config))
    assert listed.returncode == 0, listed.stderr  # 1: a server is down
    if fd != 1:
        assert "server toolbox: ready since" in listed.stdout
        assert "toolbox__convert_units" in listed.stdout
    arguments = json.dumps({"value": 2, "from_unit": "km", "to_unit": "m"})
    called = run_closed(
        fd, "call", "toolbox__convert_units", "--args", arguments, "--config", str(config)
    )
    assert called.returncode == 0, called.stderr
    if fd != 1:
        assert json.loads(called.stdout) == {"value": 2000.0, "unit": "m"}
    assert "Assertion" not in listed.stderr + called.stderr


SERVERS = 30
"""Stdio servers started at once: at a soft limit of 64 open files, most would fail."""
OPEN_FILES_ADVICE = (
    "WARNING toolkits.open_files: this process may open 64 files at once (ulimit -n), and 30 "
    "MCP servers starting at once need about 308: some will fail with 'Too many open files'. "
    "Raise the limit in the shell that starts it (ulimit -n 308); its hard limit (ulimit -Hn) "
    "is 64: raising that takes root\n"
)


def many_servers(tmp_path: Path) -> Path:
    """A config of `SERVERS` hand-written stdio servers (no SDK to import: fast to start)."""
    odd = REPO / "tests" / "servers" / "odd_stdio.py"
    config = tmp_path / "many.toml"
    config.write_text(
        "".join(
            f'[mcpServers.s{i:02}]\ncommand = "{sys.executable}"\nargs = ["-S", "{odd}"]\n'
            for i in range(SERVERS)
        )
    )
    return config


def limited(ulimit: str, *args: str) -> subprocess.Popen[str]:
    """`agent-gateway ARGS` started under `ulimit ULIMIT` (as a shell's `ulimit -Sn 64`)."""
    return subprocess.Popen(
        ["bash", "-c", f'ulimit {ulimit} && exec "$0" "$@"', str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=cli_env(),
    )


def hard_limit_below(files: int) -> bool:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1] < files


@pytest.mark.integration
@pytest.mark.skipif(hard_limit_below(4096), reason="raising the limit needs a hard limit above")
def test_a_low_soft_limit_on_open_files_is_raised_before_the_servers_start(
    tmp_path: Path,
) -> None:
    """Under a soft limit of 256 (macOS's default), 84 of 100 stdio servers failed with a bare
    "Too many open files": only `serve --http` raised the limit, once the servers had started."""
    config = many_servers(tmp_path)
    with limited("-Sn 64", "tools", "--config", str(config)) as listing:
        out, err = listing.communicate(timeout=50)
    assert listing.returncode == 0, err  # 1: a server is down
    assert out.count(": ready since") == SERVERS
    assert "Too many open files" not in err

    with limited("-Sn 64", "serve", "--http", "127.0.0.1:0", "--config", str(config)) as served:
        try:
            assert served.stderr is not None
            said = ""
            while "serving MCP on" not in said:  # once every server settled (start_wait)
                line = served.stderr.readline()
                assert line, said
                said += line
            limits = Path(f"/proc/{served.pid}/limits").read_text()
        finally:
            served.terminate()
            served.communicate(timeout=60)
    assert "Too many open files" not in said
    (files,) = [line.split()[3] for line in limits.splitlines() if "open files" in line]
    assert int(files) >= SERVERS * 4 + 2048  # its servers and its HTTP connections


@pytest.mark.integration
def test_an_open_files_limit_that_cannot_be_raised_is_said_once_with_the_way_out(
    tmp_path: Path,
) -> None:
    config = many_servers(tmp_path)
    with limited("-n 64", "tools", "--config", str(config)) as listing:
        _, err = listing.communicate(timeout=50)
    assert listing.returncode == 1  # some servers failed
    assert err.count("toolkits.open_files") == 1
    assert OPEN_FILES_ADVICE in err


TEXT = "Résumé — ☃ 🎉"
ESCAPED = {
    "ascii": "R\\xe9sum\\xe9 \\u2014 \\u2603 \\U0001f389",
    "latin-1": "Résumé \\u2014 \\u2603 \\U0001f389",
}
"""`TEXT` as written to a stream in that encoding: what it cannot write, as escapes."""


def encoded_env(encoding: str) -> dict[str, str]:
    return {**cli_env(), "PYTHONIOENCODING": encoding}


def answering(tmp_path: Path, *answers: str) -> Path:
    """A config whose one agent's scripted model answers `answers`, one per run."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": answer} for answer in answers]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n')
    return config


def run_in(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, cwd=REPO, env=env, timeout=60)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done


@pytest.mark.integration
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_output_in_an_encoding_that_cannot_write_the_answer_writes_escapes_not_a_traceback(
    tmp_path: Path, encoding: str
) -> None:
    """A run that succeeded ended in `UnicodeEncodeError` (exit 1, the answer lost), its JSON
    too; so did `runs show` and `sessions show`."""
    config = answering(tmp_path, TEXT, TEXT)
    env = encoded_env(encoding)
    state = ["--config", str(config), "--state-dir", str(tmp_path / "state")]
    shown = run_in(env, "run", "go", "--session", "s1", *state)
    assert (shown.returncode, shown.stdout.decode(encoding)) == (0, ESCAPED[encoding] + "\n")
    # JSON stays JSON, of the exact text: escaped as JSON does (`\u00e9`), not as `\xe9`.
    as_json = run_in(env, "run", "go", "--json", "--trace-json", *state)
    assert as_json.returncode == 0
    printed = json.loads(as_json.stdout.decode(encoding))
    assert printed["output"] == TEXT
    trace = [json.loads(line) for line in as_json.stderr.decode(encoding).splitlines()]
    assert trace[-1]["output"] == [{"output": TEXT}]
    stored = run_in(env, "runs", "show", printed["run_id"], *state)
    assert stored.returncode == 0
    assert f"answer: {ESCAPED[encoding]}" in stored.stdout.decode(encoding)
    stored_json = run_in(env, "runs", "show", printed["run_id"], "--json", *state)
    assert json.loads(stored_json.stdout.decode(encoding))["result"]["items"][0]["output"] == TEXT
    session = run_in(env, "sessions", "show", "s1", *state)
    assert session.returncode == 0
    assert f"assistant: {ESCAPED[encoding]}" in session.stdout.decode(encoding)


@pytest.mark.integration
def test_json_of_a_tool_call_and_of_items_stays_json_in_an_ascii_encoding(tmp_path: Path) -> None:
    """`call TOOL --json` and `run --items --json` wrote their characters as `\\xe9`, which
    no JSON reader takes."""
    config = answering(tmp_path, TEXT)
    config.write_text(config.read_text() + '[tools.shout]\npython = "tests.sample_tools:shout"\n')
    env = encoded_env("ascii")
    called = run_in(
        env,
        "call",
        "shout",
        "--args",
        json.dumps({"text": TEXT}),
        "--json",
        "--config",
        str(config),
    )
    assert called.returncode == 0
    assert json.loads(called.stdout)["content"][0]["text"] == TEXT.upper()
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"prompt": "go"}) + "\n")
    lines = run_in(
        env, "run", "--items", str(items), "--json", "--no-store", "--config", str(config)
    )
    assert lines.returncode == 0
    assert json.loads(lines.stdout.splitlines()[0])["output"] == TEXT


@pytest.mark.integration
def test_chat_streams_an_answer_its_terminal_cannot_write_as_escapes(tmp_path: Path) -> None:
    """Each streamed token logged `trace hook <RunConsole> failed` with a traceback."""
    config = answering(tmp_path, TEXT)
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [str(SCRIPT), "chat", "--config", str(config), "--state-dir", str(tmp_path / "s")],
            input=b"hello\n",
            stdout=secondary,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env={**encoded_env("ascii"), "TERM": "xterm-256color"},
            timeout=60,
        )
        os.close(secondary)
        shown = read_all(primary)
    finally:
        os.close(primary)
    assert done.returncode == 0, done.stderr
    assert b"failed" not in done.stderr, done.stderr
    assert ESCAPED["ascii"] in shown


@pytest.mark.integration
def test_a_non_ascii_command_line_in_an_ascii_locale_is_its_text(tmp_path: Path) -> None:
    """With `LC_ALL=C PYTHONUTF8=0`, a non-ASCII question or config path came in as escaped
    bytes: storing the run failed (`PydanticSerializationError: surrogates not allowed`)."""
    folder = tmp_path / "dïr ☃"
    folder.mkdir()
    config = answering(folder, TEXT)
    state = ["--config", str(config), "--state-dir", str(folder / "state")]
    ascii_locale = {**cli_env(), "LC_ALL": "C", "PYTHONUTF8": "0"}
    ascii_locale.pop("PYTHONIOENCODING", None)
    done = run_in(ascii_locale, "run", "héllo ☃", "--json", *state)
    assert done.returncode == 0
    printed = json.loads(done.stdout)
    assert printed["output"] == TEXT
    shown = run_in(cli_env(), "runs", "show", printed["run_id"], *state)
    assert "question: héllo ☃\n" in shown.stdout.decode()


LAUNCHED = """
import os, sys
from mcp.server import MCPServer

server = MCPServer("launched")


@server.tool()
def launched() -> dict[str, object]:
    return {"args": sys.argv[1:], "greeting": os.environ["GREETING"], "cwd": os.getcwd()}


server.run("stdio")
"""


@pytest.mark.integration
def test_a_servers_non_ascii_args_env_and_cwd_reach_it_in_an_ascii_locale(tmp_path: Path) -> None:
    """With `LC_ALL=C PYTHONUTF8=0` such a server failed to start: `UnicodeEncodeError: 'ascii'
    codec can't encode characters`. It gets their UTF-8, as in Python's UTF-8 mode."""
    folder = tmp_path / "dïr ☃"
    folder.mkdir()
    (tmp_path / "launched.py").write_text(LAUNCHED)
    config = tmp_path / "c.toml"
    config.write_text(
        f"[mcpServers.s]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(tmp_path / "launched.py"))}, "tägß"]\n'
        f'env = {{ GREETING = "grüße ✓" }}\ncwd = {json.dumps(str(folder))}\n'
    )
    ascii_locale = {**cli_env(), "LC_ALL": "C", "PYTHONUTF8": "0"}
    ascii_locale.pop("PYTHONIOENCODING", None)
    done = run_in(ascii_locale, "call", "s__launched", "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"] == {
        "args": ["tägß"],
        "greeting": "grüße ✓",
        "cwd": str(folder),
    }


@pytest.mark.integration
@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_an_argument_that_is_not_text_is_refused_as_bad_input(tmp_path: Path, locale: str) -> None:
    config = answering(tmp_path, TEXT)
    env = {**cli_env(), "LC_ALL": locale, "PYTHONUTF8": "0"}
    done = subprocess.run(
        [str(SCRIPT), "run", b"caf\xe9", "--config", str(config), "--no-store"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: the argument 'caf\\xe9' is not valid text in this locale: its bytes are not "
        "UTF-8 (give it as UTF-8; rename a file whose name is not)\n"
    )


STDIN_LOCALES = {
    "utf-8": {"LC_ALL": "C.UTF-8", "PYTHONUTF8": "0"},  # stdin's bad bytes kept as surrogates
    "strict": {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict"},  # as en_US.UTF-8's
    "ascii": {"LC_ALL": "C", "PYTHONUTF8": "0"},  # UTF-8 itself comes as escaped bytes
}


@pytest.mark.integration
@pytest.mark.parametrize("locale", STDIN_LOCALES)
def test_a_line_that_is_not_text_is_refused_and_the_chat_goes_on(
    tmp_path: Path, locale: str
) -> None:
    """A Latin-1 `café` piped or typed ended the chat with a traceback (`UnicodeEncodeError:
    surrogates not allowed` from the run; in a strict locale `UnicodeDecodeError` from the
    read), and the lines after it were never asked; in an ASCII locale UTF-8 did too."""
    config = answering(tmp_path, "Noted.")
    env = {**cli_env(), **STDIN_LOCALES[locale]}
    state = ["--config", str(config), "--state-dir", str(tmp_path / "state")]
    chat = subprocess.run(
        [str(SCRIPT), "chat", "--session", "s1", *state],
        input=b"caf\xe9 latin1\nth\xc3\xa9 time\n",
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    err = chat.stderr.decode(errors="replace")
    assert "Traceback" not in err
    assert (chat.returncode, chat.stdout) == (2, b"Noted.\n"), err  # 2: bad input, as `run`'s
    assert err.splitlines()[1:] == [
        "error: the line is not valid text: its bytes are not UTF-8 (byte 4: 'caf\\xe9 "
        "latin1'); give it as UTF-8"
    ]
    shown = run_in(cli_env(), "sessions", "show", "s1", *state)
    assert "user: thé time\n" in shown.stdout.decode()  # only the next line was asked
    question = subprocess.run(
        [str(SCRIPT), "run", "-", "--no-store", *state],
        input=b"caf\xe9 latin1\n",
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert (question.returncode, question.stdout) == (2, b"")
    assert question.stderr.decode() == (
        "error: stdin is not valid text: its bytes are not UTF-8 (byte 4: 'caf\\xe9 latin1\\n'); "
        "give it as UTF-8\n"
    )


def test_an_items_file_that_is_not_text_is_refused_as_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It ended in a `UnicodeDecodeError` traceback."""
    items = tmp_path / "items.jsonl"
    items.write_bytes(b'"first"\n"caf\xe9"\n')
    config = answering(tmp_path, "unasked")
    assert main(["run", "--items", str(items), "--config", str(config), "--no-store"]) == 2
    assert capsys.readouterr().err == (
        f"error: items file {items} is not valid text: its bytes are not UTF-8 (byte 13: "
        '\'"first"\\n"caf\\xe9"\\n\'); give it as UTF-8\n'
    )


HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


@pytest.mark.integration
def test_ctrl_backslash_quits_at_once_with_the_cursor_shown_again(tmp_path: Path) -> None:
    """SIGQUIT's default action ended the process with the live status line's cursor hidden:
    the terminal had none until `tput cnorm`."""
    # An agent on a server that never answers the handshake: the status line shows meanwhile.
    answering(tmp_path, TEXT).write_text(
        f'[agents.a]\nmodel = "scripted:{tmp_path / "answers.json"}"\ntools = ["silent"]\n'
        f'[mcpServers.silent]\ncommand = "{sys.executable}"\n'
        'args = ["-c", "import sys; sys.stdin.read()"]\nconnect_timeout = 60\n'
    )
    primary, secondary = pty.openpty()
    with subprocess.Popen(
        ["sh", "-c", 'ulimit -c 0; exec "$0" "$@"', str(SCRIPT), "run", "go", "--no-store"],
        cwd=tmp_path,  # (its config is found there)
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**cli_env(), "TERM": "xterm-256color"},
    ) as process:
        try:
            os.close(secondary)
            shown = read_until(primary, "waiting for 1 MCP server: silent")
            process.send_signal(signal.SIGQUIT)
            code = process.wait(timeout=10)
            shown += read_all(primary, "utf-8")
        finally:
            process.kill()
            os.close(primary)
    assert code == -signal.SIGQUIT
    assert HIDE_CURSOR in shown
    assert SHOW_CURSOR in shown[shown.rindex(HIDE_CURSOR) :], repr(shown[-200:])


INTERRUPTING_IMPORT = """
import importlib.abc, os, signal, sys


class InterruptAtTheCommandLine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == os.environ["INTERRUPTED_IMPORT"]:  # as a Ctrl-C while the command imports
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, InterruptAtTheCommandLine())
"""


@pytest.mark.integration
@pytest.mark.parametrize(
    ("module", "command"), [("gateway.cli", "--version"), ("gateway.cli.tools", "tools")]
)
def test_ctrl_c_while_the_command_imports_exits_quietly(
    tmp_path: Path, module: str, command: str
) -> None:
    """Ctrl-C in the first second printed a 40-line traceback of the import: of the command
    line, or of the chosen command's module (imported once the command line is read)."""
    (tmp_path / "sitecustomize.py").write_text(INTERRUPTING_IMPORT)
    env = {**cli_env(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "INTERRUPTED_IMPORT": module}
    done = subprocess.run(
        [str(SCRIPT), command], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


HEAVY = {"mcp", "mcp_types", "dbos", "httpx", "httpx2", "pydantic", "rich", "anyio", "uvicorn"}
"""What a command that runs anything loads (with starlette, opentelemetry, psycopg...)."""


@pytest.mark.integration
@pytest.mark.parametrize("command", [["--version"], ["--help"], ["tols"]])
def test_the_version_the_help_and_a_mistyped_command_load_none_of_the_library(
    command: list[str],
) -> None:
    """Each imported the whole library (881 modules, ~0.6 s of CPU) to print a line."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *command],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )
    assert done.returncode == (2 if command == ["tols"] else 0), done.stderr
    imported = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "gateway.cli" in imported  # what was measured is the command line
    assert {name.partition(".")[0] for name in imported} & HEAVY == set()
    assert {f"gateway.cli.{c.module}" for c in COMMANDS.values()} & imported == set()
