"""A pin whose endpoint answers every request with one fixed status (501 by default): how
many requests ``evalreg run --limit 3`` sends it, against the ideal of one, and how long the
command takes.

    python tests/benchmarks/refused_pin.py [--status 501] [--runs 3] [--evalreg CMD]

Builds the test suite's standard registry (4 items, an OpenAI pin at a loopback server that
answers only STATUS), then runs the command RUNS times and prints, per run, the exit status,
the requests the server saw and the wall time, and the median. ``--evalreg`` names another
evalreg to run (``"env PYTHONPATH=/old/runners python -m evalreg"``, an earlier version).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from conftest import GIT_ENV, Repo, _make_live, build_registry  # noqa: E402


def serve(status: int) -> tuple[ThreadingHTTPServer, list[str]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.append(self.path)
            body = json.dumps({"error": {"message": "not implemented here", "type": "x"}})
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--status", type=int, default=501)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--evalreg", default=f"{sys.executable} -m evalreg")
    args = parser.parse_args()
    os.environ.update({**GIT_ENV, "DVC_NO_ANALYTICS": "1", "OPENAI_API_KEY": "sk-bench"})
    server, seen = serve(args.status)
    repo = Repo(Path(tempfile.mkdtemp()) / "repo")
    build_registry(repo)
    repo.commit("registry")
    _make_live(repo, f"http://127.0.0.1:{server.server_address[1]}/v1")
    walls = []
    for n in range(args.runs):
        before = len(seen)
        started = time.monotonic()
        done = subprocess.run(
            [*shlex.split(args.evalreg), "-C", str(repo.root), "run", "--limit", "3"],
            capture_output=True,
            text=True,
        )
        walls.append(time.monotonic() - started)
        requests = len(seen) - before
        print(
            f"run {n + 1}: exit {done.returncode}, {requests} requests "
            f"({requests}x the ideal of one), {walls[-1]:.1f} s"
        )
    print(f"median {statistics.median(walls):.1f} s over {args.runs} runs (HTTP {args.status})")
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
