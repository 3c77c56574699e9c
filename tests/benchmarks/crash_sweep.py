"""Signal a real ``evalreg run`` at many instants, resume, and report what each left.

For each trial a fresh copy of one registry (git + DVC, two OpenAI pins at a loopback
server) is run as its own process group; SIGINT, SIGTERM or SIGKILL goes to the whole
group after a delay spread evenly over a clean run's duration, closing step included.
Then ``evalreg run`` resumes, and the trial is whole when nothing stored was bought
again, nothing is missing, every data file is tracked and pushed, no raw data is in
git, and ``evalreg reproduce HEAD`` is identical.

    python tests/benchmarks/crash_sweep.py --trials 60 --items 150
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from conftest import GIT_ENV, PIN_PYTHON, RUBRIC, SELECTION, SYSTEM, TASK, Repo  # noqa: E402
from support import runs  # noqa: E402
from support.llm_server import LLMServer  # noqa: E402


def template(base: Path, server: LLMServer, items: int) -> Repo:
    repo = Repo(base / "template")
    repo.root.mkdir()
    repo.git("init", "-q", "-b", "main")
    for rel, text in {
        "registry/models/rules.yaml": PIN_PYTHON,
        "registry/models/mini.yaml": "",
        "registry/rubrics/labels.yaml": RUBRIC,
        "registry/tasks/labels.yaml": TASK,
        "registry/selections/labels.yaml": SELECTION,
        "registry/systems/rules.py": SYSTEM,
        runs.EVALSET: "",
    }.items():
        repo.write(rel, text)
    repo.commit("registry")
    return runs.live_registry(repo, server, items=items)


def whole(repo: Repo, server: LLMServer, kept: set[str], total: int) -> list[str]:
    """What is wrong after the resumed run (nothing: [])."""
    problems = []
    rebought = sum(runs.request_key_of(r, server) in kept for r in server.requests)
    if rebought:
        problems.append(f"{rebought} stored responses bought again")
    status = runs.evalreg(repo, "status", "--json")
    if status.returncode or {c["state"] for c in json.loads(status.stdout)} != {"fresh"}:
        problems.append("cells not fresh after resuming")
    if untracked := runs.untracked_data(repo):
        problems.append(f"untracked data: {untracked}")
    if unpushed := runs.unpushed_md5s(repo):
        problems.append(f"not pushed: {unpushed}")
    repo.commit("results")
    if raw := runs.raw_in_git(repo):
        problems.append(f"raw data in git: {raw}")
    if len(runs.stored_keys(repo)) != total:
        problems.append("responses missing from the store")
    reproduced = runs.evalreg(repo, "reproduce", "HEAD")
    if reproduced.returncode:
        problems.append("reproduce HEAD differs")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--items", type=int, default=150)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument(
        "--span",
        type=float,
        default=1.3,
        help="signal times cover this multiple of a clean run's duration (runs vary)",
    )
    parser.add_argument(
        "--closing",
        type=float,
        metavar="S",
        help="instead, signal 0 to S seconds after the closing step begins (the journal's "
        "commit phase), to cover the track and push steps densely",
    )
    args = parser.parse_args()
    os.environ.update(GIT_ENV)
    os.environ["DVC_NO_ANALYTICS"] = "1"
    base = Path(tempfile.mkdtemp(prefix="evalreg-sweep-"))
    total = 2 * args.items
    with LLMServer(api_key=runs.KEY, responder=runs.label_of, latency=args.latency) as srv:
        repo = template(base, srv, args.items)
        clean = Repo(base / "clean")
        shutil.copytree(repo.root, clean.root, symlinks=True)
        started = time.monotonic()
        assert runs.evalreg(clean, "run").returncode == 0
        duration = time.monotonic() - started
        print(f"clean run: {duration:.2f} s for {total} requests")
        signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
        tally: Counter[tuple[str, str]] = Counter()
        failures = []
        for trial in range(args.trials):
            signum = signals[trial % len(signals)]
            if args.closing is None:
                delay = args.span * duration * (trial + 0.5) / args.trials
                moment = runs.Moment(f"{delay:.3f}s", lambda r, s, b: True, after=delay)
            else:
                delay = args.closing * (trial + 0.5) / args.trials
                moment = runs.Moment(
                    f"closing+{delay:.3f}s",
                    lambda r, s, b: runs.journal_phase(r) == "commit",
                    after=delay,
                )
            copy = Repo(base / f"trial-{trial}")
            shutil.copytree(repo.root, copy.root, symlinks=True)
            srv.reset()
            _, code = runs.signal_at(copy, srv, moment, signum)
            phase = runs.journal_phase(copy) or ("none" if code is not None else "ended")
            kept = runs.stored_keys(copy)
            srv.reset()
            resumed = runs.evalreg(copy, "run")
            problems = [] if resumed.returncode == 0 else [f"resume exit {resumed.returncode}"]
            problems += whole(copy, srv, kept, total)
            verdict = "whole" if not problems else "DAMAGED"
            tally[(signal.Signals(signum).name, verdict)] += 1
            print(
                f"{trial:3d} {signal.Signals(signum).name:8s} at {moment.name:>14s} "
                f"journal={phase:7s}"
                f" kept={len(kept):4d}  {verdict} {'; '.join(problems)}",
                flush=True,
            )
            if problems:
                failures.append(trial)
            shutil.rmtree(copy.root, ignore_errors=True)
    print()
    for (name, verdict), n in sorted(tally.items()):
        print(f"{name:8s} {verdict:8s} {n}")
    print(f"{args.trials - len(failures)} of {args.trials} trials whole")
    shutil.rmtree(base, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
