"""A hand-written MCP server over stdio that starts a child of its own, as `npx` starts node,
`uvx` a Python, or a server its worker: `python tests/servers/parent_stdio.py PID_FILE [MODE]`.

At start it spawns a sleeping child, waits until the child is set up, and writes
`SERVER_PID CHILD_PID` to PID_FILE. MODE `keep`: the child keeps the server's stdout (as
`sh -c 'sleep 1000 & exec server'` leaves it); `stubborn`: the child ignores SIGTERM; otherwise
the child has none of the server's stdio. The server itself exits at its stdin's end, leaving
the child. Its tools: `hello` answers `hello`; `crash` exits with status 3 instead of
answering (2025-11-25 handshake, one JSON-RPC message a line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_CHILD = """
import os, signal, sys, time
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.close(int(sys.argv[1]))  # set up: the server reads the pipe's end
time.sleep(1000)
"""

_TOOLS = ("hello", "crash")


def main() -> None:
    pid_file, mode = Path(sys.argv[1]), (sys.argv[2:] or [""])[0]
    stdio = None if mode == "keep" else subprocess.DEVNULL
    ready, told = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(told), mode],
        stdin=subprocess.DEVNULL,
        stdout=stdio,
        stderr=stdio,
        pass_fds=(told,),
    )
    os.close(told)
    os.read(ready, 1)  # b"" once the child closed its end
    pid_file.write_text(f"{os.getpid()} {child.pid}")
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message["method"]
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "parent", "version": "1"},
            }
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in _TOOLS]
            result = {"tools": tools}
        elif message["params"]["name"] == "hello":
            result = {"content": [{"type": "text", "text": "hello"}]}
        else:
            sys.exit(3)
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    main()
