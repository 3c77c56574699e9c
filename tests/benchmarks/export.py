"""``evalreg export`` at scale: the outputs table of 100,000 items x 1 candidate.

Setup (not timed): a registry repository (git + DVC) with one task of N items and one
``openai`` candidate, its responses stored directly (``harness.fill_store``, four segments)
and graded by ``evalreg run --offline``, committed. Timed: ``evalreg export`` in a fresh
process, to a file, as CSV, as JSON Lines, and as CSV read at ``--rev HEAD`` (through git
and the DVC cache), three times each (the median, and the largest peak resident set of the
child). Targets: under 10 s and under 200 MB at N = 100,000: the rows stream, a cell's
records and their responses a batch at a time.

Run: python tests/benchmarks/export.py [--items N] [--repeat N] [--keep DIR]
(``--keep DIR`` builds the repository in DIR and keeps it; given again, it is reused.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import harness

TARGET_SECONDS = 10.0
TARGET_RSS_MB = 200.0


def build(root: Path, items: int) -> None:
    harness.make_registry(root, items)
    harness.fill_store(root)
    harness.evalreg(root, "run", "--offline", "--no-push")
    harness.run(["git", "add", "-A"], root)
    harness.run(["git", "commit", "-q", "-m", "results"], root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="build in DIR and keep it (reused)")
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    with harness.workdir("evalreg-export-") as scratch:
        tmp = Path(args.keep) if args.keep else scratch
        root = tmp / "repo"
        if (root / "reports/results/bench/bench.json").is_file():
            print(f"reusing {root}")
        else:
            tmp.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            build(root, args.items)
            print(f"setup: {args.items:,} items, {time.perf_counter() - started:.1f} s")
        failed = False
        for kind, rev in (("csv", ()), ("jsonl", ()), ("csv", ("--rev", "HEAD"))):
            out = scratch / f"outputs.{kind}"
            runs = []
            for _ in range(args.repeat):
                timed = harness.timed_evalreg(
                    root, "export", "bench", "--format", kind, *rev, "-o", str(out)
                )
                if timed.returncode != 0:
                    print(timed.stderr)
                    return 1
                runs.append(timed)
            lines = out.read_bytes().count(b"\n")
            rows = lines - 1 if kind == "csv" else lines
            if rows != args.items:
                print(f"{kind}: {rows:,} rows written, {args.items:,} expected")
                failed = True
            seconds = statistics.median(r.seconds for r in runs)
            rss = max(r.peak_rss_mb for r in runs)
            size = out.stat().st_size / 1e6
            what = " ".join(("export --format", kind, *rev))
            print(f"{what}: {rows:,} rows, {size:.1f} MB")
            print(
                harness.ratio_line(f"  time ({args.items:,} items)", seconds, TARGET_SECONDS, "s")
            )
            print(harness.ratio_line("  peak RSS of the child", rss, TARGET_RSS_MB, "MB"))
            failed |= seconds > TARGET_SECONDS or rss > TARGET_RSS_MB
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
