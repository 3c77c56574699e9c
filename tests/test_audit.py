"""The audit record from real git history: order, dates, authors, pull requests, flags,
approvals over loopback HTTP, escaping, determinism and the offline HTML page."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalreg.audit.commits import Person
from evalreg.audit.record import AuditRecord, GitHubReviews, build_audit
from evalreg.errors import UsageError
from evalreg.report.audit import audit_markdown, write_html
from evalreg.text.escape import cell

from conftest import PIN_OPENAI, PIN_PYTHON, RUBRIC, SELECTION, SYSTEM, TASK, Repo, items_jsonl
from support.github_api import GitHubAPI

PEOPLE = {
    "alice": Person("Alice Adams", "alice@example.com"),
    "bob": Person("Bob Brown", "bob@example.com"),
    "carol": Person("Carol Chen", "carol@example.com"),
    "dave": Person("Dave Diaz", "dave@example.com"),
    "erin": Person("Erin Evans", "erin@example.com"),
    "frank": Person("Frank Fox", "frank@example.com"),
}
SELECTION_PATH = "registry/selections/labels.yaml"
RAISED_GATE = SELECTION.replace("min: 0.5", "min: 0.6")
PICK_MINI = RAISED_GATE.replace("selected: rules", "selected: mini")
HOSTILE = "<img src=x> @octocat #12 | pipe"
TOKEN = "ghs_audit0123456789SECRET"
GATE_05_TEXT = "gates: pass_rate on common ≥ 0.5"
POLICY_AT_CREATION_TEXT = (
    "pass_level: correct; confidence: 0.95; gates: pass_rate on common ≥ 0.5; "
    "objective: lexicographic maximize pass_rate, then minimize cost_per_item_usd; "
    "non_inferiority: none"
)


@dataclass
class History:
    repo: Repo
    shas: dict[str, str]


def git(repo: Repo, *args: str, who: str = "alice", date: str = "", committed: str = "") -> str:
    person = PEOPLE[who]
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": person.name,
        "GIT_AUTHOR_EMAIL": person.email,
        "GIT_COMMITTER_NAME": person.name,
        "GIT_COMMITTER_EMAIL": person.email,
    }
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": committed or date}
    return subprocess.run(
        ["git", *args], cwd=repo.root, env=env, check=True, capture_output=True, text=True
    ).stdout


def commit(repo: Repo, message: str, who: str, date: str, committed: str = "") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, who=who, date=date, committed=committed)
    return git(repo, "rev-parse", "HEAD").strip()


def new_registry(root: Path) -> Repo:
    repo = Repo(root)
    root.mkdir()
    git(repo, "init", "-q", "-b", "main")
    repo.write("registry/models/rules.yaml", PIN_PYTHON)
    repo.write("registry/models/mini.yaml", PIN_OPENAI)
    repo.write("registry/rubrics/labels.yaml", RUBRIC)
    repo.write("registry/tasks/labels.yaml", TASK)
    repo.write(SELECTION_PATH, SELECTION)
    repo.write("registry/systems/rules.py", SYSTEM)
    repo.write("evalsets/messages.jsonl", items_jsonl())
    return repo


@pytest.fixture
def history(tmp_path: Path) -> History:
    """Main: registry, rules results, merge of PR #7 (a raised gate), mini results, PR #9."""
    repo = new_registry(tmp_path / "repo")
    shas = {
        "registry": commit(repo, "Add the labelling registry", "alice", "2026-01-01T09:00:00+02:00")
    }
    repo.write("reports/results/labels/rules.json", "{}\n")
    shas["rules results"] = commit(repo, "Record rules results", "bob", "2026-01-02T10:00:00Z")
    git(repo, "checkout", "-q", "-b", "team/change-model")
    repo.write(SELECTION_PATH, RAISED_GATE)
    # Authored before the results existed, but it reached main after them.
    shas["gate"] = commit(
        repo, "Raise the common gate", "carol", "2025-12-30T12:00:00Z", "2026-01-03T09:00:00Z"
    )
    git(repo, "checkout", "-q", "main")
    git(
        repo,
        "merge",
        "--no-ff",
        "-q",
        "-m",
        "Merge pull request #7 from team/change-model",
        "team/change-model",
        who="dave",
        date="2026-01-05T08:00:00-05:00",
    )
    shas["merge"] = git(repo, "rev-parse", "HEAD").strip()
    repo.write("reports/results/labels/mini.json", "{}\n")
    shas["mini results"] = commit(repo, "Record mini results", "erin", "2026-01-06T00:00:00Z")
    repo.write(SELECTION_PATH, PICK_MINI)
    shas["pick"] = commit(repo, "Pick mini (#9)", "frank", "2026-01-07T16:30:00Z")
    return History(repo, shas)


