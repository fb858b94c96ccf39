"""A client that launches its MCP server over stdio (Claude Desktop, an IDE): what a proxy
in between costs it, ours against the peers, the arms taking turns in one run.

    python -m bench stdio-front [--calls 3000] [--era legacy|modern] [--checkout DIR] [--json F]

The driver writes raw JSON-RPC lines to each arm's stdin and reads its stdout (no SDK on the
client side, so the figures are the arms'); it calls `echo` (200 B) on the benchmark's
downstream (`bench/downstream.py`) in blocks of 100 calls per arm, in turns. Arms:
- `direct-stdio`: the downstream itself over stdio, the floor of every stdio-downstream arm;
- `agent-gateway`: `serve --stdio`, its node the downstream over stdio; `agent-gateway-http`:
  its node the downstream over HTTP (one process for the run, on 127.0.0.1);
- `mcp-proxy` 0.13 (its client mode: stdio to a streamable HTTP server) and FastMCP 4.2.3's
  proxy (`create_proxy` on a connected client, served over stdio), both in front of the HTTP
  downstream, as people put them in front of a remote server; only where their venvs exist
  (`python -m bench peers` makes them), and only in the handshake era (`--era legacy`,
  Claude Desktop's): mcp-proxy speaks no other;
- with `--checkout DIR`, ours again on another checkout's code (an A/B of a change).
Per arm: p50, p90, p99 of a call (ms), the p50 against direct-stdio's, and the CPU the front
process spends a call (user + system, not its children).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import cpu_seconds  # noqa: E402

PYTHON = sys.executable
GATEWAY = str(Path(sys.executable).parent / "agent-gateway")
DOWNSTREAM = str(REPO / "bench" / "downstream.py")
FASTMCP_PROXY = str(REPO / "bench" / "peers" / "fastmcp_proxy.py")
VENVS = REPO / ".bench-venvs"
DOWNSTREAM_READY = "bench-downstream: serving on "
BLOCK = 100
MESSAGE = "x" * 200
VERSIONS = {"legacy": "2025-11-25", "modern": "2026-07-28"}


@dataclass
class Arm:
    name: str
    command: list[str]
    tool: str
    env: dict[str, str] = field(default_factory=dict[str, str])
    latencies: list[float] = field(default_factory=list[float])
    cpu: float = 0.0
    process: subprocess.Popen[bytes] | None = None
    _ids: int = 0
    _envelope: dict[str, Any] | None = None
    """What a 2026-07-28 request carries in `_meta`; None in the handshake era."""

    def start(self, version: str, stderr: IO[str]) -> None:
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=tempfile.gettempdir(),  # not the repo: `--checkout` code must win on sys.path
            env={**os.environ, **self.env},
        )
        self._envelope = (
            {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            if version == VERSIONS["modern"]
            else None
        )
        if self._envelope is None:
            client = {"name": "bench", "version": "1"}
            self._ask(
                "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": client}
            )
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            self._ask("server/discover", {})
        self._ask("tools/list", {})  # as clients do (ours routes a call by the last listing)
        for _ in range(20):  # warm
            self.call()

    def call(self) -> None:
        answer = self._ask("tools/call", {"name": self.tool, "arguments": {"message": MESSAGE}})
        result: Any = answer.get("result")
        if not isinstance(result, dict) or cast(dict[str, Any], result).get("isError"):
            raise RuntimeError(f"{self.name}: {answer}")

    def block(self, calls: int) -> None:
        assert self.process is not None
        before = cpu_seconds(self.process.pid)
        for _ in range(calls):
            start = time.perf_counter()
            self.call()
            self.latencies.append(time.perf_counter() - start)
        self.cpu += cpu_seconds(self.process.pid) - before

    def stop(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        if self._envelope is not None:
            params = {**params, "_meta": self._envelope}
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        assert self.process is not None
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} ended (its stderr is in the run's log)")
            message = json.loads(line)
            if message.get("id") == self._ids and "method" not in message:
                return message

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()


def _downstream(stderr: IO[str]) -> tuple[subprocess.Popen[str], str]:
    """The downstream over HTTP on 127.0.0.1, and its base URL."""
    process = subprocess.Popen(
        [PYTHON, DOWNSTREAM, "--http"], stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith(DOWNSTREAM_READY):
            # The rest of its stderr goes to the log, so that its pipe never fills.
            threading.Thread(target=stderr.writelines, args=(process.stderr,), daemon=True).start()
            return process, line.removeprefix(DOWNSTREAM_READY).strip()
        stderr.write(line)
    raise RuntimeError("the downstream did not start")


def _gateway(name: str, backend: str, workdir: Path, checkout: Path | None) -> Arm:
    config = workdir / f"{name}.toml"
    config.write_text(f"[gateway]\nexpose_tools = true\n[mcpServers.d]\n{backend}")
    serve = ["serve", "--stdio", "--config", str(config)]
    if checkout is None:
        return Arm(name, [GATEWAY, *serve], "d__echo")
    main = "from gateway.cli import main; main()"
    env = {"PYTHONPATH": str(checkout.resolve())}
    return Arm(f"{name}@{checkout.name}", [PYTHON, "-c", main, *serve], "d__echo", env)


def arms(url: str, workdir: Path, era: str, checkout: Path | None) -> list[Arm]:
    stdio = f"command = {json.dumps(PYTHON)}\nargs = {json.dumps([DOWNSTREAM, '--stdio'])}\n"
    http = f"url = {json.dumps(url)}\n"
    found = [Arm("direct-stdio", [PYTHON, DOWNSTREAM, "--stdio"], "echo")]
    for where in (None, checkout) if checkout is not None else (None,):
        found.append(_gateway("agent-gateway", stdio, workdir, where))
        found.append(_gateway("agent-gateway-http", http, workdir, where))
    mcp_proxy = VENVS / "mcp-proxy" / "bin" / "mcp-proxy"
    fastmcp = VENVS / "fastmcp" / "bin" / "python"
    if era == "legacy" and mcp_proxy.exists():
        command = [str(mcp_proxy), "--transport", "streamablehttp", "--log-level", "WARNING", url]
        found.append(Arm("mcp-proxy", command, "echo"))
    if era == "legacy" and fastmcp.exists():
        env = {"FASTMCP_LOG_LEVEL": "WARNING"}
        found.append(Arm("fastmcp", [str(fastmcp), FASTMCP_PROXY, "--stdio", url], "echo", env))
    return found


def report(run: list[Arm]) -> list[dict[str, Any]]:
    floor = statistics.median(run[0].latencies)
    rows: list[dict[str, Any]] = []
    for arm in run:
        ordered = sorted(arm.latencies)
        p50 = statistics.median(ordered)
        rows.append(
            {
                "arm": arm.name,
                "command": shlex.join(arm.command),
                "calls": len(ordered),
                "p50_ms": p50 * 1e3,
                "p90_ms": ordered[int(len(ordered) * 0.9)] * 1e3,
                "p99_ms": ordered[int(len(ordered) * 0.99)] * 1e3,
                "p50_x": p50 / floor,
                "cpu_ms": arm.cpu / len(ordered) * 1e3,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="per arm (default 3000)")
    parser.add_argument("--era", choices=sorted(VERSIONS), default="legacy")
    parser.add_argument("--checkout", type=Path, help="ours again, on this checkout's code")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    options = parser.parse_args()
    log_path = Path(tempfile.gettempdir()) / "bench-stdio-front.log"
    with (
        open(log_path, "w") as log,
        tempfile.TemporaryDirectory(prefix="bench-stdio-") as workdir,
    ):
        downstream, base = _downstream(log)
        run = arms(f"{base}/mcp", Path(workdir), options.era, options.checkout)
        try:
            for arm in run:
                arm.start(VERSIONS[options.era], log)
            blocks = max(1, options.calls // BLOCK)
            for done in range(blocks):
                for arm in run:
                    arm.block(min(BLOCK, options.calls))
                print(f"\rblock {done + 1}/{blocks}", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
        finally:
            for arm in run:
                arm.stop()
            downstream.terminate()
            downstream.wait()
    rows = report(run)
    print(f"era {options.era} ({VERSIONS[options.era]}), {rows[0]['calls']} calls per arm")
    print(f"{'arm':28} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'p50 x':>7} {'CPU ms':>8}")
    for row in rows:
        print(
            f"{row['arm']:28} {row['p50_ms']:8.3f} {row['p90_ms']:8.3f} {row['p99_ms']:8.3f}"
            f" {row['p50_x']:7.2f} {row['cpu_ms']:8.3f}"
        )
    if options.json is not None:
        options.json.write_text(json.dumps({"era": options.era, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
