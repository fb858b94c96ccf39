"""What the terminal shows of a run: the streamed answer, the live status, and plain output
when piped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli import main


def write_script(path: Path, answers: object) -> Path:
    path.write_text(json.dumps(answers))
    return path


def test_an_empty_final_answer_is_reported_as_such_and_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(tmp_path / "empty.json", [{"content": ""}])
    code = main(["run", "anything?", "--model", f"scripted:{script}", "--trace"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert "error: the model's final answer was empty" in err
    assert '"warning":"the model\'s final answer was empty"' in err  # in the trace too
    assert main(["demo", "anything?", "--model", f"scripted:{script}"]) == 1
    out, err = capsys.readouterr()
    assert "answer:" not in out
    assert "error: the model's final answer was empty" in err