def changes(record: AuditRecord) -> list[tuple[str, str, str | None, str | None]]:
    [selection] = record.selections
    return [(c.kind, c.commit.sha, c.before, c.after) for c in selection.changes]


def table(markdown: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under ``## heading``, split into cells."""
    section = markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [row[2:-2].split(" | ") for row in rows[1:]]


# History, order and attribution


def test_changes_follow_the_first_parent_line_oldest_first(history: History) -> None:
    record = build_audit(history.repo.root, "main", verify=False)
    s = history.shas

    assert (record.rev, record.root.sha, record.history) == (s["pick"], s["registry"], 5)
    assert [(kind, sha) for kind, sha, _, _ in changes(record)] == [
        ("selected", s["registry"]),
        ("policy", s["registry"]),
        ("candidates", s["registry"]),
        ("task", s["registry"]),
        ("policy", s["merge"]),
        ("selected", s["pick"]),
    ]
    assert s["gate"] not in {sha for _, sha, _, _ in changes(record)}


def test_dates_are_utc_and_authors_are_named(history: History) -> None:
    [selection] = build_audit(history.repo.root, "main", verify=False).selections
    created, merge, pick = selection.changes[0], selection.changes[4], selection.changes[5]

    assert (created.commit.committed_at, created.commit.author) == (
        "2026-01-01T07:00:00Z",
        PEOPLE["alice"],
    )
    assert (merge.commit.committed_at, merge.commit.author) == (
        "2026-01-05T13:00:00Z",
        PEOPLE["dave"],
    )
    assert (pick.commit.authored_at, pick.commit.author) == (
        "2026-01-07T16:30:00Z",
        PEOPLE["frank"],
    )
    assert [c.commit.position for c in selection.changes] == [1, 1, 1, 1, 3, 5]


def test_pull_requests_are_read_from_merge_and_squash_subjects(history: History) -> None:
    [selection] = build_audit(history.repo.root, "main", verify=False).selections

    assert [(c.commit.pr, c.commit.merge) for c in selection.changes[3:]] == [
        (None, False),
        (7, True),
        (9, False),
    ]


def test_a_merge_names_who_wrote_the_change_and_who_merged_it(history: History) -> None:
    [selection] = build_audit(history.repo.root, "main", verify=False).selections
    merge = selection.changes[4]

    assert (merge.merged_authors, merge.commit.author) == ((PEOPLE["carol"],), PEOPLE["dave"])


def test_the_declared_candidate_history_reads_from_and_to(history: History) -> None:
    record = build_audit(history.repo.root, "main", verify=False)
    [selection] = record.selections

    assert [(b, a, sha) for kind, sha, b, a in changes(record) if kind == "selected"] == [
        (None, "rules", history.shas["registry"]),
        ("rules", "mini", history.shas["pick"]),
    ]
    assert selection.declared == "mini"
    assert selection.last_selected_change == selection.changes[5]


def test_a_policy_change_says_which_parts_changed(history: History) -> None:
    [selection] = build_audit(history.repo.root, "main", verify=False).selections
    merge = selection.changes[4]

    assert (merge.parts, merge.before, merge.after) == (
        ("gates",),
        "gates: pass_rate on common ≥ 0.5",
        "gates: pass_rate on common ≥ 0.6",
    )
    assert selection.changes[1].after == (
        "pass_level: correct; confidence: 0.95; gates: pass_rate on common ≥ 0.5; "
        "objective: lexicographic maximize pass_rate, then minimize cost_per_item_usd; "
        "non_inferiority: none"
    )


# Evidence timing


def test_criteria_changed_after_the_evidence_existed_are_flagged(history: History) -> None:
    [selection] = build_audit(history.repo.root, "main", verify=False).selections

    assert selection.evidence is not None
    assert selection.evidence.sha == history.shas["rules results"]
    [late] = [f for f in selection.flags if f.kind == "criteria_after_evidence"]
    # Carol authored the change before the results existed; first-parent order decides.
    assert late.commits == (history.shas["merge"],)
    assert late.message == (
        "criteria changed after the evidence they judge first existed: results first in "
        f"{history.shas['rules results'][:12]} (2026-01-02T10:00:00Z); policy changed in "
        f"{history.shas['merge'][:12]} (#7, 2026-01-05T13:00:00Z: gates)"
    )


def test_a_candidate_declared_without_its_results_is_flagged(history: History) -> None:
    repo = history.repo
    repo.write(
        SELECTION_PATH,
        PICK_MINI.replace("selected: mini", "selected: big").replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: big\n    pin: mini\n",
        ),
    )
    sha = commit(repo, "Pick big", "alice", "2026-01-08T00:00:00Z")
    [selection] = build_audit(repo.root, "main", verify=False).selections

    undeclared = [f.commits for f in selection.flags if f.kind == "selected_without_evidence"]
    assert undeclared == [(history.shas["registry"],), (sha,)]
    assert [(c.kind, c.before, c.after) for c in selection.changes if c.commit.sha == sha] == [
        ("selected", "mini", "big"),
        ("candidates", "rules, mini", "rules, mini, big (pin mini)"),
    ]


