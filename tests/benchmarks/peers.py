"""evalreg against its peers on one workload: the same loopback server, the same items, the
same concurrency, in one script run.

Peers: promptfoo 0.121.20 (``promptfoo eval -j C --no-cache``, the ``openai:chat:<model>``
provider with ``apiBaseUrl`` at the server, one ``is-json`` assert) and inspect_ai 0.3.285
(``generate()`` + ``includes()``, ``--max-connections C``, ``-M responses_api=false``,
``openai/<model>`` with ``OPENAI_BASE_URL`` at the server). Each is installed on first use
into a cache folder under the system temp directory (``npm install`` for promptfoo, a
separate virtual environment for inspect_ai), never into evalreg's environment. A peer that
cannot be installed or run here is reported as such and the script goes on.

Printed: each tool's wall time (start-up included) and how many times faster evalreg is
(targets: at least 15 x faster than promptfoo and 40 x faster than inspect_ai). Also the
floor of the server, measured in the same run by ``runner_throughput.py``'s hand-written
client with no start-up: no client finishes the workload faster, so a peer's time divided
by the floor is the most any tool could be faster than it here. A target above that
ceiling cannot be met on this workload whatever evalreg does, and is marked so.

Run: python tests/benchmarks/peers.py [--items N] [--concurrency C] [--latency S]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import harness
from runner_throughput import raw_floor_rate

PROMPTFOO_VERSION = "0.121.20"
PROMPTFOO_PACKAGE = f"promptfoo@{PROMPTFOO_VERSION}"
INSPECT_VERSION = "0.3.285"
INSPECT_PACKAGE = f"inspect_ai=={INSPECT_VERSION}"
CACHE = Path(tempfile.gettempdir()) / "evalreg-peers"
TARGETS = {"promptfoo": 15.0, "inspect_ai": 40.0}
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


def run_promptfoo(server: harness.Server, n: int, c: int, work: Path) -> float:
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
    started = time.perf_counter()
    proc = subprocess.run(
        args, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    seconds = time.perf_counter() - started
    results = work / "results.json"
    if not results.exists():
        raise Unavailable(f"promptfoo eval exited {proc.returncode}: {_tail(proc.stderr)}")
    data = json.loads(results.read_text())
    stats = data.get("results", {}).get("stats", {})
    answered = int(stats.get("successes", 0)) + int(stats.get("failures", 0))
    if answered != n:
        raise Unavailable(f"promptfoo answered {answered} of {n} tests: {stats}")
    return seconds


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


def run_inspect(server: harness.Server, n: int, c: int, work: Path) -> float:
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
    started = time.perf_counter()
    proc = subprocess.run(
        args, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise Unavailable(f"inspect eval exited {proc.returncode}: {_tail(proc.stderr)}")
    return seconds


# ---------------------------------------------------------------- evalreg
def run_evalreg(server: harness.Server, n: int, c: int, work: Path) -> float:
    root = harness.make_registry(work / "repo", n, base_url=server.base_url, concurrency=c)
    result = harness.timed_evalreg(root, "run", "--max-concurrency", str(c), "--no-push")
    if result.returncode != 0:
        raise Unavailable(f"evalreg run exited {result.returncode}: {_tail(result.stderr)}")
    return result.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    n, c = args.items, args.concurrency
    print(
        f"N = {n} single-turn items, concurrency {c}, server latency "
        f"{args.latency * 1000:.0f} ms; wall time with start-up"
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    times: dict[str, float | str] = {}
    with harness.workdir("evalreg-peers-") as tmp, harness.llm_server(args.latency) as server:
        runners = {
            "evalreg": run_evalreg,
            f"promptfoo {PROMPTFOO_VERSION}": run_promptfoo,
            f"inspect_ai {INSPECT_VERSION}": run_inspect,
        }
        for name, runner in runners.items():
            try:
                times[name] = runner(server, n, c, tmp / name.split()[0])
            except (Unavailable, subprocess.TimeoutExpired) as exc:
                times[name] = f"not measured: {exc}"
            value = times[name]
            shown = f"{value:8.2f} s" if isinstance(value, float) else value
            print(f"  {name:22s} {shown}")
            sys.stdout.flush()
        floor = n / raw_floor_rate(server, n, c)
        print(f"  {'floor (raw client)':22s} {floor:8.2f} s")
    ours = times.get("evalreg")
    if not isinstance(ours, float):
        print("evalreg itself was not measured; no ratios")
        return 1
    print()
    for name, value in times.items():
        if name == "evalreg" or not isinstance(value, float):
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
