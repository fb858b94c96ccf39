"""MCP clients' own config files, read as they are.

Claude Desktop's `claude_desktop_config.json`, Claude Code's `.mcp.json` and Cursor's
`mcp.json` share the `mcpServers` table; around it they keep settings of the client itself
(`globalShortcut`, `preferences`, ...), and in it they write variables the client expands:

    ${VAR}  ${VAR:-default}       Claude Code (command, args, env, url, headers)
    ${env:VAR}  ${userHome}        Cursor (also ${workspaceFolder}: the working directory)
    ${PWD}                         the working directory, where the shell has not set PWD

A variable that is unset and has no default is an error naming the server and the key: a
server started with a literal `${TOKEN}` fails later, and far less clearly.

A client's server entry may carry the client's own keys: `disabled` (Cline, Windsurf, Roo:
`true` leaves the server out, as the client does) and `envFile` (Cursor, VS Code: a `.env`
file whose variables the server gets, under its own `env`).

A client names a server as it likes (`"acme.tools"`, `"Google Drive"`); a node's name is a
tool prefix a model must take (`NODE__TOOL`), so each other character becomes `_`
(`acme_tools`, `Google_Drive`: `node_names`), the agents of the file may name the server
either way, and an error about it names the key as written.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from .env_files import read_env_file
from .errors import ConfigError, GatewayError
from .home import home

__all__ = [
    "CLIENT_CONFIG_FILES",
    "CLIENT_FILE_NAMES",
    "client_keys",
    "enabled_servers",
    "expand_server_variables",
    "key_path",
    "node_names",
    "required_variables",
    "servers_as_nodes",
    "with_env_files",
    "without_the_gateway_on",
]

CLIENT_CONFIG_FILES = (".mcp.json",)
"""Client config files picked up from the working directory when it has no
`agent-gateway.toml` (Claude Code's project file)."""

CLIENT_FILE_NAMES = frozenset(
    {".mcp.json", "mcp.json", "claude_desktop_config.json", "mcp_config.json"}
)
"""The names MCP clients give their config files (Claude Code, Cursor, Claude Desktop,
Windsurf): the servers in one start as the client would start them (`config`)."""

_OURS = ("gateway", "mcpServers", "tools", "agents", "store")
_EXPANDED = ("command", "args", "env", "cwd", "url", "headers", "envFile")
_log = logging.getLogger("gateway.config")
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_NESTED = re.compile(r"\$\{[^}]*\$\{")
"""`${A:-${B}}`: a variable within another's default, which no client expands."""
_FOLDERS = frozenset({"PWD", "userHome", "workspaceFolder"})
"""The variables that name a folder: set wherever the gateway runs, and no secret."""
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def client_keys(table: Mapping[str, Any], *, source: str) -> list[str]:
    """The top-level keys of a client's config file that are the client's own (ignored).

    Only a file with `mcpServers` is a client's; in ours every key counts. A key that looks
    like a misspelling of ours (`agnts`) is an error, not a client's setting.
    """
    if "mcpServers" not in table:
        return []
    foreign = [key for key in table if key not in _OURS]
    for key in foreign:
        close = difflib.get_close_matches(key, _OURS, n=1, cutoff=0.75)
        if close:
            raise ConfigError(f"{source}: {key}: unknown key (did you mean {close[0]!r}?)")
    return foreign


def enabled_servers(table: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """A client's `mcpServers` (in `table`, beside the file's agents) without the servers it
    marks `disabled: true`, their `disabled: false` dropped. Raises `ConfigError` for a
    `disabled` that is no boolean, and for an agent of the file that names a disabled server
    (it would be told of no node of that name)."""
    servers = cast(dict[str, Any], table["mcpServers"])
    enabled: dict[str, Any] = {}
    disabled: set[str] = set()
    for key, entry in servers.items():
        if not isinstance(entry, Mapping) or "disabled" not in entry:
            enabled[key] = entry
            continue
        fields = dict(cast(Mapping[str, Any], entry))
        off = fields.pop("disabled")
        if not isinstance(off, bool):
            raise ConfigError(
                f"{source}: {key_path('mcpServers', key)}.disabled: true or false, not {off!r}"
            )
        if off:
            disabled |= {key, _NOT_IN_NAMES.sub("_", key)}
        else:
            enabled[key] = fields
    agents: object = table.get("agents")
    for agent, spec in cast(dict[str, Any], agents).items() if isinstance(agents, dict) else ():
        tools = cast(dict[str, Any], spec).get("tools") if isinstance(spec, dict) else None
        named = (
            [t for t in cast(list[Any], tools) if t in disabled] if isinstance(tools, list) else []
        )
        if named:
            raise ConfigError(
                f"{source}: {key_path('agents', agent)}.tools: server {named[0]!r} is disabled "
                "in this file: enable it, or leave it out of the agent's tools"
            )
    return enabled


def with_env_files(servers: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """A client's servers, each one's `envFile` (its variables expanded) read into its `env`;
    the `env` written in the entry wins over the file's. Raises `ConfigError` for a file that
    cannot be read or a line that is no `KEY=VALUE` (never quoting it: it may be a secret)."""
    read: dict[str, Any] = {}
    for key, entry in servers.items():
        if not isinstance(entry, Mapping) or "envFile" not in entry:
            read[key] = entry
            continue
        fields = dict(cast(Mapping[str, Any], entry))
        file: object = fields.pop("envFile")
        where = f"{source}: {key_path('mcpServers', key)}.envFile"
        if not isinstance(file, str):
            raise ConfigError(f"{where}: a file's path, not {file!r}")
        try:
            loaded = read_env_file(Path(file))  # relative: to the working directory, as in clients
        except GatewayError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        env: object = fields.get("env", {})
        fields["env"] = {**loaded, **cast(dict[str, Any], env)} if isinstance(env, dict) else env
        read[key] = fields
    return read


def node_names(servers: Mapping[str, Any], *, source: str) -> dict[str, str]:
    """The node name of each server key of a client's file (the key itself where it is one
    already), by key. Raises `ConfigError` for two keys that make the same name, or a key that
    makes none (empty, or longer than 64 characters)."""
    names: dict[str, str] = {}
    taken: dict[str, str] = {}
    for key in servers:
        name = _NOT_IN_NAMES.sub("_", key)
        if not _NAME.fullmatch(name):
            raise ConfigError(
                f"{source}: {key_path('mcpServers', key)}: a server's name may have 1-64 characters"
            )
        if name in taken:
            raise ConfigError(
                f"{source}: {key_path('mcpServers', key)} and {key_path('mcpServers', taken[name])} "
                f"would both be node {name!r} (other characters than letters, digits, '_' and "
                "'-' become '_'): rename one"
            )
        names[key] = name
        taken[name] = key
    return names


def servers_as_nodes(
    table: dict[str, Any], servers: dict[str, Any], *, source: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """A client's `servers` under node names (`node_names`: `"Google Drive"` is node
    `Google_Drive`), and each key that changed by its node name, for errors to name it as
    written. The agents in `table` may name a server by its key as written too (changed here)."""
    names = node_names(servers, source=source)
    renamed = {key: name for key, name in names.items() if key != name}
    if not renamed:
        return servers, {}
    for key, name in renamed.items():
        _log.info("%s: %s is node %r", source, key_path("mcpServers", key), name)
    agents = table.get("agents")
    if isinstance(agents, dict):
        table["agents"] = {
            agent: _tools_renamed(spec, renamed)
            for agent, spec in cast(dict[str, Any], agents).items()
        }
    as_nodes = {names[key]: entry for key, entry in servers.items()}
    return as_nodes, {name: key for key, name in renamed.items()}


def _tools_renamed(spec: object, renamed: Mapping[str, str]) -> object:
    """An agent's entry, its `tools` naming servers by node name."""
    if not isinstance(spec, dict):
        return spec
    fields = cast(dict[str, Any], spec)
    tools: object = fields.get("tools")
    if not isinstance(tools, list):
        return fields
    named = [renamed.get(t, t) if isinstance(t, str) else t for t in cast(list[object], tools)]
    return {**fields, "tools": named}


def key_path(table: str, key: str) -> str:
    """`table.key`, the key quoted as TOML quotes it where it is not a bare key
    (`mcpServers."acme.tools"`, not `mcpServers.acme.tools`)."""
    return (
        f"{table}.{key}"
        if _BARE_KEY.fullmatch(key)
        else f"{table}.{json.dumps(key, ensure_ascii=False)}"
    )


def expand_server_variables(
    servers: Mapping[str, Any],
    *,
    source: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """`mcpServers` data with the variables of each server's launch keys expanded, the
    headers that take one marked secret (`secret_headers`: never quoted back in an error), and
    the value each put in `url` (but a folder's) marked so too (`url_secrets`).

    Raises `ConfigError` for an unset variable without a default, or an unknown form.
    """
    lookup = _Lookup(os.environ if environ is None else environ, cwd)
    expanded: dict[str, Any] = {}
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            expanded[name] = entry  # validation says what is wrong with it
            continue
        fields = dict(cast(Mapping[str, Any], entry))
        secret = _headers_from_environment(fields.get("headers"))
        if secret:
            marked: object = fields.get("secret_headers", [])
            fields["secret_headers"] = (
                [*cast(list[Any], marked), *secret] if isinstance(marked, list) else marked
            )
        in_url: list[str] = []
        for key in _EXPANDED:
            if key in fields:
                where = f"{source}: {key_path('mcpServers', name)}.{key}"
                found = in_url if key == "url" else None
                fields[key] = _expand(
                    fields[key], lambda text, w=where, f=found: lookup.expand(text, w, f)
                )
        if in_url:
            marked = fields.get("url_secrets", [])
            fields["url_secrets"] = (
                [*cast(list[Any], marked), *in_url] if isinstance(marked, list) else marked
            )
        expanded[name] = fields
    return expanded


def _headers_from_environment(headers: object) -> list[str]:
    """The names of the `headers` whose values take an environment variable."""
    if not isinstance(headers, Mapping):
        return []
    return [
        str(name)
        for name, value in cast(Mapping[Any, Any], headers).items()
        if isinstance(value, str)
        and any(
            _variable_name(match.group(1)) not in _FOLDERS for match in _VARIABLE.finditer(value)
        )
    ]


def _variable_name(expression: str) -> str:
    return expression.partition(":-")[0].removeprefix("env:")


def required_variables(servers: Mapping[str, Any]) -> dict[str, list[str]]:
    """The environment variables the servers' launch keys need (no default), with the servers
    that need each: what must be set wherever the gateway will run."""
    needed: dict[str, list[str]] = {}

    def collect(server: str) -> Callable[[str], str]:
        def found(text: str) -> str:
            for match in _VARIABLE.finditer(text):
                name = _variable_name(match.group(1))
                if ":-" not in match.group(1) and name not in _FOLDERS:
                    needed.setdefault(name, []).append(server)
            return text

        return found

    for name, entry in servers.items():
        if isinstance(entry, Mapping):
            fields = cast(Mapping[str, Any], entry)
            for key in _EXPANDED:
                _expand(fields.get(key), collect(name))
    return {var: list(dict.fromkeys(names)) for var, names in needed.items()}


def _expand(value: Any, expand: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return expand(value)
    if isinstance(value, list):
        return [_expand(item, expand) for item in cast(list[Any], value)]
    if isinstance(value, dict):
        return {k: _expand(v, expand) for k, v in cast(dict[str, Any], value).items()}
    return value


def _enclosed(text: str, start: int) -> str:
    """The `${...}` at `start` in `text`, to its matching `}` (or the end), and nothing of the
    text around it (a header's value may hold a secret)."""
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0 and text[end] == "}":
            return text[start : end + 1]
    return text[start:]


class _Lookup:
    def __init__(self, environ: Mapping[str, str], cwd: Path | None) -> None:
        self._environ = environ
        self._cwd = cwd

    def expand(self, text: str, where: str, found: list[str] | None = None) -> str:
        """`text` with its variables' values; each one's but a folder's added to `found`."""
        nested = _NESTED.search(text)
        if nested is not None:  # else passed on as a literal `${...}`, a `}` after it
            raise ConfigError(
                f"{where}: cannot expand {_enclosed(text, nested.start())}: a default "
                "(${VAR:-default}) cannot hold another variable here; give it as text"
            )

        def value(match: re.Match[str]) -> str:
            said = self._value(match.group(1), where)
            if found is not None and _variable_name(match.group(1)) not in _FOLDERS:
                found.append(said)
            return said

        return _VARIABLE.sub(value, text)

    def _value(self, expression: str, where: str) -> str:
        name, has_default, default = expression.partition(":-")
        if name.startswith("env:"):  # Cursor's spelling
            name = name.removeprefix("env:")
        elif name in ("userHome", "workspaceFolder"):
            return self._folder(name, where)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(
                f"{where}: cannot expand ${{{expression}}}: use ${{VAR}}, ${{VAR:-default}} "
                "or ${env:VAR}"
            )
        value = self._environ.get(name)
        if value is None and name == "PWD":
            value = self._folder(name, where)
        if value:
            return value
        if has_default:
            return default
        if value is not None:
            return value  # set, but empty
        raise ConfigError(
            f"{where}: ${{{name}}} is not set: set the environment variable, or give a default "
            f"with ${{{name}:-default}}"
        )

    def _folder(self, name: str, where: str) -> str:
        """The folder `${name}` names (`userHome`; `workspaceFolder`, `PWD`: the working
        directory's), or `ConfigError` saying why there is none."""
        try:
            return str(home() if name == "userHome" else self._working_directory())
        except ConfigError as exc:
            raise ConfigError(f"{where}: cannot expand ${{{name}}}: {exc}") from None

    def _working_directory(self) -> Path:
        try:
            return self._cwd or Path.cwd()
        except FileNotFoundError:  # deleted under the shell that started us
            raise ConfigError(
                "the working directory is gone (deleted?): run from a directory that exists"
            ) from None


def without_the_gateway_on(data: Any, file: Path) -> Any:
    """A client's file `data` without the entries that serve the gateway on `file` itself
    (`agent-gateway serve --config FILE`, as `install` writes): each would start the gateway
    again, and that one the next, until the spawn depth stops them. Each left out is logged."""
    if not isinstance(data, dict):
        return data
    table = cast(dict[str, Any], data)
    servers: Any = table.get("mcpServers")
    if not isinstance(servers, dict):
        return table
    itself = file.resolve()
    kept: dict[str, Any] = {}
    for key, entry in cast(dict[str, Any], servers).items():
        if _serves(entry, itself, file.parent):
            _log.warning(
                "%s: %s serves the gateway on this same file: left out (it would start "
                "itself, over and over)",
                file,
                key_path("mcpServers", key),
            )
        else:
            kept[key] = entry
    return {**table, "mcpServers": kept}


def _serves(entry: object, file: Path, folder: Path) -> bool:
    """Whether a server entry runs `serve` with `--config` naming `file` (relative: to
    `folder` or the working directory)."""
    if not isinstance(entry, Mapping):
        return False
    args: object = cast(Mapping[str, Any], entry).get("args")
    if not isinstance(args, list) or "serve" not in args:
        return False
    words = [str(arg) for arg in cast(list[Any], args)]
    named = [b for a, b in itertools.pairwise(words) if a == "--config"]
    named += [w.removeprefix("--config=") for w in words if w.startswith("--config=")]
    return any((folder / name).resolve() == file or Path(name).resolve() == file for name in named)
