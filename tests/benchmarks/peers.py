"""evalreg against its peers on one workload: the same loopback server, the same items, the
same concurrency, in one script run.

Peers: promptfoo 0.121.20 (``promptfoo eval -j C --no-cache``, the ``openai:chat:<model>``
provider with ``apiBaseUrl`` at the server, one ``is-json`` assert) and inspect_ai 0.3.285
(``generate()`` + ``includes()``, ``--max-connections C``, ``-M responses_api=false``,
``openai/<model>`` with ``OPENAI_BASE_URL`` at the server). Each is installed on first use
into a cache folder under the system temp directory (``npm install`` for promptfoo, a
separate virtual environment for inspect_ai), never into evalreg's environment. A peer that
cannot be installed or run here is reported as such and the script goes on.

Each tool runs ``--runs`` times (default 3), the tools taking turns, each time on a fresh
copy of the workload. Printed: each tool's median wall time (start-up included), its median
CPU time (user and system, of its whole process tree) per 1,000 requests, and how many times
faster evalreg is (targets: at least 20 x faster than promptfoo and 70 x faster than
inspect_ai, set for a server answering at once, ``--latency 0``). Also the floor of the
server, measured in the same run by ``runner_throughput.py``'s hand-written client with no
start-up: no client finishes the workload faster, so a peer's time divided by the floor is
the most any tool could be faster than it here. A target above that ceiling cannot be met on
this workload whatever evalreg does, and is marked so.

``--breakdown`` adds where evalreg's own run spends its time, from commands that stop after
each phase: start-up (``evalreg --help``), loading, planning and keying every request
(``run --dry-run``), grading, writing and the closing DVC step (``run --offline --force``
once everything is stored), and the fetch (the rest of a full run).

Run: python tests/benchmarks/peers.py [--items N] [--concurrency C] [--latency S] [--runs R]
       [--breakdown] [--only evalreg]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import harness
from runner_throughput import raw_floor_rate

PROMPTFOO_VERSION = "0.121.20"
PROMPTFOO_PACKAGE = f"promptfoo@{PROMPTFOO_VERSION}"
INSPECT_VERSION = "0.3.285"
INSPECT_PACKAGE = f"inspect_ai=={INSPECT_VERSION}"
CACHE = Path(tempfile.gettempdir()) / "evalreg-peers"
TARGETS = {"promptfoo": 20.0, "inspect_ai": 70.0}
"""How many times faster than each peer evalreg should be."""
SYSTEM = "Answer with one JSON object."
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 1800


class Unavailable(Exception):
    """A peer that cannot be installed or run here, and why."""


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _items(n: int) -> list[dict[str, str]]:
    return [{"id": f"i-{i:06d}", "text": harness.item_text(i)} for i in range(n)]


# ---------------------------------------------------------------- promptfoo
def promptfoo_bin() -> Path:
    folder = CACHE / f"promptfoo-{PROMPTFOO_VERSION}"
    binary = folder / "node_modules" / ".bin" / "promptfoo"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed (promptfoo needs Node.js)")
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", PROMPTFOO_PACKAGE],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    if proc.returncode != 0 or not binary.exists():
        raise Unavailable(f"npm install promptfoo@{PROMPTFOO_VERSION} failed: {_tail(proc.stderr)}")
    return binary


def run_promptfoo(server: harness.Server, n: int, c: int, work: Path) -> harness.Timed:
    binary = promptfoo_bin()
    config = {
        "description": "evalreg peer benchmark",
        "prompts": [
            json.dumps(
                [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "{{text}}"},
                ]
            )
        ],
        "providers": [
            {
                "id": f"openai:chat:{harness.MODEL}",
                "config": {
                    "apiBaseUrl": server.base_url,
                    "apiKey": harness.API_KEY,
                    "temperature": 0,
                    "max_tokens": 64,
                },
            }
        ],
        "defaultTest": {"assert": [{"type": "is-json"}]},
        "tests": [{"vars": {"text": item["text"]}} for item in _items(n)],
    }
    work.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: no YAML library needed to write the config.
    (work / "promptfooconfig.yaml").write_text(json.dumps(config))
    env = {
        **harness.env(),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CONFIG_DIR": str(work / ".promptfoo"),
        "OPENAI_API_KEY": harness.API_KEY,
    }
    args = [str(binary), "eval", "-c", "promptfooconfig.yaml", "-j", str(c), "--no-cache"]
    args += ["--no-table", "--no-progress-bar", "-o", "results.json"]
    results = work / "results.json"
    results.unlink(missing_ok=True)
    proc = harness.timed(args, work, environ=env, timeout=RUN_TIMEOUT_S)
    if not results.exists():
        raise Unavailable(f"promptfoo eval exited {proc.returncode}: {_tail(proc.stderr)}")
    data = json.loads(results.read_text())
    stats = data.get("results", {}).get("stats", {})
    answered = int(stats.get("successes", 0)) + int(stats.get("failures", 0))
    if answered != n:
        raise Unavailable(f"promptfoo answered {answered} of {n} tests: {stats}")
    return proc


# ---------------------------------------------------------------- inspect_ai
INSPECT_TASK = textwrap.dedent(
    """
    import json
    from pathlib import Path

    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, system_message


    @task
    def bench():
        rows = [json.loads(line) for line in Path("items.jsonl").read_text().splitlines()]
        samples = [Sample(id=r["id"], input=r["text"], target=r["text"][:40]) for r in rows]
        return Task(
            dataset=MemoryDataset(samples),
            solver=[system_message(SYSTEM), generate()],
            scorer=includes(),
        )
    """
)


def inspect_bin() -> Path:
    venv = CACHE / f"inspect-{INSPECT_VERSION}"
    binary = venv / "bin" / "inspect"
    if binary.exists():
        return binary
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT_S,
        )
        proc = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", INSPECT_PACKAGE, "openai"],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"could not create a virtual environment for inspect_ai: {exc}") from None
    if proc.returncode != 0 or not binary.exists():
        raise Unavailable(f"pip install inspect_ai=={INSPECT_VERSION} failed: {_tail(proc.stderr)}")
    return binary


def run_inspect(server: harness.Server, n: int, c: int, work: Path) -> harness.Timed:
    binary = inspect_bin()
    work.mkdir(parents=True, exist_ok=True)
    (work / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _items(n)))
    (work / "bench_task.py").write_text(INSPECT_TASK.replace("SYSTEM", repr(SYSTEM)))
    env = {
        **harness.env(),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": harness.API_KEY,
        "INSPECT_LOG_DIR": str(work / "logs"),
        "INSPECT_DISPLAY": "none",
    }
    env.pop("PYTHONPATH", None)
    args = [str(binary), "eval", "bench_task.py", "--model", f"openai/{harness.MODEL}"]
    args += ["--max-connections", str(c), "-M", "responses_api=false", "--temperature", "0"]
    args += ["--max-tokens", "64", "--display", "none"]
    proc = harness.timed(args, work, environ=env, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise Unavailable(f"inspect eval exited {proc.returncode}: {_tail(proc.stderr)}")
    return proc


# ---------------------------------------------------------------- evalreg
def run_evalreg(server: harness.Server, n: int, c: int, work: Path) -> harness.Timed:
    if work.exists():
        shutil.rmtree(work)
    root = harness.make_registry(work / "repo", n, base_url=server.base_url, concurrency=c)
    result = harness.timed_evalreg(root, "run", "--max-concurrency", str(c), "--no-push")
    if result.returncode != 0:
        raise Unavailable(f"evalreg run exited {result.returncode}: {_tail(result.stderr)}")
    return result


def breakdown(server: harness.Server, n: int, c: int, work: Path, runs: int) -> None:
    """Where evalreg's run spends its time: commands that stop after each phase, medians
    of ``runs`` fresh registries."""
    phases: dict[str, list[float]] = {}
    for number in range(runs):
        if work.exists():
            shutil.rmtree(work)
        root = harness.make_registry(
            work / f"repo{number}", n, base_url=server.base_url, concurrency=c
        )
        steps = [
            ("start-up (--help)", ["--help"]),
            ("load, plan, key (run --dry-run)", ["run", "--dry-run", "--max-concurrency", str(c)]),
            ("whole run", ["run", "--max-concurrency", str(c), "--no-push"]),
            (
                "grade, write, close (--offline --force)",
                ["run", "--offline", "--force", "--no-push"],
            ),
        ]
        for label, args in steps:
            result = harness.timed_evalreg(root, *args)
            if result.returncode != 0:
                raise Unavailable(f"evalreg {' '.join(args)} exited {result.returncode}")
            phases.setdefault(label, []).append(result.seconds)
    median = {label: statistics.median(values) for label, values in phases.items()}
    whole = median["whole run"]
    rest = whole - median["load, plan, key (run --dry-run)"]
    rest -= median["grade, write, close (--offline --force)"] - median["start-up (--help)"]
    print(f"\nevalreg's run, by phase (median of {runs}; a phase's command includes start-up):")
    for label, seconds in median.items():
        print(f"  {label:42s} {seconds:6.3f} s")
    print(f"  {'fetch and what overlaps it (the rest)':42s} {rest:6.3f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool (medians)")
    parser.add_argument("--breakdown", action="store_true", help="evalreg's run by phase")
    parser.add_argument(
        "--only",
        choices=("evalreg", "promptfoo", "inspect_ai"),
        action="append",
        help="measure only this tool (repeatable)",
    )
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    n, c = args.items, args.concurrency
    print(
        f"N = {n} single-turn items, concurrency {c}, server latency "
        f"{args.latency * 1000:.0f} ms; wall time with start-up, median of {args.runs} runs"
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    runners = {
        "evalreg": run_evalreg,
        f"promptfoo {PROMPTFOO_VERSION}": run_promptfoo,
        f"inspect_ai {INSPECT_VERSION}": run_inspect,
    }
    if args.only:
        runners = {k: v for k, v in runners.items() if k.split()[0] in args.only}
    measured: dict[str, list[harness.Timed]] = {name: [] for name in runners}
    failed: dict[str, str] = {}
    with harness.workdir("evalreg-peers-") as tmp, harness.llm_server(args.latency) as server:
        for _ in range(args.runs):  # the tools take turns, so load drifts alike for all
            for name, runner in runners.items():
                if name in failed:
                    continue
                try:
                    measured[name].append(runner(server, n, c, tmp / name.split()[0]))
                except (Unavailable, subprocess.TimeoutExpired) as exc:
                    failed[name] = f"not measured: {exc}"
        floor = n / raw_floor_rate(server, n, c)
        if args.breakdown and "evalreg" in runners:
            breakdown(server, n, c, tmp / "breakdown", args.runs)
    print(f"\n  {'tool':22s} {'wall':>9s} {'CPU / 1,000 requests':>22s}")
    times: dict[str, float] = {}
    for name, runs in measured.items():
        if name in failed:
            print(f"  {name:22s} {failed[name]}")
            continue
        times[name] = statistics.median(r.seconds for r in runs)
        cpu = statistics.median(r.cpu_seconds for r in runs) / n * 1000
        walls = ", ".join(f"{r.seconds:.2f}" for r in runs)
        print(f"  {name:22s} {times[name]:7.2f} s {cpu:18.3f} s   (runs: {walls} s)")
    print(f"  {'floor (raw client)':22s} {floor:7.2f} s")
    ours = times.get("evalreg")
    if ours is None:
        print("evalreg itself was not measured; no ratios")
        return 1 if "evalreg" in runners else 0
    print()
    for name, value in times.items():
        if name == "evalreg":
            continue
        faster, ceiling = value / ours, value / floor
        line = f"evalreg is {faster:5.2f} x faster than {name} (ceiling {ceiling:5.2f} x)"
        target = TARGETS.get(name.split()[0])
        if target is not None:
            verdict = "ok" if faster >= target else "SHORT"
            if faster < target and ceiling < target:
                verdict += ", above the ceiling of this workload"
            line += f"   (target >= {target:g} x: {verdict})"
        print(line)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
