"""Two worktrees of one repository share its lock: a run in one refuses a run in the other
while it writes, naming the worktree it writes to, since neither sees the other's store and
both would buy every response."""

from __future__ import annotations

import json
import time
from pathlib import Path

from evalreg.store.lock import lock_dir, state_dir

from conftest import Repo
from support import runs


def _worktree(repo: Repo, path: Path) -> Repo:
    repo.git("worktree", "add", "-q", str(path), "-b", "other")
    return Repo(path)


def test_a_run_in_another_worktree_is_refused_naming_the_worktree(
    live: Repo, server, tmp_path: Path
):
    other = _worktree(live, tmp_path / "other")
    assert lock_dir(other.root) == lock_dir(live.root) == state_dir(live.root)
    assert state_dir(other.root) != state_dir(live.root)  # each keeps its own journal
    with runs.holding(server, after=0):
        first = runs.start(live, "run")
        deadline = time.monotonic() + 60
        while server.count() == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert server.count() == 1, "the first run never reached the server"
        second = runs.evalreg(other, "run")
        assert second.returncode == 2, second.stderr
        assert f"pid {first.pid}" in second.stderr
        assert f"in its worktree {live.root.resolve()}" in second.stderr
        assert "Traceback" not in second.stderr
        # A reader in the other worktree does not take the first run for its own.
        status = runs.evalreg(other, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert "a run is in progress" not in status.stderr
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    bought = server.count()
    assert bought == 4  # the mini pin's four items, once: the refused run bought nothing
    holder = json.loads((lock_dir(live.root) / "lock").read_text())
    assert holder["worktree"] == str(live.root.resolve())
    # Once the first has ended, the other worktree runs (its own store: it buys its own).
    again = runs.evalreg(other, "run")
    assert again.returncode == 0, again.stderr
