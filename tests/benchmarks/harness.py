"""What the benchmark scripts share: a loopback LLM server in its own process, throwaway
registry repositories (git + DVC) and timing of ``evalreg`` subprocesses.

Not a benchmark itself; the scripts beside it import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = ROOT / "tests" / "support" / "llm_server.py"
FAST_SERVER_SCRIPT = ROOT / "tests" / "benchmarks" / "fast_llm_server.mjs"
SERVERS = ("python", "node")
"""The stand-ins ``llm_server`` can start: the test suite's (Python) and its cheaper twin
on Node.js (``fast_llm_server.mjs``, the same replies, chat completions only)."""
PYTHON = sys.executable
API_KEY = "sk-bench-0b7c3f"
KEY_ENV = "EVALREG_BENCH_KEY"
MODEL = "bench-model-2026-01-01"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "DVC_NO_ANALYTICS": "1",
}
TAGS = ("common", "messy", "edge", "adversarial", "regression")


def compile_bytecode() -> None:
    """Compile evalreg's modules to bytecode, as ``pip install`` does for an installed
    package: start-up figures then describe an installation, not a first import with
    ``PYTHONDONTWRITEBYTECODE`` set (which recompiles every module in every process)."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("evalreg")
    if spec is not None and spec.origin is not None:
        compileall.compile_dir(Path(spec.origin).parent, quiet=1)


def env(**extra: str) -> dict[str, str]:
    """The environment every child gets: git identity, the bench key, no DVC analytics."""
    return {**os.environ, **GIT_ENV, KEY_ENV: API_KEY, **extra}


# ---------------------------------------------------------------- the loopback server
@dataclass
class Server:
    process: subprocess.Popen[str]
    root_url: str

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"


@contextlib.contextmanager
def llm_server(
    latency: float, *, api_key: str | None = API_KEY, kind: str = "python"
) -> Iterator[Server]:
    """A stand-in server (``kind`` in ``SERVERS``) as a separate process, stopped on exit."""
    command = (
        [PYTHON, str(SERVER_SCRIPT)] if kind == "python" else ["node", str(FAST_SERVER_SCRIPT)]
    )
    args = [*command, "--port", "0", "--latency", str(latency)]
    if api_key:
        args += ["--api-key", api_key]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the LLM server did not start: {line!r}")
        yield Server(proc, line.split(" ", 1)[1])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- registries
RUBRIC = """\
schema_version: 1
description: Valid JSON that echoes the message.
version: "1"
criteria:
  - id: valid_json
    description: The answer is a JSON object with an echo.
    critical: true
    grader:
      type: json_schema
  - id: echo
    description: The echo repeats the start of the message.
    grader:
      type: field_exact
      field: echo
  - id: short
    description: The echo is short.
    slices: [messy, edge]
    grader:
      type: length
      field: echo
      max_chars: 40
levels:
  correct: {require: all}
  acceptable: {require: critical}
"""

TASK = """\
schema_version: 1
description: Echo a message as JSON.
evalset: evalsets/bench.jsonl
prompt:
  system: Answer with one JSON object.
  template: "{{ text }}"
output:
  parser: json
  schema:
    type: object
    required: [echo]
    properties:
      echo: {type: string}
      n: {type: integer}
rubric: bench
repeats: 1
monthly_volume: 100000
failure_modes:
  - id: wrong_echo
    description: The echo differs.
    cost_usd: 1.5
    detected_by: [echo]
"""


def pin_yaml(base_url: str, concurrency: int, seed: int = 0) -> str:
    return f"""\
schema_version: 1
provider: openai
model: {MODEL}
base_url: {base_url}
api_key_env: {KEY_ENV}
params:
  temperature: 0
  max_tokens: 64
  seed: {seed}
price:
  input_per_mtok: 0.15
  output_per_mtok: 0.6
  as_of: 2026-01-01
limits:
  concurrency: {concurrency}
  timeout_s: 60
"""


def selection_yaml(candidates: Sequence[str]) -> str:
    lines = [
        "schema_version: 1",
        "use_case: Echo benchmark",
        "task: bench",
        "candidates:",
        *(f"  - id: {c}\n    pin: {c}" for c in candidates),
        "policy:",
        "  gates:",
        "    - metric: pass_rate",
        "      min: 0.5",
        "  objective:",
        "    lexicographic:",
        "      - maximize: pass_rate",
        f"selected: {candidates[0]}",
        "rationale: Benchmark.",
    ]
    return "\n".join(lines) + "\n"


def item_text(i: int) -> str:
    return f"message number {i} about order {i * 7919 % 100_000}"


