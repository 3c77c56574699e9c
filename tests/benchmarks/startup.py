"""Start-up: ``evalreg --help`` (target under 0.3 s) and ``evalreg check`` on the shipped
example registry (target under 1 s), each the median of several fresh processes, with the
modules each one imports.

Run: python tests/benchmarks/startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

import harness

CASES = (
    ("evalreg --help", ("--help",), 0.3),
    ("evalreg check (example registry)", ("-C", str(harness.ROOT), "check"), 1.0),
)
HEAVY = ("dvc", "scipy", "pydantic", "rich", "git", "httpx", "jinja2", "jsonschema", "numpy")


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
    for label, cli_args, target in CASES:
        times = []
        for _ in range(args.repeat):
            result = harness.timed([harness.PYTHON, "-m", "evalreg", *cli_args], harness.ROOT)
            if result.returncode not in (0, 1):
                print(f"{label}: exited {result.returncode}: {result.stderr[-1000:]}")
                break
            times.append(result.seconds)
        if not times:
            continue
        median = statistics.median(times)
        print(harness.ratio_line(f"{label} (median of {len(times)})", median, target, "s"))
        modules = " ".join(imported(cli_args)) or "none of the heavy ones"
        print(f"    min {min(times):.3f} s, max {max(times):.3f} s; imports: {modules}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