def test_an_unreadable_selection_file_is_flagged_and_skipped(history: History) -> None:
    repo = history.repo
    repo.write(SELECTION_PATH, "schema_version: 1\nselected: [\n")
    broken = commit(repo, "Break the selection", "bob", "2026-01-08T00:00:00Z")
    repo.write(SELECTION_PATH, PICK_MINI)
    commit(repo, "Restore the selection", "bob", "2026-01-09T00:00:00Z")
    [selection] = build_audit(repo.root, "main", verify=False).selections

    [unreadable] = [f for f in selection.flags if f.kind == "unreadable"]
    assert unreadable.commits == (broken,)
    assert unreadable.message.startswith(f"the selection file cannot be read: {SELECTION_PATH}:")
    assert len(selection.changes) == 6


# Rendering


def test_the_same_repository_state_gives_the_same_markdown_bytes(history: History) -> None:
    first = audit_markdown(build_audit(history.repo.root, "main", verify=False))
    second = audit_markdown(build_audit(history.repo.root, "main", verify=False))

    assert first.encode() == second.encode()
    assert first.startswith(f"# Audit record for `{history.shas['pick'][:12]}`\n")


def test_the_tables_read_one_row_per_use_case_and_per_change(history: History) -> None:
    markdown = audit_markdown(build_audit(history.repo.root, "main", verify=False))
    s = {name: f"`{sha[:12]}`" for name, sha in history.shas.items()}

    assert table(markdown, "Use cases") == [
        [
            "Message labelling",
            "labels",
            "mini",
            f"2026-01-07T16:30:00Z in {s['pick']}",
            "Frank Fox",
            "#9",
            "—",
            f"2026-01-02T10:00:00Z in {s['rules results']}",
            "a declaration without results, criteria changed after the evidence",
        ]
    ]
    alice = cell("Alice Adams <alice@example.com>", limit=600)
    merged = (
        cell("Carol Chen <carol@example.com>", limit=600)
        + " (merged by "
        + cell("Dave Diaz <dave@example.com>", limit=600)
        + ")"
    )
    subject = "Add the labelling registry"
    assert [row[:7] for row in table(markdown, "Changes")] == [
        ["2026-01-01T07:00:00Z", s["registry"], "—", alice, "labels", "declared candidate", "—"],
        ["2026-01-01T07:00:00Z", s["registry"], "—", alice, "labels", "policy", "—"],
        ["2026-01-01T07:00:00Z", s["registry"], "—", alice, "labels", "candidates", "—"],
        ["2026-01-01T07:00:00Z", s["registry"], "—", alice, "labels", "task", "—"],
        [
            "2026-01-05T13:00:00Z",
            s["merge"],
            "#7",
            merged,
            "labels",
            "policy",
            cell(GATE_05_TEXT, limit=600),
        ],
        [
            "2026-01-07T16:30:00Z",
            s["pick"],
            "#9",
            cell("Frank Fox <frank@example.com>", limit=600),
            "labels",
            "declared candidate",
            "rules",
        ],
    ]
    assert [row[7:] for row in table(markdown, "Changes")] == [
        ["rules", cell(subject)],
        [cell(POLICY_AT_CREATION_TEXT, limit=600), cell(subject)],
        ["rules, mini", cell(subject)],
        ["labels", cell(subject)],
        [
            cell(GATE_05_TEXT.replace("0.5", "0.6"), limit=600),
            cell("Merge pull request #7 from team/change-model", limit=600),
        ],
        ["mini", cell("Pick mini (#9)", limit=600)],
    ]


def test_a_hostile_commit_subject_is_escaped(history: History, tmp_path: Path) -> None:
    repo = history.repo
    repo.write(SELECTION_PATH, PICK_MINI.replace("selected: mini", "selected: rules"))
    commit(repo, HOSTILE, "alice", "2026-01-08T00:00:00Z")
    record = build_audit(repo.root, "main", verify=False)
    markdown = audit_markdown(record)
    [page] = write_html(record, tmp_path / "site")
    html = page.read_text(encoding="utf-8")

    assert "| " + cell(HOSTILE, limit=600) + " |" in markdown
    for raw in ("<img", "@octocat", "#12", " | pipe"):
        assert raw not in markdown
    assert "<img" not in html
    assert "&lt;img src=x&gt; \u200b@\u200boctocat #\u200b12 | pipe</td>" in html


