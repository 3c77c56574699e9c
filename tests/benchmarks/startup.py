"""Start-up: ``evalreg --help`` (target under 0.1 s) and ``evalreg check`` on the shipped
example registry (target under 0.5 s), in this checkout and in a fresh clone (no eval-set
file in the working tree, no DVC cache: the data comes from the remote beside it), each
the median of several fresh processes, with the modules each one imports. Also, with no
target, ``evalreg run --offline`` on the example: the run's start-up (its imports, loading
and planning; every cell is fresh or pending, so nothing is bought or written).

Run: python tests/benchmarks/startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

import harness

CASES: tuple[tuple[str, tuple[str, ...], float | None], ...] = (
    ("evalreg --help", ("--help",), 0.1),
    ("evalreg check (example registry)", ("-C", str(harness.ROOT), "check"), 0.5),
    (
        "evalreg run --offline (example, nothing to buy)",
        ("-C", str(harness.ROOT), "run", "--offline"),
        None,
    ),
)
HEAVY = (
    *("dvc", "scipy", "pydantic", "rich", "git", "httpx", "jinja2", "jsonschema", "numpy"),
    *("click", "pygments", "botocore"),
)


def imported(args: tuple[str, ...]) -> list[str]:
    """Which heavy top-level packages the command imports."""
    probe = (
        "import sys, runpy; sys.argv = ['evalreg', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('evalreg', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print('MODULES:', *sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    proc = subprocess.run(
        [harness.PYTHON, "-c", probe, *args], capture_output=True, text=True, env=harness.env()
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("MODULES:")]
    return lines[-1].split()[1:] if lines else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    with harness.workdir("evalreg-startup-") as tmp:
        clone = tmp / "clone"
        harness.run(["git", "clone", "-q", str(harness.ROOT), str(clone)], tmp)
        fresh = ("evalreg check (a fresh clone)", ("-C", str(clone), "check"), 0.5)
        for case in (*CASES, fresh):
            measure(*case, repeat=args.repeat)
    return 0


def measure(label: str, cli_args: tuple[str, ...], target: float | None, *, repeat: int) -> None:
    times = []
    for _ in range(repeat):
        result = harness.timed([harness.PYTHON, "-m", "evalreg", *cli_args], harness.ROOT)
        if result.returncode not in (0, 1):
            print(f"{label}: exited {result.returncode}: {result.stderr[-1000:]}")
            break
        times.append(result.seconds)
    if not times:
        return
    median = statistics.median(times)
    label = f"{label} (median of {len(times)})"
    if target is None:
        print(f"{label:52s} {median:10.3f} s")
    else:
        print(harness.ratio_line(label, median, target, "s"))
    modules = " ".join(imported(cli_args)) or "none of the heavy ones"
    print(f"    min {min(times):.3f} s, max {max(times):.3f} s; imports: {modules}")


if __name__ == "__main__":
    sys.exit(main())
