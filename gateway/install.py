"""`agent-gateway install claude-desktop`: add the gateway to Claude Desktop's MCP servers.

The client's config file gets one stdio entry, `mcpServers.<name>`, launching
`agent-gateway serve --stdio --config <abs path>`. Every other entry and key stays as it was
(keys of our own entry that we do not set, such as `env`, too). A file that would not change
is not written; otherwise a backup (`<file>.bak`) is written first, then the new file
atomically.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .errors import GatewayError

__all__ = ["Installation", "claude_desktop_config_path", "install_claude_desktop", "server_entry"]


@dataclass(frozen=True, slots=True)
class Installation:
    path: Path
    text: str
    """The client config as it will be (or is) on disk."""
    changed: bool
    backup: Path | None = None


def claude_desktop_config_path(platform: str = sys.platform) -> Path:
    """Where Claude Desktop keeps its config on this platform."""
    if platform == "darwin":
        return (
            Path.home()
            / "Library"
            / "Application Support"
            / "Claude"
            / "claude_desktop_config.json"
        )
    if platform == "win32":
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
        return base / "Claude" / "claude_desktop_config.json"
    return Path.home() / ".config" / "Claude" / "claude_desktop_config.json"


def server_entry(config: Path) -> dict[str, Any]:
    """The stdio entry: the console script beside this Python, or `python -m gateway.cli`."""
    args = ["serve", "--stdio", "--config", str(config.resolve())]
    script = Path(sys.executable).parent / (
        "agent-gateway.exe" if sys.platform == "win32" else "agent-gateway"
    )
    if script.is_file():
        return {"command": str(script.absolute()), "args": args}
    return {"command": str(Path(sys.executable).absolute()), "args": ["-m", "gateway.cli", *args]}


def install_claude_desktop(
    config: Path,
    *,
    name: str = "agent-gateway",
    client_config: Path | None = None,
    dry_run: bool = False,
) -> Installation:
    """Merge our entry into the client's config. Raises `GatewayError` for a file we must not
    touch (unreadable, not a JSON object, `mcpServers` not an object)."""
    if not name.strip():
        raise GatewayError("--name must not be empty")
    path = client_config or claude_desktop_config_path()
    current: dict[str, Any] = {}
    old_text: str | None = None
    if path.exists():
        try:
            old_text = path.read_text(encoding="utf-8")
            loaded: Any = json.loads(old_text) if old_text.strip() else {}
        except (OSError, UnicodeDecodeError) as exc:
            raise GatewayError(f"cannot read {path}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise GatewayError(
                f"{path} is not valid JSON ({exc}); fix it or pass --client-config"
            ) from exc
        if not isinstance(loaded, dict):
            raise GatewayError(f"{path} does not hold a JSON object; not touching it")
        current = cast(dict[str, Any], loaded)
    servers: Any = current.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise GatewayError(f"{path}: mcpServers is not an object; not touching it")
    servers = cast(dict[str, Any], servers)
    old_entry: Any = servers.get(name)
    entry = dict(cast(dict[str, Any], old_entry)) if isinstance(old_entry, dict) else {}
    entry.update(server_entry(config))
    merged = {**current, "mcpServers": {**servers, name: entry}}
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    changed = merged != current
    if dry_run or not changed:
        return Installation(path=path, text=text, changed=changed)
    backup: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if old_text is not None:
            backup = path.with_name(path.name + ".bak")
            backup.write_text(old_text, encoding="utf-8")
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)  # atomic: Claude never reads a half-written file
    except OSError as exc:
        raise GatewayError(f"cannot write {path}: {exc}") from exc
    return Installation(path=path, text=text, changed=True, backup=backup)
