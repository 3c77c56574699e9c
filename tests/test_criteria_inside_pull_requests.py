"""Criteria fixed before the evidence, judged inside merged pull requests: a merge commit's
second-parent side, a squash merge's own commits (``refs/pull/N/head``), and rebased
commits; and a selection declared over results that already existed. The report and the
audit say the same, in the same words."""

from __future__ import annotations

import pytest

from evalreg.text.escape import cell

from conftest import SELECTION, Repo

STRICT = "registry/selections/strict.yaml"
LATE = "criteria changed after the evidence they judge first existed"
DECLARED = "selection declared after its evidence"


def _strict(gate: str) -> str:
    """A second use case over the labels task: the rules baseline, one gate."""
    text = SELECTION.replace("use_case: Message labelling", "use_case: Strict labelling")
    text = text.replace("  - id: mini\n    pin: mini\n", "")
    return text.replace("min: 0.5", f"min: {gate}")


def _pull_request(repo: Repo, cli) -> str:
    """Branch ``strict``: its first commit adds the use case with a 0.9 gate; its second
    records the first results and, in the same commit, loosens the gate to 0.5."""
    repo.git("checkout", "-q", "-b", "strict")
    repo.write(STRICT, _strict("0.9"))
    repo.commit("Strict labelling, gate 0.9")
    assert cli(repo, "run", "--candidate", "rules").code == 0
    repo.write(STRICT, _strict("0.5"))
    head = repo.commit("First results; gate 0.5")
    repo.git("checkout", "-q", "main")
    return head


def _audit_flags(repo: Repo, cli) -> str:
    record = cli(repo, "audit", "--no-verify")
    assert record.code == 0, record.err
    return record.out.split("## Flags", 1)[1].split("\n## ", 1)[0]


def _flagged(flags: str, selection: str, kind: str) -> bool:
    return any(
        ln.startswith(f"- **{selection}**") and cell(kind) in ln for ln in flags.splitlines()
    )


def _line(flags: str, selection: str, kind: str) -> str:
    return next(
        ln for ln in flags.splitlines() if ln.startswith(f"- **{selection}**") and cell(kind) in ln
    )


def _report_criteria(repo: Repo, cli) -> str:
    assert cli(repo, "report").code == 0
    page = repo.read("reports/strict.md")
    return page.split("## 3. Criteria\n", 1)[1].split("An item **passes**", 1)[0]


@pytest.fixture
def main(live: Repo) -> Repo:
    live.git("branch", "-M", "main")
    return live


def test_a_merge_commit_is_judged_by_the_pull_requests_own_commits(main: Repo, cli):
    head = _pull_request(main, cli)
    main.git("merge", "--no-ff", "-q", "-m", "Merge pull request #21 from team/strict", "strict")
    merge = main.git("rev-parse", "HEAD").strip()
    flags = _audit_flags(main, cli)
    line = _line(flags, "strict", LATE)
    assert cell(LATE) in line
    assert cell(f"results first in {head[:12]}") in line
    assert cell(f"inside pull request #21 merged in {merge[:12]}") in line
    assert not _flagged(flags, "labels", LATE)  # its criteria did not move
    criteria = _report_criteria(main, cli)
    assert "**⚠ Criteria changed after the evidence:**" in criteria
    assert head[:12] in criteria


def test_a_squash_merge_is_judged_when_its_pull_request_head_is_fetched(main: Repo, cli):
    head = _pull_request(main, cli)
    main.git("merge", "--squash", "-q", "strict")
    main.git("commit", "-q", "-m", "Strict labelling (#21)")
    squash = main.git("rev-parse", "HEAD").strip()
    flags = _audit_flags(main, cli)
    assert "- **strict**" not in flags
    assert cell(f"pull request #21 (squashed in {squash[:12]})") in flags
    assert cell("fetch refs/pull/21/head") in flags
    main.git(
        "update-ref", "refs/pull/21/head", head
    )  # what `git fetch origin 'refs/pull/*'` writes
    flags = _audit_flags(main, cli)
    line = _line(flags, "strict", LATE)
    assert cell(LATE) in line and cell(f"inside pull request #21 merged in {squash[:12]}") in line
    assert "Not checked" not in flags


def test_rebased_commits_are_judged_on_main_itself(main: Repo, cli):
    head = _pull_request(main, cli)
    main.git("merge", "--ff-only", "-q", "strict")
    flags = _audit_flags(main, cli)
    line = _line(flags, "strict", LATE)
    assert cell(LATE) in line and cell(f"results first in {head[:12]}") in line
    assert "inside pull request" not in line


def test_a_pull_request_that_fixed_its_criteria_first_is_not_flagged(main: Repo, cli):
    main.git("checkout", "-q", "-b", "strict")
    main.write(STRICT, _strict("0.9"))
    main.commit("Strict labelling, gate 0.9")
    assert cli(main, "run", "--candidate", "rules").code == 0
    main.commit("First results")
    main.git("checkout", "-q", "main")
    main.git("merge", "--no-ff", "-q", "-m", "Merge pull request #22 from team/strict", "strict")
    flags = _audit_flags(main, cli)
    assert "- **strict**" not in flags
    assert "**Criteria fixed before evidence:**" in _report_criteria(main, cli)


def test_a_selection_declared_over_results_already_on_main_is_flagged(main: Repo, cli):
    assert cli(main, "run", "--candidate", "rules").code == 0
    results = main.commit("rules results")
    main.write(STRICT, _strict("0.5"))
    # Before it is committed, the report already says so...
    criteria = _report_criteria(main, cli)
    assert "**⚠ Selection declared after its evidence:**" in criteria
    assert results[:12] in criteria
    declared = main.commit("Strict labelling, gate set with the results in view")
    # ...and the same once it is, as the audit does.
    flags = _audit_flags(main, cli)
    line = _line(flags, "strict", DECLARED)
    assert cell(f"{DECLARED}: created in {declared[:12]}") in line
    assert cell(f"labels/rules already existed (since {results[:12]}") in line
    assert "**⚠ Selection declared after its evidence:**" in _report_criteria(main, cli)
    assert not _flagged(flags, "labels", DECLARED)


def test_a_selection_declared_after_results_inside_a_pull_request_is_flagged(main: Repo, cli):
    main.git("checkout", "-q", "-b", "strict")
    assert cli(main, "run", "--candidate", "rules").code == 0
    results = main.commit("rules results")
    main.write(STRICT, _strict("0.5"))
    main.commit("Strict labelling")
    main.git("checkout", "-q", "main")
    main.git("merge", "--no-ff", "-q", "-m", "Merge pull request #23 from team/strict", "strict")
    merge = main.git("rev-parse", "HEAD").strip()
    flags = _audit_flags(main, cli)
    line = _line(flags, "strict", DECLARED)
    assert cell(DECLARED) in line and cell(f"since {results[:12]}") in line
    assert cell(f"inside pull request #23 merged in {merge[:12]}") in line
