from __future__ import annotations

import signal
from collections.abc import Iterator

# Imported here, at a shallow stack: its pytest plugin otherwise imports it while printing the
# summary of a failing run, where Python 3.11.7's compiler can fail ("AST constructor recursion
# depth mismatch") and hide the failures.
import hypothesis  # noqa: F401  # pyright: ignore[reportUnusedImport]
import pytest

from tests.servers.databases import (
    PostgresCluster,
    RedisServer,
    postgres_cluster,
    postgres_server,
    redis_server,
)
from tests.stopping import (
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_timeout_cancel_timer,
    pytest_timeout_set_timer,
)

# Hooks that keep the run stoppable: every test's timeout stops it, Ctrl-C stops the run.
__all__ = [
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_timeout_cancel_timer",
    "pytest_timeout_set_timer",
]

# Started in the background by a non-interactive shell, pytest ignores SIGINT and SIGQUIT, and
# so would every gateway it spawns (an ignored signal survives exec): the Ctrl-C and Ctrl-\
# tests need them handled.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _private_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat memory's default file goes to a temp dir, never the user's data directory."""
    monkeypatch.setenv("AGENT_GATEWAY_DATA_DIR", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the whole session; its `postgres` database's URL."""
    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL server of the test's own, to stop and start again (a store that goes
    away, a server that restarts)."""
    with postgres_cluster() as started:
        yield started


@pytest.fixture(scope="session")
def redis_instance() -> Iterator[RedisServer]:
    """A real Redis server for the whole session, by TCP and by its Unix socket."""
    with redis_server() as started:
        yield started


@pytest.fixture(scope="session")
def redis_url(redis_instance: RedisServer) -> str:
    return redis_instance.url
