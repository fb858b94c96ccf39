"""`agent-gateway install CLIENT`: add the gateway to an MCP client's servers.

    claude-desktop   claude_desktop_config.json in the app's folder
    claude-code      .mcp.json in the project (the working directory)
    cursor           ~/.cursor/mcp.json, or the project's .cursor/mcp.json (`project=True`)

The client's config file gets one stdio entry, `mcpServers.<name>`, launching
`agent-gateway serve --stdio --config <abs path>` (in a Cursor project's file,
`${workspaceFolder}/<path>`), with `env` for what the gateway needs (API
keys: a desktop app does not pass on the shell's environment). Every other entry and key stays
as it was (keys of our own entry that we do not set, too). A file that would not change is not
written; otherwise a backup (`<file>.bak`) is written first, then the new file atomically.

A project's file (`.mcp.json`, a project's `.cursor/mcp.json`) is meant to be checked in, so
a secret never goes into it: its value is written as a reference the client fills in from its
own environment when it starts the gateway (`${VAR}` for Claude Code, `${env:VAR}` for
Cursor). A secret is a variable the config names as one (provider keys, `bearer_token_env`,
`tokens_env`, `state_key_env`), whose name says so (KEY, TOKEN, SECRET, PASSWORD, PAT, ...),
or whose value does (a URL with a password, `postgresql://u:PW@h/db`, `?password=`; a token
in a known form, `ghp_...`, `sk-...`, `xoxb-...`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from agent.models import API_KEYS, api_key_names
from agent.url_credentials import url_credentials

from .config import Config
from .env_files import parse_env_assignment, read_env_file
from .errors import GatewayError

__all__ = [
    "CLIENTS",
    "ClientKind",
    "Installation",
    "claude_desktop_config_path",
    "client_config_path",
    "install_claude_desktop",
    "install_server",
    "is_project_file",
    "missing_env",
    "parse_env_assignment",
    "read_env_file",
    "reference_name",
    "secret_names",
    "server_entry",
]

ClientKind = Literal["claude-desktop", "claude-code", "cursor"]


@dataclass(frozen=True, slots=True)
class _Client:
    label: str
    passes_shell_env: bool
    """Whether the servers it starts see the environment of the shell that ran `install`."""
    entry_type: str | None = None
    """The `type` its entries carry (Claude Code writes `"stdio"`)."""
    reference: str | None = None
    """How its project file refers to an environment variable (`{}`: the name), if it can."""


CLIENTS: dict[ClientKind, _Client] = {
    "claude-desktop": _Client("Claude Desktop", passes_shell_env=False),
    "claude-code": _Client(
        "Claude Code", passes_shell_env=True, entry_type="stdio", reference="${{{}}}"
    ),
    "cursor": _Client("Cursor", passes_shell_env=False, reference="${{env:{}}}"),
}

_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION"
    r"|(?:^|_)(?:PAT|DSN)(?:_|$)",
    re.IGNORECASE,
)
"""In a variable's name: its value is a secret (`GITHUB_PAT`, `SENTRY_DSN` too)."""
_TOKEN = re.compile(
    # By their issuers' prefixes: GitHub, GitLab, OpenAI and Anthropic, Stripe, Slack, Hugging
    # Face, npm, PyPI, AWS, Google; a JWT; a PEM private key.
    r"(?:Bearer\s+)?(?:gh[pousr]_|github_pat_|glpat-|sk-|[sr]k_(?:live|test)_|xox[abposr]-"
    r"|xapp-|hf_|npm_|pypi-|A[KS]IA|AIza|eyJ)[\w.-]{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----.*",
    re.DOTALL,
)
"""A value that is a token, whatever its variable's name."""
_PASSWORD_SETTING = re.compile(r"\b(?:ssl)?passw(?:or)?d\s*=\s*\S", re.IGNORECASE)
"""In a value, a password given as a setting (libpq's `host=db password=PW`)."""
_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


_BASIC = {
    name: os.environ.get(name, "set")
    for name in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "USERPROFILE", "APPDATA")
}
"""What every client passes on to the servers it starts (the MCP SDKs' default environment)."""


@dataclass(frozen=True, slots=True)
class Installation:
    path: Path
    text: str
    """The client config as it will be (or is) on disk."""
    changed: bool
    backup: Path | None = None
    env: list[str] = field(default_factory=list[str])
    """The names of the entry's environment variables (their values are secrets)."""
    references: list[str] = field(default_factory=list[str])
    """Secrets written as references to the client's environment (a project's file)."""
    backup_secrets: list[str] = field(default_factory=list[str])
    """Secrets whose values the old file held (so its backup does), now references."""
    machine_paths: list[str] = field(default_factory=list[str])
    """Paths of this machine's written into a project's file (meant to be shared)."""
    replaced: list[str] | None = None
    """The command line of the entry of that name that ran something else (another config)."""


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


