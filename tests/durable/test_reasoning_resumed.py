"""A stored run on OpenAI's Responses API (`openai-responses:`) killed while a call waits for
approval, resumed by another process: the model's encrypted reasoning of the first step goes
back, exactly as it came, before its function call and the call's output; `runs show` shows
its summary as the call's thinking."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.servers.responses_stub import responses_stub

from .cli_runs import cli, list_runs, start_run, stop_run

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

MODEL = "openai-responses:gpt-5-mini"
REASONING: dict[str, Any] = {
    "id": "rs_68af4030baa48193b0b43b4c2a176a1a",
    "type": "reasoning",
    "encrypted_content": "gAAAAABor0AyJZ7bBqP1x0kT3mVn2Qe8Rr5Yh1Lw6SdA9cF4gU0iO7pK3jH2tZ5x==",
    "summary": [{"type": "summary_text", "text": "**Logging G**\n\nThe guarded tool logs it."}],
}
DONE: dict[str, Any] = {
    "id": "msg_2",
    "type": "message",
    "status": "completed",
    "content": [{"type": "output_text", "annotations": [], "text": "G is done"}],
    "role": "assistant",
}


async def test_a_resumed_run_sends_the_first_steps_reasoning_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
        '[agents.assistant]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
    )
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": f'{{"log": "{log}", "name": "G"}}',
        "call_id": "call_g1",
        "name": "guarded",
    }
    with responses_stub([[REASONING, call], [DONE]]) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-responses")
        run = await start_run("go", "--config", str(config), "--store", store, "--model", MODEL)
        try:
            await run.until("waiting for approval: guarded")
            run.process.send_signal(signal.SIGKILL)
            assert await run.process.wait() == -signal.SIGKILL
        finally:
            await stop_run(run)
        [waiting] = list_runs(store)
        approved = cli("runs", "approve", waiting["run_id"], "call_g1", "--store", store)
        assert approved.returncode == 0, approved.stderr
        resumed = cli("resume", waiting["run_id"], "--store", store, "--model", MODEL)
        assert (resumed.returncode, resumed.stdout) == (0, "G is done\n"), resumed.stderr
    assert log.read_text().splitlines() == ["start G", "end G"]
    first, second = stub.requests
    assert first["store"] is False
    assert first["include"] == ["reasoning.encrypted_content"]
    sent = second["input"]
    assert sent[-3:-1] == [REASONING, call]
    assert {key: sent[-1][key] for key in ("type", "call_id")} == {
        "type": "function_call_output",
        "call_id": "call_g1",
    }
    assert "G done" in sent[-1]["output"]
    shown = cli("runs", "show", waiting["run_id"], "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "thinking: **Logging G**" in shown.stdout  # its reasoning summary
