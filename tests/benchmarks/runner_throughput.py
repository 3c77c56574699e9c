"""Throughput of the real ``evalreg run`` against a loopback OpenAI-compatible server.

0. Against the floor of the server, in the same run (L = 50 ms, N = 5,000, C = 64), for
   each stand-in (``tests/support/llm_server.py`` and its cheaper Node.js twin,
   ``fast_llm_server.mjs``): the floor is a hand-written HTTP/1.1 client over asyncio
   streams with no start-up (``http_clients.py``'s ``raw-asyncio``), first request sent to
   last response read. Targets: evalreg's fetch phase (``fetch`` with its HTTP layer and
   store writes, in a child process) at most 1.05 x that floor; the whole ``evalreg run``
   (start-up, grading, writes and DVC included) at most the floor + 0.5 s.
1. Latency L = 50 ms, N = 5,000 single-turn items, one ``openai`` pin at concurrency C
   (16, 64, 256): wall time of the ``evalreg run`` subprocess (start-up, requests, grading,
   store and results writes, DVC tracking) against the ideal N·L/C.
   Target at C = 64: at most 1.10 x ideal.
2. L = 0: requests per second of the runner against a bare ``httpx.AsyncClient`` loop with
   the same concurrency against the same server. Target: at least 0.8 x the bare loop.
   Printed twice: end to end (the ``evalreg run`` subprocess, start-up included) and for
   the fetch phase alone (``evalreg.providers.fetch.fetch`` in a child process, store
   writes included).

The server is ``tests/support/llm_server.py`` in its own process; every figure comes from
a fresh registry repository (git + DVC) in a temporary directory.

Run: python tests/benchmarks/runner_throughput.py [--items N] [--latency S] [--concurrency C ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

import harness
import http_clients

FLOOR_RATIO = 1.05
FLOOR_SLACK_S = 0.5
TARGET_RATIO = 1.10
TARGET_C = 64
RATE_TARGET = 0.8

# A child process so each figure has a fresh interpreter, like a user's shell would give.
BARE_LOOP = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import httpx

    base, key, n, c, model = sys.argv[1:6]
    n, c = int(n), int(c)

    async def main():
        limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            queue = list(range(n))
            headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}

            async def worker():
                while queue:
                    i = queue.pop()
                    body = {"model": model, "messages": [{"role": "user", "content": f"m{i}"}]}
                    r = await client.post(f"{base}/chat/completions", content=json.dumps(body),
                                          headers=headers)
                    r.raise_for_status()
                    json.loads(r.content)

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(c)))
            print(n / (time.perf_counter() - started))

    asyncio.run(main())
    """
)

