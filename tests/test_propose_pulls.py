"""``evalreg propose --open-pr`` and the people on the other side of its pull requests: a
reviewer's commit on a proposal branch is never overwritten, and a declined proposal is not
opened again. A bare ``origin`` on disk, the GitHub stand-in over loopback HTTP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from test_propose import TOKEN, github, lists, team

from evalreg.gitops.github import GitHubClient
from evalreg.propose import pulls

from conftest import Repo

FIXTURES = (github, lists, team)
"""Shared with test_propose: the registry, the model lists, the GitHub stand-in."""

MINI = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
FLASH = "evalreg/propose/flash-gemini-1.5-flash-002"
HAIKU = "evalreg/propose/retired-haiku"


def _run(where: Repo, cli, code: int = 0) -> dict:
    done = cli(where, "propose", "--open-pr", "--json")
    assert done.code == code, done.err
    assert "Traceback" not in done.err
    return json.loads(done.out)


def _actions(data: dict) -> dict[str, tuple[str, int]]:
    return {o["branch"]: (o["action"], o["number"]) for o in data["pulls"]}


def _all_pulls(api) -> list[dict]:
    """Every pull request of the stand-in's repository, in any state (one per number)."""
    got = httpx.get(
        f"{api.url}/repos/acme/registry/pulls",
        params={"state": "all", "per_page": "100"},
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    got.raise_for_status()
    return got.json()


def _origin(api) -> Path:
    return Path(api.git_dir)


def _tip(git_dir: Path, branch: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"refs/heads/{branch}"],
        cwd=git_dir,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _fresh_clone(api, where: Path) -> Repo:
    """A clone the way CI's checkout makes one: the base branch only, one commit deep."""
    shallow = ("--depth", "1", "--single-branch", "--branch", "main")
    subprocess.run(
        ["git", "clone", "-q", *shallow, f"file://{_origin(api)}", str(where)],
        check=True,
        capture_output=True,
    )
    return Repo(where)


def _move_main(team: Repo) -> str:
    """A new commit on main, pushed: every proposal is rebuilt on it next time."""
    team.write("README.md", "A registry.\n")
    head = team.commit("a note")
    team.git("push", "-q", "origin", "main")
    return head


def _writes_to(api, number: int) -> list:
    return [w for w in api.writes() if w.path.split("?")[0].endswith(f"/pulls/{number}")]


def test_a_reviewers_commit_on_the_remote_branch_survives_next_weeks_run_from_a_fresh_clone(
    team: Repo, github, cli, tmp_path
):
    first = _run(team, cli)
    assert {a for a, _ in _actions(first).values()} == {"opened"}
    origin = _origin(github)
    # A reviewer confirms the prices: removes price.review, as the pull request asks.
    reviewer = Repo(tmp_path / "reviewer")
    subprocess.run(
        ["git", "clone", "-q", "--branch", MINI, str(origin), str(reviewer.root)],
        check=True,
        capture_output=True,
    )
    rel = "registry/models/mini-2026-10-01.yaml"
    pin = reviewer.read(rel)
    assert "  review: " in pin
    reviewer.write(rel, "".join(x for x in pin.splitlines(True) if "  review: " not in x))
    fixed = reviewer.commit("Confirm the prices of mini-2026-10-01")
    reviewer.git("push", "-q", "origin", MINI)
    before = {p["number"]: p for p in _all_pulls(github)}
    mini_pr = next(n for n, p in before.items() if p["head"]["ref"] == MINI)
    writes = len(github.writes())
    head = _move_main(team)
    # Next week: CI's fresh clone, where no proposal branch exists.
    ci = _fresh_clone(github, tmp_path / "ci")
    lacks = subprocess.run(["git", "cat-file", "-e", fixed], cwd=ci.root, capture_output=True)
    assert lacks.returncode != 0  # the reviewer's commit is fetched to be read
    data = _run(ci, cli)
    outcomes = {o["branch"]: o for o in data["pulls"]}
    assert outcomes[MINI]["action"] == "kept" and outcomes[MINI]["number"] == mini_pr
    assert outcomes[MINI]["url"] == before[mini_pr]["html_url"]
    # The remote branch is the reviewer's, byte for byte; the pull request is untouched.
    assert _tip(origin, MINI) == fixed
    assert _writes_to(github, mini_pr) == []
    after = {p["number"]: p for p in _all_pulls(github)}
    assert after[mini_pr] == before[mini_pr] and set(after) == set(before)
    # The other proposals are propose's own: rebuilt on the new main and pushed.
    assert _actions(data)[FLASH][0] in ("unchanged", "updated")
    for branch in (FLASH, HAIKU):
        assert ci.git("rev-parse", f"{_tip(origin, branch)}^").strip() == head
    assert len(github.writes()) == writes  # their pull requests already say what they hold
    # Nothing left behind in the clone: no scratch ref, no remote-tracking branch.
    assert ci.git("for-each-ref", "refs/evalreg").strip() == ""
    assert ci.git("for-each-ref", f"refs/remotes/origin/{MINI}").strip() == ""
    # The text says so too.
    done = cli(ci, "propose", "--open-pr")
    assert done.code == 0, done.err
    assert f"#{mini_pr} kept: {MINI}" in done.out
    assert _tip(origin, MINI) == fixed


def test_a_proposal_whose_local_branch_is_kept_is_not_pushed(team: Repo, github, cli, tmp_path):
    first = _actions(_run(team, cli))
    origin = _origin(github)
    pushed = _tip(origin, MINI)
    # A person commits on the proposal branch here, and has not pushed it.
    work = tmp_path / "work"
    team.git("worktree", "add", "-q", str(work), MINI)
    mine = Repo(work)
    mine.write("NOTES.md", "Prices to be checked with finance.\n")
    local = mine.commit("A note for the reviewers")
    team.git("worktree", "remove", str(work))
    _move_main(team)
    writes = len(github.writes())
    data = _run(team, cli)
    (proposal,) = [p for p in data["proposals"] if p["branch"] == MINI]
    assert proposal["outcome"] == "kept"
    assert _actions(data)[MINI] == ("kept", first[MINI][1])
    assert _tip(origin, MINI) == pushed != local
    assert _writes_to(github, first[MINI][1]) == []
    assert _actions(data)[FLASH][0] in ("unchanged", "updated")
    assert _tip(origin, FLASH) == team.git("rev-parse", FLASH).strip()
    assert len(github.writes()) == writes


def test_a_declined_proposal_is_not_opened_again(team: Repo, github, cli):
    first = _actions(_run(team, cli))
    number = first[MINI][1]
    origin = _origin(github)
    pushed = _tip(origin, MINI)
    # A person declines it: closes the pull request without merging.
    closed = httpx.patch(
        f"{github.url}/repos/acme/registry/pulls/{number}",
        json={"state": "closed"},
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    assert closed.status_code == 200 and closed.json()["merged_at"] is None
    _move_main(team)  # the branch is rebuilt: pushing it would be a change
    writes = len(github.writes())
    data = _run(team, cli)
    (outcome,) = [o for o in data["pulls"] if o["branch"] == MINI]
    assert (outcome["action"], outcome["number"]) == ("declined", number)
    assert outcome["url"].endswith(f"/pull/{number}")
    from_mini = [p for p in _all_pulls(github) if p["head"]["ref"] == MINI]
    assert [(p["number"], p["state"]) for p in from_mini] == [(number, "closed")]
    assert _tip(origin, MINI) == pushed  # not pushed either
    assert len(github.writes()) == writes
    done = cli(team, "propose", "--open-pr")
    assert done.code == 0, done.err
    assert f"#{number} declined: {MINI}" in done.out
    assert len(_all_pulls(github)) == 3


def test_only_a_closed_unmerged_pull_request_is_a_decline(github):
    """A merged pull request is not a decline: only one closed without merging is."""
    github.add_pull(7, "a" * 40, merged_as="b" * 40)
    github.add_pull(8, "c" * 40, state="closed")
    github.add_pull(9, "d" * 40)
    with GitHubClient(TOKEN, "acme/registry", api_url=github.url) as client:
        assert pulls._declined(client, "branch-7") is None
        assert pulls._declined(client, "branch-9") is None
        declined = pulls._declined(client, "branch-8")
    assert declined is not None and declined["number"] == 8


def test_a_commit_pushed_while_propose_runs_is_not_overwritten(
    team: Repo, github, cli, monkeypatch: pytest.MonkeyPatch
):
    first = _actions(_run(team, cli))
    origin = _origin(github)
    pushed = _tip(origin, MINI)
    # Someone pushes to the branch just before propose pushes over it.
    tree = team.git("rev-parse", f"{pushed}^{{tree}}").strip()
    theirs = team.git("commit-tree", tree, "-p", pushed, "-m", "A reviewer's fix").strip()
    run = subprocess.run

    def raced(argv, *args, **kwargs):
        if argv[:2] == ["git", "push"] and argv[-1].endswith(f"/{MINI}"):
            theirs_pushed = ["git", "push", "-q", "origin", f"{theirs}:refs/heads/{MINI}"]
            run(theirs_pushed, cwd=team.root, check=True, capture_output=True)
        return run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", raced)
    _move_main(team)
    data = _run(team, cli, code=1)  # a branch not pushed: the job says so
    (outcome,) = [o for o in data["pulls"] if o["branch"] == MINI]
    assert (outcome["action"], outcome["number"]) == ("failed", first[MINI][1])
    assert data["problems"] == [f"{MINI}: not pushed: {outcome['reason']}"]
    assert _tip(origin, MINI) == theirs
    assert _writes_to(github, first[MINI][1]) == []
    assert _actions(data)[FLASH][0] in ("unchanged", "updated")
