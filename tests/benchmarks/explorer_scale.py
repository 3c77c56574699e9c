"""``evalreg view`` at scale: the explorer of 10,000 items x 5 candidates, in a browser.

Setup (not timed): a registry repository (git + DVC) with one task of 10,000 items and five
``openai`` candidates, stored responses written directly and graded by ``evalreg run
--offline`` (BASE); then two candidates change and are re-graded (HEAD). Timed: ``evalreg
view --base BASE`` in a fresh process (reading the records, the store and the eval set,
rendering the page), three times, the median; then the page it wrote, opened from the file
system in headless Chromium (Debian's, as the tests drive it): the time to the first
rendered matrix (from navigation start, the data parsed on the way), to apply a filter,
to draw rows after a scroll to the end, to search the text the first time (which reads
every input and output once) and again, and to make the CSV of every row, three times each.

Run: python tests/benchmarks/explorer_scale.py [--items N] [--candidates N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import harness

sys.path.insert(0, str(harness.ROOT / "tests"))

from support import browser

TARGET_LOAD_MS = 2000.0
TARGET_FILTER_MS = 100.0

FILTER = """
const started = performance.now();
const select = document.getElementById(arguments[0]);
select.value = arguments[1];
select.dispatchEvent(new Event("change"));
return [performance.now() - started, document.getElementById("count").textContent];
"""
SCROLL = """
const started = performance.now();
const rows = document.getElementById("rows");
rows.scrollTop = rows.scrollHeight;
rows.dispatchEvent(new Event("scroll"));
return [performance.now() - started, document.querySelectorAll("#layer .row").length];
"""
SEARCH = """
const started = performance.now();
const field = document.getElementById("f-search");
field.value = arguments[0];
field.dispatchEvent(new Event("input"));
return [performance.now() - started, document.getElementById("count").textContent];
"""
CSV = """
const started = performance.now();
const text = evalregExplorer.csv();
return [performance.now() - started, text.length];
"""


def set_temperature(root: Path, candidate: str, value: float) -> None:
    path = root / f"registry/models/{candidate}.yaml"
    path.write_text(path.read_text().replace("temperature: 0\n", f"temperature: {value}\n"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="build in DIR and keep it")
    args = parser.parse_args(argv)
    if not browser.available():
        print(f"needs {browser.CHROMIUM} and {browser.CHROMEDRIVER}")
        return 2
    harness.compile_bytecode()
    candidates = [f"cand{i:02d}" for i in range(1, args.candidates + 1)]
    with harness.workdir("evalreg-explorer-scale-") as scratch:
        tmp = Path(args.keep) if args.keep else scratch
        tmp.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        root = harness.make_registry(tmp / "repo", args.items, candidates=candidates)
        harness.fill_store(root)
        harness.evalreg(root, "run", "--offline", "--no-push")
        harness.run(["git", "add", "-A"], root)
        harness.run(["git", "commit", "-q", "-m", "base results"], root)
        base = harness.run(["git", "rev-parse", "HEAD"], root).stdout.strip()
        changed = candidates[:2]
        for c in changed:
            set_temperature(root, c, 0.2)
        harness.fill_store(root, only=changed, flavour=3, segments=1)
        harness.evalreg(root, "run", "--offline", "--no-push")
        harness.run(["git", "add", "-A"], root)
        harness.run(["git", "commit", "-q", "-m", "two candidates at temperature 0.2"], root)
        print(
            f"setup: {args.candidates} candidates x {args.items:,} items, "
            f"{len(changed)} changed, in {time.perf_counter() - started:.0f} s"
        )
        out = tmp / "explorer"
        runs = [
            harness.timed_evalreg(root, "view", "--base", base, "-o", str(out))
            for _ in range(args.repeat)
        ]
        if runs[0].returncode != 0:
            print(f"evalreg view exited {runs[0].returncode}: {runs[0].stderr[-2000:]}")
            return 1
        seconds = sorted(r.seconds for r in runs)
        print(
            f"evalreg view --base BASE: {statistics.median(seconds):.2f} s "
            f"({seconds[0]:.2f}-{seconds[-1]:.2f} s, peak RSS "
            f"{max(r.peak_rss_mb for r in runs):.0f} MB)"
        )
        (page,) = out.glob("*.html")
        print(f"page: {page.stat().st_size / 1e6:.1f} MB")
        loads, parses, filters, scrolls, searches, again, csvs = [], [], [], [], [], [], []
        with browser.chromium() as driver:
            for _ in range(args.repeat):
                driver.get(page.resolve().as_uri())
                marks = driver.execute_script(
                    "return ['explorer-data-parsed', 'explorer-ready'].map("
                    "n => performance.getEntriesByName(n)[0].startTime)"
                )
                parses.append(marks[0])
                loads.append(marks[1])
                ms_scroll, drawn = driver.execute_script(SCROLL)
                scrolls.append(ms_scroll)
                ms, count = driver.execute_script(FILTER, "f-slice", harness.TAGS[0])
                filters.append(ms)
                driver.execute_script(FILTER, "f-slice", "")
                ms, found = driver.execute_script(SEARCH, "i-00012")
                searches.append(ms)
                ms, found = driver.execute_script(SEARCH, "i-000123")
                again.append(ms)
                driver.execute_script(SEARCH, "")
                ms, csv_chars = driver.execute_script(CSV)
                csvs.append(ms)
        print(f"a scroll to the end draws {drawn} rows; the slice filter shows {count}")
        print(f"each measured {args.repeat} times in one browser: the median")
        print(f"  data parsed after          {statistics.median(parses):7.0f} ms")
        print(
            harness.ratio_line(
                "  first matrix rendered", statistics.median(loads), TARGET_LOAD_MS, "ms"
            )
        )
        print(
            harness.ratio_line(
                "  a slice filter applied", statistics.median(filters), TARGET_FILTER_MS, "ms"
            )
        )
        print(f"  rows drawn after a scroll  {statistics.median(scrolls):7.1f} ms")
        print(
            harness.ratio_line(
                "  a first text search", statistics.median(searches), TARGET_FILTER_MS, "ms"
            )
        )
        print(
            harness.ratio_line(
                "  a second text search", statistics.median(again), TARGET_FILTER_MS, "ms"
            )
        )
        print(f"    (the search shows {found})")
        csv_ms = statistics.median(csvs)
        print(f"  CSV of every row           {csv_ms:7.0f} ms ({csv_chars:,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
