"""A call waiting for approval takes one decision, the first: a later one is refused, naming
the first, whether the run's process lives or not, and of two at the same moment exactly one
wins. On SQLite and PostgreSQL, with the runs in this process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.durable import DurableRuns, open_runs
from gateway.errors import AlreadyDecided, GatewayError
from gateway.run_state import RunResult, RunState
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

from .cli_runs import cli

pytestmark = pytest.mark.anyio

CALL = "tool 0 b"
REJECTED = "The user rejected the tool call to erase; it did not run. The user said: NO"


def _gated(erased: list[str]) -> tuple[Gateway, ScriptedModel]:
    def erase(text: str) -> str:
        """Erase a text."""
        erased.append(text)
        return f"erased {text}"

    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="erase", id="b", arguments={"text": "B"})]
            ),
            "done",
        ]
    )
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    return Gateway([FunctionToolkit("log", [function_tool(erase)])], [spec]), model


async def _waiting(runs: DurableRuns) -> str:
    """A run started here, once its call waits for approval."""
    state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
    await runs.begin(state)
    with anyio.fail_after(20):
        assert await runs.follow(state.run_id) != []
    return state.run_id


async def _stop(runs: DurableRuns, run_id: str) -> None:
    runs.interrupt(run_id)
    with anyio.fail_after(20), pytest.raises(GatewayError, match="interrupted"):
        await runs.follow(run_id, pause=False)


def _told(model: ScriptedModel) -> str:
    [told] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    return told


async def test_a_second_decision_is_refused_while_nobody_runs_the_run(store: str) -> None:
    erased: list[str] = []
    gateway, model = _gated(erased)
    async with open_runs(store) as runs:
        runs.use(gateway)
        run_id = await _waiting(runs)
        await _stop(runs, run_id)  # as if its process had died: the call waits in the store
        info = await runs.get(run_id)
        assert (info.status, info.error) == ("waiting_approval", "interrupted")

        await runs.decide(run_id, CALL, Decision(approved=False, message="NO"), by="ann@desk")
        with pytest.raises(AlreadyDecided) as refused:
            await runs.decide(run_id, CALL, Decision(approved=True), by="bob@desk")
        message = str(refused.value)
        assert message.startswith(
            f"call b of run {run_id} is already decided (denied, by ann@desk at "
        )
        assert message.endswith(" UTC)")
        with pytest.raises(AlreadyDecided):  # the same verdict again is a second decision too
            await runs.decide(run_id, CALL, Decision(approved=False, message="NO"))

        await runs.adopt(run_id)
        with anyio.fail_after(20):
            result = await runs.follow(run_id)
    assert isinstance(result, RunResult)
    assert result.items[0].output == "done"
    assert erased == []  # the denial stood
    assert _told(model) == REJECTED


async def test_of_two_decisions_at_the_same_moment_exactly_one_wins(store: str) -> None:
    erased: list[str] = []
    gateway, model = _gated(erased)
    outcomes: dict[str, str] = {}
    async with open_runs(store) as runs:
        runs.use(gateway)
        run_id = await _waiting(runs)

        async def decide(by: str, decision: Decision) -> None:
            try:
                await runs.decide(run_id, CALL, decision, by=by)
            except AlreadyDecided as exc:
                outcomes[by] = str(exc)
            else:
                outcomes[by] = "sent"

        followed: list[RunResult | list[ApprovalRequest]] = []

        async def follow() -> None:
            followed.append(await runs.follow(run_id, decided=[CALL]))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                # Followed first: the run may end, and leave this process, as soon as the
                # winning decision lands.
                tg.start_soon(follow)
                tg.start_soon(decide, "ann@desk", Decision(approved=False, message="NO"))
                tg.start_soon(decide, "bob@desk", Decision(approved=True))
    [result] = followed
    assert isinstance(result, RunResult)
    [winner] = [by for by, said in outcomes.items() if said == "sent"]
    [loser] = [by for by in outcomes if by != winner]
    verdict = "denied" if winner == "ann@desk" else "approved"
    assert f"is already decided ({verdict}, by {winner} at " in outcomes[loser]
    # The run took the decision its sender was told won.
    assert (erased, _told(model)) == (
        ([], REJECTED) if verdict == "denied" else (["B"], "erased B")
    )


async def test_runs_approve_after_a_denial_exits_2_naming_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    gateway, _model = _gated([])
    async with open_runs(store) as runs:
        runs.use(gateway)
        run_id = await _waiting(runs)
        await _stop(runs, run_id)
        denied = cli("runs", "deny", run_id, "b", "--message", "NO", "--store", store)
        assert denied.returncode == 0, denied.stderr
        assert denied.stderr.startswith('denied b: erase {"text": "B"}')
        approved = cli("runs", "approve", run_id, "--store", store)
    assert approved.returncode == 2
    assert approved.stderr.startswith(
        f"error: call b of run {run_id} is already decided (denied, by "
    )
    assert "approved b" not in approved.stderr
