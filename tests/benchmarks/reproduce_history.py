"""History at audit speed: ``evalreg reproduce --range BASE..HEAD`` over R revisions of a
registry of N items and C candidates (defaults: 50 revisions, 10,000 items, 5 candidates).

The history is built as a team's would be: a first commit with every cell run, then R - 1
commits that each change one candidate's pin (a new ``seed``, so new requests: its
responses are stored, as the run that bought them would have, and the cell is run
offline), every tenth commit changing the rubric instead (every cell re-graded, nothing
bought). Printed: the time to build the history, the time of ``reproduce --range`` over
all of it (start-up included), how many cells it graded and how many it found with
evidence already reproduced, and, for comparison, ``reproduce REV`` alone on three of
the revisions, extrapolated to R. Target: under 60 s for the range.

Building the history takes minutes; ``--keep DIR`` builds it in DIR once and later runs with
the same DIR (and the same sizes) time the commands on it again without rebuilding.

Run: python tests/benchmarks/reproduce_history.py [--revisions R] [--items N] [--candidates C]
     [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from pathlib import Path

import harness

TARGET_S = 60.0


def build(root: Path, revisions: int, items: int, candidates: list[str]) -> str:
    """The history; returns the commit before the first results."""
    harness.make_registry(root, items, candidates=candidates)
    base = harness.run(["git", "rev-parse", "HEAD"], root).stdout.strip()
    harness.fill_store(root)
    harness.evalreg(root, "run", "--offline", "--no-push")
    harness.run(["git", "add", "-A"], root)
    harness.run(["git", "commit", "-q", "-m", "first results"], root)
    rubric = root / "registry/rubrics/bench.yaml"
    for r in range(1, revisions):
        if r % 10 == 0:
            # The length limit moves: every cell is re-graded, nothing is bought.
            text = rubric.read_text()
            limit = 40 + r // 10
            rubric.write_text(
                text.replace(f"max_chars: {limit - 1}", f"max_chars: {limit}"), encoding="utf-8"
            )
            description = f"rubric: max_chars {limit}, every cell re-graded"
        else:
            cand = candidates[r % len(candidates)]
            pin = root / f"registry/models/{cand}.yaml"
            pin.write_text(harness.pin_yaml("http://127.0.0.1:9/v1", 64, seed=1000 + r))
            harness.fill_store(root, segments=1, only=[cand], flavour=r)
            description = f"{cand}: new seed"
        harness.evalreg(root, "run", "--offline", "--no-push")
        harness.run(["git", "add", "-A"], root)
        harness.run(["git", "commit", "-q", "-m", description], root)
    return base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--revisions", type=int, default=50)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the history in DIR and keep it; a later run with DIR reuses it",
    )
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    candidates = [f"cand{i}" for i in range(args.candidates)]
    shape = f"{args.revisions} revisions x {args.items:,} items x {args.candidates} candidates"
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            root = stack.enter_context(harness.workdir("evalreg-history-")) / "repo"
        else:
            root = args.keep.resolve()
        built_mark = root / ".git" / "evalreg-history-base"
        if built_mark.is_file() and built_mark.read_text().split("\n")[1:2] == [shape]:
            base = built_mark.read_text().split("\n")[0]
            print(f"history: {shape}, kept in {root}")
        else:
            if root.exists() and any(root.iterdir()):
                print(f"--keep {root}: not empty and not a history of this shape")
                return 2
            started = time.perf_counter()
            base = build(root, args.revisions, args.items, candidates)
            built = time.perf_counter() - started
            built_mark.write_text(f"{base}\n{shape}\n")
            print(f"history: {shape}, built in {built:.0f} s")
        ranged = harness.timed_evalreg(root, "reproduce", "--range", f"{base}..HEAD")
        if ranged.returncode != 0:
            print(f"reproduce --range failed ({ranged.returncode}):")
            print(ranged.stdout[-3000:], ranged.stderr[-3000:])
            return 1
        tail = ranged.stdout.strip().splitlines()[-1]
        print(f"reproduce --range: {ranged.seconds:.1f} s, peak RSS {ranged.peak_rss_mb:.0f} MB")
        print(f"  {tail}")
        revs = harness.run(
            ["git", "rev-list", "--first-parent", "--reverse", f"{base}..HEAD"], root
        ).stdout.split()
        sample = [revs[0], revs[len(revs) // 2], revs[-1]]
        alone = [harness.timed_evalreg(root, "reproduce", rev).seconds for rev in sample]
        per_rev = sum(alone) / len(alone)
        print(
            f"reproduce REV alone: {', '.join(f'{s:.1f}' for s in alone)} s on three "
            f"revisions; x {len(revs)} revisions = {per_rev * len(revs):.0f} s "
            f"({per_rev * len(revs) / ranged.seconds:.1f} x the range)"
        )
        match = re.search(r"(\d+) cells? graded, (\d+) with evidence", tail)
        if match:
            graded, shared = int(match[1]), int(match[2])
            print(f"cells graded {graded}, reused {shared} of {graded + shared}")
        print(harness.ratio_line("reproduce --range", ranged.seconds, TARGET_S, "s"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