FETCH_PHASE = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from evalreg.providers.fetch import fetch, make_job
    from evalreg.providers import get_provider
    from evalreg.providers.http import HttpLayer
    from evalreg.registry.schema import Pin
    from evalreg.store.segments import ResponseStore, SegmentWriter

    root, base, n, c, env, model = (Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                    int(sys.argv[4]), sys.argv[5], sys.argv[6])
    pin = Pin.model_validate({
        "schema_version": 1, "provider": "openai", "model": model, "base_url": base,
        "api_key_env": env, "params": {"temperature": 0},
        "limits": {"concurrency": c, "timeout_s": 60},
    })
    provider = get_provider("openai")
    jobs = [make_job("p", pin, provider, [{"role": "user", "content": f"m{i}"}], None, 0, str(i))
            for i in range(n)]

    async def main():
        store = ResponseStore()
        async with HttpLayer() as http:
            with SegmentWriter(root) as writer:
                started = time.perf_counter()
                report = await fetch(jobs, store, writer, http, concurrency=c)
                elapsed = time.perf_counter() - started
        assert report.fetched == n, report.errors[:3]
        print(n / elapsed)

    asyncio.run(main())
    """
)


def raw_floor_rate(server: harness.Server, n: int, c: int) -> float:
    """Requests per second of the hand-written client (``raw-asyncio``): the floor."""
    figure = http_clients.rate(server, "raw-asyncio", n, c, None)
    if figure.startswith("failed"):
        raise RuntimeError(f"the raw client {figure}")
    return float(figure)


def floor_section(n: int, latency: float, c: int) -> None:
    ideal = n * latency / c
    print(
        f"Against the floor: N = {n}, L = {latency * 1000:.0f} ms, C = {c}, "
        f"ideal N·L/C = {ideal:.2f} s"
    )
    print(
        f"{'server':>8} {'floor s':>8} {'x ideal':>8} {'fetch s':>8} {'x floor':>8} "
        f"{'run s':>7} {'- floor':>8}"
    )
    for kind in harness.SERVERS:
        with harness.llm_server(latency, kind=kind) as server:
            floor = n / raw_floor_rate(server, n, c)
            fetch = n / fetch_phase_rate(server, n, c)
            whole = run_once(server, n, c).seconds
        ratio, slack = fetch / floor, whole - floor
        marks = (
            "ok" if ratio <= FLOOR_RATIO else "SHORT",
            "ok" if slack <= FLOOR_SLACK_S else "SHORT",
        )
        print(
            f"{kind:>8} {floor:8.2f} {floor / ideal:8.2f} {fetch:8.2f} {ratio:8.2f} "
            f"{whole:7.2f} {slack:+8.2f}   fetch <= {FLOOR_RATIO} x floor: {marks[0]}; "
            f"run <= floor + {FLOOR_SLACK_S} s: {marks[1]}"
        )
        sys.stdout.flush()
    print()


def bare_rate(server: harness.Server, n: int, c: int) -> float:
    with harness.workdir("evalreg-bare-") as tmp:
        proc = harness.run(
            [
                harness.PYTHON,
                "-c",
                BARE_LOOP,
                server.base_url,
                harness.API_KEY,
                str(n),
                str(c),
                harness.MODEL,
            ],
            tmp,
        )
    return float(proc.stdout.strip())


def fetch_phase_rate(server: harness.Server, n: int, c: int) -> float:
    with harness.workdir("evalreg-fetch-") as tmp:
        proc = harness.run(
            [
                harness.PYTHON,
                "-c",
                FETCH_PHASE,
                str(tmp),
                server.base_url,
                str(n),
                str(c),
                harness.KEY_ENV,
                harness.MODEL,
            ],
            tmp,
        )
    return float(proc.stdout.strip())


def run_once(server: harness.Server, n: int, c: int) -> harness.Timed:
    """A fresh registry, then ``evalreg run`` timed as a subprocess; checks what it wrote."""
    with harness.workdir("evalreg-throughput-") as tmp:
        root = harness.make_registry(tmp / "repo", n, base_url=server.base_url, concurrency=c)
        result = harness.timed_evalreg(root, "run", "--max-concurrency", str(c), "--no-push")
        if result.returncode != 0:
            raise RuntimeError(f"evalreg run exited {result.returncode}:\n{result.stderr[-3000:]}")
        summary = json.loads((root / "reports/results/bench/bench.json").read_text())
        graded = summary["totals"]["graded"]
        if graded != n:
            raise RuntimeError(f"expected {n} graded items, the summary says {graded}")
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--rate-concurrency", type=int, default=64)
    parser.add_argument("--skip-floor", action="store_true", help="skip the floor comparison")
    parser.add_argument("--skip-latency", action="store_true", help="only the L = 0 rates")
    parser.add_argument("--skip-rate", action="store_true", help="skip the L = 0 rates")
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    n, latency = args.items, args.latency

    if not args.skip_floor:
        floor_section(n, latency, TARGET_C)
    if not args.skip_latency:
        print(f"evalreg run, N = {n} items, L = {latency * 1000:.0f} ms (start-up included)")
        print(f"{'C':>5} {'wall s':>8} {'ideal s':>8} {'x ideal':>8} {'req/s':>8} {'RSS MB':>7}")
        with harness.llm_server(latency) as server:
            for c in args.concurrency:
                result = run_once(server, n, c)
                ideal = n * latency / c
                ratio = result.seconds / ideal
                verdict = ""
                if c == TARGET_C:
                    verdict = "ok" if ratio <= TARGET_RATIO else "SHORT"
                    verdict = f"  target <= {TARGET_RATIO:.2f} x ideal: {verdict}"
                print(
                    f"{c:5d} {result.seconds:8.2f} {ideal:8.2f} {ratio:8.2f} "
                    f"{n / result.seconds:8.0f} {result.peak_rss_mb:7.0f}{verdict}"
                )
                sys.stdout.flush()

    if not args.skip_rate:
        c = args.rate_concurrency
        print(f"\nL = 0, N = {n}, concurrency {c}: requests per second")
        with harness.llm_server(0.0) as server:
            bare = bare_rate(server, n, c)
            phase = fetch_phase_rate(server, n, c)
            e2e = run_once(server, n, c)
        e2e_rate = n / e2e.seconds
        print(f"  bare httpx.AsyncClient loop (one client) {bare:8.0f} req/s")
        print(
            f"  evalreg fetch phase (HttpLayer + store)  {phase:8.0f} req/s   "
            f"{phase / bare:5.2f} x bare  (target >= {RATE_TARGET})"
        )
        print(
            f"  evalreg run, end to end                  {e2e_rate:8.0f} req/s   "
            f"{e2e_rate / bare:5.2f} x bare  ({e2e.seconds:.2f} s, start-up, grading, "
            "writes and DVC included)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
