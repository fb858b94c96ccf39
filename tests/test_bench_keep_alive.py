"""`python -m bench keep-alive`: SDK clients that call again as the server closes their idle
connection.

A smoke run on a 1 s keep-alive: every client of the gateway (which keeps idle connections
120 s) gets every answer; against the short keep-alive some clients may die, which the run
reports rather than fails on. No timing is asserted.
"""

from __future__ import annotations

import re

import pytest

from tests.bench_command import run_bench

pytestmark = pytest.mark.integration

OPTIONS = ("--clients", "6", "--calls", "2", "--pause", "1.0", "--server-keep-alive", "1")


@pytest.mark.timeout(120)
def test_a_smoke_run_counts_the_clients_that_died_and_the_answers() -> None:
    done = run_bench("keep-alive", *OPTIONS)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        found.group(1).strip(): (int(found.group(2)), int(found.group(3)))
        for line in done.stdout.splitlines()
        if (found := re.match(r"(.+?)\s+(\d+)/6\s+(\d+)$", line))
    }
    assert rows["agent-gateway"] == (0, 12)
    died, answered = rows["uvicorn, keep-alive 1 s"]
    assert 6 <= answered == 12 - died  # a client that died got its first answer only
