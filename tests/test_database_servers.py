"""The PostgreSQL servers the tests start (`tests/servers/databases.py`): started wherever
Python's temp dir is, and a start that fails says why."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.servers.databases import postgres_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def outside() -> Iterator[Path]:
    """A fresh directory in the usual temp dir: the test's own `tmp_path` is inside pytest's
    private one, which the user PostgreSQL runs as (when this is root) cannot enter."""
    directory = Path(tempfile.mkdtemp(prefix="agent-gateway-test-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


@pytest.mark.parametrize("name", ["tmp with spaces", "l" * 100], ids=["spaces", "long"])
def test_a_cluster_starts_in_a_temp_dir_with_spaces_or_a_long_path(
    outside: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pg_ctl split its -o options (the socket directory among them) on spaces, and a socket
    path past 107 bytes could not be made: neither cluster started."""
    temp = outside / name
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with postgres_cluster() as cluster, psycopg.connect(cluster.url) as connection:
        assert cluster.directory.parent == temp
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_a_cluster_starts_when_the_temp_dir_is_inside_one_only_root_enters(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root, PostgreSQL runs as another user, which could not reach such a temp dir (as
    /root/tmp): initdb failed. The cluster goes to /tmp then."""
    private = outside / "private"
    private.mkdir(mode=0o700)
    temp = private / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with postgres_cluster() as cluster, psycopg.connect(cluster.url) as connection:
        assert cluster.directory.parent == (Path("/tmp") if os.geteuid() == 0 else temp)
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_a_start_that_fails_says_what_pg_ctl_and_the_server_said() -> None:
    """Only "Command [...] returned non-zero exit status 1" reached the developer: pg_ctl's
    output was kept from them, and the server's log removed with its directory."""
    with postgres_cluster() as cluster:
        cluster.stop()
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", cluster.port))
            taken.listen()
            with pytest.raises(RuntimeError) as failed:
                cluster.start()
    said = str(failed.value)
    assert "pg_ctl: could not start server" in said
    assert "the server's log" in said
    assert "Address already in use" in said  # the server's own reason, from its log
