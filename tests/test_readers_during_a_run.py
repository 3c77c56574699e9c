"""Commands that only read, while a run writes: they name the run, leave its files and its
journal alone, and judge the repository as if those files were not there yet.

The run is a real ``evalreg run`` process, caught mid-fetch by a loopback server that
holds its requests; the readers are real processes beside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from evalreg.store.journal import Journal, Staged
from evalreg.store.lock import RepositoryLock, state_dir
from evalreg.store.segments import STORE_DIR

from conftest import Repo
from support import runs
from support.llm_server import LLMServer

ANSWERED = 2
"""Requests the server answers before it holds the rest (the live registry's run sends 4)."""


@contextmanager
def run_held_mid_fetch(repo: Repo, server: LLMServer) -> Iterator[subprocess.Popen[str]]:
    """``evalreg run`` in its own process, its requests held by the server after the
    first ``ANSWERED`` until the block ends; then it finishes, and must succeed."""
    with runs.holding(server, after=ANSWERED):
        run = runs.start(repo, "run")
        # Caught once the held request has arrived and the answered ones are in its segment
        # (written as they arrive): from then on, nothing in the tree changes until release.
        assert runs.wait_until(
            run, lambda: server.count() > ANSWERED and stored_lines(repo) >= ANSWERED
        ), run.communicate()
        try:
            yield run
        except BaseException:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate(timeout=120)
            raise
    _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err


def stored_lines(repo: Repo) -> int:
    """Whole lines in the run's segments (those without a DVC pointer yet)."""
    return sum(
        (repo.root / rel).read_bytes().count(b"\n")
        for rel in runs.untracked_data(repo)
        if rel.startswith(STORE_DIR) and rel.endswith(".jsonl")
    )


def note_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if "a run is in progress" in x]
    return line


def test_check_during_a_run_names_it_and_leaves_its_files_out(live: Repo, server):
    with run_held_mid_fetch(live, server) as run:
        # The run's segment is in the working tree, not tracked yet: its own.
        assert [p for p in runs.untracked_data(live) if p.startswith(STORE_DIR)]
        check = runs.evalreg(live, "check")
        as_json = runs.evalreg(live, "check", "--json")
        assert runs.journal_phase(live) == "fetch"  # neither rolled back nor completed

    assert check.returncode == 0, check.stderr  # pending cells and no report: warnings
    assert "dvc add" not in check.stderr and "not tracked by DVC" not in check.stderr
    note = note_line(check.stderr)
    assert note.startswith("evalreg: note: a run is in progress in this repository (pid ")
    assert f"pid {run.pid} on " in note and " run`" in note
    assert " UTC): " in note and "the files it is writing were not checked" in note
    assert "Traceback" not in check.stderr
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["ok"] and data["run_in_progress"]["pid"] == run.pid
    assert data["run_in_progress"]["started"].endswith(" UTC")
    assert data["run_in_progress"]["command"].endswith(" run")
    # Once the run has ended, its files are tracked: nothing to leave out, nor to repair.
    after = runs.evalreg(live, "check")
    assert "Traceback" not in after.stderr and "not tracked by DVC" not in after.stderr
    assert "in progress" not in after.stderr and "interrupted" not in after.stderr


def outside_dvc_tmp(repo: Repo) -> dict[str, tuple[str, int]]:
    """``repo.snapshot()`` but for DVC's own scratch files (the run's DVC child uses them)."""
    return {k: v for k, v in repo.snapshot().items() if not k.startswith(".dvc/tmp/")}


def test_status_and_report_during_a_run(live: Repo, server):
    with run_held_mid_fetch(live, server) as run:
        # The run's own segment is left out: the run may still be flushing the responses
        # it was answered before the hold into it.
        own = {p for p in runs.untracked_data(live) if p.startswith(STORE_DIR)}
        before = {k: v for k, v in outside_dvc_tmp(live).items() if k not in own}
        status = runs.evalreg(live, "status", "--json")
        report = runs.evalreg(live, "report")
        assert {k: v for k, v in outside_dvc_tmp(live).items() if k not in own} == before
        assert runs.journal_phase(live) == "fetch"

    assert status.returncode == 0, status.stderr
    assert {c["state"] for c in json.loads(status.stdout)} == {"pending"}
    assert f"pid {run.pid} on " in note_line(status.stderr)
    # The report is written by one writer at a time: refused while the run writes.
    assert report.returncode == 2
    assert "another evalreg process is writing to this repository" in report.stderr
    assert f"pid {run.pid} on " in report.stderr and "Traceback" not in report.stderr


def test_a_killed_run_is_no_run_in_progress_and_check_repairs_it(live: Repo, server):
    held = runs.Moment("requests held", lambda repo, srv, before: srv.count() > ANSWERED)
    with runs.holding(server, after=ANSWERED):
        _, code = runs.signal_at(live, server, held, signal.SIGKILL)
    assert code == -signal.SIGKILL
    # The lock file still names the run, which holds nothing any more.
    holder = json.loads((state_dir(live.root) / "lock").read_text())
    assert runs.journal_phase(live) == "fetch"

    check = runs.evalreg(live, "check")

    assert check.returncode == 0, check.stderr
    assert "rolled back an interrupted run" in check.stderr
    assert "in progress" not in check.stderr and f"pid {holder['pid']}" not in check.stderr
    assert runs.journal_phase(live) is None
    assert runs.untracked_data(live) == []


def test_check_leaves_out_the_results_a_closing_run_is_putting_in_place(live: Repo, cli):
    """Between moving a cell's records into place and tracking them, the closing step's
    files look like any left untracked: the journal says whose they are."""
    items = "reports/results/labels/mini.items.jsonl"
    with RepositoryLock(live.root, command="evalreg run") as lock:
        journal = Journal.begin(live.root, push=False)
        segment = f"{STORE_DIR}/20260101T000000Z-run-0123abcd.jsonl"
        journal.add_segment(segment)
        live.write(segment, '{"key": "x"}\n')
        journal.items = [Staged(journal.tmp_name(items), items)]
        journal.phase = "commit"
        journal.save()
        live.write(items, '{"item": "m-000"}\n')

        check = cli(live, "check")

        assert check.code == 0, check.err
        assert f"pid {os.getpid()} on " in note_line(check.err)
        assert items not in check.err and segment not in check.err
        journal.path.unlink()  # this test's run never closes
        lock.release()
    # With no run in progress, the same files are findings.
    check = cli(live, "check")
    assert check.code == 1
    assert f"{items}: finding: not tracked by DVC" in check.err
    assert f"{segment}: finding: not tracked by DVC" in check.err
