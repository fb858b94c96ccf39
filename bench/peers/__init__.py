"""The peer benchmark: agent-gateway against direct calls, mcp-proxy, FastMCP's proxy and two
floors (`floors.py`: a byte relay, and uvicorn with a bare forwarding app, the least any
Python front can cost here).

    python -m bench peers [--rounds 3] [--quick] [--only WORKLOAD ...] [--arms ARM ...]
                          [--checkout DIR ...] [--out DIR]

One driver for every arm (the mcp 2.x `Client`, streamable HTTP; the direct stdio arm over
stdio), a low-level SDK server downstream (`bench/downstream.py`), all arms interleaved in
rounds; every figure is also a ratio to `direct` from the same round, and the summary is the
median over rounds. Prints a table per workload and writes `peers.json`, `peers.md` and
`peers.png` to `--out`. The peers run from their own venvs in `.bench-venvs/`, created on the
first full run; `--quick` (seconds: the test suite's smoke run) skips a peer whose venv is
absent and says so. `--checkout DIR` adds, for each arm of ours chosen, its twin running the
code of another checkout of this repository (`ARM@NAME`; `agent-gateway@NAME` when no arm of
ours is chosen), to weigh a change against main in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import psutil

from bench._processes import REPO

from .arms import ARMS, DIRECT, Arm, twin
from .report import as_json, headline, plot, summarize, tables
from .run import RoundResults, listening_addresses, run_rounds
from .sizes import FULL, QUICK
from .venvs import VENVS, install, is_installed
from .workloads import WORKLOADS, workloads

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench peers",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"workloads: {', '.join(WORKLOADS)}\narms: {', '.join(a.name for a in ARMS)}",
    )
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="the smoke size: seconds")
    parser.add_argument(
        "--only", nargs="+", metavar="WORKLOAD", choices=WORKLOADS, help="these workloads only"
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        metavar="ARM",
        choices=[a.name for a in ARMS],
        help="these arms only (direct is always measured: it is the base of every ratio)",
    )
    parser.add_argument(
        "--checkout",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help="also an arm of ours on the code in DIR (another checkout or worktree)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / ".bench-results", help="where the JSON/MD/PNG go"
    )
    return parser


def _arms(options: argparse.Namespace, log: Any) -> tuple[list[Arm], dict[str, str]]:
    wanted = set(options.arms or [a.name for a in ARMS if a.default]) | {DIRECT}
    chosen: list[Arm] = []
    skipped: dict[str, str] = {}
    for arm in ARMS:
        if arm.name not in wanted:
            continue
        if arm.peer is not None and not is_installed(arm.peer):
            if options.quick:
                skipped[arm.name] = (
                    f"its venv {VENVS / arm.peer} is absent; --quick does not create it "
                    "(a full run does)"
                )
                log(f"skipped {arm.name}: {skipped[arm.name]}")
                continue
            install(arm.peer)
        chosen.append(arm)
    # Each arm of ours chosen gets its twin on the checkout's code (the HTTP arm if none is).
    ours = [arm for arm in chosen if arm.ours] or [
        next(arm for arm in ARMS if arm.name == "agent-gateway")
    ]
    for checkout in options.checkout:
        if not (checkout / "gateway" / "__init__.py").is_file():
            raise SystemExit(f"error: --checkout {checkout}: not a checkout of agent-gateway")
        chosen += [twin(arm, checkout) for arm in ours]
    return chosen, skipped


def _meta(options: argparse.Namespace, rounds: int, skipped: dict[str, str]) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "rounds": rounds,
        "quick": options.quick,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "load_before": os.getloadavg(),
        "skipped_arms": skipped,
    }


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    if options.rounds is not None and options.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    rounds = options.rounds or (1 if options.quick else 3)
    sizes = QUICK if options.quick else FULL
    # Every arm runs as deployed, its bytecode cached after the first start: a checkout that
    # never got its `.pyc` files would import ~90 ms slower, and the start-up figures would
    # blame its code (bench/RESULTS.md, item 27).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    specs = [s for s in workloads(sizes) if not options.only or s.name in options.only]

    clock = time.perf_counter()

    def log(line: str) -> None:
        print(f"[{time.perf_counter() - clock:6.1f} s] {line}", file=sys.stderr, flush=True)

    arms, skipped = _arms(options, log)
    meta = _meta(options, rounds, skipped)
    listening: set[str] = set()
    started = time.perf_counter()
    options.out.mkdir(parents=True, exist_ok=True)

    def save(done: list[RoundResults]) -> None:
        """The rounds so far, in case the run is stopped before the end."""
        partial = {**meta, "rounds_done": len(done)}
        summary = summarize(arms, specs, rounds=done)
        (options.out / "peers.json").write_text(as_json(partial, arms, specs, done, summary))

    with tempfile.TemporaryDirectory(prefix="bench-peers-") as workdir:
        results = anyio.run(
            run_rounds, arms, specs, sizes, rounds, Path(workdir), log, listening, save
        )
    meta["rounds_done"] = len(results)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_after"] = os.getloadavg()
    meta["listening"] = sorted(listening | listening_addresses())
    meta["leftover_processes"] = [p.pid for p in psutil.Process().children(recursive=True)]
    summary = summarize(arms, specs, rounds=results)
    table = tables(arms, specs, summary)
    if top := headline(arms, specs, summary):
        table = f"### ratios to direct (direct: its own figures)\n\n{top}\n{table}"
    header = (
        f"{rounds} round(s){' (quick)' if options.quick else ''}, {os.cpu_count()} CPUs, "
        f"load {meta['load_before'][0]:.1f} -> {meta['load_after'][0]:.1f}, "
        f"commit {meta['commit']}; (N.NNx) = ratio to direct in the same round, median of rounds"
    )
    for arm, reason in skipped.items():
        header += f"\nskipped {arm}: {reason}"
    print(f"{header}\n\n{table}")
    (options.out / "peers.md").write_text(f"{header}\n\n{table}")
    (options.out / "peers.json").write_text(as_json(meta, arms, specs, results, summary))
    plot(options.out / "peers.png", arms, specs, summary)
    log(f"wrote {options.out}/peers.json, peers.md, peers.png in {meta['seconds']} s")
    return 0