def client_config_path(client: ClientKind, *, project: bool = False) -> Path:
    """The file `client` reads its MCP servers from: its own, or the project's."""
    if client == "claude-desktop":
        return claude_desktop_config_path()
    if client == "claude-code":
        return Path.cwd() / ".mcp.json"
    return (Path.cwd() if project else Path.home()) / ".cursor" / "mcp.json"


def is_project_file(client: ClientKind, path: Path) -> bool:
    """Whether `path` is a project's config for `client`, meant to be shared (checked in)."""
    if client == "claude-code":
        return path.name == ".mcp.json"
    if client == "cursor":
        folder = path.absolute().parent
        return folder.name == ".cursor" and folder.parent != Path.home().absolute()
    return False


def secret_names(config: Config) -> set[str]:
    """The environment variables `config` names as holding secrets."""
    names = {name for names in API_KEYS.values() for name in names}
    names.update(s.bearer_token_env for s in config.mcp_servers.values() if s.bearer_token_env)
    names.update(n for n in (config.gateway.tokens_env, config.gateway.state_key_env) if n)
    return names


def reference_name(value: str) -> str | None:
    """The variable `value` refers to, when it is a reference and nothing else (`${VAR}`,
    `${env:VAR}`)."""
    match = _REFERENCE.fullmatch(value)
    return match.group(1) if match else None


def server_entry(config: Path) -> dict[str, Any]:
    """The stdio entry: the console script beside this Python, or `python -P -m gateway.cli`
    (`-P`: a `gateway` folder where the client starts it is not what runs)."""
    args = ["serve", "--stdio", "--config", str(config.resolve())]
    script = Path(sys.executable).parent / (
        "agent-gateway.exe" if sys.platform == "win32" else "agent-gateway"
    )
    if script.is_file():
        return {"command": str(script.absolute()), "args": args}
    python = str(Path(sys.executable).absolute())
    return {"command": python, "args": ["-P", "-m", "gateway.cli", *args]}


def install_server(
    config: Path,
    client: ClientKind = "claude-desktop",
    *,
    name: str = "agent-gateway",
    client_config: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: bool = False,
    dry_run: bool = False,
    secrets: Collection[str] = (),
) -> Installation:
    """Merge our entry (with `env` over the entry's own) into the client's config; in a
    project's file, the values of secrets (`secrets`, and names that say so) as references.
    Raises `GatewayError` for a file we must not touch (unreadable, not a JSON object,
    `mcpServers` not an object)."""
    if not name.strip():
        raise GatewayError("--name must not be empty")
    path = client_config or client_config_path(client, project=project)
    current, old_text = _read_client_config(path)
    servers: Any = current.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise GatewayError(f"{path}: mcpServers is not an object; not touching it")
    servers = cast(dict[str, Any], servers)
    old_entry: Any = servers.get(name)
    entry = dict(cast(dict[str, Any], old_entry)) if isinstance(old_entry, dict) else {}
    kind = CLIENTS[client].entry_type
    entry.update({"type": kind} if kind else {}, **server_entry(config))
    machine_paths: list[str] = []
    if is_project_file(client, path):
        machine_paths = _portable(entry, client, path)
    replaced = _command_line(old_entry)
    if replaced == [entry["command"], *entry["args"]]:
        replaced = None
    old_env: Any = entry.get("env")
    merged_env = {
        **(cast(dict[str, str], old_env) if isinstance(old_env, dict) else {}),
        **(env or {}),
    }
    references: list[str] = []
    backup_secrets: list[str] = []
    reference = CLIENTS[client].reference
    if reference and is_project_file(client, path):
        for key, value in merged_env.items():
            if _is_secret(key, value, secrets) and reference_name(value) is None:
                merged_env[key] = reference.format(key)
                references.append(key)
                if _held_a_value(old_env, key):
                    backup_secrets.append(key)
    if merged_env:
        entry["env"] = merged_env
    merged = {**current, "mcpServers": {**servers, name: entry}}
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    changed = merged != current
    done = Installation(
        path=path,
        text=text,
        changed=changed,
        env=sorted(merged_env),
        references=sorted(references),
        backup_secrets=sorted(backup_secrets),
        machine_paths=machine_paths,
        replaced=replaced,
    )
    if dry_run or not changed:
        return done
    target = path.resolve()  # a symlinked file (dotfiles) is written where it lives
    backup = target.with_name(target.name + ".bak") if old_text is not None else None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # The file keeps its mode, never wider; with our env in it, readable by its owner only.
        kept = stat.S_IMODE(target.stat().st_mode) if old_text is not None else None
        private = 0o600 if kept is None else kept & 0o600
        # References are no secrets; a value of our entry's env may be one.
        values = any(reference_name(value) is None for value in merged_env.values())
        mode = private if values else kept
        if backup is not None and old_text is not None:
            # The old secrets, as private as they were (or now are).
            _write(backup, old_text, private if values or backup_secrets else kept)
        partial = target.with_name(target.name + ".tmp")
        _write(partial, text, mode)
        partial.replace(target)  # atomic: the client never reads a half-written file
    except OSError as exc:
        raise GatewayError(f"cannot write {path}: {exc}") from exc
    return Installation(
        path=path,
        text=text,
        changed=True,
        backup=backup,
        env=done.env,
        references=done.references,
        backup_secrets=done.backup_secrets if backup else [],
        machine_paths=machine_paths,
        replaced=replaced,
    )