def test_the_html_page_is_offline_and_holds_the_tables(history: History, tmp_path: Path) -> None:
    record = build_audit(history.repo.root, "main", verify=False)

    [page] = write_html(record, tmp_path / "site")
    html = page.read_text(encoding="utf-8")

    assert page == tmp_path / "site" / "index.html"
    assert "<script" not in html
    assert " src=" not in html and "<link" not in html
    assert "<th>declared</th>" in html and "<td>mini</td>" in html
    assert "<th>subject</th>" in html and "<td>Pick mini (#\u200b9)</td>" in html


# Approvals over HTTP


REVIEWED = "c" * 40


@pytest.fixture
def api(history: History) -> Iterator[GitHubAPI]:
    """GitHub with the reviews of #7 and #9 (one of them pending)."""
    with GitHubAPI(tokens={TOKEN: "auditor"}, repository="o/r") as gh:
        gh.add_pull(7, history.shas["gate"], author="carol", merged_as=history.shas["merge"])
        gh.add_pull(9, REVIEWED, author="frank", merged_as=history.shas["pick"])
        gh.add_review(
            7, "carol", "COMMENTED", commit_id=REVIEWED, submitted_at="2026-01-04T10:00:00Z"
        )
        # Any offset is a date-time; the record keeps UTC.
        gh.add_review(
            7, "erin", "APPROVED", commit_id=REVIEWED, submitted_at="2026-01-05T09:00:00+01:00"
        )
        gh.add_review(
            9, "alice", "CHANGES_REQUESTED", commit_id=REVIEWED, submitted_at="2026-01-07T10:00:00Z"
        )
        gh.add_review(
            9, "alice", "APPROVED", commit_id=REVIEWED, submitted_at="2026-01-07T12:00:00Z"
        )
        gh.add_review(9, "bob", "PENDING", commit_id=REVIEWED)
        yield gh


def test_approvals_are_read_after_a_rate_limit(
    history: History, api: GitHubAPI, tmp_path: Path
) -> None:
    sleeps: list[float] = []
    api.rate_limit_next(status=429, retry_after=0)
    with GitHubReviews(TOKEN, "o/r", api.url, sleep=sleeps.append) as github:
        record = build_audit(history.repo.root, "main", github=github, verify=False)
        shown = repr(github)
    markdown = audit_markdown(record)
    [page] = write_html(record, tmp_path / "site")

    assert record.approvals is not None
    [seven, nine] = record.approvals
    assert [(r.reviewer, r.state, r.submitted_at) for r in seven.reviews] == [
        ("carol", "COMMENTED", "2026-01-04T10:00:00Z"),
        ("erin", "APPROVED", "2026-01-05T08:00:00Z"),
    ]
    assert nine.standing == (("alice", "APPROVED"),)
    assert sleeps == [1.0]  # a rate limit is waited out (never for less than a second)
    assert {r.headers["authorization"] for r in api.requests} == {f"Bearer {TOKEN}"}
    assert "| #9 | alice (approved) |" in markdown
    assert "| #7 | erin | approved | 2026-01-05T08:00:00Z | `cccccccccccc` |" in markdown
    for text in (markdown, page.read_text(encoding="utf-8"), repr(record), shown):
        assert TOKEN not in text


def test_unreadable_reviews_are_recorded_without_the_token(
    history: History, api: GitHubAPI
) -> None:
    with GitHubReviews(TOKEN, "o/other", api.url) as github:
        record = build_audit(history.repo.root, "main", github=github, verify=False)

    assert record.approvals is not None
    assert [(p.number, p.error) for p in record.approvals] == [
        (
            7,
            "GitHub answered 404 to GET /repos/o/other/pulls/7/reviews: check the repository "
            "(o/other) and the pull request number, and that the token can read the repository",
        ),
        (
            9,
            "GitHub answered 404 to GET /repos/o/other/pulls/9/reviews: check the repository "
            "(o/other) and the pull request number, and that the token can read the repository",
        ),
    ]
    assert "| #9 | unavailable |" in audit_markdown(record)
    assert TOKEN not in repr(record)


def test_a_next_page_on_another_host_gets_no_token(history: History, api: GitHubAPI) -> None:
    for _ in range(100):
        api.add_review(7, "carol", "COMMENTED", commit_id=REVIEWED)
    api.link_base = api.url.replace("127.0.0.1", "localhost")
    with GitHubReviews(TOKEN, "o/r", api.url) as github:
        record = build_audit(history.repo.root, "main", github=github, verify=False)

    assert record.approvals is not None
    assert record.approvals[0].error == (
        "GitHub's next-page link points to http://localhost, not to http://127.0.0.1; "
        "refusing to send the token there: check GITHUB_API_URL and any proxy between this "
        "job and GitHub"
    )
    reviews = [(r.path, r.query) for r in api.requests if "/reviews" in r.path]
    assert reviews == [  # the first pages of #7 and #9, nothing more
        ("/repos/o/r/pulls/7/reviews", {"per_page": "100"}),
        ("/repos/o/r/pulls/9/reviews", {"per_page": "100"}),
    ]


