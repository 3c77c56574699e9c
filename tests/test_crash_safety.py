"""A run stopped at any instant, or run twice at once, loses nothing and buys nothing twice.

Every test drives real ``evalreg`` processes in their own process group against a real
git + DVC repository and a loopback model server, signals the whole group as a terminal
(Ctrl-C), a CI runner (cancel) or a container engine (stop) would, then resumes and
checks the server's counts, the store, DVC's pointers and remote, and ``reproduce``.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalreg.cells import METRICS_DIR
from evalreg.store.lock import state_dir
from evalreg.store.segments import STORE_DIR, ResponseStore

from conftest import Repo, registry_template, replace_tree
from support import runs
from support.llm_server import LLMServer
from support.matrix import cross_section

ITEMS = 60  # x 2 HTTP pins = 120 requests a run


@pytest.fixture
def server(server_port: int):
    with LLMServer(
        api_key=runs.KEY, responder=runs.label_of, latency=0.01, port=server_port
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def registry_on_dvc(tmp_path_factory, server_port: int) -> Path:
    """``registry``'s repository, built once for the module (``dvc init``, add and push)."""
    with LLMServer(api_key=runs.KEY, port=server_port) as srv:
        return registry_template(
            tmp_path_factory, lambda r: runs.live_registry(r, srv, items=ITEMS)
        )


@pytest.fixture
def registry(repo: Repo, server: LLMServer, registry_on_dvc: Path) -> Repo:
    """The registry with two HTTP pins at ``server``, on DVC: this test's own copy."""
    return replace_tree(repo, registry_on_dvc)


