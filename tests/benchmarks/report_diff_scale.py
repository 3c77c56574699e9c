"""``evalreg report`` and ``evalreg diff`` at scale: 20 candidates x 10 slices x 10,000 items.

Setup (not timed): a registry repository (git + DVC) with one task of 10,000 items in ten
slices and 20 candidates, each its own ``openai`` pin; their stored responses are written
directly and graded by ``evalreg run --offline`` (the BASE commit). Then five candidates
change (a new ``temperature``), their new responses are stored and graded, and that is
committed as HEAD. Timed, each in a fresh process, start-up included: ``evalreg report`` at
HEAD, and ``evalreg diff BASE HEAD`` as Markdown and as JSON, three times each (the
median counts: one run on a small shared machine can be 20 % off). Target: under 2 s each.

Run: python tests/benchmarks/report_diff_scale.py [--items N] [--candidates N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import harness

TARGET_S = 2.0
SLICE_TAGS = tuple(f"slice{i}" for i in range(9))  # and "long": ten slices


def set_temperature(root: Path, candidate: str, value: float) -> None:
    path = root / f"registry/models/{candidate}.yaml"
    path.write_text(path.read_text().replace("temperature: 0\n", f"temperature: {value}\n"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--changed", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command")
    parser.add_argument(
        "--keep", metavar="DIR", help="build the repository in DIR and keep it (for profiling)"
    )
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    candidates = [f"cand{i:02d}" for i in range(1, args.candidates + 1)]
    with harness.workdir("evalreg-report-scale-") as scratch:
        tmp = Path(args.keep) if args.keep else scratch
        tmp.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        root = harness.make_registry(
            tmp / "repo", args.items, candidates=candidates, tags=SLICE_TAGS
        )
        harness.fill_store(root)
        harness.evalreg(root, "run", "--offline", "--no-push")
        harness.run(["git", "add", "-A"], root)
        harness.run(["git", "commit", "-q", "-m", "base results"], root)
        base = harness.run(["git", "rev-parse", "HEAD"], root).stdout.strip()
        changed = candidates[: args.changed]
        for c in changed:
            set_temperature(root, c, 0.2)
        harness.fill_store(root, only=changed, flavour=3, segments=1)
        harness.evalreg(root, "run", "--offline", "--no-push")
        harness.evalreg(root, "report")
        harness.run(["git", "add", "-A"], root)
        harness.run(["git", "commit", "-q", "-m", "five candidates at temperature 0.2"], root)
        print(
            f"setup: {args.candidates} candidates x {args.items} items in "
            f"{len(SLICE_TAGS) + 1} slices, {len(changed)} changed, "
            f"in {time.perf_counter() - started:.0f} s"
        )
        cases = [
            ("evalreg report", ("report",)),
            ("evalreg diff BASE HEAD (Markdown)", ("diff", base, "HEAD", "-o", str(tmp / "d.md"))),
            (
                "evalreg diff BASE HEAD (JSON)",
                ("diff", base, "HEAD", "--format", "json", "-o", str(tmp / "d.json")),
            ),
        ]
        print(f"each timed {args.repeat} times in fresh processes: the median, and the range")
        for label, cli_args in cases:
            results = [harness.timed_evalreg(root, *cli_args) for _ in range(args.repeat)]
            failed = [r for r in results if r.returncode != 0]
            if failed:
                print(f"{label}: exited {failed[0].returncode}: {failed[0].stderr[-2000:]}")
                continue
            seconds = sorted(r.seconds for r in results)
            line = harness.ratio_line(label, statistics.median(seconds), TARGET_S, "s")
            print(
                f"{line}  ({seconds[0]:.2f}-{seconds[-1]:.2f} s, "
                f"peak RSS {max(r.peak_rss_mb for r in results):.0f} MB)"
            )
        md = tmp / "d.md"
        size = len(md.read_text(encoding="utf-8")) if md.exists() else 0
        print(f"diff Markdown: {size:,} characters (GitHub's limit is 65,536)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