# Reproduce verdict and bad input


def test_verifying_a_revision_without_results_finds_nothing_to_reproduce(tmp_path: Path) -> None:
    repo = new_registry(tmp_path / "repo")
    commit(repo, "Add the labelling registry", "alice", "2026-01-01T09:00:00Z")

    record = build_audit(repo.root, "HEAD", verify=True)

    assert record.reproduction is not None
    assert (record.reproduction.status, record.reproduction.cells) == ("nothing", ())
    assert "Nothing to reproduce: no cell has a recorded result at this revision" in (
        audit_markdown(record)
    )


def test_an_unknown_revision_is_a_usage_error(history: History) -> None:
    with pytest.raises(UsageError, match="unknown revision 'no-such-rev'"):
        build_audit(history.repo.root, "no-such-rev", verify=False)


# Rubrics, tasks, pins and eval sets

LENIENT_RUBRIC = RUBRIC.replace(
    "  - id: label\n    description: Label matches.\n    critical: true\n    grader:\n"
    "      type: field_exact\n      field: label\n",
    "",
).replace("acceptable: {require: [valid_json]}", "acceptable: {require: all}")
STRICT_GATE = SELECTION.replace("min: 0.5", "min: 0.9")


def merge_pull_request(repo: Repo, number: int, branch: str, who: str, date: str) -> str:
    """Merge ``branch`` into main the way GitHub's merge button does."""
    git(repo, "checkout", "-q", "main")
    message = f"Merge pull request #{number} from {branch}"
    git(repo, "merge", "--no-ff", "-q", "-m", message, branch, who=who, date=date)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_merged_pr_that_loosened_the_rubric_after_results_is_flagged(
    history: History,
) -> None:
    repo = history.repo
    git(repo, "checkout", "-q", "-b", "team/lenient")
    repo.write("registry/rubrics/labels.yaml", LENIENT_RUBRIC)
    loosened = commit(repo, "Grade only JSON validity", "carol", "2026-01-08T00:00:00Z")
    merge = merge_pull_request(repo, 11, "team/lenient", "dave", "2026-01-09T00:00:00Z")

    record = build_audit(repo.root, "main", verify=False)
    [selection] = record.selections
    [change] = [f for f in record.files if f.commit.sha == merge]
    [late] = [f for f in selection.flags if f.kind == "criteria_after_evidence"]

    assert (change.kind, change.id, change.commit.pr, change.selections) == (
        "rubric",
        "labels",
        11,
        ("labels",),
    )
    assert change.summary == (
        "criterion `label` removed",
        '`levels.acceptable.require` ["valid_json"] → all',
    )
    assert change.merged_authors == (PEOPLE["carol"],)
    assert loosened not in {f.commit.sha for f in record.files}
    assert late.commits == (history.shas["merge"], merge)
    assert (
        f"rubric labels changed in {merge[:12]} (#11, 2026-01-09T00:00:00Z: criterion `label` "
        'removed; `levels.acceptable.require` ["valid_json"] → all)'
    ) in late.message
    row = table(audit_markdown(record), "Rubrics, tasks, pins and eval sets")[-1]
    assert (row[1], row[2], row[4], row[5]) == (f"`{merge[:12]}`", "#11", "rubric labels", "labels")


def test_a_gate_loosened_in_the_commit_that_first_records_results_is_flagged(
    tmp_path: Path,
) -> None:
    repo = new_registry(tmp_path / "repo")
    repo.write(SELECTION_PATH, STRICT_GATE)
    commit(repo, "Add the labelling registry", "alice", "2026-01-01T00:00:00Z")
    repo.write(SELECTION_PATH, SELECTION)
    repo.write("reports/results/labels/rules.json", "{}\n")
    both = commit(repo, "Record results and relax the gate (#12)", "bob", "2026-01-02T00:00:00Z")

    [selection] = build_audit(repo.root, "HEAD", verify=False).selections
    [late] = [f for f in selection.flags if f.kind == "criteria_after_evidence"]

    assert selection.evidence is not None and selection.evidence.sha == both
    assert late.commits == (both,)
    assert late.message == (
        f"criteria changed after the evidence they judge first existed: results first in "
        f"{both[:12]} (2026-01-02T00:00:00Z); policy changed in {both[:12]} "
        f"(#12, 2026-01-02T00:00:00Z: gates) (a change in {both[:12]} itself counts: its "
        "results were in the working tree when the criteria were edited)"
    )
    [gate] = [c for c in selection.changes if c.commit.sha == both]
    assert (gate.before, gate.after) == (
        "gates: pass_rate on common ≥ 0.9",
        "gates: pass_rate on common ≥ 0.5",
    )