def _portable(entry: dict[str, Any], client: ClientKind, path: Path) -> list[str]:
    """A project's entry made to hold what works on any machine where the client can say it
    (Cursor's `${workspaceFolder}` for a config in the project); the paths of this machine's
    it still holds (the command, always: where agent-gateway is installed)."""
    args = cast(list[str], entry["args"])
    config = Path(args[-1])
    workspace = path.absolute().parent.parent  # <project>/.cursor/mcp.json
    if client == "cursor" and config.is_relative_to(workspace.resolve()):
        args[-1] = "${workspaceFolder}/" + config.relative_to(workspace.resolve()).as_posix()
        return [entry["command"]]
    return [entry["command"], args[-1]]


def _command_line(entry: Any) -> list[str] | None:
    """What an entry runs: its command and args, or its URL (None: no entry, or none of
    these)."""
    if not isinstance(entry, dict):
        return None
    fields = cast(dict[str, Any], entry)
    if isinstance(url := fields.get("url"), str):
        return [url]  # an HTTP server's entry
    command: Any = fields.get("command")
    args: Any = fields.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return None
    return [command, *(str(arg) for arg in cast(list[Any], args))]


def _is_secret(name: str, value: str, secrets: Collection[str]) -> bool:
    """Whether variable `name` holds a secret: named so (by the config, or by its name), or
    by its value (a URL with a password or a query credential, a known token's form)."""
    return (
        name in secrets
        or _SECRET_WORDS.search(name) is not None
        or _TOKEN.fullmatch(value.strip()) is not None
        or _PASSWORD_SETTING.search(value) is not None
        or bool(url_credentials(value))
    )


def _held_a_value(old_env: Any, key: str) -> bool:
    """Whether the entry's old `env` held a value of its own (not a reference) for `key`."""
    if not isinstance(old_env, dict):
        return False
    value: Any = cast(dict[str, Any], old_env).get(key)
    return isinstance(value, str) and bool(value) and reference_name(value) is None


def _write(path: Path, text: str, mode: int | None) -> None:
    """`text` in `path` with `mode` from the start (never readable by more in between);
    None: a new file's usual mode (the umask's)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode
    )
    with open(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    if mode is not None:
        os.chmod(path, mode)  # the umask may have narrowed it at creation


def install_claude_desktop(
    config: Path,
    *,
    name: str = "agent-gateway",
    client_config: Path | None = None,
    dry_run: bool = False,
) -> Installation:
    """`install_server` for Claude Desktop."""
    return install_server(
        config, "claude-desktop", name=name, client_config=client_config, dry_run=dry_run
    )


def missing_env(
    config: Config,
    env: Mapping[str, str],
    client: ClientKind,
    variables: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """What the gateway will need from its environment that the client will not give it: API
    keys of the agents' providers, bearer tokens of HTTP servers, the `variables` its servers'
    launch keys name (`client_config.required_variables`). One line each, naming the fix."""
    known = CLIENTS[client]
    visible = {**os.environ, **env} if known.passes_shell_env else {**_BASIC, **env}
    where = (
        "in the entry's env nor in this shell"
        if known.passes_shell_env
        else f"in the entry's env ({known.label} does not pass on your shell's environment)"
    )
    needs: dict[tuple[str, ...], list[str]] = {}
    for variable, servers in (variables or {}).items():
        needs.setdefault((variable,), []).extend(f"server {name!r}" for name in servers)
    for agent, spec in config.agents.items():
        specs = [spec.model] if isinstance(spec.model, str) else spec.model or []
        for model in specs:
            names = api_key_names(model)
            if names:
                needs.setdefault(names, []).append(f"agent {agent!r} ({model})")
    for server, settings in config.mcp_servers.items():
        if settings.bearer_token_env:
            needs.setdefault((settings.bearer_token_env,), []).append(f"server {server!r}")
    return [
        f"{' and '.join(users)} {'need' if len(users) > 1 else 'needs'} {' or '.join(names)}, "
        f"which is not set {where}: add --env {names[0]}=VALUE or --env-file FILE"
        for names, users in needs.items()
        if not any(visible.get(name) for name in names)
    ]


def _read_client_config(path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.exists():
        return {}, None
    try:
        text = path.read_text(encoding="utf-8")
        loaded: Any = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError) as exc:
        raise GatewayError(f"cannot read {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise GatewayError(
            f"{path} is not valid JSON ({exc}); fix it or pass --client-config"
        ) from exc
    if not isinstance(loaded, dict):
        raise GatewayError(f"{path} does not hold a JSON object; not touching it")
    return cast(dict[str, Any], loaded), text
