"""`python -m bench COMMAND [options]`: one entry point for every benchmark."""

from __future__ import annotations

import runpy
import sys

COMMANDS = {
    "peers": "bench.peers",
    "proxy-latency": "bench.proxy_latency",
    "nested-hop": "bench.nested_hop",
    "mcp-overhead": "bench.mcp_overhead",
    "engine-overhead": "bench.engine_overhead",
    "store": "bench.store",
    "hot-path": "bench.hot_path",
    "paired": "bench.paired",
    "keep-alive": "bench.keep_alive",
    "stdio-front": "bench.stdio_front",
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python -m bench {{{','.join(COMMANDS)}}} [options]", file=sys.stderr)
        return 2
    command = sys.argv.pop(1)
    if command == "peers":
        from bench.peers import main as peers

        return peers(sys.argv[1:])
    sys.argv[0] = f"python -m bench {command}"
    runpy.run_module(COMMANDS[command], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
