"""`chat` driven through its stdin, `sessions list|show|delete`, and one conversation shared
by an MCP client (`session_id`) and the command line (`--session`)."""

from __future__ import annotations

import io
import json
import os
import pty
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from rich.cells import cell_len

from agent import UserMessage
from agent.memory import SQLiteStore
from agent.memory.redis_store import RedisStore
from gateway.cli import main
from gateway.config import TOOLBOX_SERVER
from gateway.server.transports.static_tokens import token_label
from tests.screen import Terminal
from tests.server.processes import http_server
from tests.servers.openai_stub import CutOff, OpenAIStub, Refusal, openai_stub

EXECUTABLE = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))


def config_for(model: OpenAIStub, directory: Path) -> Path:
    config = directory / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "{model.spec}"\ntools = ["calculator"]\n'
    )
    return config


@pytest.mark.integration
def test_chat_streams_answers_keeps_the_conversation_and_forgets_it_on_reset(
    tmp_path: Path,
) -> None:
    assert EXECUTABLE is not None
    answers = [
        {"name": "calculator", "arguments": {"expression": "6 * 7"}},
        "It is 42, Ada.",
        "You are Ada.",
        "I do not know you yet.",
    ]
    with openai_stub(answers) as model:
        config = config_for(model, tmp_path)
        lines = [
            "I am Ada. What is 6 * 7?",
            "/tools",
            "Who am I?",
            "/reset",
            "Who am I?",
            "/nonsense",
            "/exit",
            "never read",
        ]
        done = subprocess.run(
            [EXECUTABLE, "chat", "--config", str(config), "--session", "c1"],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=40,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout.splitlines()
        assert out[0] == "It is 42, Ada."
        assert out[1].startswith("calculator ")
        assert out[2:] == ["You are Ada.", "I do not know you yet."]
        assert "agent assistant, new session c1 (none of that id is stored) (/tools" in done.stderr
        assert "unknown command '/nonsense'" in done.stderr
        assert len(model.requests) == 4  # nothing after /exit was asked
        assert model.requests[1]["stream"] is True  # the answers were streamed
        remembered = [m["role"] for m in model.messages(2)]
        assert remembered == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert [m["role"] for m in model.messages(3)] == ["system", "user"]  # after /reset


def test_a_command_is_its_word_alone_and_two_slashes_ask_a_question(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/reset all` and `/exit now` were "unknown command '/reset'" in a message that listed
    /reset, and a question that begins with / could not be asked at all."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hi."}, {"content": "A file."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n')
    lines = [
        "hello",
        "/reset all",
        "/exit now",
        "//etc/hosts is what?",
        "/etc",
        "/context notjson",  # refused as a mistyped command is: the chat still exits 0
        "/exit",
        "no",
    ]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    state = ["--config", str(config), "--state-dir", str(tmp_path / "state")]
    assert main(["chat", "--session", "s1", *state]) == 0
    out, err = capsys.readouterr()
    assert out == "Hi.\nA file.\n"
    slashes = "a question that begins with / is typed with two"
    assert err.splitlines()[1:] == [
        f"/reset takes nothing after it, so nothing was done: type /reset alone; {slashes}: "
        "//reset all",
        f"/exit takes nothing after it, so nothing was done: type /exit alone; {slashes}: "
        "//exit now",
        "unknown command '/etc': /tools lists the tools, /context shows or sets the run's "
        f"context, /reset forgets the conversation, /exit leaves; {slashes}: //etc",
        "error: /context is not JSON: Expecting value: line 1 column 1 (char 0)",
    ]
    assert main(["sessions", "show", "s1", *state]) == 0
    said = capsys.readouterr().out.splitlines()
    assert [line for line in said if line.startswith("user: ")] == [
        "user: hello",  # not forgotten
        "user: /etc/hosts is what?",
    ]


def test_chat_tools_marks_the_handoffs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "answers.json"
    script.write_text("[]")  # asked nothing
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[tools.calculator]\nbuiltin = "calculator"\n[agents.triage]\nmodel = "scripted:{script}"\n'
        'tools = ["calculator"]\nhandoffs = ["billing"]\n'
        f'[agents.billing]\nmodel = "scripted:{script}"\n'
        'description = "Answers billing questions."\n'
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("/tools\n/exit\n"))
    assert main(["chat", "--config", str(config), "--agent", "triage"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(maxsplit=1) == ["billing", "(handoff) Answers billing questions."]
    assert out[1].startswith("calculator ")
    assert "(handoff)" not in out[1]


@pytest.mark.integration
def test_chat_asks_with_its_context_which_context_shows_and_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with openai_stub(["Hi Ada.", "Hi Bo."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(
            f'[agents.a]\nmodel = "{model.spec}"\nsystem = "You help {{{{ context.customer }}}}."\n'
        )
        lines = [
            "hello",
            "/context",
            '/context {"customer": "Bo"}',
            "again",
            "/context [1]",  # bad input: the context stays
            "/context",
            "/context {}",
            "bye",  # the system message has no customer to read: fails, the model not asked
            "/context",
        ]
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
        state = ["--config", str(config), "--state-dir", str(tmp_path / "state")]
        # `bye` failed (1); the refused `/context [1]` is no failure of the chat's.
        assert main(["chat", *state, "--context", '{"customer": "Ada"}']) == 1
        out, err = capsys.readouterr()
        assert out.splitlines() == [
            "Hi Ada.",
            '{"customer": "Ada"}',
            "Hi Bo.",
            '{"customer": "Bo"}',
            "{}",
        ]
        assert "(the next questions have this context)" in err
        assert "/context must be a JSON object ({\"key\": ...}), not '[1]'" in err
        assert "(the context is cleared)" in err
        assert (
            "the system message uses {{ context.customer }}, but the run's context has no " in err
        )
        assert len(model.requests) == 2
        assert model.messages(0)[0] == {"role": "system", "content": "You help Ada."}
        assert model.messages(1)[0] == {"role": "system", "content": "You help Bo."}
        assert [m["role"] for m in model.messages(1)[1:]] == ["user", "assistant", "user"]

        # The line a chat on a terminal ends with gives the context back, and a bad one is
        # refused before the chat begins.
        terminal = io.StringIO('/context {"customer": "Cy"}\n/exit\n')
        monkeypatch.setattr(terminal, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", terminal)
        assert main(["chat", *state, "--session", "s2"]) == 0
        [hint] = [line for line in capsys.readouterr().err.splitlines() if "continues it" in line]
        assert shlex.split(hint.split("`")[1])[-2:] == ["--context", '{"customer": "Cy"}']
        assert main(["chat", *state, "--context", "{customer: Ada}"]) == 2
        assert "error: --context is not JSON: Expecting property name" in capsys.readouterr().err
        assert len(model.requests) == 2


@pytest.mark.integration
@pytest.mark.parametrize(
    ("status", "said"),
    [(401, "Incorrect API key provided"), (400, "Invalid value for 'messages'")],
)
def test_a_question_that_fails_is_reported_and_the_chat_goes_on(
    tmp_path: Path, status: int, said: str
) -> None:
    """A bad key raises; a request the model refused fails its question on its own (it
    exited 0): either way the exit code says a question failed."""
    assert EXECUTABLE is not None
    with openai_stub([Refusal(status, said), "Hello again."]) as model:
        done = subprocess.run(
            [EXECUTABLE, "chat", "--config", str(config_for(model, tmp_path))],
            input="hello\nsecond\n",
            capture_output=True,
            text=True,
            timeout=40,
            check=False,
        )
    assert done.returncode == 1, done.stderr  # something failed
    assert f"HTTP {status}" in done.stderr
    assert said in done.stderr
    assert done.stdout == "Hello again.\n"
    assert "Traceback" not in done.stderr


ESCAPES = "before \x1b[31mRED\x1b[0m \x1b]0;PWNED\x07 after\r!"
"""A model's answer with control characters a terminal would obey."""


def test_piped_chat_writes_each_answer_exactly_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, chat wrote the answer's control characters as escapes (`\\x1b[31m`), which only
    a terminal should get: `run` writes the model's text exactly."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": ESCAPES}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n')
    monkeypatch.setattr(sys, "stdin", io.StringIO("colour it\n"))
    chat = ["chat", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    assert main(chat) == 0
    assert capsys.readouterr().out == ESCAPES + "\n"


@pytest.mark.integration
def test_piped_chat_writes_only_the_answer_of_the_model_that_took_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model of a fallback list that broke mid-answer left its partial text on piped stdout
    as an answer line of its own, with no word of it anywhere: a script read two answers."""
    with openai_stub([CutOff("The weather is"), "The weather is fine."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(f'[agents.a]\nmodel = ["{model.spec}", "{model.spec}"]\n')
        monkeypatch.setattr(sys, "stdin", io.StringIO("weather?\n"))
        chat = ["chat", "--config", str(config), "--state-dir", str(tmp_path / "state")]
        assert main(chat) == 0
    assert len(model.requests) == 2  # the first model's stream broke: the second answered
    assert capsys.readouterr().out == "The weather is fine.\n"


def test_sessions_are_listed_shown_and_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
                {"content": "It is 42."},
            ]
        )
    )
    state = ["--state-dir", str(tmp_path / "state")]
    assert (
        main(["run", "What is 6 * 7?", "--model", f"scripted:{script}", "--session", "s1", *state])
        == 0
    )
    capsys.readouterr()
    assert main(["sessions", "list", *state]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("s1 ")
    assert " 1 turn  " in listed
    assert listed.rstrip().endswith(" UTC")  # as `runs show` says its times
    assert main(["sessions", "list", "--json", *state]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert list(info) == ["session_id", "turns", "updated_ms", "summarised_through", "owner"]
    assert isinstance(info["updated_ms"], int)  # as `runs list --json` gives its times
    assert abs(info["updated_ms"] / 1000 - time.time()) < 600
    assert main(["sessions", "show", "s1", *state]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "--- turn 1",
        "user: What is 6 * 7?",
        'assistant calls calculator {"expression": "6 * 7"}',
        "calculator: 42",
        "assistant: It is 42.",
    ]
    assert main(["sessions", "show", "s1", "--json", *state]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in shown["turns"][0]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # Its times in milliseconds too, as every other JSON document gives them.
    [turn] = shown["turns"]
    assert turn["created_ms"] == round(turn["created_at"] * 1000)
    assert shown["created_ms"] == shown["updated_ms"] == turn["created_ms"] == info["updated_ms"]
    assert main(["sessions", "delete", "s1", *state]) == 0
    capsys.readouterr()
    for action in ("delete", "show"):  # bad input, said on stderr: stdout stays JSON or empty
        assert main(["sessions", action, "s1", "--json", *state]) == 2
        gone = capsys.readouterr()
        assert (gone.out, gone.err.startswith("error: no session 's1' in ")) == ("", True)
    assert main(["sessions", "show", *state]) == 2
    assert "needs a session id" in capsys.readouterr().err
    assert (tmp_path / "state" / "agent-gateway.sqlite3").is_file()


def test_sessions_show_a_models_escapes_as_text_and_line_up_wide_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sessions show` wrote a stored answer's escape sequences raw (a terminal turned red and
    took `PWNED` as its window title), as `runs show` never does; `sessions list` padded ids
    by characters, so a CJK id pushed its row's columns out of line."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": ESCAPES}, {"content": "Hello."}]))
    state = ["--state-dir", str(tmp_path / "state")]
    for session in ("会話", "ascii"):
        run = ["run", "Hi \x1b[2J", "--model", f"scripted:{script}", "--session", session]
        assert main([*run, *state]) == 0
    capsys.readouterr()
    assert main(["sessions", "show", "会話", *state]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "--- turn 1",
        "user: Hi \\x1b[2J",
        "assistant: before \\x1b[31mRED\\x1b[0m \\x1b]0;PWNED\\x07 after\\x0d!",
    ]
    assert main(["sessions", "show", "会話", "--json", *state]) == 0
    [turn] = json.loads(capsys.readouterr().out)["turns"]
    assert [m["content"] for m in turn["messages"]] == ["Hi \x1b[2J", ESCAPES]  # exactly
    assert main(["sessions", "list", *state]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].startswith("会話" + " " * 28 + " ")  # 4 cells of 32: as wide as the other
    assert len({cell_len(row[: row.index(" 1 turn")]) for row in rows}) == 1


def test_a_session_id_kept_before_invisible_characters_were_refused_is_listed_written_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`a\u200bb` was listed as `ab`, beside a real `ab`: two sessions that looked alike.
    A joiner a word or an emoji needs is listed as it is: it is part of what is seen."""
    file = tmp_path / "old.sqlite3"
    technologist = "\U0001f469\u200d\U0001f4bb"

    async def keep() -> None:
        store = SQLiteStore(file)  # the store itself, as an older gateway kept them
        for session_id in ("ab", "a\u200bb", "a\u2028b", "x\ufeff", "a\u200db", technologist):
            await store.append(session_id, "k", [UserMessage(content="hi")], [1])
        await store.aclose()

    anyio.run(keep)
    assert main(["sessions", "list", "--store", f"sqlite:///{file}"]) == 0
    listed = sorted(row.split(" ")[0] for row in capsys.readouterr().out.splitlines())
    assert listed == sorted(["a\\u200bb", "a\\u2028b", "ab", "x\\ufeff", "a\\u200db", technologist])
    assert main(["sessions", "show", technologist, "--store", f"sqlite:///{file}"]) == 0
    assert "hi" in capsys.readouterr().out


def test_sessions_kept_in_a_named_store_are_found_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    store = ["--store", f"sqlite:///{tmp_path / 'elsewhere.sqlite3'}"]
    state = ["--state-dir", str(tmp_path / "state")]
    assert main(["run", "Hi", "--model", f"scripted:{script}", "--session", "s2", *store]) == 0
    capsys.readouterr()
    assert main(["sessions", "list", *store]) == 0
    assert capsys.readouterr().out.startswith("s2 ")
    assert main(["sessions", "show", "s2", *store]) == 0
    assert capsys.readouterr().out.splitlines() == ["--- turn 1", "user: Hi", "assistant: Hello."]
    assert main(["sessions", "list", *store, *state]) == 2
    assert "give one of --store and --state-dir" in capsys.readouterr().err
    typo = tmp_path / "no-such-dir"
    assert main(["sessions", "list", "--state-dir", str(typo)]) == 0  # none there
    assert f"no sessions are kept in {typo}" in capsys.readouterr().err
    assert main(["sessions", "list", "--state-dir", str(typo), "--json"]) == 0
    assert capsys.readouterr().out == "[]\n"
    assert not typo.exists()  # looking made no store


def test_a_store_named_on_the_command_line_is_the_one_looked_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sessions ... --store URL` listed and deleted the sessions of the memory store the
    config names (exit 0), not of the database named."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[gateway]\nmemory = "sqlite:///memory.db"\n[tools.calculator]\nbuiltin = "calculator"\n'
    )
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}, {"content": "Hi."}]))
    other = tmp_path / "other.sqlite3"
    common = ["--config", str(config), "--model", f"scripted:{script}"]
    assert main(["run", "Hi", *common, "--session", "kept", "--no-store"]) == 0
    assert main(["run", "Hi", *common, "--session", "s2", "--state-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    for named in (["--store", f"sqlite:///{other}"], ["--state-dir", str(tmp_path)]):
        assert main(["sessions", "list", "--config", str(config), "--json", *named]) == 0
        assert capsys.readouterr().out == "[]\n"  # the config's memory.db keeps them both
        assert main(["sessions", "delete", "kept", "--config", str(config), *named]) == 2
        assert "error: no session 'kept' in " in capsys.readouterr().err
    assert main(["sessions", "list", "--config", str(config), "--json"]) == 0
    kept = [info["session_id"] for info in json.loads(capsys.readouterr().out)]
    assert sorted(kept) == ["kept", "s2"]  # memory is the config's: `run --store` is the runs'


def _tables(file: Path) -> set[str]:
    with closing(sqlite3.connect(file)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_before_any_run_is_stored_the_listings_show_none_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine: `sessions list` made the default file (chat memory's tables only),
    and `runs list` then failed on it (`no such table: main.workflow_status`, exit 2)."""
    file = Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3"
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["sessions", "show", "s1"]) == 2
    assert capsys.readouterr().err == f"error: no session 's1' in {file}\n"  # not a repr
    assert not file.exists()  # looking made no store
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    assert (
        main(["run", "Hi", "--model", f"scripted:{script}", "--session", "s1", "--no-store"]) == 0
    )
    assert "workflow_status" not in _tables(file)  # chat memory alone made it
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["runs", "list", "--json"]) == 0
    assert capsys.readouterr().out == "[]\n"
    assert main(["runs", "show", "r1"]) == 2
    assert "no runs are stored in" in capsys.readouterr().err
    assert main(["resume", "r1"]) == 2
    assert "no stored run 'r1'" in capsys.readouterr().err
    assert "workflow_status" not in _tables(file)  # looking wrote nothing
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal is told of none
    assert main(["runs", "list", "--status", "failed"]) == 0
    assert capsys.readouterr() == ("", f"no failed runs in sqlite:///{file}\n")
    assert main(["sessions", "list", "--store", f"sqlite:///{tmp_path / 'other.sqlite3'}"]) == 0
    assert capsys.readouterr() == ("", f"no sessions in {tmp_path / 'other.sqlite3'}\n")


@pytest.mark.integration
@pytest.mark.anyio
async def test_a_conversation_begun_over_mcp_goes_on_from_the_command_line(
    tmp_path: Path,
) -> None:
    assert EXECUTABLE is not None
    with openai_stub(["Hello, Ada.", "Your name is Ada."]) as model:
        config = config_for(model, tmp_path)
        server = StdioServerParameters(
            command=EXECUTABLE,
            args=["serve", "--stdio", "--config", str(config)],
            env=dict(os.environ),
        )
        with anyio.fail_after(30):
            async with Client(server) as client:
                result = await client.call_tool(
                    "assistant", {"prompt": "I am Ada.", "session_id": "shared"}
                )
        assert not result.is_error
        done = await anyio.run_process(
            [EXECUTABLE, "run", "What is my name?", "--session", "shared", "--config", str(config)],
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == "Your name is Ada.\n"
        assert [m["content"] for m in model.messages(1)[1:]] == [
            "I am Ada.",
            "Hello, Ada.",
            "What is my name?",
        ]


@pytest.mark.integration
@pytest.mark.anyio
async def test_over_http_each_tokens_sessions_are_its_own_and_the_operator_reaches_them(
    tmp_path: Path,
) -> None:
    """Two tokens naming the same `session_id` hold two conversations; from the command line,
    `sessions list` says whose each is and its key (`@ann/shared1`) continues it. A token is
    its name (`ann=TOKEN`) or its digest's label, not its position: with Ann's token revoked,
    the one left does not become hers and gets none of her conversation."""
    assert EXECUTABLE is not None
    ann, other = "first-token-0123456789", "second-token-0123456789"
    other_label = token_label(other)
    answers = ["Noted.", "I know no secret of yours.", "It is PINEAPPLE-42.", "Still none."]
    state = ["--state-dir", str(tmp_path / "state")]

    async def ask(url: str, token: str, question: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with anyio.fail_after(30):
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                arguments = {"prompt": question, "session_id": "shared1"}
                answer = await client.call_tool("assistant", arguments)
        assert not answer.is_error, answer

    with openai_stub(answers) as model:
        config = config_for(model, tmp_path)
        config.write_text('[gateway]\ntokens_env = "GW_TEST_TOKENS"\n' + config.read_text())
        env = {"GW_TEST_TOKENS": f"ann={ann},{other}"}
        async with http_server(config, *state, env=env) as served:
            await ask(served.url, ann, "my secret is PINEAPPLE-42")
            await ask(served.url, other, "what is my secret?")
        # The second token's model saw no history: the question alone.
        assert [m["content"] for m in model.messages(1)[1:]] == ["what is my secret?"]

        async def cli(*command: str) -> tuple[int, str]:
            argv = [str(EXECUTABLE), *command, "--config", str(config), *state]
            done = await anyio.run_process(argv, check=False)
            return done.returncode, done.stdout.decode()

        code, out = await cli("sessions", "list", "--json")
        assert code == 0
        listed = {s["session_id"]: s["owner"] for s in json.loads(out)}
        assert listed == {"@ann/shared1": "ann", f"@{other_label}/shared1": other_label}
        assert other not in out
        code, out = await cli("sessions", "list")
        assert out.splitlines()[-1].endswith(" UTC  of ann")
        assert (await cli("sessions", "show", "shared1"))[0] == 2  # nobody's: none
        code, out = await cli("run", "What is my secret?", "--session", "@ann/shared1")
        assert (code, out) == (0, "It is PINEAPPLE-42.\n")
        assert [m["content"] for m in model.messages(2)[1:]] == [
            "my secret is PINEAPPLE-42",
            "Noted.",
            "What is my secret?",
        ]

        # Ann's token revoked: the other, now the first and only one, is still itself.
        async with http_server(config, *state, env={"GW_TEST_TOKENS": other}) as served:
            await ask(served.url, other, "what is my secret now?")
        assert [m["content"] for m in model.messages(3)[1:]] == [
            "what is my secret?",
            "I know no secret of yours.",
            "what is my secret now?",
        ]


@pytest.mark.integration
def test_ctrl_c_in_chat_cancels_the_answer_and_at_the_prompt_leaves(tmp_path: Path) -> None:
    """A REPL's Ctrl-C: the answer in flight is cancelled and the prompt comes back; at the
    prompt it leaves, saying how to continue. (It ended the whole chat, mid-answer.)"""
    assert EXECUTABLE is not None
    marker = tmp_path / "marker"
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "wait", "arguments": {"marker": str(marker)}}]},
                {"content": "The second answer."},
            ]
        )
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["wait"]\n'
    )
    primary, secondary = pty.openpty()
    repo = str(Path(__file__).resolve().parents[1])
    with subprocess.Popen(
        [EXECUTABLE, "chat", "--config", str(config), "--session", "c7"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": repo, "TERM": "dumb"},
    ) as process:
        terminal = Terminal(primary)
        try:
            os.close(secondary)
            terminal.until("> ")
            terminal.type("first")
            terminal.until("wait_until_cancelled: started")
            process.send_signal(signal.SIGINT)
            terminal.until("(interrupted: the answer was cancelled")
            terminal.until("> ", count=2)
            terminal.type("second")
            terminal.until("> ", count=3)
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=10)
            terminal.until("continues it")
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read().decode()
    assert code == 130, terminal.shown
    assert marker.read_text() == "cancelled"  # the tool's call ended with the answer
    assert out == "The second answer.\n"
    again = f"agent-gateway chat --session c7 --config {shlex.quote(str(config))}"
    assert f"session c7: `{again}` continues it" in terminal.shown
    assert "Traceback" not in terminal.shown


@pytest.mark.integration
def test_chat_leaves_at_once_after_ctrl_c_left_a_plain_tool_running(tmp_path: Path) -> None:
    """The thread of a blocking local tool cannot be stopped: after Ctrl-C cancelled its
    answer, Ctrl-D (or /exit) waited for it until the tool ended (a minute), and a Ctrl-C
    meanwhile printed a traceback of `threading._shutdown` and exited 0."""
    assert EXECUTABLE is not None
    script = tmp_path / "answers.json"
    nap = {"name": "nap", "arguments": {"seconds": 600}}
    script.write_text(json.dumps([{"tool_calls": [nap]}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.nap]\npython = "tests.sample_tools:sleep_blocking"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["nap"]\n'
    )
    primary, secondary = pty.openpty()
    repo = str(Path(__file__).resolve().parents[1])
    with subprocess.Popen(
        [EXECUTABLE, "chat", "--config", str(config), "--session", "c9"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": repo, "TERM": "dumb"},
    ) as process:
        terminal = Terminal(primary)
        try:
            os.close(secondary)
            terminal.until("> ")
            terminal.type("nap")
            terminal.until("sleep_blocking: started")
            process.send_signal(signal.SIGINT)
            terminal.until("(interrupted: the answer was cancelled")
            terminal.until("> ", count=2)
            os.write(primary, b"\x04")  # Ctrl-D
            code = process.wait(timeout=20)  # not the 600 s the tool sleeps
            terminal.until("continues it")
        finally:
            process.kill()
            os.close(primary)
    assert code == 0, terminal.shown
    assert "Traceback" not in terminal.shown


@pytest.mark.integration
def test_chat_on_a_dumb_terminal_says_which_servers_it_waits_for(tmp_path: Path) -> None:
    """With TERM=dumb, `run` says in a plain line which MCP servers it waits for; chat said
    nothing for the seconds they take."""
    assert EXECUTABLE is not None
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "unasked"}]))
    config = tmp_path / "agent-gateway.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"toolbox": TOOLBOX_SERVER.model_dump(exclude_defaults=True)},
                "agents": {"a": {"model": f"scripted:{script}", "tools": ["toolbox"]}},
            }
        )
    )
    primary, secondary = pty.openpty()
    repo = str(Path(__file__).resolve().parents[1])
    with subprocess.Popen(
        [EXECUTABLE, "chat", "--config", str(config), "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": repo, "TERM": "dumb"},
    ) as process:
        terminal = Terminal(primary)
        try:
            os.close(secondary)
            terminal.until("> ")
            terminal.type("/exit")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
    assert code == 0, terminal.shown
    assert terminal.shown.startswith("waiting for 1 MCP server: toolbox\r\n"), terminal.shown
    assert "\x1b" not in terminal.shown  # a dumb terminal gets no escape sequence


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_chat_ended_by_a_signal_at_the_prompt_says_how_to_continue(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM or SIGHUP ended a chat with no word of its session (Ctrl-C and Ctrl-D said it),
    the hint left after the prompt's `> `."""
    assert EXECUTABLE is not None
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "unasked"}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    primary, secondary = pty.openpty()
    repo = str(Path(__file__).resolve().parents[1])
    with subprocess.Popen(
        [EXECUTABLE, "chat", "--config", str(config), "--session", "c8"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": repo, "TERM": "dumb"},
    ) as process:
        terminal = Terminal(primary)
        try:
            os.close(secondary)
            terminal.until("> ")
            process.send_signal(signum)
            code = process.wait(timeout=10)
            terminal.until("continues it")
        finally:
            process.kill()
            os.close(primary)
    assert code == 128 + signum, terminal.shown
    again = f"agent-gateway chat --session c8 --config {shlex.quote(str(config))}"
    hint = f"session c8: `{again}` continues it"
    assert f"> \r\n{hint}\r\n" in terminal.shown  # on a line of its own
    assert "Traceback" not in terminal.shown


def test_chat_says_how_to_continue_its_session_where_it_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint names the config and the database given: the session is in neither default."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello, Ada."}, {"content": "Ada."}]))
    config = tmp_path / "my config.toml"
    config.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    state_dir = tmp_path / "state"
    terminal = io.StringIO("I am Ada.\n/exit\n")
    monkeypatch.setattr(terminal, "isatty", lambda: True)
    monkeypatch.setattr(sys, "stdin", terminal)
    chat = ["chat", "--session", "s1", "--config", str(config), "--state-dir", str(state_dir)]
    assert main(chat) == 0
    out, err = capsys.readouterr()
    assert out == "Hello, Ada.\n"
    assert (
        f"session s1: `agent-gateway chat --session s1 --config {shlex.quote(str(config))} "
        f"--state-dir {shlex.quote(str(state_dir))}` continues it"
    ) in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("/exit\n"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    sessions = tmp_path / "s.sqlite3"
    assert main([*chat[:5], "--store", f"sqlite:///{sessions}"]) == 0
    store = shlex.quote(f"sqlite:///{sessions}")
    assert f"--config {shlex.quote(str(config))} --store {store}` continues it" in (
        capsys.readouterr().err
    )


def test_chats_hint_quotes_the_session_and_keeps_no_promise_memory_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint left the session id unquoted (`--session my notes; date` ran `date`), and
    with `memory = "memory://"` it named a command that continued nothing: the session had
    gone with the process."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n')

    def hint(session: str) -> str:
        terminal = io.StringIO("/exit\n")
        monkeypatch.setattr(terminal, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", terminal)
        chat = ["chat", "--session", session, "--config", str(config)]
        assert main([*chat, "--state-dir", str(tmp_path / "state")]) == 0
        return capsys.readouterr().err.splitlines()[-1]

    said = hint("my notes; date")
    again = said.split("`")[1]
    assert shlex.split(again)[2:4] == ["--session", "my notes; date"]
    assert again.startswith("agent-gateway chat --session 'my notes; date' --config ")
    config.write_text(f'[gateway]\nmemory = "memory://"\n{config.read_text()}')
    assert hint("kept9").endswith(  # (after the prompt: the terminal echoed no /exit here)
        "session kept9 ends with this chat: memory:// keeps it in this process only"
    )


def test_a_scripted_chat_whose_questions_failed_on_their_own_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Max iterations and an empty answer are failures the run returns (not raises): a script
    piping questions in was told 0, as if every one was answered."""
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]},
                {"content": ""},
            ]
        )
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["calculator"]\nmax_iterations = 1\n'
    )
    chat = ["chat", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    monkeypatch.setattr(sys, "stdin", io.StringIO("loop\nsay nothing\n"))
    assert main(chat) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: Max iterations (1) reached" in err
    assert "error: the model's final answer was empty" in err
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps([{"content": "Fine."}]))
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    assert main([*chat, "--model", f"scripted:{fine}"]) == 0  # every question answered
    assert capsys.readouterr().out == "Fine.\n"


def test_chats_hint_for_a_session_and_system_that_begin_with_a_dash_works_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--session -v2` in the hint: argparse took `-v2` for an option ("expected one
    argument"). Such values are written `--session=-v2`."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello, Ada."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n')
    state_dir = tmp_path / "state"

    def chat(command: list[str], line: str) -> tuple[int, str]:
        terminal = io.StringIO(f"{line}\n")
        monkeypatch.setattr(terminal, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", terminal)
        code = main(command)
        return code, capsys.readouterr().err

    first = ["chat", "--session=-v2", "--system=-be brief", "--config", str(config)]
    code, err = chat([*first, "--state-dir", str(state_dir)], "I am Ada.")
    assert code == 0, err
    [hint] = [line for line in err.splitlines() if line.endswith("continues it")]
    again = hint.split("`")[1]
    assert again.startswith("agent-gateway chat --session=-v2 ")
    assert " --system='-be brief'" in again
    code, err = chat(shlex.split(again)[1:], "Who am I?")
    assert code == 0, err

    async def questions() -> list[object]:
        store = SQLiteStore(state_dir / "agent-gateway.sqlite3")
        turns = await store.turns("-v2")
        await store.aclose()
        return [turn.messages[0].content for turn in turns]

    assert anyio.run(questions) == ["I am Ada.", "Who am I?"]  # the same conversation went on


def test_chats_hint_names_the_agent_and_model_it_chose_and_works_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a config with several agents, the hint left out `--agent`: following it failed
    (`choose an agent with --agent`), and without `--model` another model answered."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello, Ada."}]))  # each chat reads it anew
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[agents.a]\nmodel = "none"\n[agents.b]\nmodel = "none"\n')
    state_dir = tmp_path / "state"

    def chat(command: list[str], line: str) -> tuple[int, str, str]:
        terminal = io.StringIO(f"{line}\n")
        monkeypatch.setattr(terminal, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", terminal)
        code = main(command)
        out, err = capsys.readouterr()
        return code, out, err

    model = f"scripted:{script}"
    first = ["chat", "--config", str(config), "--state-dir", str(state_dir)]
    code, out, err = chat(
        [*first, "--agent", "b", "--model", model, "--temperature", "0.5"], "I am Ada."
    )
    assert (code, out) == (0, "Hello, Ada.\n")
    [hint] = [line for line in err.splitlines() if line.endswith("continues it")]
    again = hint.split("`")[1]
    assert again.endswith(f" --agent b --model {shlex.quote(model)} --temperature 0.5")
    command = shlex.split(again)
    assert command[0] == "agent-gateway"
    code, out, err = chat(command[1:], "Who am I?")
    assert (code, out) == (0, "Hello, Ada.\n"), err
    # The banner says the session goes on, and how long it is.
    assert err.startswith(f"agent b, session {command[3]} continued: 1 turn, the last 20")
    assert main(["sessions", "show", command[3], "--state-dir", str(state_dir)]) == 0
    said = capsys.readouterr().out
    assert "user: I am Ada." in said  # the same conversation went on
    assert "--- turn 2\nuser: Who am I?" in said


def test_sessions_look_into_a_redis_store_named_on_the_command_line(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sessions list|delete --store redis://...` was refused: "not a run store URL"."""
    session = f"redis-{uuid.uuid4().hex}"

    async def keep() -> None:
        store = RedisStore(redis_url)
        await store.append(session, "k", [UserMessage(content="Hi")], [1])
        await store.aclose()

    anyio.run(keep)
    assert main(["sessions", "list", "--store", redis_url, "--json"]) == 0
    listed = {info["session_id"]: info["turns"] for info in json.loads(capsys.readouterr().out)}
    assert listed[session] == 1
    assert main(["sessions", "show", session, "--store", redis_url]) == 0
    assert "user: Hi" in capsys.readouterr().out
    assert main(["sessions", "delete", session, "--store", redis_url]) == 0
    assert main(["sessions", "delete", session, "--store", redis_url]) == 2
    assert f"error: no session {session!r} in {redis_url}" in capsys.readouterr().err
    assert main(["sessions", "list", "--store", "memory://"]) == 2
    assert "memory:// keeps sessions in the process that runs them only" in (
        capsys.readouterr().err
    )
    assert main(["sessions", "list", "--store", "mysql://db/x"]) == 2
    assert capsys.readouterr().err == (
        "error: not a chat memory store URL (sqlite:///FILE, postgresql://USER@HOST:PORT/DB, "
        "redis://HOST:PORT/DB): 'mysql://db/x'\n"
    )


def test_sessions_looking_into_a_postgres_store_not_made_makes_nothing(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sessions list|show|delete|prune --store postgresql://.../typo` made the database and
    the memory's tables, then listed none: a typo quietly made an empty store."""
    database = f"looked_{uuid.uuid4().hex[:12]}"
    url = f"{postgres_url.rsplit('/', 1)[0]}/{database}"
    assert main(["sessions", "list", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["sessions", "show", "x", "--store", url]) == 2
    assert f"error: no session 'x' in {url}" in capsys.readouterr().err
    assert main(["sessions", "delete", "x", "--store", url]) == 2
    assert f"error: no session 'x' in {url}" in capsys.readouterr().err
    assert main(["sessions", "prune", "--older-than", "1", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == 0

    async def databases() -> list[str]:
        async with await psycopg.AsyncConnection.connect(postgres_url) as admin:
            found = await admin.execute(
                "SELECT datname FROM pg_database WHERE datname = %s", (database,)
            )
            return [row[0] for row in await found.fetchall()]

    assert anyio.run(databases) == []


def _age(file: Path, session_ids: list[str], days: float) -> None:
    """Make these sessions' turns `days` old."""
    with closing(sqlite3.connect(file)) as db, db:
        db.executemany(
            "UPDATE memory_turns SET created_at = created_at - ? WHERE session_id = ?",
            [(days * 86_400, session_id) for session_id in session_ids],
        )


def test_sessions_not_used_for_keep_days_are_deleted_and_prune_shrinks_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Chat memory had no retention: sessions stayed for ever, and the file never shrank."""
    file = tmp_path / "memory.sqlite3"

    async def keep(session_ids: list[str]) -> None:
        store = SQLiteStore(file)
        for session_id in session_ids:
            await store.append(session_id, "k", [UserMessage(content="x" * 20_000)], [5000])
        await store.aclose()

    old = [f"old{n}" for n in range(200)]
    anyio.run(keep, [*old, "recent"])
    _age(file, old, 40)
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[gateway.memory]\nurl = "sqlite:///memory.sqlite3"\nkeep_days = 30\n'
        '[tools.calculator]\nbuiltin = "calculator"\n'
    )
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    common = ["--config", str(config)]
    run = ["run", "Hi", *common, "--model", f"scripted:{script}", "--session", "s1", "--no-store"]
    assert main(run) == 0
    capsys.readouterr()
    assert main(["sessions", "list", *common, "--json"]) == 0
    listed = sorted(info["session_id"] for info in json.loads(capsys.readouterr().out))
    assert listed == ["recent", "s1"]  # the 200 older than keep_days went when `run` began
    # A chat on one of them says it starts a new session, and why that may be.
    with subprocess.Popen(
        [str(EXECUTABLE), "chat", "--session", "old7", *common, "--model", f"scripted:{script}"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as chat:
        said = chat.communicate(timeout=30)[1]
    assert said.startswith(
        "agent assistant, new session old7 (none of that id is stored: sessions unused for 30 "
        "days are deleted) (/tools"
    ), said

    anyio.run(keep, old)
    _age(file, old, 10)
    size = file.stat().st_size
    assert main(["sessions", "prune", *common]) == 2
    assert "sessions prune needs --older-than DAYS" in capsys.readouterr().err
    assert main(["sessions", "prune", "--older-than", "7", *common]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"deleted 200 sessions not used for 7 days from {file}"
    assert said[1].startswith(f"{file}: ")
    assert file.stat().st_size < size / 2  # 4 MB of turns given back, not left as free pages
    assert main(["sessions", "list", *common, "--json"]) == 0
    listed = sorted(info["session_id"] for info in json.loads(capsys.readouterr().out))
    assert listed == ["recent", "s1"]
