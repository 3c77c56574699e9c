"""Scale-out: ``evalreg run --shard i/4`` in four processes sharing one DVC remote, then one
offline run that grades every shard's responses, compared byte for byte with a
single-process offline run over the same responses.

A CI matrix, played locally: the registry lives in an origin repository whose DVC remote is
a folder outside it. Each shard is a fresh clone that buys its share of the responses from
the loopback LLM server (its own process) and ``dvc push``es its store segment. The final
job is another clone: it takes the shards' segment pointers (CI would pass them as
artifacts), ``dvc pull``s the segments and runs ``evalreg run --offline``. The reference is a
third clone with the same segments merged into one (``evalreg store compact``), graded by a
single ``evalreg run --offline``. Their results must be identical.

Run: python tests/benchmarks/shards.py [--items N] [--shards N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import time
from pathlib import Path

import harness

STORE = "reports/store"
RESULTS = "reports/results"


def clone(origin: Path, dest: Path) -> Path:
    harness.run(["git", "clone", "-q", str(origin), str(dest)], origin.parent)
    return dest


def take_segments(shards: list[Path], dest: Path) -> int:
    """Copy every shard's segment pointers into ``dest`` and ``dvc pull`` the segments."""
    (dest / STORE).mkdir(parents=True, exist_ok=True)
    pointers = 0
    for shard in shards:
        for pointer in (shard / STORE).glob("*.jsonl.dvc"):
            shutil.copy2(pointer, dest / STORE / pointer.name)
            pointers += 1
    harness.run([harness.PYTHON, "-m", "dvc", "pull", "-q"], dest)
    return pointers


def differences(a: Path, b: Path) -> list[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    out = [f"only in one: {p}" for p in sorted(files_a ^ files_b)]
    for rel in sorted(files_a & files_b):
        if not filecmp.cmp(a / rel, b / rel, shallow=False):
            out.append(f"differs: {rel}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args(argv)
    harness.compile_bytecode()
    n, count, c = args.items, args.shards, args.concurrency
    with harness.workdir("evalreg-shards-") as tmp, harness.llm_server(args.latency) as server:
        remote = tmp / "remote"
        remote.mkdir()
        origin = harness.make_registry(
            tmp / "origin", n, base_url=server.base_url, concurrency=c, remote=str(remote)
        )
        shards = [clone(origin, tmp / f"shard{i}") for i in range(1, count + 1)]
        started = time.perf_counter()
        run = [harness.PYTHON, "-m", "evalreg", "run", "--max-concurrency", str(c)]
        procs = [
            subprocess.Popen(
                [*run, "--shard", f"{i}/{count}"],
                cwd=shard,
                env=harness.env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, shard in enumerate(shards, start=1)
        ]
        for i, proc in enumerate(procs, start=1):
            _out, err = proc.communicate()
            if proc.returncode != 0:
                print(f"shard {i}/{count} exited {proc.returncode}: {err[-2000:]}")
                return 1
        bought_s = time.perf_counter() - started
        print(
            f"{count} shard processes bought {n} responses in {bought_s:.2f} s "
            f"(each pushed its own segment to the shared DVC remote)"
        )

        final = clone(origin, tmp / "final")
        pointers = take_segments(shards, final)
        graded = harness.timed_evalreg(final, "run", "--offline", "--no-push")
        if graded.returncode != 0:
            print(f"final offline run exited {graded.returncode}: {graded.stderr[-2000:]}")
            return 1
        print(
            f"final job: dvc pull of {pointers} segments, evalreg run --offline "
            f"in {graded.seconds:.2f} s"
        )

        single = clone(origin, tmp / "single")
        take_segments(shards, single)
        harness.evalreg(single, "store", "compact", "--no-push")
        segments = len(list((single / STORE).glob("*.jsonl")))
        reference = harness.timed_evalreg(single, "run", "--offline", "--no-push")
        if reference.returncode != 0:
            print(f"single-process run exited {reference.returncode}: {reference.stderr[-2000:]}")
            return 1
        print(
            f"single process: the same responses compacted into {segments} segment, "
            f"evalreg run --offline in {reference.seconds:.2f} s"
        )

        diff = differences(final / RESULTS, single / RESULTS)
        files = sum(1 for p in (final / RESULTS).rglob("*") if p.is_file())
        if diff:
            print(f"results DIFFER ({len(diff)} of {files} files):")
            for line in diff[:20]:
                print(f"  {line}")
            return 1
        print(f"results byte-identical: {files} files under {RESULTS}/ compared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
