"""A stored run of two items whose models give the same call ids: each item's gated call
inside a sub-agent is listed on its own (its name has its item: `1:call_leaf/tool 0 call_d`),
with its item, and runs only on its own decision; `runs show`'s tree names each item's
sub-agent call and marks its call waiting. A run stored by an older agent-gateway, which
listed item 1's call under item 0's name, resumes: that question's decision goes to the call
it showed, and the other call is asked under a name of its own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from agent import AgentItem, AgentOptions, ScriptedAnswer, ScriptedCall
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.cli import main
from gateway.durable import CallNode, DurableRuns, RunOptions, call_tree, open_runs
from gateway.errors import GatewayError
from gateway.run_state import RunResult, RunState
from gateway.trace import new_id
from tests.prompt_model import PromptModel
from toolkits import FunctionToolkit, function_tool

pytestmark = pytest.mark.anyio

ITEM_0 = "call_leaf/tool 0 call_d"
ITEM_1 = "1:call_leaf/tool 0 call_d"


class Erased(list[str]):
    """The texts erased, in order; `until` waits for one."""

    def __init__(self) -> None:
        super().__init__()
        self._more = anyio.Event()

    async def erase(self, text: str) -> str:
        """Erase a text."""
        self.append(text)
        self._more.set()
        return f"erased {text}"

    async def until(self, text: str) -> None:
        with anyio.fail_after(20):
            while text not in self:
                self._more = anyio.Event()
                await self._more.wait()


def _gateway(erased: Erased) -> Gateway:
    """Items `q0`, `q1` each call agent `leaf` as `call_leaf`; its gated `erase` call is
    `call_d` in both, erasing `T0` or `T1`."""

    def calls(tool: str, call_id: str, **arguments: JsonValue) -> ScriptedAnswer:
        return ScriptedAnswer(tool_calls=[ScriptedCall(name=tool, id=call_id, arguments=arguments)])

    model = PromptModel(
        {
            **{
                f"q{n}": [calls("leaf", "call_leaf", prompt=f"erase {n}"), f"top {n}"]
                for n in (0, 1)
            },
            **{f"erase {n}": [calls("erase", "call_d", text=f"T{n}"), f"leaf {n}"] for n in (0, 1)},
        }
    )
    return Gateway(
        [FunctionToolkit("log", [function_tool(erased.erase, name="erase")])],
        [
            AgentSpec("top", model, tools=["leaf"], options=AgentOptions(batch_size=2)),
            AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"])),
        ],
    )


class Asked:
    """Hears of each call that starts waiting (listed in the store by then)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._more = anyio.Event()

    async def __call__(self, request: ApprovalRequest) -> None:
        self.calls.append(request.call)
        self._more.set()

    async def until(self, count: int) -> None:
        with anyio.fail_after(20):
            while len(self.calls) < count:
                self._more = anyio.Event()
                await self._more.wait()


async def _begin(runs: DurableRuns, asked: Asked) -> str:
    state = RunState(
        run_id=new_id(), agent="top", items=[AgentItem(prompt="q0"), AgentItem(prompt="q1")]
    )
    await runs.begin(state, RunOptions(on_approval=asked))
    return state.run_id


async def _stop(runs: DurableRuns, run_id: str) -> None:
    runs.interrupt(run_id)
    with anyio.fail_after(20), pytest.raises(GatewayError, match="interrupted"):
        await runs.follow(run_id, pause=False)


def _sub_agent_calls(calls: list[CallNode]) -> dict[int | None, tuple[str, str | None, bool]]:
    """Each item's sub-agent call in `runs show`'s tree: its name, and its gated call's id
    and whether it waits for approval."""
    shown: dict[int | None, tuple[str, str | None, bool]] = {}
    for call in calls:
        if call.kind == "tool":
            [gated] = [c for c in call.calls if c.kind == "tool"]
            shown[call.item] = (call.name, gated.call_id, gated.waiting_approval)
    return shown


async def test_each_items_call_is_listed_and_decided_on_its_own(store: str) -> None:
    erased = Erased()
    asked = Asked()
    async with open_runs(store) as runs:
        runs.use(_gateway(erased))
        run_id = await _begin(runs, asked)
        await asked.until(2)
        waiting = {r.call: (r.short, r.item, r.input) for r in (await runs.get(run_id)).waiting}
        assert waiting == {
            ITEM_0: ("call_leaf/call_d", 0, {"text": "T0"}),
            ITEM_1: ("1:call_leaf/call_d", 1, {"text": "T1"}),
        }
        steps, state = await runs.steps(run_id), await runs.state(run_id)
        tree = call_tree(steps, state=state, in_flight=True, asked=list(waiting))
        assert _sub_agent_calls(tree) == {0: ("leaf", "call_d", True), 1: ("leaf", "call_d", True)}

        await runs.decide(run_id, ITEM_0, Decision(approved=True))
        with anyio.fail_after(20):
            still = await runs.follow(run_id, decided=[ITEM_0])
        assert isinstance(still, list)
        assert [r.call for r in still] == [ITEM_1]  # item 1's call was not decided with it
        await runs.decide(run_id, ITEM_1, Decision(approved=False, message="not T1"))
        with anyio.fail_after(20):
            result = await runs.follow(run_id, decided=[ITEM_0, ITEM_1])
    assert isinstance(result, RunResult)
    assert [item.output for item in result.items] == ["top 0", "top 1"]
    assert erased == ["T0"]


