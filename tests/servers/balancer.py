"""A real nginx in front of gateway replicas: round robin, on 127.0.0.1, in a temp dir.

`.ci/run` installs nginx (Debian's package); a missing nginx skips the tests that need it
with the reason (a failure under `AGENT_GATEWAY_REQUIRE_SERVERS=1`). Each response says which
replica answered in `X-Upstream` (each one asked, in order, when it asked several).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream

from tests.server.processes import stop
from tests.servers.databases import missing

__all__ = ["round_robin"]

# Paths relative to the prefix (`-p`, its directory): none to quote, whatever the temp dir.
_CONFIG = """\
daemon off;
worker_processes 1;
pid nginx.pid;
error_log stderr notice;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path body;
    proxy_temp_path proxy;
    fastcgi_temp_path fastcgi;
    uwsgi_temp_path uwsgi;
    scgi_temp_path scgi;
    upstream replicas {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
{next_upstream}
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


@asynccontextmanager
async def round_robin(
    port: int, upstreams: Sequence[str], *, retries: bool = False
) -> AsyncGenerator[str]:
    """nginx on 127.0.0.1:`port` sending requests to `upstreams` (`HOST:PORT`) in turn;
    yields its base URL. Stopped (and its directory removed) on exit. With `retries`, a
    request an upstream refused the connection of goes to the next one (nginx's default,
    the README's block); without, it fails (what each replica does is seen)."""
    nginx, directory, config = _prepare(port, upstreams, retries=retries)
    process = await anyio.open_process(
        [nginx, "-p", str(directory), "-c", str(config), "-e", "stderr"],
        stdout=subprocess.DEVNULL,
    )
    try:
        assert process.stderr is not None
        seen = ""
        async with anyio.create_task_group() as tg:
            # Its workers start once its port is bound: that line says it is ready.
            with anyio.fail_after(20):
                async for chunk in TextReceiveStream(process.stderr):
                    seen += chunk
                    if "start worker process" in seen:
                        break
            if "start worker process" not in seen:
                raise RuntimeError(f"nginx did not start: {seen[-500:]}")
            tg.start_soon(_drain, process.stderr)
            yield f"http://127.0.0.1:{port}"
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)  # SIGTERM: nginx's fast shutdown, workers included
            shutil.rmtree(directory, ignore_errors=True)


def _prepare(port: int, upstreams: Sequence[str], *, retries: bool) -> tuple[str, Path, Path]:
    """nginx's binary, a temp dir for it, and its config there."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        missing("nginx is not installed: apt-get install nginx")
    directory = Path(tempfile.mkdtemp(prefix="agent-gateway-nginx-"))
    directory.chmod(0o777)  # its workers may run as another user (nobody, when we are root)
    servers = "\n".join(f"        server {u};" for u in upstreams)
    config = directory / "nginx.conf"
    next_upstream = "" if retries else "            proxy_next_upstream off;"
    config.write_text(_CONFIG.format(servers=servers, port=port, next_upstream=next_upstream))
    return nginx, directory, config


async def _drain(stream: ByteReceiveStream) -> None:
    """Keep reading its log: a full pipe would stop it."""
    async for _ in stream:
        pass
