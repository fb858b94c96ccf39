"""DNS-rebinding protection over real HTTP: Host and Origin must name the server exactly.

The SDK's `127.0.0.1:*` matched as a prefix, so `127.0.0.1:PORT@evil.com` passed as a Host
and `http://127.0.0.1:1.evil.com` as an Origin. Hosts and ports are parsed and compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.server.processes import (
    REPO,
    SCRIPT,
    TIMES_42,
    Served,
    http_server,
    untimed,
    write_config,
)

from .wire import initialize

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def statuses(served: Served, cases: dict[str, dict[str, str]]) -> dict[str, int]:
    """The status of an `initialize` sent with each case's extra headers."""
    seen: dict[str, int] = {}
    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(30):
            for case, headers in cases.items():
                response = await http.post(
                    served.url, content=json.dumps(initialize()), headers={**HEADERS, **headers}
                )
                seen[case] = response.status_code
    return seen


async def test_host_and_origin_name_the_bound_loopback_port_exactly(tmp_path: Path) -> None:
    async with http_server(write_config(tmp_path, TIMES_42)) as served:
        port = served.url.split(":")[2].split("/")[0]
        refused = {
            f"Host 127.0.0.1:{port}@evil.com": {"Host": f"127.0.0.1:{port}@evil.com"},
            f"Host 127.0.0.1:{port}.evil.com": {"Host": f"127.0.0.1:{port}.evil.com"},
            f"Host localhost:{port}0": {"Host": f"localhost:{port}0"},
            "Host 127.0.0.1:1 (another port)": {"Host": "127.0.0.1:1"},
            "Host 127.0.0.1 (no port)": {"Host": "127.0.0.1"},
            "Host evil.com": {"Host": f"evil.com:{port}"},
            "Host 127.0.0.1.evil.com": {"Host": f"127.0.0.1.evil.com:{port}"},
            "Origin http://127.0.0.1:1.evil.com": {"Origin": "http://127.0.0.1:1.evil.com"},
            f"Origin http://127.0.0.1:{port}.evil.com": {
                "Origin": f"http://127.0.0.1:{port}.evil.com"
            },
            f"Origin http://localhost:{port}@evil.com": {
                "Origin": f"http://localhost:{port}@evil.com"
            },
            "Origin http://127.0.0.1:1 (another port)": {"Origin": "http://127.0.0.1:1"},
            "Origin http://evil.com": {"Origin": "http://evil.com"},
            "Origin null": {"Origin": "null"},
        }
        allowed = {
            "no Origin": {},
            f"Host localhost:{port}": {"Host": f"localhost:{port}"},
            f"Host LOCALHOST:{port}": {"Host": f"LOCALHOST:{port}"},
            f"Host [::1]:{port}": {"Host": f"[::1]:{port}"},
            f"Origin http://127.0.0.1:{port}": {"Origin": f"http://127.0.0.1:{port}"},
            f"Origin http://localhost:{port}": {"Origin": f"http://localhost:{port}"},
        }
        seen = await statuses(served, {**refused, **allowed})
        again = await statuses(served, {**refused, **allowed})  # each judged once, then known
        # Each refused value is logged once (a WARNING, shown at the default level); the
        # last request's line comes after every line the others caused.
        last = "WARNING gateway.server.transports.host_check: refused a request with Host "
        await statuses(served, {"last": {"Host": "last.example.com"}})
        with anyio.fail_after(10):
            await served.line_starting(f"{last}'last.example.com'")
    expected = {case: 421 if case.startswith("Host") else 403 for case in refused}
    expected |= dict.fromkeys(allowed, 200)
    assert seen == expected
    assert again == expected
    warnings = [untimed(line) for line in served.stderr if "refused a request with" in line]
    assert len(warnings) == len(refused) + 1, warnings
    assert (
        "WARNING gateway.server.transports.host_check: refused a request with Host "
        f"'evil.com:{port}' (HTTP 421); if this server is meant to answer to it, add it to "
        "[gateway] allowed_hosts (logged once per value)"
    ) in warnings
    assert any(
        "Origin 'null' (HTTP 403)" in line and "allowed_origins" in line for line in warnings
    )


