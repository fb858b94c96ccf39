"""Real PostgreSQL and Redis servers for the memory stores' tests, on 127.0.0.1 in temp dirs.

`.ci/run` installs them (and the non-root user PostgreSQL must run as); each server here is
started for the test session and stopped, its directory removed, when the session ends. A
missing server skips its tests with the reason (a failure under
`AGENT_GATEWAY_REQUIRE_SERVERS=1`).
"""

from __future__ import annotations

import os
import pwd
import random
import selectors
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "PG_USER",
    "PostgresCluster",
    "RedisServer",
    "free_port",
    "missing",
    "postgres_cluster",
    "postgres_server",
    "redis_server",
]

PG_USER = "pgtest"
"""PostgreSQL refuses to run as root: as root, it runs as this user (`.ci/run` creates it)."""
START_TIMEOUT = 30.0


def missing(reason: str) -> NoReturn:
    if os.environ.get("AGENT_GATEWAY_REQUIRE_SERVERS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    """A port free now for a server the test starts later (nginx, PostgreSQL, a gateway).

    Not one the kernel hands out itself (`bind(0)`): those come from the ephemeral range,
    which every outgoing connection of the other tests running meanwhile draws from too, and
    one of them took nginx's port before nginx bound it (`Address already in use`). Below
    that range only a server asking for the very port can take it."""
    low = _ephemeral_low()
    while True:
        port = random.randrange(10000, low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _postgres_binary(name: str) -> str | None:
    """On PATH, or where Debian's packages put it (not on PATH)."""
    found = shutil.which(name)
    if found is not None:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: p.parts)
    return str(versions[-1]) if versions else None


class PostgresCluster:
    """A PostgreSQL cluster in a temp dir, to stop and start again (a store that goes away).

    Reached over TCP only: its settings are in its `postgresql.conf`, not in pg_ctl's `-o`
    (a string pg_ctl splits on spaces, so a temp dir with one broke it), and it makes no
    Unix-domain socket (whose path may not pass 107 bytes, which a long temp dir did)."""

    def __init__(self, directory: Path, as_user: list[str], pg_ctl: str) -> None:
        self.directory, self._as_user, self._pg_ctl = directory, as_user, pg_ctl
        self.data, self.port = directory / "data", free_port()
        self.log = directory / "log"

    @property
    def url(self) -> str:
        """Its `postgres` database's URL."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def configure(self) -> None:
        """Its settings, after `initdb` made the data directory."""
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
                "fsync = off\n"
            )

    def start(self) -> None:
        self._ctl("-l", str(self.log), "-w", "-t", str(int(START_TIMEOUT)), "start")

    def stop(self, mode: str = "fast", *, check: bool = True) -> None:
        """Stopped: its connections are closed, and new ones refused."""
        self._ctl("-m", mode, "-w", "stop", check=check)

    def _ctl(self, *args: str, check: bool = True) -> None:
        command = [*self._as_user, self._pg_ctl, "-D", str(self.data), *args]
        _run(command, check=check, timeout=START_TIMEOUT + 5, log=self.log)


def _run(command: list[str], *, check: bool = True, timeout: float, log: Path | None) -> None:
    """`command`, which failing raises with what it said and the end of the server's `log`
    (removed with the cluster's directory, so said here or never)."""
    done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if not check or done.returncode == 0:
        return
    said = (done.stderr + done.stdout).decode(errors="replace").strip()
    message = f"{shlex.join(command)} exited with {done.returncode}: {said or '(nothing said)'}"
    if log is not None and log.exists():
        tail = log.read_text(errors="replace").strip()[-2000:]
        message += f"\nthe server's log ({log}) ends:\n{tail}"
    raise RuntimeError(message)


def _cluster_directory(as_user: list[str], owner: pwd.struct_passwd | None) -> Path:
    """A fresh directory for a cluster, which `owner` (who PostgreSQL runs as, when this is
    root) owns and reaches: under the temp dir, else under /tmp (a temp dir inside one only
    root may enter, as /root/tmp, cannot be reached)."""
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        directory = Path(tempfile.mkdtemp(prefix="agent-gateway-pg-", dir=base))
        if owner is None:
            return directory
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        reached = [*as_user, "test", "-w", str(directory)]
        if subprocess.run(reached, check=False, timeout=START_TIMEOUT).returncode == 0:
            return directory
        shutil.rmtree(directory)
    missing(f"the user {PG_USER!r} reaches no temp dir to run PostgreSQL in (TMPDIR, /tmp)")


@contextmanager
def postgres_cluster() -> Generator[PostgresCluster]:
    """A fresh PostgreSQL cluster, started; stopped and removed after the block."""
    initdb, pg_ctl = _postgres_binary("initdb"), _postgres_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        missing("PostgreSQL is not installed (initdb, pg_ctl): apt-get install postgresql")
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(PG_USER)
        except KeyError:
            missing(f"no user {PG_USER!r} to run PostgreSQL as: useradd -m {PG_USER}")
        as_user = ["runuser", "-u", PG_USER, "--"]
    directory = _cluster_directory(as_user, owner)
    cluster = PostgresCluster(directory, as_user, pg_ctl)
    try:
        initialize = [*as_user, initdb, "-D", str(cluster.data), "-U", "postgres", "-A", "trust"]
        _run(initialize, timeout=START_TIMEOUT, log=None)
        cluster.configure()
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate", check=False)
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def postgres_server() -> Generator[str]:
    """A fresh PostgreSQL cluster; yields the URL of its `postgres` database."""
    with postgres_cluster() as cluster:
        yield cluster.url


SOCKET_PATH_MAX = 107
"""The longest path a Unix-domain socket may have on Linux (`sun_path`, 108 bytes with NUL)."""


@dataclass(frozen=True)
class RedisServer:
    url: str
    """By TCP: `redis://127.0.0.1:PORT/0`."""
    socket_url: str
    """The same server by its Unix socket: `unix:///DIR/redis.sock?db=0`."""


@contextmanager
def redis_server() -> Generator[RedisServer]:
    """A fresh redis-server with no persistence, on 127.0.0.1 and on a Unix socket (owner
    only) in its temp dir (under /tmp where the temp dir's path is too long for one)."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server is not installed: apt-get install redis-server")
    directory = Path(tempfile.mkdtemp(prefix="agent-gateway-redis-"))
    if len(str(directory / "redis.sock").encode()) > SOCKET_PATH_MAX:
        shutil.rmtree(directory)
        directory = Path(tempfile.mkdtemp(prefix="agent-gateway-redis-", dir="/tmp"))
    socket_path = directory / "redis.sock"
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(directory),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_line(process, b"Ready to accept connections")
        # Keep reading its log, or a full pipe would stop the server.
        threading.Thread(target=_drain, args=(process,), daemon=True).start()
        yield RedisServer(f"redis://127.0.0.1:{port}/0", f"unix://{socket_path}?db=0")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_for_line(process: subprocess.Popen[bytes], marker: bytes) -> None:
    """Read the server's output until `marker` (the server says it is ready), or fail."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while marker not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise TimeoutError(f"the server did not start: {seen[-500:]!r}")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the server exited: {seen[-500:]!r}")
            seen += chunk


def _drain(process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    try:
        while os.read(process.stdout.fileno(), 65536):
            pass
    except OSError:  # closed when the server is stopped
        return
