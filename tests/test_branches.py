"""Branches that re-run the same cell: their store segments stay theirs, raw output never
reaches git, and a merge of their generated files is resolved offline."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from evalreg.check import check
from evalreg.registry.tree import GitTree
from evalreg.store.segments import STORE_DIR

from conftest import Repo, registry_template, replace_tree
from support import runs
from support.llm_server import LLMServer

ITEMS = 60


@pytest.fixture
def server(server_port: int):
    with LLMServer(
        api_key=runs.KEY, responder=runs.label_of, latency=0.01, port=server_port
    ) as srv:
        yield srv


def _results_on_main(repo: Repo, server: LLMServer) -> None:
    reg = runs.live_registry(repo, server, items=ITEMS, pins=1)
    assert runs.in_process(reg, "run").returncode == 0
    assert runs.in_process(reg, "report").returncode == 0
    reg.git("add", "-A")
    reg.commit("results")


@pytest.fixture(scope="module")
def results_on_main(tmp_path_factory, server_port: int) -> Path:
    """``registry``'s repository, built once for the module (a live run and a report)."""
    with LLMServer(api_key=runs.KEY, responder=runs.label_of, port=server_port) as srv:
        return registry_template(tmp_path_factory, lambda r: _results_on_main(r, srv))


@pytest.fixture
def registry(repo: Repo, server: LLMServer, results_on_main: Path) -> Repo:
    """One HTTP pin at ``server``, on DVC, its results and report committed on main (this
    test's own copy)."""
    return replace_tree(repo, results_on_main)


PIN = "registry/models/mini.yaml"
RUBRIC = "registry/rubrics/labels.yaml"


def _branch(repo: Repo, name: str, temperature: str, *, rubric: bool = False) -> None:
    """A branch off main that changes the pin (and the rubric), runs live and commits
    what a user would: everything ``git add -A`` picks up."""
    repo.git("checkout", "-q", "-b", name, "main")
    repo.write(PIN, repo.read(PIN).replace("temperature: 0\n", f"temperature: {temperature}\n"))
    if rubric:
        repo.write(RUBRIC, repo.read(RUBRIC).replace('version: "1"', 'version: "2"'))
    ran = runs.in_process(repo, "run")
    assert ran.returncode == 0, ran.stderr
    assert runs.in_process(repo, "report").returncode == 0
    repo.git("add", "-A")
    repo.commit(f"{name}: re-run")


def _segments_in(repo: Repo, rev: str) -> set[str]:
    listed = repo.git("ls-tree", "--name-only", rev, f"{STORE_DIR}/").splitlines()
    return {p for p in listed if p.endswith(".jsonl.dvc")}


def _no_raw_output_staged(repo: Repo) -> None:
    repo.git("add", "-A")
    staged = repo.git("status", "--porcelain").splitlines()
    assert not [line for line in staged if line.endswith((".jsonl", ".tmp"))], staged


def test_a_segment_another_branch_left_is_not_added_here_unless_results_use_it(
    registry: Repo, server: LLMServer
):
    _branch(registry, "a", "0.2")
    a_only = _segments_in(registry, "a") - _segments_in(registry, "main")
    assert len(a_only) == 1
    # Branch b buys other requests: a's segment, still on disk (ignored), is not its own.
    _branch(registry, "b", "0.3")
    assert _segments_in(registry, "b") & a_only == set()
    assert runs.in_process(registry, "check").returncode == 0  # a's file is a's, not a finding
    # Branch c makes a's requests again: its results use a's responses (nothing is bought),
    # so it tracks a's segment too, with the same pointer, and reproduces from a clone.
    before = server.count()
    _branch(registry, "c", "0.2")
    assert server.count() == before
    assert a_only <= _segments_in(registry, "c")
    for pointer in a_only:
        assert registry.git("show", f"c:{pointer}") == registry.git("show", f"a:{pointer}")
    assert runs.in_process(registry, "reproduce", "HEAD").returncode == 0


def test_two_branches_that_re_ran_one_cell_merge_with_resolve(registry: Repo, server: LLMServer):
    _branch(registry, "a", "0.2")
    _branch(registry, "b", "0.3", rubric=True)
    registry.git("checkout", "-q", "a")
    merged = subprocess.run(["git", "merge", "--no-edit", "b"], cwd=registry.root)
    assert merged.returncode != 0  # the pin conflicts (a source), and the generated files
    conflicted = check(registry.root)
    assert conflicted.exit_code() == 1
    assert any("evalreg resolve" in f.message for f in conflicted.findings)
    refused = runs.in_process(registry, "resolve")
    assert refused.returncode == 2 and PIN in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    # The team keeps a's pin and b's rubric: responses a bought, graded by b's rubric.
    registry.git("checkout", "--ours", "--", PIN)
    registry.git("add", PIN)
    before = server.count()
    resolved = runs.in_process(registry, "resolve")
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    assert "git commit" in resolved.stdout
    assert server.count() == before  # nothing bought
    assert registry.git("ls-files", "-u") == ""
    registry.git("commit", "-q", "--no-edit")
    done = runs.in_process(registry, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    reproduced = runs.in_process(registry, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr
    _no_raw_output_staged(registry)


def test_check_fails_when_raw_output_is_committed_to_git(registry: Repo):
    segment = next((registry.root / STORE_DIR).glob("*.jsonl"))
    rel = segment.relative_to(registry.root).as_posix()
    registry.git("rm", "-q", "--cached", f"{rel}.dvc")
    (registry.root / f"{rel}.dvc").unlink()
    registry.git("add", "-f", rel)
    found = check(registry.root)
    assert found.exit_code() == 1
    assert any(f.path == rel and "committed to git" in f.message for f in found.findings)
    registry.commit("segment in git")
    at_rev = check(GitTree(registry.root, "HEAD"))
    assert any(f.path == rel and "committed to git" in f.message for f in at_rev.findings)


@pytest.mark.parametrize(
    "moment", [runs.MOMENTS[0], runs.MOMENTS[2], runs.MOMENTS[3]], ids=lambda m: m.name
)
def test_a_run_killed_leaves_nothing_git_add_would_commit(
    registry: Repo, server: LLMServer, moment: runs.Moment
):
    registry.write(PIN, registry.read(PIN).replace("temperature: 0\n", "temperature: 0.5\n"))
    registry.commit("new temperature")
    runs.signal_at(registry, server, moment, signal.SIGKILL)
    _no_raw_output_staged(registry)