def assert_whole(repo: Repo, server: LLMServer, kept: set[str]) -> None:
    """After a resumed run: nothing kept was bought again, every cell is fresh, every data
    file is tracked and pushed, and the committed results reproduce."""
    rebought = [r for r in server.requests if runs.request_key_of(r, server) in kept]
    assert rebought == [], f"{len(rebought)} stored responses were bought again"
    status = runs.in_process(repo, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert {c["state"] for c in json.loads(status.stdout)} == {"fresh"}
    assert runs.untracked_data(repo) == []
    assert runs.unpushed_md5s(repo) == []
    assert not (state_dir(repo.root) / "journal.json").exists()
    metrics = sorted(
        p.relative_to(repo.root).as_posix() for p in (repo.root / METRICS_DIR).rglob("*.json")
    )
    assert metrics == [f"{METRICS_DIR}/labels/{c}.json" for c in ("mini", "mini2")]
    assert all(f"  - {m}\n" in repo.read("dvc.yaml") for m in metrics)
    repo.commit("results")
    assert runs.raw_in_git(repo) == []
    store = ResponseStore.open(repo.root)
    assert store.stats.torn == 0
    assert len(store) == 2 * ITEMS
    reproduced = runs.in_process(repo, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


@pytest.mark.parametrize(
    ("moment", "signum"),
    cross_section(runs.MOMENTS, SIGNALS, ids=lambda m, s: f"{signal.Signals(s).name}-{m.name}"),
)
def test_a_run_signalled_at_any_moment_resumes_without_loss_or_rebuying(
    registry: Repo, server: LLMServer, moment: runs.Moment, signum: int
):
    err, code = runs.signal_at(registry, server, moment, signum)
    assert "Traceback" not in err
    if code is not None and signum != signal.SIGKILL:
        assert code == 128 + signum, err
    kept = runs.stored_keys(registry)  # what reached the store before the signal
    bought_before = server.count()
    assert bought_before - len(kept) <= 64  # at most the requests in flight were lost
    server.reset()

    resumed = runs.evalreg(registry, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert server.count() == 2 * ITEMS - len(kept)
    assert_whole(registry, server, kept)


def test_status_and_check_repair_an_interrupted_run_before_reporting(
    registry: Repo, server: LLMServer
):
    moment = runs.MOMENTS[2]  # the closing step begins
    runs.signal_at(registry, server, moment, signal.SIGKILL)
    assert runs.journal_phase(registry) == "commit"
    status = runs.evalreg(registry, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert "finished an interrupted run's closing step" in status.stderr
    assert {c["state"] for c in json.loads(status.stdout)} == {"fresh"}
    assert runs.journal_phase(registry) is None
    assert runs.untracked_data(registry) == []
    check = runs.evalreg(registry, "check")
    assert "finished an interrupted run" not in check.stderr  # nothing left to repair
    # Repairing pushes nothing; the push still owed is a warning until a run makes it.
    assert "are not on the DVC remote yet" in check.stderr
    assert runs.evalreg(registry, "run").returncode == 0
    assert runs.unpushed_md5s(registry) == []
    assert "DVC remote" not in runs.evalreg(registry, "check").stderr


def test_a_second_run_meanwhile_is_refused_naming_the_first(registry: Repo, server: LLMServer):
    with server.hold() as held:  # the first run is still fetching when the second starts
        first = runs.start(registry, "run")
        assert runs.wait_until(first, lambda: held.waiting > 0), first.communicate()
        second = runs.evalreg(registry, "run")
    assert second.returncode == 2
    assert f"pid {first.pid}" in second.stderr
    assert " run`" in second.stderr and "Traceback" not in second.stderr
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert server.count() == 2 * ITEMS  # the refused run bought nothing
    assert_whole(registry, server, set())


@pytest.mark.parametrize("split", ["overlapping", "disjoint"])
def test_two_runs_started_together_buy_each_response_once(
    registry: Repo, server: LLMServer, split: str
):
    server.latency = 0.02
    args = (["--candidate", "mini"], ["--candidate", "mini2"]) if split == "disjoint" else ([], [])
    procs = [runs.start(registry, "run", *a) for a in args]
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 2], outcomes  # one ran, the other was refused at once
    refused = next(err for code, err in outcomes if code == 2)
    assert "another evalreg process is writing" in refused and "Traceback" not in refused
    again = runs.evalreg(registry, "run")  # what the refused one would have done
    assert again.returncode == 0, again.stderr
    keys = [runs.request_key_of(r, server) for r in server.requests]
    assert len(keys) == len(set(keys)) == 2 * ITEMS  # nothing bought twice, nothing lost
    assert_whole(registry, server, set())


def test_a_file_size_limit_mid_run_ends_with_a_message_and_the_next_run_completes(
    registry: Repo, server: LLMServer
):
    # `ulimit -f` (as a full disk does) stops the store segment mid-run.
    stopped = runs.evalreg(registry, "run", max_file_bytes=40_000)
    assert stopped.returncode == 2, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert "reports/store/" in stopped.stderr and "File too large" in stopped.stderr
    kept = runs.stored_keys(registry)
    assert 0 < len(kept) < 2 * ITEMS
    server.reset()
    resumed = runs.evalreg(registry, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert "rolled back an interrupted run" in resumed.stderr
    assert server.count() == 2 * ITEMS - len(kept)
    assert_whole(registry, server, kept)


def test_check_reports_data_left_untracked_outside_any_run(registry: Repo, server: LLMServer):
    assert runs.evalreg(registry, "run").returncode == 0
    stray = registry.root / STORE_DIR / "20260101T000000Z-run-0badc0de.jsonl"
    # Responses no revision tracks (a copy of a tracked segment would be in DVC's cache).
    tracked = (registry.root / STORE_DIR).glob("*.jsonl").__next__().read_bytes()
    stray.write_bytes(tracked.splitlines(keepends=True)[0])
    check = runs.evalreg(registry, "check")
    assert check.returncode == 1
    (line,) = [x for x in check.stderr.splitlines() if stray.name in x and "dvc add" in x]
    assert line.startswith(f"{STORE_DIR}/{stray.name}:") and "not tracked by DVC" in line


@pytest.fixture
def tmpfs() -> Iterator[Callable[[Path, str], None]]:
    """Mount a small tmpfs (``mount(8)`` options) at a directory, or change its options;
    skipped where this process may not mount (not root, no CAP_SYS_ADMIN)."""
    if shutil.which("mount") is None:
        pytest.skip("no mount(8)")
    mounted: list[Path] = []

    def mount(path: Path, options: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        remount = path in mounted
        args = ["mount", "-o", f"remount,{options}" if remount else options]
        args += [str(path)] if remount else ["-t", "tmpfs", "tmpfs", str(path)]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        if not remount:
            mounted.append(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_mid_run_ends_with_a_message_and_the_next_run_completes(
    registry: Repo, server: LLMServer, tmpfs: Callable[[Path, str], None]
):
    store = registry.root / STORE_DIR
    tmpfs(store, "size=48k")
    stopped = runs.evalreg(registry, "run")
    assert stopped.returncode == 2, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert "No space left on device" in stopped.stderr and "reports/store/" in stopped.stderr
    kept = runs.stored_keys(registry)
    assert 0 < len(kept) < 2 * ITEMS
    tmpfs(store, "size=16m")  # space is freed
    server.reset()
    resumed = runs.evalreg(registry, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert server.count() == 2 * ITEMS - len(kept)
    assert_whole(registry, server, kept)


def test_a_read_only_reports_directory_stops_the_run_before_it_buys(
    registry: Repo, server: LLMServer, tmpfs: Callable[[Path, str], None]
):
    reports = registry.root / "reports"
    tmpfs(reports, "size=16m")
    tmpfs(reports, "ro")
    before = registry.snapshot()
    refused = runs.evalreg(registry, "run")
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert "Read-only file system" in refused.stderr and "reports/" in refused.stderr
    assert server.count() == 0
    assert registry.snapshot() == before
    tmpfs(reports, "rw")
    resumed = runs.evalreg(registry, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert_whole(registry, server, set())


@pytest.mark.parametrize("content", [b"{}", b'{"run": 1, "phase": "commit"}', b"[1, 2]"])
def test_a_journal_in_another_shape_is_left_alone(
    registry: Repo, server: LLMServer, content: bytes
):
    journal = state_dir(registry.root) / "journal.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_bytes(content)
    for command in (["status"], ["run"]):
        done = runs.evalreg(registry, *command)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr


def test_a_dvc_lock_table_left_half_written_is_repaired(registry: Repo, server: LLMServer):
    moment = runs.MOMENTS[2]  # the closing step begins
    runs.signal_at(registry, server, moment, signal.SIGKILL)
    # DVC rewrites its lock table in place: a kill mid-write leaves it like this.
    (registry.root / ".dvc" / "tmp" / "rwlock").write_bytes(b'{"write": {"reports/st')
    kept = runs.stored_keys(registry)
    server.reset()
    resumed = runs.evalreg(registry, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert_whole(registry, server, kept)
