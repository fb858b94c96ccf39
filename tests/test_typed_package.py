"""The installed package as a typed user sees it: pyright --strict on a program of theirs,
resolving `agent`, `toolkits` and `gateway` through this environment's install (PEP 561)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

USER_PROGRAM = """
from agent import ScriptedModel, ToolsAgent
from gateway import Gateway
from toolkits import FunctionToolkit, function_tool


def add(a: int, b: int) -> int:
    return a + b


agent = ToolsAgent(model=ScriptedModel(["hi"]))
kit = FunctionToolkit("sums", [function_tool(add)])
gateway: type[Gateway] = Gateway
"""


def test_a_strict_user_program_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright is not None, "pyright is a test dependency (pip install -e '.[test]')"
    (tmp_path / "use.py").write_text(USER_PROGRAM)
    prefix = Path(sys.prefix)
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps(
            {"typeCheckingMode": "strict", "venvPath": str(prefix.parent), "venv": prefix.name}
        )
    )
    checked = subprocess.run(
        [pyright, "--outputjson", "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(checked.stdout)
    problems = [f"{d.get('rule')}: {d['message']}" for d in report["generalDiagnostics"]]
    assert problems == []
    assert report["summary"]["filesAnalyzed"] == 1