def test_criteria_created_with_the_first_results_are_not_flagged(tmp_path: Path) -> None:
    repo = new_registry(tmp_path / "repo")
    repo.write("reports/results/labels/rules.json", "{}\n")
    commit(repo, "Add the registry with its first results", "alice", "2026-01-01T00:00:00Z")

    [selection] = build_audit(repo.root, "HEAD", verify=False).selections

    assert selection.evidence is not None
    assert "criteria_after_evidence" not in {f.kind for f in selection.flags}


def test_task_and_pin_changes_are_summarised_with_their_squash_pull_request(
    history: History,
) -> None:
    repo = history.repo
    repo.write("registry/tasks/labels.yaml", TASK.replace("{{ text }}", "{{ text }}\\nLabel it."))
    repo.write(
        "registry/models/mini.yaml",
        PIN_OPENAI.replace("temperature: 0", "temperature: 0.7").replace(
            "2024-07-18", "2024-08-06"
        ),
    )
    sha = commit(repo, "Retune the prompt and the pin (#14)", "alice", "2026-01-08T00:00:00Z")

    record = build_audit(repo.root, "main", verify=False)

    assert [
        (f.kind, f.id, f.commit.pr, f.summary) for f in record.files if f.commit.sha == sha
    ] == [
        ("task", "labels", 14, ("`prompt.template` changed",)),
        (
            "pin",
            "mini",
            14,
            (
                "snapshot id gpt-4o-mini-2024-07-18 → gpt-4o-mini-2024-08-06",
                "`params.temperature` 0 → 0.7",
            ),
        ),
    ]
    assert {f.commit.pr_source for f in record.files if f.commit.sha == sha} == {"squash"}
    # A prompt or a pin is not the ruler: the flag stays about the policy alone.
    [late] = [f for f in record.selections[0].flags if f.kind == "criteria_after_evidence"]
    assert late.commits == (history.shas["merge"],)


def test_an_eval_set_change_on_dvc_reads_md5_and_item_counts_from_its_pointer(
    tmp_path: Path,
) -> None:
    from evalreg import dvcrepo

    repo = new_registry(tmp_path / "repo")
    dvcrepo.init(repo.root, remote=None)
    dvcrepo.track(repo.root, ["evalsets/messages.jsonl"], push=False)
    first = commit(repo, "Add the registry, eval set on DVC", "alice", "2026-01-01T00:00:00Z")
    repo.write("evalsets/messages.jsonl", items_jsonl(3))
    dvcrepo.track(repo.root, ["evalsets/messages.jsonl"], push=False)
    second = commit(repo, "Drop an item (#15)", "bob", "2026-01-02T00:00:00Z")
    md5s = [
        dvcrepo.pointer_md5(git(repo, "show", f"{sha}:evalsets/messages.jsonl.dvc").encode())
        for sha in (first, second)
    ]

    record = build_audit(repo.root, "HEAD", verify=False)
    evalsets = [
        (f.commit.sha, f.summary, f.selections) for f in record.files if f.kind == "evalset"
    ]

    assert None not in md5s
    assert evalsets == [
        (first, (f"md5 {md5s[0][:12]}, 4 items",), ("labels",)),
        (second, (f"md5 {md5s[0][:12]} → {md5s[1][:12]}, 4 → 3 items",), ("labels",)),
    ]


# Waiver approvals against the GitHub API stand-in

AUDITOR_TOKEN = "ghs_auditor0123456789"
WAIVED = PICK_MINI + (
    "waivers:\n"
    "  - candidate: mini\n"
    "    reason: Cheaper at equal quality.\n"
    "    approver: Erin\n"
    "    date: 2026-01-06\n"
)


@dataclass
class WaivedHistory:
    repo: Repo
    first_head: str
    final_head: str
    merge: str


@pytest.fixture
def waived(history: History) -> WaivedHistory:
    """PR #21 adds a waiver for mini, is pushed to once more, and is merged."""
    repo = history.repo
    git(repo, "checkout", "-q", "-b", "team/waive")
    repo.write(SELECTION_PATH, WAIVED)
    first_head = commit(repo, "Waive the policy for mini", "frank", "2026-01-08T00:00:00Z")
    repo.write("registry/systems/rules.py", SYSTEM + "\n# tweak\n")
    final_head = commit(repo, "Tweak the baseline", "frank", "2026-01-08T01:00:00Z")
    merge = merge_pull_request(repo, 21, "team/waive", "dave", "2026-01-09T00:00:00Z")
    return WaivedHistory(repo, first_head, final_head, merge)


@pytest.fixture
def gh(waived: WaivedHistory) -> Iterator[GitHubAPI]:
    with GitHubAPI(tokens={AUDITOR_TOKEN: "auditor"}) as api:
        api.add_pull(21, waived.final_head, author="frank", merged_as=waived.merge)
        yield api


