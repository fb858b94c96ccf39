"""The command line's answers at the edges of the run store, in subprocesses (where DBOS's own
log records reach stderr): a store that is not one or cannot be reached says so in one line;
a run that has ended is not cancelled; `--json` prints every key also when the run fails;
`--items` of one line answers in JSON lines, stored or not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.durable.cli_runs import cli, script_model, tool_call

CONFIG = '[tools.calculator]\nbuiltin = "calculator"\n[agents.assistant]\ntools = ["calculator"]\n'
KEYS = [
    "run_id",
    "agent",
    "status",
    "output",
    "error",
    "stopped_in",
    "usage",
    "iterations",
    "steps",
    "handoff",
]
"""What `run --json` prints, as the README lists it."""


def _config(tmp_path: Path) -> str:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    return str(config)


def test_a_store_that_is_not_one_or_is_down_is_one_line_with_the_right_exit_code(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "notdb.sqlite"
    junk.write_text("junk\n")
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    run = ["run", "q", "--config", _config(tmp_path), "--model", model]
    not_a_db = f"sqlite:///{junk}"
    for command in (
        [*run, "--store", not_a_db],
        ["runs", "list", "--store", not_a_db],
        ["runs", "show", "r1", "--store", not_a_db],
        ["runs", "cancel", "r1", "--store", not_a_db],
    ):
        done = cli(*command)
        assert done.returncode == 2, (command, done.stderr)  # bad input
        assert (
            done.stderr == f"error: cannot open the run store {not_a_db}: file is not a database\n"
        )
    down = "postgresql://gw:s3cret@127.0.0.1:1/gw"  # nothing listens on port 1
    for command in ([*run, "--store", down], ["runs", "list", "--store", down]):
        done = cli(*command)
        assert done.returncode == 1, (command, done.stderr)  # the database cannot be reached
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("error: cannot open the run store postgresql://gw:***@")
        assert "s3cret" not in done.stderr
    # --json: bad input prints no JSON, as an unknown agent's; a run that failed prints its
    # object, with no run id for a run the store never held (it printed a fresh one).
    for command in ([*run, "--store", not_a_db], [*run, "--agent", "nope", "--no-store"]):
        done = cli(*command, "--json")
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
    done = cli(*run, "--store", down, "--json")
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)
    assert list(printed) == KEYS
    assert (printed["run_id"], printed["status"]) == (None, "failed")  # none to resume
    assert printed["error"].startswith("cannot open the run store postgresql://gw:***@")


def test_a_store_found_damaged_as_a_run_starts_fails_it_with_no_hint_to_resume(
    tmp_path: Path,
) -> None:
    """A SQLite file that opens, but whose pages are damaged (16 kB overwritten): the run's
    first write finds it so. Was: exit 2 (bad input), nothing on stdout with --json, and
    `the run is stored: agent-gateway resume ...`, which could never work."""
    file = tmp_path / "runs.sqlite3"
    store = f"sqlite:///{file}"
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    run = ["run", "q", "--config", _config(tmp_path), "--model", model, "--store", store]
    for _ in range(3):
        assert cli(*run).returncode == 0
    with file.open("r+b") as damaged:
        damaged.seek(12288)
        damaged.write(bytes(range(256)) * 64)
    done = cli(*run, "--json")
    assert done.returncode == 1, done.stderr  # the store fails now: the input was fine
    assert "the run is stored" not in done.stderr
    printed = json.loads(done.stdout)
    assert list(printed) == KEYS
    assert (printed["run_id"], printed["status"]) == (None, "failed")  # nothing to resume
    said = f"cannot write to the run store {store}: database disk image is malformed: "
    assert printed["error"].startswith(said + "the file is damaged: restore it from a backup")
    assert f"error: {printed['error']}\n" in done.stderr
    # Read as it is opened, it is as a file that is not a database: bad input, said so.
    shown = cli("runs", "list", "--store", store)
    assert shown.returncode == 2, shown.stderr
    assert "cannot open the run store" in shown.stderr
    assert "the file is damaged" in shown.stderr


def test_a_run_that_has_ended_is_not_cancelled_nor_resumed(tmp_path: Path) -> None:
    """The hint to look at it names the store it is in (else it looks in the default one)."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    done = cli(
        "run", "q", "--config", _config(tmp_path), "--model", model, "--store", store, "--json"
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    run_id = printed["run_id"]
    assert printed["status"] == "succeeded"
    cancel = cli("runs", "cancel", run_id, "--store", store)
    assert cancel.returncode == 2
    assert cancel.stderr == (
        f"error: run {run_id!r} has ended (succeeded): it cannot be cancelled; "
        f"`agent-gateway runs show {run_id} --store {store}` shows it\n"
    )
    for action in (["cancel"], ["approve"], ["deny", "c1"]):  # --json: bad input prints none
        refused = cli("runs", *action[:1], run_id, *action[1:], "--store", store, "--json")
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    resume = cli("resume", run_id, "--store", store)
    assert resume.returncode == 2
    assert resume.stderr == (
        f"error: run {run_id!r} has ended (succeeded): it cannot be resumed; "
        f"`agent-gateway runs show {run_id} --store {store}` shows it\n"
    )
    listed = cli("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[:2] == [run_id, "succeeded"]


def test_json_of_a_failed_run_has_every_key_and_what_it_did_so_far(tmp_path: Path) -> None:
    config = _config(tmp_path)
    # One tool call, then the model has nothing more to say: the run fails at its second call.
    model = script_model(
        tmp_path / "a.json", {"tool_calls": [tool_call("calculator", "c1", expression="6 * 7")]}
    )
    so_far = [
        {
            "call_id": "c1",
            "tool": "calculator",
            "input": {"expression": "6 * 7"},
            "observation": "42",
        }
    ]
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    for where in (["--store", store], ["--no-store"]):
        done = cli("run", "q", "--config", config, "--model", model, "--json", *where)
        assert done.returncode == 1, done.stderr
        printed = json.loads(done.stdout)
        assert list(printed) == KEYS
        assert printed["output"] is None
        assert "has 1 answers and was asked for answer 2" in printed["error"]
        if where[0] == "--store":  # its last checkpoint is at hand; it resumes
            assert printed["usage"]["requests"] == 1
            assert printed["steps"] == so_far
            assert printed["status"] == "stopped"
            shown = cli("runs", "show", printed["run_id"], "--json", *where)
            assert json.loads(shown.stdout)["status"] == "stopped", shown.stderr
        else:  # nothing was stored: no run id, and it has ended
            assert (printed["run_id"], printed["status"]) == (None, "failed")
    with_model = tmp_path / "with_model.toml"
    with_model.write_text(CONFIG + f'model = "{model}"\n')
    done = cli(
        "call", "assistant", "--config", str(with_model), "--args", '{"prompt": "6*7?"}', "--json"
    )
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)
    assert list(printed) == KEYS
    assert (printed["agent"], printed["output"], printed["steps"]) == ("assistant", None, so_far)
    assert printed["usage"]["requests"] == 1
    assert "has 1 answers" in printed["error"]
    # `call` stores no run: its id named none (`runs show ID`: no stored run).
    assert (printed["run_id"], printed["status"]) == (None, "failed")


