"""`python -m bench COMMAND` as the README runs it, from this checkout, for the bench tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_bench(
    command: str, *options: str, timeout: float = 100
) -> subprocess.CompletedProcess[str]:
    """Run it to the end; its output as text (check `returncode` yourself)."""
    return subprocess.run(
        [sys.executable, "-m", "bench", command, *options],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
