"""`python -m bench stdio-front`: a smoke run in both eras, a checkout's twin included. Every
arm answers every call (the script fails on an error result) and comes out with its figures;
no timing is asserted. The peers take part only where their venvs exist (not in CI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_command import REPO, run_bench

pytestmark = pytest.mark.integration

OURS = ["direct-stdio", "agent-gateway", "agent-gateway-http"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_smoke_run_gives_every_arm_its_figures(era: str, tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = run_bench(
        "stdio-front", "--calls", "100", "--era", era, "--checkout", str(REPO), "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    names = [row["arm"] for row in rows]
    assert names[:5] == [*OURS, f"agent-gateway@{REPO.name}", f"agent-gateway-http@{REPO.name}"]
    if era == "modern":
        assert len(names) == 5  # the peers speak the handshake era only
    for row in rows:
        assert row["calls"] == 100
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
        assert row["cpu_ms"] > 0
    assert rows[0]["p50_x"] == 1.0
    assert f"era {era}" in done.stdout
