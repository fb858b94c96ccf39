"""Which run store a command uses: the default file, `[store] url`, `--store`, `--state-dir`,
none with `--no-store`; and one clear line (exit 2 or 1) for a store that cannot be used."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from gateway.cli import main
from tests.servers.databases import free_port

STOP_AFTER_THE_TOOL = [
    {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}
]


def _config(directory: Path, store: str = "") -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps([{"content": "It is 42."}]))
    config = directory / "agent-gateway.toml"
    config.write_text(
        f"{store}"
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["calculator"]\n'
    )
    return config


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    assert main(["runs", "list", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_run_is_kept_in_the_data_directory_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    assert main(["run", "What is 6 * 7?", "--config", str(config), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    [run] = _listed(capsys)
    assert (run["run_id"], run["status"], run["agent"]) == (run_id, "succeeded", "assistant")
    data = Path(os.environ["AGENT_GATEWAY_DATA_DIR"])
    assert (data / "agent-gateway.sqlite3").is_file()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory of its own, and a working directory apart from it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def test_a_relative_xdg_data_home_is_ignored_as_the_xdg_spec_says(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store was put under `./rel/...`: a job started from another folder found another."""
    monkeypatch.delenv("AGENT_GATEWAY_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", "rel")
    config = _config(tmp_path)
    assert main(["run", "What is 6 * 7?", "--config", str(config)]) == 0
    assert (home / ".local/share/agent-gateway/agent-gateway.sqlite3").is_file()
    assert not Path("rel").exists()


def test_a_tilde_in_a_store_path_is_the_home_directory(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--state-dir=~/st` (which no shell expands) made `./~/st`; so did `~` in a store URL."""
    config = _config(tmp_path, '[store]\nurl = "sqlite:///~/configured.sqlite3"\n')
    run = ["run", "What is 6 * 7?"]
    assert main([*run, "--config", str(config)]) == 0
    assert (home / "configured.sqlite3").is_file()
    assert main([*run, "--config", str(config), "--state-dir=~/st"]) == 0
    assert (home / "st" / "agent-gateway.sqlite3").is_file()
    assert main([*run, "--config", str(config), "--store", "sqlite:///~/given.sqlite3"]) == 0
    assert (home / "given.sqlite3").is_file()
    (home / "c.toml").write_text(config.read_text())
    capsys.readouterr()
    assert main([*run, "--config=~/c.toml", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert run_id in {
        row["run_id"] for row in _listed(capsys, "--store", "sqlite:///~/configured.sqlite3")
    }
    assert not Path("~").exists()


def test_no_store_keeps_no_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["run", "q", "--config", str(config), "--no-store"]) == 0
    assert capsys.readouterr().out == "It is 42.\n"
    assert not (Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3").exists()


def test_the_config_names_the_store_relative_to_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, '[store]\nurl = "sqlite:///runs/kept.sqlite3"\n')
    script = tmp_path / "stop.json"
    script.write_text(json.dumps(STOP_AFTER_THE_TOOL))
    command = ["run", "q", "--config", str(config), "--model", f"scripted:{script}"]
    assert main(command) == 1
    err = capsys.readouterr().err
    kept = tmp_path / "runs" / "kept.sqlite3"
    assert kept.is_file()
    [run] = _listed(capsys, "--config", str(config))
    assert run["status"] == "stopped"
    # Not the default store: the hint names it.
    store = shlex.quote(f"sqlite:///{kept}")
    assert f"the run is stored: agent-gateway resume {run['run_id']} --store {store}" in err
    # `resume` finds the store in the config too.
    answers = f"scripted:{tmp_path / 'answers.json'}"
    assert main(["resume", str(run["run_id"]), "--config", str(config), "--model", answers]) == 0
    assert capsys.readouterr().out == "It is 42.\n"
    assert _listed(capsys, "--store", f"sqlite:///{kept}")[0]["status"] == "succeeded"
    assert _listed(capsys) == []  # the default store was not used


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "redis://127.0.0.1/0"], "not a run store URL (sqlite:///FILE or postgresql:"),
        (["--store", "sqlite:///"], "not a run store URL"),
        (  # DBOS said `DBOS Error 3: Error initializing DBOS Transact: Database name must...`
            ["--store", "postgres://gw:s3cret@x"],
            "error: the store URL names no database: 'postgres://gw:***@x' "
            "(postgresql://USER@HOST:PORT/DBNAME)\n",
        ),
        (["--store", "postgresql://x:5432/"], "the store URL names no database"),
        (["--store", "sqlite:///x.db", "--state-dir", "d"], "give one of --store and --state-dir"),
        (["--no-store", "--state-dir", "d"], "give one of --state-dir and --no-store"),
    ],
)
def test_a_store_that_is_not_one_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    config = _config(tmp_path)
    assert main(["run", "q", "--config", str(config), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_a_config_store_url_that_is_not_one_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, '[store]\nurl = "mysql://db/runs"\n')
    assert main(["run", "q", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "store.url: not a run store URL" in err


@pytest.mark.parametrize(
    ("credentials", "shown"),
    [
        (("gw:s3cret@", ""), ("gw:***@", "")),
        # libpq reads a password from the query too: it was shown as it was given.
        (("gw@", "?password=s3cret"), ("gw@", "?password=***")),
        (("gw@", "?sslmode=prefer&sslpassword=s3cret"), ("gw@", "?sslmode=prefer&sslpassword=***")),
    ],
)
def test_an_unreachable_database_fails_in_one_line_without_its_password(
    credentials: tuple[str, str],
    shown: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path)
    address = f"127.0.0.1:{free_port()}/runs"
    url = f"postgresql://{credentials[0]}{address}{credentials[1]}"
    named = f"the run store postgresql://{shown[0]}{address}{shown[1]}: "
    assert main(["run", "q", "--config", str(config), "--store", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot open {named}")
    assert "s3cret" not in err
    assert err.count("\n") == 1
    assert main(["runs", "list", "--store", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot open {named}")
    assert "s3cret" not in err


def test_finished_runs_are_kept_for_keep_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = _config(tmp_path, "")
    assert main(["run", "first", "--config", str(kept)]) == 0
    assert main(["run", "second", "--config", str(kept)]) == 0
    capsys.readouterr()
    assert len(_listed(capsys)) == 2  # 30 days by default
    # A run on a store that keeps finished runs a few microseconds deletes them when it starts.
    brief = _config(tmp_path, "[store]\nkeep_days = 1e-10\n")
    assert main(["run", "third", "--config", str(brief), "--json"]) == 0
    third = json.loads(capsys.readouterr().out)["run_id"]
    assert [run["run_id"] for run in _listed(capsys)] == [third]
