"""The peer benchmark's smoke run (`python -m bench peers --quick`): every arm and workload
comes out with numbers in the table and the JSON. No timing is asserted: the machine is shared.

The peers (mcp-proxy, FastMCP) take part only where their venvs exist (a full run creates them);
CI has none, so there it is our arms, the direct ones and the floors (`bench/peers/floors.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.peers.arms import ARMS, twin
from bench.peers.venvs import is_installed
from bench.peers.workloads import WORKLOADS
from tests.bench_command import run_bench

pytestmark = pytest.mark.integration


NOT_APPLICABLE = {
    ("direct-stdio", "idle_sessions"),
    ("direct-stdio", "cycles"),
    ("direct-stdio", "clients10"),
    ("direct-stdio", "clients50"),
    ("direct-stdio", "asking"),
    ("direct-stdio", "asking_modern"),
    ("mcp-proxy", "agent"),
    ("fastmcp", "agent"),
    ("fastmcp-fresh", "agent"),
    ("floor-relay", "agent"),
    ("floor-bare", "agent"),
}
"""Workloads an arm cannot do (shown as n/a with the reason)."""

NO_FIGURE = {
    (arm, "servers", key)
    for arm in ("direct", "direct-stdio", "mcp-proxy", "floor-relay", "floor-bare")
    for key in ("coldn_ms", "warmn_ms", "rssn_mb", "coldn_x1", "answeredn_ms")
} - {
    ("direct", "servers", "warmn_ms"),
    ("direct", "servers", "answeredn_ms"),
    ("direct-stdio", "servers", "coldn_ms"),
    ("direct-stdio", "servers", "coldn_x1"),
} | {
    ("direct-stdio", "servers", "answered1_ms"),
    ("direct", "agent", "overhead_ms"),
    ("direct-stdio", "agent", "overhead_ms"),
}
"""Single figures an arm cannot have: no aggregate of N servers (direct lists as many tools
from one server; direct over stdio starts as many servers at once), no raw request over
stdio, no agent."""


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench")
    done = run_bench("peers", "--quick", "--out", str(out), timeout=840)
    assert done.returncode == 0, done.stderr[-3000:]
    (out / "run.log").write_text(done.stderr)  # the run's own log, for a failure's message
    return done.stdout, json.loads((out / "peers.json").read_text()), out


def expected_arms() -> list[str]:
    return [
        arm.name for arm in ARMS if arm.default and (arm.peer is None or is_installed(arm.peer))
    ]


@pytest.mark.timeout(900)
def test_every_arm_has_numbers_for_every_workload_in_the_json(
    smoke_run: tuple[str, dict[str, Any], Path],
) -> None:
    _stdout, document, out = smoke_run
    assert list(document["arms"]) == expected_arms()
    assert list(document["workloads"]) == list(WORKLOADS)
    summary = document["summary"]
    log = (out / "run.log").read_text()[-4000:]
    for arm in expected_arms():
        for workload, spec in document["workloads"].items():
            entry = summary[arm][workload]
            assert "failed" not in entry, (arm, workload, entry, log)
            if (arm, workload) in NOT_APPLICABLE:
                assert entry["n/a"], (arm, workload)
                continue
            for figure in spec["figures"]:
                median = entry["figures"][figure["key"]]["median"]
                if (arm, workload, figure["key"]) in NO_FIGURE:
                    assert median is None, (arm, workload, figure["key"])
                else:
                    assert isinstance(median, int | float), (arm, workload, figure["key"], median)


@pytest.mark.timeout(900)
def test_ratios_to_direct_come_from_the_same_round(
    smoke_run: tuple[str, dict[str, Any], Path],
) -> None:
    _stdout, document, _out = smoke_run
    (round_one,) = document["rounds"]
    direct = round_one["direct"]["sequential"]["figures"]["p50_ms"]
    ours = round_one["agent-gateway"]["sequential"]["figures"]["p50_ms"]
    figure = document["summary"]["agent-gateway"]["sequential"]["figures"]["p50_ms"]
    assert figure["ratio"] == pytest.approx(ours / direct)
    assert document["summary"]["direct"]["sequential"]["figures"]["p50_ms"]["ratio"] == 1.0


@pytest.mark.timeout(900)
def test_the_table_shows_every_workload_and_arm_and_says_which_peers_were_skipped(
    smoke_run: tuple[str, dict[str, Any], Path],
) -> None:
    stdout, _document, out = smoke_run
    for workload in WORKLOADS:
        section = stdout.split(f"### {workload}:")[1].split("###")[0]
        for arm in expected_arms():
            row = next(line for line in section.splitlines() if line.startswith(f"| {arm} |"))
            assert "failed" not in row
    assert (out / "peers.md").read_text().strip() in stdout
    for arm in ARMS:
        if arm.peer is not None and not is_installed(arm.peer):
            assert f"skipped {arm.name}: its venv" in stdout
    assert (out / "peers.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.timeout(900)
def test_everything_listened_on_loopback_only_and_was_stopped(
    smoke_run: tuple[str, dict[str, Any], Path],
) -> None:
    _stdout, document, _out = smoke_run
    assert document["meta"]["listening"] == ["127.0.0.1"]
    assert document["meta"]["leftover_processes"] == []


def test_a_twin_on_another_checkout_is_the_same_arm_but_for_its_code(tmp_path: Path) -> None:
    modern = next(arm for arm in ARMS if arm.name == "agent-gateway-modern")
    on_asyncio = next(arm for arm in ARMS if arm.name == "agent-gateway-asyncio")
    twin_modern, twin_asyncio = twin(modern, tmp_path / "base"), twin(on_asyncio, tmp_path / "b")
    assert twin_modern.name == "agent-gateway-modern@base"
    assert (twin_modern.kind, twin_modern.stdio, twin_modern.protocol) == (
        "agent-gateway",
        False,
        "modern",
    )
    assert twin_modern.env == (("PYTHONPATH", str((tmp_path / "base").resolve())),)
    assert twin_asyncio.env[0] == ("AGENT_GATEWAY_EVENT_LOOP", "asyncio")
