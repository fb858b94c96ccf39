"""The peers' own venvs under `.bench-venvs/` (gitignored), created on first use.

mcp-proxy 0.13 pins mcp < 2, so it cannot share our venv. fastmcp 4.2.3 would fit ours
(it wants mcp >= 2.3, < 3), but it brings ~30 packages; in its own venv it stays out of the
project's venv and CI, and it runs on the same mcp release as ours (pinned below), so the
comparison is of the proxies, not of SDK versions.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from bench._processes import REPO

__all__ = ["PEERS", "VENVS", "install", "is_installed", "peer_bin"]

VENVS = REPO / ".bench-venvs"
PEERS: dict[str, tuple[str, ...]] = {
    "mcp-proxy": ("mcp-proxy==0.13.0",),
    "fastmcp": ("fastmcp==4.2.3", f"mcp=={version('mcp')}"),
}
"""Each peer's venv and what goes into it."""

_STAMP = ".installed"


def peer_bin(peer: str, program: str) -> Path:
    return VENVS / peer / "bin" / program


def _wanted(peer: str) -> str:
    return f"{' '.join(PEERS[peer])} (python {sys.version.split()[0]})"


def is_installed(peer: str) -> bool:
    stamp = VENVS / peer / _STAMP
    return stamp.is_file() and stamp.read_text() == _wanted(peer)


def install(peer: str) -> None:
    """Create the peer's venv and install its packages (about 20-40 s each); idempotent."""
    if is_installed(peer):
        return
    directory = VENVS / peer
    print(f"bench: creating {directory} with {' '.join(PEERS[peer])}", file=sys.stderr)
    # The base interpreter, not ours: a venv made from inside a venv would still be standalone,
    # but this keeps it independent of how ours was made.
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", "--clear", str(directory)], check=True)
    subprocess.run(
        [
            str(directory / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *PEERS[peer],
        ],
        check=True,
    )
    (directory / _STAMP).write_text(_wanted(peer))
