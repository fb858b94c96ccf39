"""`python -m bench hot-path`: the front's CPU per passed-through call, sockets replaced.

A smoke run of each era the node may speak: the call really passes through (the echo comes
back, from the downstream's recorded answer) and a figure is printed; and one of `--blob`, whose
whole text must come back; one of `--bytecodes`; and one of `--asking`, whose calls are
parked. No timing is asserted.
"""

from __future__ import annotations

import re

import pytest

from tests.bench_command import run_bench

pytestmark = pytest.mark.integration


def _hot_path(*options: str) -> list[str]:
    """The lines `python -m bench hot-path` prints with `options`."""
    done = run_bench("hot-path", *options)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", ["modern", "auto"])
def test_a_smoke_run_passes_calls_through_and_prints_the_cpu_per_call(protocol: str) -> None:
    line = _hot_path("--calls", "40", "--rounds", "2", "--protocol", protocol, "--gap", "0.5")[-1]
    assert re.fullmatch(
        rf"front CPU per passed-through call \({protocol} node, gap 0\.5 ms\): "
        r"min \d+\.\d us, median \d+\.\d us \(2 rounds x 40 calls\)",
        line,
    ), line


@pytest.mark.timeout(120)
def test_blob_calls_blob_and_checks_that_its_text_came_back_whole() -> None:
    line = _hot_path("--calls", "5", "--rounds", "1", "--blob", "300000")[-1]
    assert line.startswith(
        "front CPU per passed-through call (modern node, gap 0 ms, blob 300000 B): min "
    ), line


@pytest.mark.timeout(120)
def test_bytecodes_counts_a_round_by_function() -> None:
    lines = _hot_path("--calls", "20", "--rounds", "1", "--bytecodes")
    total = re.fullmatch(r"bytecodes per passed-through call: (\d+)", lines[1])
    assert total is not None, lines
    rows = [re.fullmatch(r" *(\d+\.\d)  (\S+):(\d+) (\S+)", line) for line in lines[2:]]
    assert len(rows) == 25
    assert all(rows), lines
    # The pass-through's own code is among the busiest (the call really went through it).
    assert any("gateway/server/served/pass_through.py" in line for line in lines[2:])
    assert 1_000 < int(total[1]) < 100_000


@pytest.mark.timeout(120)
def test_asking_parks_each_call_of_a_client_that_declares_roots() -> None:
    lines = _hot_path("--calls", "20", "--rounds", "1", "--asking", "--bytecodes")
    assert lines[0].startswith(
        "front CPU per passed-through call (modern node, gap 0 ms, asking client): min "
    ), lines
    # Parked in the serving run (`pass_through_rounds`), its first round passed through.
    assert any("gateway/server/client_requests/parked_calls.py" in line for line in lines[2:])
