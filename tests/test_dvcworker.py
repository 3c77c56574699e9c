"""The run's ``dvc add`` in a child process: the same result as in-process, errors as text."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.errors import UsageError
from evalreg.runner._dvcworker import Tracker

from conftest import Repo

pytestmark = pytest.mark.dvc_child

SEGMENT = "reports/store/run-1.jsonl"


def dvc_repo(repo: Repo, remote: Path) -> Repo:
    dvcrepo.init(repo.root, str(remote))
    repo.commit("dvc")
    repo.write(SEGMENT, '{"k": 1}\n')
    repo.write("reports/results/labels/mini.items.jsonl", '{"item": "m-000"}\n')
    return repo


def state(repo: Repo) -> dict[str, object]:
    """What a `dvc add` leaves: pointers, ignores, the cache, and what git stages."""
    files = sorted(
        str(p.relative_to(repo.root))
        for p in repo.root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo.root).parts[:1]
        if "tmp" not in p.relative_to(repo.root).parts
    )
    return {
        "files": files,
        "pointers": {f: (repo.root / f).read_bytes() for f in files if f.endswith(".dvc")},
        "ignores": {f: (repo.root / f).read_bytes() for f in files if f.endswith(".gitignore")},
        "staged": repo.git("diff", "--cached", "--name-only"),
    }


def test_the_child_tracks_exactly_as_dvc_add_in_process(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    twin = Repo(tmp_path / "twin")
    shutil.copytree(repo.root, twin.root)
    paths = [SEGMENT, "reports/results/labels/mini.items.jsonl"]

    with Tracker(repo.root) as tracker:
        tracker.add(paths)
        assert tracker.push(paths) is None
    dvcrepo.track(twin.root, paths, push=True)

    assert state(repo) == state(twin)
    assert (repo.root / (SEGMENT + ".dvc")).is_file()
    assert "reports/store/run-1.jsonl.dvc" in state(repo)["staged"]  # type: ignore[operator]
    md5 = dvcrepo.pointer_md5((repo.root / (SEGMENT + ".dvc")).read_bytes())
    assert md5 is not None and dvcrepo.cached(repo.root, md5) == b'{"k": 1}\n'
    pushed = tmp_path / "remote" / "files" / "md5" / md5[:2] / md5[2:]
    assert pushed.read_bytes() == b'{"k": 1}\n'


def test_a_tracker_released_after_its_add_ends_its_child_before_it_is_closed(
    repo: Repo, tmp_path: Path
):
    dvc_repo(repo, tmp_path / "remote")
    with Tracker(repo.root) as tracker:
        tracker.add([SEGMENT])
        tracker.release()
        assert tracker.proc is not None
        assert tracker.proc.wait(timeout=60) == 0  # gone while the caller goes on
        assert tracker.push([SEGMENT]) is None  # a push after all: done in this process
    md5 = dvcrepo.pointer_md5((repo.root / (SEGMENT + ".dvc")).read_bytes())
    assert md5 is not None
    assert (tmp_path / "remote" / "files" / "md5" / md5[:2] / md5[2:]).is_file()


def test_a_tracker_never_asked_changes_nothing_and_frees_the_lock(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    before = repo.snapshot()
    tracker = Tracker(repo.root)
    tracker.close()  # at once: the child may not have started its interpreter yet
    assert tracker.proc is not None and tracker.proc.returncode in (0, -signal.SIGUSR1)
    after = repo.snapshot()
    after.pop(".dvc/tmp/lock", None)  # DVC's lock file (git-ignored) stays, unlocked
    assert after == before
    dvcrepo.track(repo.root, [SEGMENT], push=False)  # the lock was released
    assert (repo.root / (SEGMENT + ".dvc")).is_file()


def lock_held(root: Path) -> bool:
    """Whether a process holds DVC's repository lock (an exclusive ``flock``)."""
    path = root / ".dvc" / "tmp" / "lock"
    if not path.exists():
        return False
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def test_a_tracker_dismissed_while_holding_the_lock_releases_it(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    before = repo.snapshot()
    tracker = Tracker(repo.root)
    deadline = time.monotonic() + 60
    while not lock_held(repo.root):
        assert tracker.proc is not None and tracker.proc.poll() is None
        assert time.monotonic() < deadline, "the child never took the lock"
        time.sleep(0.005)
    tracker.close()
    assert tracker.proc is not None and tracker.proc.returncode == 0  # it unwound
    assert not lock_held(repo.root)
    after = repo.snapshot()
    after.pop(".dvc/tmp/lock", None)
    assert after == before


def test_without_a_child_process_the_tracker_works_in_this_one(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from evalreg.runner import _dvcworker as dvcworker

    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError("Resource temporarily unavailable")

    dvc_repo(repo, tmp_path / "remote")
    monkeypatch.setattr(dvcworker.subprocess, "Popen", no_process)
    with Tracker(repo.root) as tracker:
        assert tracker.proc is None
        tracker.add([SEGMENT])
        assert tracker.push([SEGMENT]) is None
        with pytest.raises(UsageError, match="DVC could not track reports/store/absent"):
            tracker.add(["reports/store/absent.jsonl"])
    md5 = dvcrepo.pointer_md5((repo.root / (SEGMENT + ".dvc")).read_bytes())
    assert md5 is not None
    assert (tmp_path / "remote" / "files" / "md5" / md5[:2] / md5[2:]).is_file()


def test_a_failed_add_is_an_error_naming_the_paths(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    with Tracker(repo.root) as tracker, pytest.raises(UsageError) as failure:
        tracker.add(["reports/store/absent.jsonl"])
    assert "DVC could not track reports/store/absent.jsonl" in str(failure.value)
    assert "Traceback" not in str(failure.value)


def test_the_push_failing_is_reported_and_the_data_kept(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    (tmp_path / "remote").write_text("a file where the remote directory should be\n")
    with Tracker(repo.root) as tracker:
        tracker.add([SEGMENT])
        error = tracker.push([SEGMENT])
    assert error is not None
    assert (repo.root / (SEGMENT + ".dvc")).is_file()
    md5 = dvcrepo.pointer_md5((repo.root / (SEGMENT + ".dvc")).read_bytes())
    assert md5 is not None and dvcrepo.cached(repo.root, md5) is not None


@pytest.mark.slow  # DVC's lock gives up after three seconds, in the child and again after
def test_a_lock_held_elsewhere_falls_back_and_reports(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """While another process holds the repository's lock the child cannot prepare; when
    asked, it tries the plain way and says why that failed too (at once: it is told not to
    wait for the holder)."""
    monkeypatch.setenv("EVALREG_DVC_LOCK_WAIT", "0")
    dvc_repo(repo, tmp_path / "remote")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dvc.repo import Repo, lock_repo\n"
            f"r = Repo({str(repo.root)!r})\n"
            "with lock_repo(r):\n"
            "    print('held', flush=True); sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with Tracker(repo.root) as tracker, pytest.raises(UsageError) as failure:
            tracker.add([SEGMENT])
        assert "lock" in str(failure.value).lower()
    finally:
        holder.communicate("")
    assert not (repo.root / (SEGMENT + ".dvc")).exists()
    with Tracker(repo.root) as tracker:
        tracker.add([SEGMENT])
    assert (repo.root / (SEGMENT + ".dvc")).is_file()


def test_read_ahead_fills_the_remembered_reads_with_verified_content(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    dvcrepo.track(repo.root, [SEGMENT, "reports/results/labels/mini.items.jsonl"], push=False)
    md5s = [
        dvcrepo.pointer_md5((repo.root / f"{rel}.dvc").read_bytes())
        for rel in (SEGMENT, "reports/results/labels/mini.items.jsonl")
    ]
    assert all(md5s)
    good, damaged = (m for m in md5s if m)
    # A cache file that no longer matches its md5 is not taken.
    (cache_file,) = (repo.root / ".dvc/cache/files/md5" / damaged[:2]).glob(damaged[2:])
    cache_file.chmod(0o644)
    cache_file.write_bytes(b"damaged\n")
    assert dvcrepo.read_ahead(repo.root, [good]) is not None  # outside: nothing to fill
    with dvcrepo.remembering_reads():
        dvcrepo.read_ahead(repo.root, [good, damaged, "0" * 32])()
        remembered = dvcrepo._RECENT
        assert remembered == {good: b'{"k": 1}\n'}
        # Now only the remembered copy has it: neither the cache nor the working tree.
        for path in (repo.root / ".dvc/cache/files/md5" / good[:2]).glob(good[2:]):
            path.unlink()
        (repo.root / SEGMENT).unlink()
        assert dvcrepo.read_tracked(repo.root, SEGMENT, good, None) == b'{"k": 1}\n'


def cache_file(repo: Repo, rel: str) -> Path:
    md5 = dvcrepo.pointer_md5((repo.root / f"{rel}.dvc").read_bytes())
    assert md5 is not None
    return repo.root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def test_a_cache_that_copies_leaves_the_tracked_file_as_written(repo: Repo, tmp_path: Path):
    """DVC's default cache copies: the file is copied into it once, not copied back over
    itself (the same bytes), and DVC sees the workspace as it tracked it."""
    dvc_repo(repo, tmp_path / "remote")
    written = 1_600_000_000_000_000_000  # a file copied back would be a new one, of now
    os.utime(repo.root / SEGMENT, ns=(written, written))
    with Tracker(repo.root) as tracker:
        tracker.add([SEGMENT])
    assert (repo.root / SEGMENT).stat().st_mtime_ns == written
    assert cache_file(repo, SEGMENT).read_bytes() == b'{"k": 1}\n'
    assert cache_file(repo, SEGMENT).stat().st_ino != (repo.root / SEGMENT).stat().st_ino
    dvc = dvcrepo.open_repo(repo.root)
    try:
        with dvcrepo.quiet():
            assert dvc.status() == {}
    finally:
        dvc.close()


def test_a_cache_that_links_still_links_the_tracked_file(repo: Repo, tmp_path: Path):
    dvc_repo(repo, tmp_path / "remote")
    dvc = dvcrepo.open_repo(repo.root)
    with dvc.config.edit() as conf:
        conf["cache"]["type"] = "hardlink"
    dvc.close()
    with Tracker(repo.root) as tracker:
        tracker.add([SEGMENT])
    assert (repo.root / SEGMENT).stat().st_ino == cache_file(repo, SEGMENT).stat().st_ino
    assert (repo.root / SEGMENT).read_bytes() == b'{"k": 1}\n'
