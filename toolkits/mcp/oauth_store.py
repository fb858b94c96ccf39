"""Where a user's OAuth tokens for MCP servers live: the OS keyring, else a file only they read.

One entry per configured server, keyed by the server's name and URL: a config that points the
same name at another URL finds nothing, so a token is never sent to a server it was not issued
for. An entry holds the tokens (with their absolute expiry, which the SDK only keeps in memory)
and the client registration the authorization server gave us (dynamic registration; a
pre-registered client's secret stays in the environment and is never stored).

Backends:
- `KeyringStore`: the `keyring` package's OS keyring (macOS Keychain, Windows Credential
  Locker, Secret Service), used when it is installed and has a real backend;
- `FileStore`: one JSON file per entry in a 0700 directory, each file 0600, written atomically.
  A directory it did not make keeps its mode (`AGENT_GATEWAY_OAUTH_DIR=/tmp` must not take
  `/tmp` from every other user); one open to others gets a warning naming the fix.

`AGENT_GATEWAY_OAUTH_STORE=keyring|file` forces a backend; `AGENT_GATEWAY_OAUTH_DIR` moves the
file store (default: `$XDG_DATA_HOME/agent-gateway/oauth`). Nothing here logs a token.

Every process of the user shares an entry, so each change to one is read, changed and
written under the entry's lock (`oauth_lock`, a file beside it: for the keyring, in that
directory), and tokens are dropped only while they are still the ones found dead
(`drop_tokens`): a process never loses tokens another one stored meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ServerConfigError
from .oauth_lock import held

_log = logging.getLogger(__name__)

__all__ = [
    "OAUTH_DIR_ENV",
    "OAUTH_STORE_ENV",
    "FileStore",
    "KeyringStore",
    "OAuthEntry",
    "ServerTokens",
    "TokenStore",
    "default_store",
    "entry_key",
    "same_tokens",
]

OAUTH_STORE_ENV = "AGENT_GATEWAY_OAUTH_STORE"
OAUTH_DIR_ENV = "AGENT_GATEWAY_OAUTH_DIR"
_KEYRING_SERVICE = "agent-gateway-oauth"
_LOCK_SECONDS = 60.0
"""How long to wait for another process's change of an entry (a refresh: one token request)."""


class OAuthEntry(BaseModel):
    """What we keep for one server."""

    model_config = ConfigDict(extra="ignore")

    server_url: str
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """When the access token expires (epoch seconds), if the server said."""
    client_info: OAuthClientInformationFull | None = None
    resource_metadata: ProtectedResourceMetadata | None = None
    server_metadata: OAuthMetadata | None = None
    """What discovery found, so a restarted process refreshes at the right token endpoint."""
    wanted_scope: str | None = None
    """Scopes a server asked for (a step-up) that nobody could authorise then: the next
    `auth login` asks for them too."""

    def __repr__(self) -> str:  # tokens and client secrets are secrets
        return f"OAuthEntry(server_url={self.server_url!r}, tokens={self.tokens is not None})"

    __str__ = __repr__


def entry_key(name: str, server_url: str) -> str:
    """The store key of server `name` at `server_url` (readable, and safe as a file name)."""
    digest = hashlib.sha256(resource_url_from_server_url(server_url).encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:64]
    return f"{safe}-{digest}"


class TokenStore(Protocol):
    """Keeps entries by key. Implementations are called from a worker thread."""

    description: str
    """Where entries go, for `auth status` (never a secret)."""

    def read(self, key: str) -> str | None: ...

    def write(self, key: str, value: str) -> None: ...

    def delete(self, key: str) -> bool:
        """Remove the entry; True if there was one."""
        ...

    def lock_path(self, key: str) -> Path:
        """The file whose lock guards the entry's changes (its directory made if missing)."""
        ...


