"""A process with no home directory (HOME unset, a uid with no passwd entry: `docker run --user
4242`): what needs no data directory runs; what does says in one line what to set (exit 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agent import MemoryStoreError
from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import parse_config
from tests.durable.cli_runs import SCRIPT, cli_env

pytestmark = pytest.mark.anyio

FIX = "name a data directory with --state-dir DIR, or set AGENT_GATEWAY_DATA_DIR or XDG_DATA_HOME"


def _config(folder: Path, extra: str = "") -> Path:
    script = folder / "answers.json"
    script.write_text(json.dumps([{"content": "It is 42."}] * 4))
    config = folder / "c.toml"
    config.write_text(f'[agents.a]\nmodel = "scripted:{script}"\n{extra}')
    return config


def _without_home() -> dict[str, str]:
    env = cli_env()
    for name in ("HOME", "AGENT_GATEWAY_DATA_DIR", "XDG_DATA_HOME"):
        env.pop(name, None)
    return env


def _as_user_without_passwd_entry(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` as uid 4242, which has no passwd entry, with HOME unset (in a user
    namespace of its own: no root needed)."""
    command = ["unshare", "--user", "--map-user=4242", "--map-group=4242", str(SCRIPT), *args]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, env=_without_home(), timeout=60
    )


@pytest.fixture
def no_passwd_entry() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    probe = subprocess.run(
        ["unshare", "--user", "--map-user=4242", "true"], capture_output=True, timeout=10
    )
    if probe.returncode != 0:
        pytest.skip("user namespaces are not allowed here")


@pytest.mark.integration
@pytest.mark.usefixtures("no_passwd_entry")
def test_with_no_home_what_keeps_no_data_runs_and_the_rest_says_what_to_set(
    tmp_path: Path,
) -> None:
    """Every command ended in `RuntimeError: Could not determine home directory.`"""
    config = str(_config(tmp_path, '[tools.calculator]\nbuiltin = "calculator"\n'))
    for args, out in [
        (["tools", "--config", config], "calculator"),
        (["run", "hi", "--no-store", "--config", config], "It is 42.\n"),
        (["call", "calculator", "--args", '{"expression": "6 * 7"}', "--config", config], "42"),
    ]:
        done = _as_user_without_passwd_entry(*args, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), args
        assert out in done.stdout
    no_home = "error: no home directory: HOME is not set, and user 4242 has no entry in the "
    for args in (
        ["run", "hi", "--config", config],
        ["run", "hi", "--no-store", "--session", "s", "--config", config],
        ["runs", "list"],
        ["sessions", "list"],
    ):
        done = _as_user_without_passwd_entry(*args, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (2, ""), args
        [said] = done.stderr.splitlines()
        assert said.startswith(no_home + "password database: " + FIX), said
    state = ["--state-dir", str(tmp_path / "st")]
    done = _as_user_without_passwd_entry("run", "hi", "--config", config, *state, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "It is 42.\n"), done.stderr
    listed = _as_user_without_passwd_entry("runs", "list", *state, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "succeeded" in listed.stdout


@pytest.mark.integration
@pytest.mark.usefixtures("no_passwd_entry")
def test_with_no_home_a_servers_user_home_variable_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[mcpServers.s]\ncommand = "srv"\nargs = ["${userHome}/x"]\n')
    done = _as_user_without_passwd_entry("tools", "--config", str(config), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: {config}: mcpServers.s.args: cannot expand ${{userHome}}: no home directory: "
        "HOME is not set, and user 4242 has no entry in the password database\n"
    )


@pytest.fixture
def relative_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """HOME set, but to a relative path: a data directory under it would move with the
    working directory."""
    for name in ("AGENT_GATEWAY_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "home")
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("relative_home")
def test_a_relative_home_is_no_home_and_nothing_is_kept_under_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stored run went to `home/.local/share/agent-gateway` under wherever it was started."""
    config = str(_config(tmp_path))
    assert main(["run", "hi", "--config", config]) == 2
    assert capsys.readouterr().err == (
        f"error: no home directory: HOME ('home') is not an absolute path: {FIX} "
        "(or --no-store: keep no record)\n"
    )
    assert main(["chat", "--config", config]) == 2
    assert capsys.readouterr().err.startswith("error: no home directory: HOME ('home')")
    assert main(["run", "hi", "--no-store", "--config", config]) == 0
    assert capsys.readouterr().out == "It is 42.\n"
    assert not (tmp_path / "home").exists()


@pytest.mark.usefixtures("relative_home")
async def test_memory_with_no_place_fails_only_the_run_that_uses_a_session(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    config = parse_config({"agents": {"a": {}}})
    async with open_gateway(config, model=f"scripted:{tmp_path / 'answers.json'}") as gateway:
        assert (await gateway.run("a", "hi")).output == "It is 42."
        with pytest.raises(MemoryStoreError) as caught:
            await gateway.run("a", "hi", session_id="s1")
    assert (
        str(caught.value)
        == f"chat memory: no home directory: HOME ('home') is not an absolute path: {FIX}"
    )


def test_a_relative_data_directory_is_refused_not_kept_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`AGENT_GATEWAY_DATA_DIR=relative/dir` kept runs under wherever a command started: from
    another folder, `runs list` found none."""
    monkeypatch.setenv("AGENT_GATEWAY_DATA_DIR", "relative/dir")
    monkeypatch.chdir(tmp_path)
    config = str(_config(tmp_path))
    assert main(["run", "hi", "--config", config]) == 2
    assert capsys.readouterr().err == (
        f"error: AGENT_GATEWAY_DATA_DIR ('relative/dir') is not an absolute path: {FIX} "
        "(or --no-store: keep no record)\n"
    )
    assert main(["runs", "list"]) == 2
    assert not (tmp_path / "relative").exists()
    monkeypatch.setenv("AGENT_GATEWAY_DATA_DIR", str(tmp_path / "data"))
    assert main(["run", "hi", "--config", config]) == 0
    assert (tmp_path / "data" / "agent-gateway.sqlite3").is_file()