def test_two_items_calls_of_one_id_wait_under_two_short_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --items`: both items' models give their gated calculator call the id `c1`. They
    wait as `c1` (item 0's) and `1:c1` (item 1's), the names `runs approve` takes, and
    approving `1:c1` runs item 1's call alone."""
    ask = [
        {"tool_calls": [{"name": "calculator", "id": "c1", "arguments": {"expression": e}}]}
        for e in ("1+1", "2+2")
    ]
    (tmp_path / "model.json").write_text(json.dumps(ask))
    (tmp_path / "c.toml").write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "scripted:{tmp_path / "model.json"}"\n'
        'tools = ["calculator"]\nrequire_approval = ["calculator"]\nbatch_size = 2\n'
    )
    (tmp_path / "items.jsonl").write_text('"first"\n"second"\n')
    store = ["--state-dir", str(tmp_path / "state")]
    run = ["run", "--items", str(tmp_path / "items.jsonl"), "--config", str(tmp_path / "c.toml")]
    assert main([*run, *store, "--no-wait", "--json"]) == 3
    stopped = json.loads(capsys.readouterr().out)
    waiting = {w["short"]: (w["call"], w["item"], w["input"]) for w in stopped["waiting"]}
    assert waiting == {
        "c1": ("tool 0 c1", 0, {"expression": "1+1"}),
        "1:c1": ("tool 1 c1", 1, {"expression": "2+2"}),
    }
    run_id = stopped["run_id"]
    assert main(["runs", "approve", run_id, "1:c1", *store]) == 0
    capsys.readouterr()
    assert main(["resume", run_id, "--no-wait", "--json", *store]) == 3
    again = json.loads(capsys.readouterr().out)
    assert [(w["short"], w["item"]) for w in again["waiting"]] == [("c1", 0)]
    assert main(["runs", "show", run_id, "--json", *store]) == 0
    calls = json.loads(capsys.readouterr().out)["calls"]
    ran = {c["item"]: c["output"] for c in calls if c["kind"] == "tool"}
    assert ran == {0: None, 1: {"response": "4"}}  # item 0's still waits


def _list_as_an_older_version(path: Path, run_id: str) -> None:
    """The run's waiting calls as an older agent-gateway listed them: item 1's call under
    item 0's name (which it shared), said to be of item 0."""
    with sqlite3.connect(path) as db:
        [(value,)] = db.execute(
            "SELECT value FROM workflow_events WHERE workflow_uuid = ? AND key = 'approvals'",
            (run_id,),
        )
        listed = json.loads(value)
        older = {ITEM_0: {**listed[ITEM_1], "call": ITEM_0, "item": 0}}
        db.execute(
            "UPDATE workflow_events SET value = ? WHERE workflow_uuid = ? AND key = 'approvals'",
            (json.dumps(older), run_id),
        )


async def test_a_run_listed_by_an_older_version_resumes_each_call_on_its_own_decision(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    erased = Erased()
    async with open_runs(f"sqlite:///{path}") as runs:
        runs.use(_gateway(erased))
        run_id = await _begin(runs, asked := Asked())
        await asked.until(2)
        await _stop(runs, run_id)
        _list_as_an_older_version(path, run_id)
        [listed] = (await runs.get(run_id)).waiting
        assert (listed.call, listed.input) == (ITEM_0, {"text": "T1"})
        # Decided as the listing showed it: erase T1.
        await runs.decide(run_id, ITEM_0, Decision(approved=True))

        await runs.adopt(run_id, RunOptions(on_approval=(again := Asked())))
        with anyio.fail_after(20):
            still = await runs.follow(run_id, decided=[ITEM_0])
        # Item 0's call (erase T0), whose name the older listing gave item 1's, takes no
        # decision made on that one: it waits under a name of its own.
        assert isinstance(still, list)
        assert [(r.call, r.item, r.input) for r in still] == [
            ("0:call_leaf/tool 0 call_d", 0, {"text": "T0"})
        ]
        await erased.until("T1")
        await runs.decide(run_id, still[0].call, Decision(approved=True))
        with anyio.fail_after(20):
            result = await runs.follow(run_id, decided=[ITEM_0, still[0].call])
    assert isinstance(result, RunResult)
    assert [item.output for item in result.items] == ["top 0", "top 1"]
    assert sorted(erased) == ["T0", "T1"]
    assert again.calls == ["0:call_leaf/tool 0 call_d"]
