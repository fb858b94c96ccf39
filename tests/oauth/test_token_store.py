"""Where tokens live: a real keyring backend when there is one (here keyrings.alt's file
keyring, forced), else a private file store; entries are bound to the server's URL."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import keyring
import pytest
from keyring.backend import KeyringBackend
from keyrings.alt.file import PlaintextKeyring
from mcp.shared.auth import OAuthToken

from tests.servers.oauth import oauth_world
from toolkits import ServerConfigError
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.mcp.oauth_lock import StoreLocked, held
from toolkits.mcp.oauth_store import FileStore, KeyringStore, ServerTokens, default_store


@pytest.fixture
def plaintext_keyring(tmp_path: Path) -> Iterator[PlaintextKeyring]:
    before: KeyringBackend = keyring.get_keyring()
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring" / "keyring_pass.cfg")  # pyright: ignore[reportAttributeAccessIssue]
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


def test_a_low_priority_keyring_is_passed_over_for_the_private_file_store(
    plaintext_keyring: PlaintextKeyring, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_GATEWAY_OAUTH_STORE", raising=False)
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", str(tmp_path / "files"))
    assert plaintext_keyring.priority < 1
    store = default_store()
    assert isinstance(store, FileStore)
    assert store.directory == tmp_path / "files"
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "keyring")
    assert isinstance(default_store(), KeyringStore)


def test_the_file_store_is_in_the_home_directory_when_xdg_data_home_is_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The XDG spec says a relative `XDG_DATA_HOME` is ignored: it was the working directory's."""
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "file")
    monkeypatch.delenv("AGENT_GATEWAY_OAUTH_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = {
        "rel": tmp_path / "home" / ".local" / "share" / "agent-gateway" / "oauth",
        str(tmp_path / "xdg"): tmp_path / "xdg" / "agent-gateway" / "oauth",
    }
    for xdg, directory in expected.items():
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
        store = default_store()
        assert isinstance(store, FileStore)
        assert store.directory == directory
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", "~/tokens")
    store = default_store()
    assert isinstance(store, FileStore)
    assert store.directory == tmp_path / "home" / "tokens"


def test_no_home_directory_is_a_clear_error_naming_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative HOME counts as none (a store under it would move with the working
    directory), as HOME unset with no passwd entry is (`docker run --user 4242`)."""
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "file")
    monkeypatch.delenv("AGENT_GATEWAY_OAUTH_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", "relative/home")
    with pytest.raises(ServerConfigError, match="set AGENT_GATEWAY_OAUTH_DIR"):
        default_store()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # what it says to set works
    store = default_store()
    assert isinstance(store, FileStore)
    assert store.directory == tmp_path / "xdg" / "agent-gateway" / "oauth"


def test_the_file_store_writes_private_files_atomically(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "made" / "oauth")
    store.write("k", "v1")
    store.write("k", "v2")
    assert store.read("k") == "v2"
    assert stat.S_IMODE(os.stat(tmp_path / "made" / "oauth").st_mode) == 0o700
    assert [p.name for p in (tmp_path / "made" / "oauth").iterdir()] == ["k.json"]
    assert stat.S_IMODE(os.stat(tmp_path / "made" / "oauth" / "k.json").st_mode) == 0o600
    assert store.delete("k")
    assert not store.delete("k")
    assert store.read("k") is None


def test_the_file_store_leaves_a_directory_it_did_not_make_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`AGENT_GATEWAY_OAUTH_DIR=/tmp` took /tmp from every other user (chmod 0700)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "someone-elses").write_text("theirs")
    store = FileStore(shared)
    store.write("k", "v1")
    store.write("k", "v2")
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(shared / "k.json").st_mode) == 0o600
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"the OAuth token directory {shared} is open to other users (mode 1777): each token "
        "file in it is 0600, but others may add or remove files there; "
        f"chmod 700 {shared}, or set AGENT_GATEWAY_OAUTH_DIR to a directory of your own"
    ]
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    caplog.clear()
    FileStore(own).write("k", "v")
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o700
    assert not caplog.records


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


@pytest.mark.anyio
@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="the holder process uses flock")
async def test_an_entry_changes_only_while_no_other_process_holds_its_lock(
    tmp_path: Path,
) -> None:
    """Each change is read, changed and written under the entry's lock: while another process
    holds it (a refresh under way there), a change here waits, and gives up past its bound."""
    store = FileStore(tmp_path)
    tokens = ServerTokens(store, "remote", "http://127.0.0.1:1234/mcp")
    await tokens.set_tokens(OAuthToken(access_token="first", expires_in=60))
    lock = store.lock_path(tokens.key)
    command = [sys.executable, "-c", HOLDER, str(lock)]
    second = OAuthToken(access_token="second", expires_in=60)
    async with await anyio.open_process(command) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        with anyio.fail_after(10):
            assert (await holder.stdout.receive()).strip() == b"held"
        with anyio.move_on_after(0.3) as waiting:
            await tokens.set_tokens(second)
        assert waiting.cancelled_caught
        stored = await tokens.get_tokens()
        assert stored is not None
        assert stored.access_token == "first"
        with pytest.raises(StoreLocked):
            async with held(lock, within=0.2):
                pass
        await holder.stdin.aclose()  # the holder ends, and its lock with it
        with anyio.fail_after(10):
            await holder.wait()
    await tokens.set_tokens(second)
    stored = await tokens.get_tokens()
    assert stored is not None
    assert stored.access_token == "second"


@pytest.mark.anyio
async def test_dropping_dead_tokens_keeps_newer_ones_another_process_stored(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    url = "http://127.0.0.1:1234/mcp"
    ours, theirs = ServerTokens(store, "remote", url), ServerTokens(store, "remote", url)
    dead = OAuthToken(access_token="a1", refresh_token="r1", expires_in=60)
    await ours.set_tokens(dead)
    await theirs.set_tokens(OAuthToken(access_token="a2", refresh_token="r2", expires_in=60))
    assert not await ours.drop_tokens(dead)
    kept = await ours.get_tokens()
    assert kept is not None
    assert kept.refresh_token == "r2"
    assert await ours.drop_tokens(kept)
    assert await ours.get_tokens() is None


@pytest.mark.anyio
async def test_an_entry_is_bound_to_the_server_url(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    here = ServerTokens(store, "remote", "http://127.0.0.1:1234/mcp")
    await here.set_tokens(OAuthToken(access_token="secret-a", expires_in=60))
    assert (await here.get_tokens()) is not None
    elsewhere = ServerTokens(store, "remote", "http://127.0.0.1:9999/mcp")
    assert await elsewhere.get_tokens() is None
    assert "secret-a" not in repr(await here.load())


@pytest.mark.anyio
@pytest.mark.integration
async def test_a_node_keeps_its_tokens_in_the_keyring(
    plaintext_keyring: PlaintextKeyring, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "keyring")
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", str(tmp_path / "files"))
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_REDIRECT", "fetch")
    async with (
        oauth_world() as world,
        McpToolkit("remote", McpServerConfig(url=world.url)) as toolkit,
    ):
        result = await toolkit.call_tool("remote__echo", {"text": "hi"})
        assert not result.is_error
    stored = await ServerTokens(KeyringStore(), "remote", world.url).get_tokens()
    assert stored is not None
    assert stored.access_token in world.authority.access
    # The file store's directory holds only the (empty) lock file of the entry.
    [lock] = (tmp_path / "files").iterdir()
    assert lock.name.endswith(".lock")
    assert lock.read_bytes() == b""
