"""An optional extra not installed (the Redis driver, the OpenTelemetry SDK) is bad input,
exit 2, naming what to install: chat memory on Redis exited 1, as if the store had failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration


def without(modules: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where `modules` cannot be imported, as when not installed."""
    hidden = "".join(f"sys.modules[{name!r}] = None; " for name in modules)
    code = f"import sys; {hidden}from gateway.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )


def test_chat_memory_on_redis_without_its_driver_is_bad_input() -> None:
    done = without(
        ["redis", "redis.asyncio"], "sessions", "list", "--store", "redis://127.0.0.1:1/0"
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: Redis memory needs its driver: pip install 'agent-gateway[redis]' ("
    )


def test_otel_export_without_the_sdk_is_bad_input(tmp_path: Path) -> None:
    script = tmp_path / "answers.json"
    script.write_text('[{"content": "Hi."}]')
    done = without(
        ["opentelemetry.sdk", "opentelemetry.sdk.trace"],
        *("run", "hello", "--model", f"scripted:{script}", "--no-store", "--otel"),
    )
    assert (done.returncode, done.stderr) == (
        2,
        "error: OpenTelemetry export needs the SDK: pip install 'agent-gateway[otel]'\n",
    )