class FileStore:
    """Entries as files (0600) in a directory only the user can read: made 0700 when missing;
    one that exists keeps its mode, with a warning if others may use it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.description = f"file store {directory}"
        self._checked = False

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def read(self, key: str) -> str | None:
        try:
            return self._path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def write(self, key: str, value: str) -> None:
        self._private_directory()
        # mkstemp creates the file 0600; the rename makes a reader see the old or the new.
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(value)
            os.replace(temp, self._path(key))
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def lock_path(self, key: str) -> Path:
        self._private_directory()
        return self.directory / f".{key}.lock"

    def _private_directory(self) -> None:
        """Make the directory 0700 if it is missing (its parents get the default mode); warn,
        once, about one that exists open to others, leaving its mode as it is."""
        try:
            self.directory.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            mode = stat.S_IMODE(self.directory.stat().st_mode)
            if mode & 0o077 and not self._checked:
                _log.warning(
                    "the OAuth token directory %s is open to other users (mode %04o): each "
                    "token file in it is 0600, but others may add or remove files there; "
                    "chmod 700 %s, or set AGENT_GATEWAY_OAUTH_DIR to a directory of your own",
                    self.directory,
                    mode,
                    self.directory,
                )
        else:
            os.chmod(self.directory, 0o700)  # ours: whatever the umask left
        self._checked = True

    def delete(self, key: str) -> bool:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        return True


class KeyringStore:
    """Entries in the OS keyring, one secret per key."""

    def __init__(self) -> None:
        import keyring  # optional dependency

        self._keyring = keyring
        self.description = f"keyring ({type(keyring.get_keyring()).__name__})"
        self._locks: FileStore | None = None

    def read(self, key: str) -> str | None:
        return self._keyring.get_password(_KEYRING_SERVICE, key)

    def write(self, key: str, value: str) -> None:
        self._keyring.set_password(_KEYRING_SERVICE, key, value)

    def delete(self, key: str) -> bool:
        from keyring.errors import PasswordDeleteError

        try:
            self._keyring.delete_password(_KEYRING_SERVICE, key)
        except PasswordDeleteError:
            return False
        return True

    def lock_path(self, key: str) -> Path:
        # The keyring has no lock of its own: the file store's directory holds its lock files.
        if self._locks is None:
            self._locks = FileStore(_data_dir())
        return self._locks.lock_path(key)


def default_store() -> TokenStore:
    """The keyring when it has a real backend (or is forced), else the file store."""
    choice = os.environ.get(OAUTH_STORE_ENV, "").strip().lower()
    if choice != "file" and (choice == "keyring" or _usable_keyring()):
        return KeyringStore()
    return FileStore(_data_dir())


def _usable_keyring() -> bool:
    try:
        import keyring
    except ImportError:
        return False
    try:
        # Priority below 1: the fail/null backends, or plaintext files (no better than ours).
        return keyring.get_keyring().priority >= 1
    except Exception:  # a broken backend setup is "no keyring", not a crash
        return False


def _data_dir() -> Path:
    configured = os.environ.get(OAUTH_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        base = Path(local) if local else _home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = _home() / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        # A relative one is ignored, as the XDG spec says: it moves with the working directory.
        base = Path(xdg) if os.path.isabs(xdg) else _home() / ".local" / "share"
    return base / "agent-gateway" / "oauth"


def _home() -> Path:
    """The user's home. None (HOME unset and no passwd entry: `docker run --user 4242`), or a
    relative one that would move with the working directory, is a `ServerConfigError` naming
    what to set instead of Python's bare `RuntimeError`."""
    try:
        home = Path.home()
    except RuntimeError:
        home = None
    if home is None or not home.is_absolute():
        raise ServerConfigError(
            "the OAuth token store has no place to be kept: there is no home directory; "
            f"set {OAUTH_DIR_ENV} (or XDG_DATA_HOME) to a directory for it"
        )
    return home


