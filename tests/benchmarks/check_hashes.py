"""What verifying the store against its DVC pointers costs ``evalreg check``: the CPU time
of the command (its own and its children's: wall time on a shared machine says more of the
machine than of the command) for N records, in the states a clone passes through.

Each N gets a registry repository (git + DVC) whose store holds N records in four segments
tracked by DVC (``harness.synthetic_store``). Printed per N, the median CPU seconds of
``evalreg check``:

- first: no md5 remembered yet, DVC's state database as ``dvc add`` left it (a fresh clone
  after ``dvc pull`` is in this state);
- second: the md5s the first remembered, the files unchanged (every later check);
- touched: no md5 remembered and every segment's mtime changed, so DVC's state does not
  know them either: everything is hashed.

Run: python tests/benchmarks/check_hashes.py [--items N ...] [--repeat R] [--keep DIR]
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import harness


def cpu_of_check(root: Path) -> float:
    """CPU seconds (user + system) of one ``evalreg check`` and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = harness.evalreg(root, "check", check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode == 2:
        raise RuntimeError(proc.stderr[-4000:])
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def forget_hashes(remembered: Path, touch: list[Path]) -> None:
    """Forget every remembered md5, and change the mtime of the files in ``touch``."""
    remembered.unlink(missing_ok=True)
    for path in touch:
        os.utime(path)


def median(root: Path, repeat: int, before: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        before()
        times.append(cpu_of_check(root))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    from evalreg.store.hashes import HASHES
    from evalreg.store.lock import state_dir
    from evalreg.store.segments import STORE_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, nargs="+", default=[20_000, 400_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the stores here once, and reuse them")
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    print("evalreg check, median CPU seconds")
    print(f"{'N':>9} {'store MB':>9} {'first':>7} {'second':>7} {'touched':>8}")
    for n in args.items:
        with harness.workdir("evalreg-check-hashes-") as tmp:
            root = (args.keep or tmp) / f"store-{n}"
            if not root.is_dir():
                harness.make_registry(root, 10)
                harness.synthetic_store(root, n)
                harness.run(["git", "add", "-A"], root)
                harness.run(["git", "commit", "-q", "-m", "store"], root)
            segments = sorted((root / STORE_DIR).glob("*.jsonl"))
            forget = functools.partial(forget_hashes, state_dir(root) / HASHES, [])
            touch = functools.partial(forget_hashes, state_dir(root) / HASHES, segments)
            first = median(root, args.repeat, forget)
            second = median(root, args.repeat)
            touched = median(root, args.repeat, touch)
            size = sum(p.stat().st_size for p in segments) / 1e6
            print(f"{n:9d} {size:9.0f} {first:7.2f} {second:7.2f} {touched:8.2f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