def test_call_of_an_agent_and_run_without_a_store_name_no_run_in_json(tmp_path: Path) -> None:
    """Their `run_id` named no stored run: `runs show` and `resume` of it said `no stored
    run`. Null says so, as for a run whose store could not be opened."""
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    config = tmp_path / "with_model.toml"
    config.write_text(CONFIG + f'model = "{model}"\n')
    store = ["--store", f"sqlite:///{tmp_path / 'runs.sqlite'}"]
    for command in (
        ["call", "assistant", "--args", '{"prompt": "hi?"}'],
        ["run", "hi?", "--no-store"],
    ):
        done = cli(*command, "--config", str(config), "--json")
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert list(printed) == KEYS
        assert (printed["run_id"], printed["status"], printed["output"]) == (
            None,
            "succeeded",
            "hi",
        )
    stored = cli("run", "hi?", "--config", str(config), "--json", *store)
    run_id = json.loads(stored.stdout)["run_id"]
    assert cli("runs", "show", run_id, *store).returncode == 0  # a run id names a stored run


def test_items_of_one_line_answer_in_json_lines_stored_or_not(tmp_path: Path) -> None:
    items = tmp_path / "one.jsonl"
    items.write_text('"one?"\n')
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    run = ["run", "--items", str(items), "--config", _config(tmp_path), "--model", model]
    for where in (["--store", f"sqlite:///{tmp_path / 'runs.sqlite'}"], ["--no-store"]):
        done = cli(*run, *where)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"index": 0, "output": "hi", "error": None}


def test_a_run_whose_item_failed_is_stored_as_failed(tmp_path: Path) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        CONFIG.replace("[agents.assistant]\n", "[agents.assistant]\nmax_iterations = 1\n")
    )
    call = {"tool_calls": [tool_call("calculator", "c1", expression="1 + 1")]}
    model = script_model(tmp_path / "loop.json", call, call, call)
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = cli("run", "q", "--config", str(config), "--model", model, "--store", store, "--json")
    assert done.returncode == 1, done.stderr
    assert "dbos" not in done.stderr  # the failure is said once, by the command
    printed = json.loads(done.stdout)
    assert printed["error"].startswith("Max iterations (1) reached")
    assert printed["status"] == "failed"  # it has ended: `resume` is refused
    listed = cli("runs", "list", "--status", "failed", "--json", "--store", store)
    [failed] = json.loads(listed.stdout)
    assert (failed["run_id"], failed["error"]) == (printed["run_id"], printed["error"])
    assert failed["agent"] == "assistant"
    again = cli("resume", printed["run_id"], "--store", store)
    assert again.returncode == 2
    assert "has ended (failed)" in again.stderr
