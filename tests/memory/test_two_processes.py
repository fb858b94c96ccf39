"""`run --session` in one process, then in another: the second model call carries the whole
first turn, kept in SQLite (the default), PostgreSQL or Redis."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.openai_stub import openai_stub

pytestmark = pytest.mark.integration

EXECUTABLE = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))


def agent_gateway(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert EXECUTABLE is not None, "the package is not installed (pip install -e .)"
    return subprocess.run(
        [EXECUTABLE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("store", ["sqlite", "postgres", "redis"])
def test_a_conversation_goes_on_in_another_process(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    memory = "" if store == "sqlite" else f'memory = "{request.getfixturevalue(f"{store}_url")}"\n'
    answers = [
        {"name": "calculator", "arguments": {"expression": "6 * 7"}},
        "It is 42, Ada.",
        "Your name is Ada.",
    ]
    with openai_stub(answers) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(
            f"[gateway]\n{memory}"
            '[tools.calculator]\nbuiltin = "calculator"\n'
            f'[agents.assistant]\nmodel = "{model.spec}"\ntools = ["calculator"]\n'
        )
        session = f"s1-{store}"
        first = agent_gateway("run", "I am Ada. What is 6 * 7?", "--session", session, cwd=tmp_path)
        assert (first.returncode, first.stdout) == (0, "It is 42, Ada.\n"), first.stderr
        second = agent_gateway("run", "What is my name?", "--session", session, cwd=tmp_path)
        assert (second.returncode, second.stdout) == (0, "Your name is Ada.\n"), second.stderr
        sent = model.messages(2)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "I am Ada. What is 6 * 7?"
    call = sent[2]["tool_calls"][0]
    assert call["function"]["name"] == "calculator"
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == (call["id"], "42")
    assert sent[4]["content"] == "It is 42, Ada."
    assert sent[5]["content"] == "What is my name?"
    if store == "sqlite":
        assert (Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3").is_file()
