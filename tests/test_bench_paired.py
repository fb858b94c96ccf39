"""`python -m bench paired`: two fronts timed call by call against each other.

A smoke run of each call kind: both fronts really pass the calls through (the script checks
every answer's text and fails otherwise) and the table and the ratios are printed. No timing is
asserted; a path that is not a checkout is refused before anything starts.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.bench_command import REPO, run_bench

pytestmark = pytest.mark.integration

_NUMBERS = r"(\s+\d+\.\d{3}){4}\s+\d+\.\d"
"""p50, p90, mean and CPU per call to the microsecond, calls/s to a tenth."""


def _paired(*options: str) -> subprocess.CompletedProcess[str]:
    return run_bench("paired", *options)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("call", "first"),
    [
        ((), "16 echo calls through each side (one client), modern"),
        (("--blob", "20000", "--protocol", "auto"), "16 blob(20000) calls through each side"),
        (("--clients", "2", "--turn", "4"), "16 echo calls through each side (2 clients at once)"),
        (("--asking",), "16 echo calls through each side (one client, 2025-era sessions declaring"),
        (("--asking", "modern"), "16 echo calls through each side (one client, 2026-07-28 client"),
        (("--pause", "2"), "16 echo calls through each side (one client, 2 ms quiet after each"),
    ],
)
def test_a_smoke_run_times_both_fronts_and_prints_their_ratio(
    call: tuple[str, ...], first: str
) -> None:
    done = _paired("--against", str(REPO), "--calls", "16", "--warmup", "8", *call)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(first), lines[0]
    for name, line in zip(("base", "against"), lines[2:4], strict=True):
        assert re.match(rf"{name}{_NUMBERS}\s+{re.escape(str(REPO))}$", line), line
        assert all(float(value) > 0 for value in line.split()[1:6])
    assert re.match(r"ratio(\s+\d+\.\d{3}x){5}\s+\(against / base\)$", lines[4]), lines[4]


@pytest.mark.timeout(120)
def test_the_bare_floor_and_a_direct_call_are_sides_too() -> None:
    done = _paired("--base", "floor-bare", "--against", "direct", "--calls", "8", "--warmup", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert re.match(rf"base{_NUMBERS}\s+floor-bare$", lines[2]), lines[2]
    # No front, no front's CPU.
    assert re.match(r"against(\s+\d+\.\d{3}){3}\s+-\s+\d+\.\d\s+direct$", lines[3]), lines[3]
    assert re.match(r"ratio(\s+\d+\.\d{3}x){3}\s+-(\s+\d+\.\d{3}x)", lines[4]), lines[4]


@pytest.mark.timeout(60)
def test_a_directory_that_is_not_a_checkout_is_refused(tmp_path: Path) -> None:
    done = _paired("--against", str(tmp_path), "--calls", "1")
    assert done.returncode != 0
    assert f"{tmp_path}: not a checkout of agent-gateway" in done.stderr