def audit_with(gh: GitHubAPI, repo: Repo) -> AuditRecord:
    with GitHubReviews(AUDITOR_TOKEN, gh.repository, gh.url) as github:
        return build_audit(repo.root, "main", github=github, verify=False)


def test_a_matching_approval_on_the_final_head_passes(waived: WaivedHistory, gh: GitHubAPI) -> None:
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.final_head)

    record = audit_with(gh, waived.repo)

    assert record.waiver_checks is not None
    [check] = record.waiver_checks
    assert (check.pr, check.login, check.status) == (21, "erin", "approved")
    assert check.rule == "approver read as a GitHub login (case-insensitive)"
    assert "waiver_unapproved" not in {f.kind for f in record.selections[0].flags}
    row = table(audit_markdown(record), "Approvals")[-1]
    assert row[7] == "approved on the final head"


def test_an_approval_on_an_earlier_commit_is_flagged(waived: WaivedHistory, gh: GitHubAPI) -> None:
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.first_head)

    record = audit_with(gh, waived.repo)

    assert record.waiver_checks is not None
    [check] = record.waiver_checks
    assert check.status == "earlier_commit"
    [flag] = [f for f in record.selections[0].flags if f.kind == "waiver_unapproved"]
    assert flag.message == (
        f"waiver for mini (approver Erin, #21): erin approved #21 on {waived.first_head[:12]}, "
        f"not on its final head {waived.final_head[:12]}: what was pushed after the approval "
        "was not approved"
    )
    assert flag.commits == (waived.merge,)


def test_changes_requested_after_an_approval_is_flagged(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.final_head)
    gh.add_review(21, "erin", "CHANGES_REQUESTED", commit_id=waived.final_head)

    [check] = audit_with(gh, waived.repo).waiver_checks or ()

    assert check.status == "changes_requested"
    assert check.message.endswith("after approving")


def test_an_approver_who_never_reviewed_is_flagged(waived: WaivedHistory, gh: GitHubAPI) -> None:
    gh.add_review(21, "carol", "APPROVED", commit_id=waived.final_head)

    [check] = audit_with(gh, waived.repo).waiver_checks or ()

    assert (check.status, check.login) == ("no_reviewer", None)
    assert check.message.endswith("; name the account with approver_login")