async def test_configured_hosts_and_origins_match_host_and_port_exactly(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        TIMES_42,
        gateway='allowed_hosts = ["gw.example.com:*", "api.example.com:8443"]\n'
        'allowed_origins = ["https://app.example.com"]',
    )
    async with http_server(config) as served:
        seen = await statuses(
            served,
            {
                "gw.example.com": {"Host": "gw.example.com"},
                "gw.example.com:8000": {"Host": "gw.example.com:8000"},
                "api.example.com:8443": {"Host": "api.example.com:8443"},
                "api.example.com:8444": {"Host": "api.example.com:8444"},
                "api.example.com": {"Host": "api.example.com"},
                "gw.example.com:1@evil.com": {"Host": "gw.example.com:1@evil.com"},
                "gw.example.com.evil.com": {"Host": "gw.example.com.evil.com"},
                "origin https://app.example.com": {"Origin": "https://app.example.com"},
                "origin https://app.example.com:444": {"Origin": "https://app.example.com:444"},
                "origin http://app.example.com": {"Origin": "http://app.example.com"},
                "origin https://app.example.com.evil.com": {
                    "Origin": "https://app.example.com.evil.com"
                },
            },
        )
    assert seen == {
        "gw.example.com": 200,
        "gw.example.com:8000": 200,
        "api.example.com:8443": 200,
        "api.example.com:8444": 421,
        "api.example.com": 421,
        "gw.example.com:1@evil.com": 421,
        "gw.example.com.evil.com": 421,
        "origin https://app.example.com": 200,
        "origin https://app.example.com:444": 403,
        "origin http://app.example.com": 403,
        "origin https://app.example.com.evil.com": 403,
    }


async def test_a_host_pattern_that_does_not_parse_stops_serve_with_exit_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42, gateway='allowed_hosts = ["gw.example.com/x"]')
    command = [str(SCRIPT), "serve", "--http", "127.0.0.1:0", "--config", str(config)]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, check=False, cwd=REPO)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "allowed_hosts" in err
    assert "'gw.example.com/x' is not HOST, HOST:PORT or HOST:*" in err
    assert "Traceback" not in err


async def test_refusals_are_in_the_words_of_each_paths_clients(tmp_path: Path) -> None:
    """An MCP client reads a JSON-RPC error on /mcp, an OpenAI client `{"error": {...}}` on
    /v1; neither body repeats the refused value (a page that planted it would get it back)."""
    planted = '<script>alert("x")</script>'
    async with http_server(write_config(tmp_path, TIMES_42)) as served:
        base = served.url.removesuffix("/mcp")
        cases = {
            "mcp host": (served.url, {"Host": f"evil.com{planted}"}),
            "mcp origin": (served.url, {"Origin": f"http://evil.com/{planted}"}),
            "v1 host": (f"{base}/v1/chat/completions", {"Host": f"evil.com{planted}"}),
            "v1 origin": (f"{base}/v1/models", {"Origin": f"http://evil.com/{planted}"}),
        }
        seen: dict[str, httpx2.Response] = {}
        async with httpx2.AsyncClient(timeout=10) as http:
            with anyio.fail_after(30):
                for case, (url, headers) in cases.items():
                    seen[case] = await http.post(
                        url, content=json.dumps(initialize()), headers={**HEADERS, **headers}
                    )
    for case, response in seen.items():
        assert response.headers["content-type"] == "application/json", case
        assert "script" not in response.text, case
        assert "evil" not in response.text, case
    for case in ("mcp host", "mcp origin"):
        body = seen[case].json()
        assert body["jsonrpc"] == "2.0", case
        assert body["id"] is None, case
        assert body["error"]["code"] == -32000, case
    assert seen["mcp host"].status_code == 421
    assert seen["mcp host"].json()["error"]["message"].startswith("Invalid Host header")
    assert seen["mcp origin"].status_code == 403
    assert "allowed_origins" in seen["mcp origin"].json()["error"]["message"]
    assert seen["v1 host"].status_code == 421
    assert seen["v1 host"].json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_host",
    }
    assert seen["v1 origin"].status_code == 403
    assert seen["v1 origin"].json()["error"]["code"] == "invalid_origin"
    assert "allowed_origins" in seen["v1 origin"].json()["error"]["message"]