class ServerTokens:
    """One server's entry, as the SDK's `TokenStorage` (plus what we add to it).

    `fixed_client` is a pre-registered client (from config): it is returned as the client
    registration and never written to the store.
    """

    def __init__(
        self,
        store: TokenStore,
        name: str,
        server_url: str,
        *,
        fixed_client: OAuthClientInformationFull | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.server_url = server_url
        self.key = entry_key(name, server_url)
        self._fixed_client = fixed_client
        self.registered_now: set[str] = set()
        """Client IDs registered through this object (so known to the server right now)."""
        self._local = anyio.Lock()
        self._holder: object = None
        self._refreshing: OAuthToken | None = None
        self.refresh_dropped = False
        """The last refresh's tokens were not stored (`refreshing`)."""
        self.replaced: OAuthToken | None = None
        """The tokens an authorization's (not a refresh's) last replaced here: `auth login`
        revokes their refresh token."""
        self.client_forgotten = False
        """The stored registration was dropped (`forget_client`): its tokens went with it."""

    async def load(self) -> OAuthEntry:
        raw = await anyio.to_thread.run_sync(self.store.read, self.key)
        if raw is not None:
            try:
                entry = OAuthEntry.model_validate_json(raw)
            except ValidationError:
                entry = None  # unreadable (another version's format): as if absent
            if entry is not None and _same_resource(entry.server_url, self.server_url):
                return entry
        return OAuthEntry(server_url=self.server_url)

    async def save(self, entry: OAuthEntry) -> None:
        await anyio.to_thread.run_sync(self.store.write, self.key, entry.model_dump_json())

    @asynccontextmanager
    async def locked(self) -> AsyncGenerator[None]:
        """Hold the entry's lock: no other process (nor task here) changes it meanwhile. The
        task holding it may take it again (`update` inside a refresh).

        Raises `StoreLocked` when another process keeps it too long.
        """
        task = anyio.get_current_task().id
        if self._holder == task:
            yield
            return
        async with self._local:
            path = await anyio.to_thread.run_sync(self.store.lock_path, self.key)
            async with held(path, within=_LOCK_SECONDS):
                self._holder = task
                try:
                    yield
                finally:
                    self._holder = None

    async def update(self, change: Callable[[OAuthEntry], OAuthEntry | None]) -> None:
        """Read the entry, `change` it (None: leave it as it is) and write it, under its lock."""
        async with self.locked():
            changed = change(await self.load())
            if changed is not None:
                await self.save(changed)

    async def forget(self) -> bool:
        async with self.locked():
            return await anyio.to_thread.run_sync(self.store.delete, self.key)

    async def set_discovery(
        self, resource: ProtectedResourceMetadata | None, server: OAuthMetadata | None
    ) -> None:
        fields = {"resource_metadata": resource, "server_metadata": server}
        await self.update(lambda entry: entry.model_copy(update=fields))

    @property
    def pre_registered(self) -> bool:
        """Whether the client registration is the config's (never stored, never replaced)."""
        return self._fixed_client is not None

    async def forget_client(self) -> None:
        """Drop the stored client registration (the authorization server no longer knows it).
        The tokens issued to it stay until new ones replace them: an authorization that fails
        leaves what was there."""
        await self.update(lambda entry: entry.model_copy(update={"client_info": None}))
        self.client_forgotten = True

    async def drop_tokens(self, dead: OAuthToken) -> bool:
        """Drop the stored tokens if they are still `dead` (a refresh token the authorization
        server refused), keeping the client registration; True if they were. Tokens another
        process stored meanwhile are kept."""
        dropped = False

        def drop(entry: OAuthEntry) -> OAuthEntry | None:
            nonlocal dropped
            if entry.tokens is None or not same_tokens(entry.tokens, dead):
                return None
            dropped = True
            return entry.model_copy(update={"tokens": None, "expires_at": None})

        await self.update(drop)
        return dropped

    async def want_scope(self, scope: str) -> None:
        """Record scopes a server asked for that nobody could authorise now (for `auth login`)."""

        def want(entry: OAuthEntry) -> OAuthEntry:
            wanted = union_scopes(entry.wanted_scope, scope)
            return entry.model_copy(update={"wanted_scope": wanted})

        await self.update(want)

    # The SDK's TokenStorage protocol.

    async def get_tokens(self) -> OAuthToken | None:
        return (await self.load()).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        fields = {"tokens": tokens, "expires_at": expires_at}
        refreshed = self._refreshing

        def store(entry: OAuthEntry) -> OAuthEntry | None:
            if refreshed is not None and (
                entry.tokens is None or not same_tokens(entry.tokens, refreshed)
            ):
                self.refresh_dropped = True
                return None
            if refreshed is None and entry.tokens and not same_tokens(entry.tokens, tokens):
                self.replaced = entry.tokens
            return entry.model_copy(update=fields)

        await self.update(store)

    @contextmanager
    def refreshing(self, sent: OAuthToken) -> Generator[None]:
        """Tokens set within are a refresh of `sent`: stored only while the entry still holds
        `sent`, never over tokens stored since nor into an entry forgotten since (a logout:
        what it revoked must not come back); `refresh_dropped` then says so."""
        self._refreshing, self.refresh_dropped = sent, False
        try:
            yield
        finally:
            self._refreshing = None

    def client_of(self, entry: OAuthEntry) -> OAuthClientInformationFull | None:
        """The client registration: the config's, else `entry`'s."""
        return self._fixed_client or entry.client_info

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._fixed_client is not None:
            return self._fixed_client
        return (await self.load()).client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._fixed_client is not None and client_info.client_id == self._fixed_client.client_id:
            return
        await self.update(lambda entry: entry.model_copy(update={"client_info": client_info}))
        self.registered_now.add(client_info.client_id)


def same_tokens(a: OAuthToken, b: OAuthToken) -> bool:
    """Whether `a` and `b` are the same grant's same tokens (one issue of them)."""
    return a.access_token == b.access_token and a.refresh_token == b.refresh_token


def _same_resource(a: str, b: str) -> bool:
    return resource_url_from_server_url(a).rstrip("/") == resource_url_from_server_url(b).rstrip(
        "/"
    )