def items_jsonl(n: int, tags: Sequence[str] = TAGS) -> bytes:
    """``n`` items, each tagged with one of ``tags`` in turn, and every third also "long"."""
    rows = []
    for i in range(n):
        text = item_text(i)
        rows.append(
            json.dumps(
                {
                    "id": f"i-{i:06d}",
                    "input": {"text": text},
                    "expected": {"echo": text[:40]},
                    "tags": [tags[i % len(tags)]] + (["long"] if i % 3 == 0 else []),
                },
                sort_keys=True,
            )
        )
    return ("\n".join(rows) + "\n").encode()


def run(args: Sequence[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), cwd=cwd, env=env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def evalreg(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([PYTHON, "-m", "evalreg", "-C", str(root), *args], root, check=check)


def make_registry(
    root: Path,
    n_items: int,
    *,
    base_url: str = "http://127.0.0.1:9/v1",
    concurrency: int = 64,
    candidates: Sequence[str] = ("bench",),
    remote: str | None = None,
    tags: Sequence[str] = TAGS,
) -> Path:
    """A registry repository (git + DVC) with one task of ``n_items`` single-turn items and
    one ``openai`` pin per candidate, committed. With ``remote`` (a DVC remote URL) the
    eval set is pushed there, so clones of the repository can read it."""
    root.mkdir(parents=True, exist_ok=True)
    run(["git", "init", "-q", "-b", "main"], root)
    files = {
        "registry/rubrics/bench.yaml": RUBRIC,
        "registry/tasks/bench.yaml": TASK,
        "registry/selections/bench.yaml": selection_yaml(candidates),
    }
    for seed, c in enumerate(candidates):
        files[f"registry/models/{c}.yaml"] = pin_yaml(base_url, concurrency, seed)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "evalsets").mkdir(exist_ok=True)
    (root / "evalsets/bench.jsonl").write_bytes(items_jsonl(n_items, tags))
    init = (
        "import sys; from pathlib import Path; from evalreg import dvcrepo; "
        "dvcrepo.init(Path(sys.argv[1]), sys.argv[2] or None)"
    )
    run([PYTHON, "-c", init, str(root), remote or ""], root)
    push = () if remote else ("--no-push",)
    evalreg(root, "evalset", "add", *push, str(root / "evalsets/bench.jsonl"))
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-q", "-m", "benchmark registry"], root)
    return root


def fill_store(root: Path, *, segments: int = 4, only: Sequence[str] = (), flavour: int = 0) -> int:
    """Store a response for every item of every cell (or of the candidates in ``only``),
    written directly (``store.encode_record`` through ``SegmentWriter``), spread over
    ``segments`` segments as that many earlier runs would leave them (tracked by DVC).
    Answers are mostly right; which ones are wrong depends on the candidate and on
    ``flavour``."""
    from evalreg import dvcrepo
    from evalreg.cells import cells
    from evalreg.prompting import render_messages
    from evalreg.providers import get_provider
    from evalreg.providers.base import Completion
    from evalreg.providers.fetch import make_job
    from evalreg.registry.loader import load_registry
    from evalreg.store.segments import SegmentWriter, encode_record

    registry = load_registry(root)
    lines = []
    for index, cell in enumerate(cells(registry)):
        if only and cell.candidate.id not in only:
            continue
        provider = get_provider(cell.pin.provider, root)
        wrong_every = 5 + (index + flavour) % 7
        for item in sorted(registry.evalset_of(cell.task_id).items, key=lambda i: i.id):
            messages = render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
            job = make_job(cell.candidate.pin, cell.pin, provider, messages, None, 0, item.id)
            text = str((item.input or {}).get("text", ""))
            number = int(item.id.split("-")[1])
            echo = text[:10] if (number + index) % wrong_every == 0 else text[:40]
            answer = json.dumps({"echo": echo, "n": number % 1000})
            if (number + flavour) % 97 == 0:
                answer = "not json " + answer  # a few do not parse
            completion = Completion(answer, cell.pin.model, "fp_bench", 20 + number % 13, 9)
            record = {
                "provider": provider.name,
                "endpoint": job.endpoint,
                "sample": 0,
                "request": job.body,
                "response": completion.as_record(),
                "latency_ms": 300 + (number * 7 + index) % 400,
                "attempts": 1,
                "created_utc": "2026-01-01T00:00:00.000000Z",
            }
            lines.append(encode_record(job.key, record))
    per_segment = -(-len(lines) // segments)
    written = []
    for start in range(0, len(lines), per_segment):
        with SegmentWriter(root, label=f"bench{start // per_segment}") as writer:
            for line in lines[start : start + per_segment]:
                writer.put(line)
        written.append(writer.path.relative_to(root).as_posix())
    # Tracked by DVC, as the runs that bought them would have left them.
    dvcrepo.track(root, written, push=False)
    return len(lines)


def synthetic_store(root: Path, n: int, *, segments: int = 4) -> list[str]:
    """Store ``n`` records shaped as ``fill_store``'s (an echo request and its answer) for
    items no registry renders, straight into ``segments`` segment files (buffered, not
    synced line by line as a run's writer does), tracked by DVC; return their keys.

    For benchmarks of the store itself, where a million records must take seconds."""
    from evalreg import dvcrepo
    from evalreg.canonical import canonical_bytes
    from evalreg.store.segments import STORE_DIR, encode_record, request_key

    endpoint = "http://127.0.0.1:9/v1/chat/completions"
    keys = []
    written = []
    per_segment = -(-n // segments)
    (root / STORE_DIR).mkdir(parents=True, exist_ok=True)
    for segment, first in enumerate(range(0, n, per_segment)):
        rel = f"{STORE_DIR}/20260101T00000{segment}Z-bench{segment}-{segment:08x}.jsonl"
        with (root / rel).open("wb") as f:
            for number in range(first, min(n, first + per_segment)):
                text = item_text(number)
                body = canonical_bytes(
                    {
                        "max_tokens": 64,
                        "messages": [
                            {"content": "Answer with one JSON object.", "role": "system"},
                            {"content": text, "role": "user"},
                        ],
                        "model": MODEL,
                        "seed": 0,
                        "temperature": 0,
                    }
                )
                key = request_key("openai", endpoint, body, 0)
                answer = json.dumps({"echo": text[:40], "n": number % 1000})
                record = {
                    "attempts": 1,
                    "created_utc": "2026-01-01T00:00:00.000000Z",
                    "endpoint": endpoint,
                    "latency_ms": 300 + number * 7 % 400,
                    "provider": "openai",
                    "response": {
                        "model": MODEL,
                        "system_fingerprint": "fp_bench",
                        "text": answer,
                        "usage": {"input_tokens": 20 + number % 13, "output_tokens": 9},
                    },
                    "sample": 0,
                }
                f.write(encode_record(key, record, encoded={"request": body}))
                keys.append(key)
        written.append(rel)
    dvcrepo.track(root, written, push=False)
    return keys


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


# ---------------------------------------------------------------- timing
@dataclass(frozen=True)
class Timed:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str
    cpu_seconds: float = 0.0
    """User and system time of the command and every descendant it waited for (wait4's
    rusage of the child counts those reaped below it)."""


# Starts the measured command from a small, fresh process. Linux carries the peak resident
# set of the process that calls exec into the new program's rusage, so a command started
# straight from this (large) benchmark process would report the benchmark's own peak.
_LAUNCHER = """
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
cpu = usage.ru_utime + usage.ru_stime
with open(report, "w") as f:
    f.write(f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {cpu}")
"""


def timed(
    args: Sequence[str],
    cwd: Path,
    *,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
    **extra_env: str,
) -> Timed:
    """Run a child to completion: its wall time, its own peak resident set and the CPU time
    of its whole process tree (from wait4 in a small launcher process). ``environ``: its
    whole environment, instead of ``env(**extra_env)``."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        report = Path(scratch) / "rusage"
        launcher = [PYTHON, "-S", "-c", _LAUNCHER, str(report), *args]
        subprocess.run(
            launcher,
            cwd=cwd,
            env=dict(environ) if environ is not None else env(**extra_env),
            stdout=out,
            stderr=err,
            timeout=timeout,
        )
        seconds, maxrss_kb, returncode, cpu = report.read_text().split()
        out.seek(0)
        err.seek(0)
        return Timed(
            float(seconds),
            int(maxrss_kb) / 1024,
            int(returncode),
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            float(cpu),
        )


def timed_evalreg(root: Path, *args: str, **extra_env: str) -> Timed:
    return timed([PYTHON, "-m", "evalreg", "-C", str(root), *args], root, **extra_env)


def ratio_line(label: str, value: float, target: float, unit: str, *, lower: bool = True) -> str:
    """``label  value unit  ratio x target  ok|SHORT``: lower is better unless ``lower=False``."""
    ratio = value / target if target else float("inf")
    ok = ratio <= 1.0 if lower else ratio >= 1.0
    mark = "ok" if ok else "SHORT"
    return f"{label:52s} {value:10.3f} {unit:5s} {ratio:6.2f} x target ({target:g} {unit})  {mark}"