def test_an_approver_login_that_is_the_pr_author_is_flagged(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    repo = waived.repo
    repo.write(
        SELECTION_PATH,
        WAIVED.replace("approver: Erin\n", "approver: Frank\n    approver_login: Frank\n"),
    )
    commit(repo, "Name the approver's login (#22)", "frank", "2026-01-10T00:00:00Z")
    gh.add_pull(22, "e" * 40, author="frank", merged_as="f" * 40)
    gh.add_review(22, "frank", "COMMENTED", commit_id="e" * 40)

    [check] = audit_with(gh, repo).waiver_checks or ()

    assert (check.pr, check.rule, check.status) == (22, "approver_login", "pr_author")


def test_without_a_token_the_audit_says_approvals_not_checked(
    waived: WaivedHistory, tmp_path: Path
) -> None:
    record = build_audit(waived.repo.root, "main", verify=False)
    markdown = audit_markdown(record)
    [page] = write_html(record, tmp_path / "site")

    assert record.waiver_checks is None
    assert "\n## Approvals\n\nApprovals not checked: no GitHub token was given" in markdown
    assert "Approvals not checked" in page.read_text(encoding="utf-8")
    [row] = table(markdown, "Approvals")
    assert (row[0], row[1], row[4], row[7]) == ("labels", "mini", "#21", "not checked")


def test_a_commit_without_a_pull_request_subject_gets_one_from_github_across_pages(
    history: History,
) -> None:
    repo = history.repo
    repo.write("registry/rubrics/labels.yaml", LENIENT_RUBRIC)
    rebased = commit(repo, "Grade only JSON validity", "carol", "2026-01-08T00:00:00Z")
    with GitHubAPI(tokens={AUDITOR_TOKEN: "auditor"}) as api:
        # A hundred open pull requests also contain the commit; the merged one is on page 2.
        for number in range(2, 102):
            api.add_pull(number, "a" * 40, commits=(rebased,))
        api.add_pull(1, "b" * 40, commits=(rebased,), merged_as=rebased)
        record = audit_with(api, repo)
        lookups = [r.query for r in api.requests if r.path.endswith(f"/commits/{rebased}/pulls")]

    [change] = [f for f in record.files if f.commit.sha == rebased]
    assert (change.commit.pr, change.commit.pr_source) == (1, "api")
    assert lookups == [{"per_page": "100"}, {"per_page": "100", "page": "2"}]
    [late] = [f for f in record.selections[0].flags if f.kind == "criteria_after_evidence"]
    assert f"rubric labels changed in {rebased[:12]} (#1, " in late.message


# What GitHub can answer besides a plain approval: dismissals, commits and accounts that no
# longer exist, pull requests closed without merging, more than a page of reviews.


def test_a_dismissed_approval_does_not_count(waived: WaivedHistory, gh: GitHubAPI) -> None:
    # GitHub turns a dismissed review's state into DISMISSED; what it was is not said.
    gh.add_review(21, "erin", "DISMISSED", commit_id=waived.final_head)

    record = audit_with(gh, waived.repo)

    [check] = record.waiver_checks or ()
    assert (check.status, check.login) == ("not_approved", "erin")
    assert check.message.endswith(
        "erin's last review of #21 was dismissed and no approval followed it"
    )
    assert "waiver_unapproved" in {f.kind for f in record.selections[0].flags}


def test_an_approval_given_again_after_a_dismissal_counts(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    gh.add_review(21, "erin", "DISMISSED", commit_id=waived.first_head)
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.final_head)

    [check] = audit_with(gh, waived.repo).waiver_checks or ()

    assert check.status == "approved"


def test_an_approval_on_a_commit_github_no_longer_has_is_not_on_the_final_head(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    # commit_id is null when the reviewed commit was force-pushed away and collected.
    gh.add_review(21, "erin", "APPROVED", commit_id=None)

    record = audit_with(gh, waived.repo)

    [check] = record.waiver_checks or ()
    assert check.status == "earlier_commit"
    assert check.message.endswith(
        f"erin approved #21 on a commit GitHub no longer has, not on its final head "
        f"{waived.final_head[:12]}: what was pushed after the approval was not approved"
    )
    assert "| erin | approved | " in audit_markdown(record)


def test_a_review_by_a_deleted_account_is_left_out(waived: WaivedHistory, gh: GitHubAPI) -> None:
    gh.add_review(21, None, "APPROVED", commit_id=waived.final_head)
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.final_head)

    record = audit_with(gh, waived.repo)

    [check] = record.waiver_checks or ()
    assert check.status == "approved"
    [pull] = [p for p in record.approvals or () if p.number == 21]
    assert [r.reviewer for r in pull.reviews] == ["erin"]


def test_an_approver_whose_account_was_deleted_is_not_found(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    gh.add_review(21, None, "APPROVED", commit_id=waived.final_head)

    [check] = audit_with(gh, waived.repo).waiver_checks or ()

    assert (check.status, check.login) == ("no_reviewer", None)


def test_an_approval_past_the_first_hundred_reviews_is_found(
    waived: WaivedHistory, gh: GitHubAPI
) -> None:
    for _ in range(120):
        gh.add_review(21, "carol", "COMMENTED", commit_id=waived.final_head)
    gh.add_review(21, "erin", "APPROVED", commit_id=waived.final_head)

    [check] = audit_with(gh, waived.repo).waiver_checks or ()

    assert check.status == "approved"
    pages = [r.query.get("page") for r in gh.requests if r.path.endswith("/pulls/21/reviews")]
    assert pages == [None, "2"]


def test_a_pull_request_closed_without_merging_is_not_the_one_that_merged_a_commit(
    history: History,
) -> None:
    repo = history.repo
    repo.write("registry/rubrics/labels.yaml", LENIENT_RUBRIC)
    rebased = commit(repo, "Grade only JSON validity", "carol", "2026-01-08T00:00:00Z")
    repo.write("registry/systems/rules.py", SYSTEM + "\n# tweak\n")
    last = commit(repo, "Tweak the baseline", "carol", "2026-01-08T00:01:00Z")
    with GitHubAPI(tokens={AUDITOR_TOKEN: "auditor"}) as api:
        # The first attempt was closed unmerged; the second was rebased onto main, and
        # GitHub names its last rebased commit as the one that merged it.
        api.add_pull(30, rebased, state="closed")
        api.add_pull(31, "b" * 40, commits=(rebased, last), merged_as=last)
        record = audit_with(api, repo)

    [change] = [f for f in record.files if f.commit.sha == rebased]
    assert (change.commit.pr, change.commit.pr_source) == (31, "api")


def test_a_commit_only_a_closed_unmerged_pull_request_holds_came_through_none(
    history: History,
) -> None:
    repo = history.repo
    repo.write("registry/rubrics/labels.yaml", LENIENT_RUBRIC)
    pushed = commit(repo, "Grade only JSON validity", "carol", "2026-01-08T00:00:00Z")
    with GitHubAPI(tokens={AUDITOR_TOKEN: "auditor"}) as api:
        api.add_pull(30, pushed, state="closed", commits=(pushed,))
        api.add_pull(32, pushed)
        record = audit_with(api, repo)

    [change] = [f for f in record.files if f.commit.sha == pushed]
    assert (change.commit.pr, change.commit.pr_source) == (None, None)
