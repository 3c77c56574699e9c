"""The response store at scale: ``ResponseStore.open`` and reads by key over N records,
for N = 100,000 and 1,000,000.

Each N gets a registry repository (git + DVC) whose store holds N records shaped as a
replay's (``harness.fill_store``'s), written straight into four segments and tracked by
DVC, as four earlier runs would leave them (``harness.synthetic_store``: no registry to
render, so a million records take seconds). A fresh child process then opens the store
and asks it, in random order, whether it holds every key, and for every record. Printed
per N: the open's wall and CPU time and what it added to the peak resident set, the CPU
time per ``key in store`` and per ``get``, and the peak resident set at the end.

Run: python tests/benchmarks/store_scale.py [--items N ...] [--keep DIR]
(``--keep DIR`` builds the stores into DIR once and reuses them on later runs.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness

CHILD = """
import random, resource, sys, time
from pathlib import Path
import numpy  # a run imports it anyway: not the store's to count
from evalreg.store.segments import ResponseStore

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

root = Path(sys.argv[1])
before, cpu0, wall0 = peak_mb(), cpu(), time.perf_counter()
store = ResponseStore.open(root)
records = store.stats.records
wall1, open_cpu = time.perf_counter(), cpu() - cpu0
opened = peak_mb()
keys = Path(sys.argv[2]).read_text().split()
random.Random(7).shuffle(keys)
cpu1 = cpu()
held = sum(1 for key in keys if key in store)
cpu2 = cpu()
read = sum(1 for key in keys if store.get(key) is not None)
cpu3 = cpu()
assert records == held == read == len(keys), (records, held, read, len(keys))
print(wall1 - wall0, open_cpu, opened - before, (cpu2 - cpu1) / held * 1e6,
      (cpu3 - cpu2) / read * 1e6, peak_mb())
"""


def build(root: Path, n: int) -> Path:
    """A registry whose store holds ``n`` records, and the file listing their keys."""
    keys = root / "keys.txt"
    if not keys.is_file():
        harness.make_registry(root, 10)
        keys.write_text("\n".join(harness.synthetic_store(root, n)) + "\n")
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--keep", type=Path, help="build the stores here once, and reuse them")
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    print("ResponseStore.open, then `key in store` and `get` for every key (random order)")
    print(
        f"{'N':>9} {'open s':>7} {'open CPU s':>11} {'open +RSS MB':>13} "
        f"{'in us':>6} {'get us':>7} {'peak RSS MB':>12}"
    )
    for n in args.items:
        with harness.workdir("evalreg-store-") as tmp:
            root = (args.keep or tmp) / f"store-{n}"
            keys = build(root, n)
            proc = harness.run([harness.PYTHON, "-c", CHILD, str(root), str(keys)], root)
            wall, cpu, added, contains, get, peak = map(float, proc.stdout.split())
            print(
                f"{n:9d} {wall:7.2f} {cpu:11.2f} {added:13.0f} "
                f"{contains:6.2f} {get:7.2f} {peak:12.0f}"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
