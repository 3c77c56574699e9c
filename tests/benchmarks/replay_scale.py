"""Offline re-grading at scale: ``evalreg run --offline --force`` and ``evalreg report`` over
N stored responses, for N = 25,000, 50,000 and 100,000.

Each N gets a fresh registry repository (git + DVC) with one task of N single-turn items and
one ``openai`` pin; its response store is written directly (``store.encode_record`` through
``SegmentWriter``, four segments, as four earlier runs would leave it). Printed per N: wall
time and items per second of the run (start-up included), the report's wall time, and the
peak resident set of each child. Targets: at least 30,000 items/s at N = 100,000, and
memory flat in N, at most 400 MB at N = 1,000,000 (``--items 100000 1000000``). A digest
of the written results lets two versions of evalreg be compared byte for byte.

Run: python tests/benchmarks/replay_scale.py [--items N ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import harness

TARGET_RATE = 30_000
TARGET_RSS_MB = 400


def results_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted((root / "reports/results").rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, nargs="+", default=[25_000, 50_000, 100_000])
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    print("evalreg run --offline --force, then evalreg report (start-up included)")
    print(
        f"{'N':>8} {'run s':>7} {'items/s':>9} {'run RSS MB':>11} "
        f"{'report s':>9} {'report RSS MB':>14}  results digest"
    )
    rows = []
    for n in args.items:
        with harness.workdir("evalreg-replay-") as tmp:
            root = harness.make_registry(tmp / "repo", n)
            harness.fill_store(root)
            run = harness.timed_evalreg(root, "run", "--offline", "--force", "--no-push")
            if run.returncode != 0:
                print(f"{n:8d} evalreg run failed ({run.returncode}): {run.stderr[-2000:]}")
                continue
            summary = json.loads((root / "reports/results/bench/bench.json").read_text())
            if summary["totals"]["samples"] != n:
                raise RuntimeError(f"expected {n} records, got {summary['totals']['samples']}")
            report = harness.timed_evalreg(root, "report")
            if report.returncode != 0:
                print(f"{n:8d} evalreg report failed: {report.stderr[-2000:]}")
            rate = n / run.seconds
            rows.append((n, rate, run.peak_rss_mb))
            print(
                f"{n:8d} {run.seconds:7.2f} {rate:9.0f} {run.peak_rss_mb:11.0f} "
                f"{report.seconds:9.2f} {report.peak_rss_mb:14.0f}  {results_digest(root)}"
            )
            sys.stdout.flush()
    if rows:
        n, rate, rss = rows[-1]
        print()
        print(harness.ratio_line(f"items/s at N = {n}", rate, TARGET_RATE, "it/s", lower=False))
        print(harness.ratio_line(f"peak RSS at N = {n}", rss, TARGET_RSS_MB, "MB"))
        if len(rows) > 1:
            (n0, _, rss0), (n1, _, rss1) = rows[0], rows[-1]
            per_item = (rss1 - rss0) / (n1 - n0) * 1024
            print(f"memory growth from N = {n0} to N = {n1}: {per_item:.2f} KB per item")
    return 0


if __name__ == "__main__":
    sys.exit(main())
