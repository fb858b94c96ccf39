"""`python -m bench hot-path`: the front's CPU per passed-through call, sockets replaced.

A smoke run of each era the node may speak: the call really passes through (the echo comes
back, from the downstream's recorded answer) and a figure is printed; and one of `--blob`, whose
whole text must come back. No timing is asserted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]


def _hot_path(*options: str) -> str:
    """The last line `python -m bench hot-path` prints with `options`."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "hot-path", *options],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", ["modern", "auto"])
def test_a_smoke_run_passes_calls_through_and_prints_the_cpu_per_call(protocol: str) -> None:
    line = _hot_path("--calls", "40", "--rounds", "2", "--protocol", protocol, "--gap", "0.5")
    assert re.fullmatch(
        rf"front CPU per passed-through call \({protocol} node, gap 0\.5 ms\): "
        r"min \d+\.\d us, median \d+\.\d us \(2 rounds x 40 calls\)",
        line,
    ), line


@pytest.mark.timeout(120)
def test_blob_calls_blob_and_checks_that_its_text_came_back_whole() -> None:
    line = _hot_path("--calls", "5", "--rounds", "1", "--blob", "300000")
    assert line.startswith(
        "front CPU per passed-through call (modern node, gap 0 ms, blob 300000 B): min "
    ), line
