"""What an auditor reads in the governance report and the audit HTML: criteria dated from git
against the first evidence, gates with their estimate and bound, small slices kept, params as
a diff, working links, the drift section, charts, and the decision on the audit page."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from evalreg.compare.drift import CellDrift, DriftReport
from evalreg.compare.drift_log import (
    DRIFT_LOG,
    append_log,
    drift_workflow,
    last_checks,
    read_drift_log,
)
from evalreg.errors import RegistryError
from evalreg.registry.loader import load_registry
from evalreg.registry.tree import WorkspaceTree
from evalreg.report.writer import render
from evalreg.text.escape import link

from conftest import Repo, build_registry

SVG = "{http://www.w3.org/2000/svg}"


def _page(repo: Repo) -> str:
    return render(load_registry(repo.root))["reports/labels.md"].decode()


def _criteria(page: str) -> str:
    return page.split("## 3. Criteria\n", 1)[1].split("An item **passes**", 1)[0]


@pytest.fixture
def evidenced(live: Repo, cli) -> Repo:
    """The registry committed, then the rules baseline's results in a later commit (the
    model's cell stays pending)."""
    assert cli(live, "run", "--candidate", "rules").code == 0
    live.commit("rules results")
    return live


# ---------------------------------------------------------------- criteria against evidence
def test_criteria_committed_before_the_results_are_fixed_before_evidence(evidenced: Repo):
    registry_commit = evidenced.git("rev-list", "--max-parents=0", "HEAD").strip()
    text = _criteria(_page(evidenced))
    assert "**Criteria fixed before evidence:**" in text
    assert f"The policy last changed in `{registry_commit[:12]}`" in text
    assert f"The rubric `labels` last changed in `{registry_commit[:12]}`" in text
    assert "⚠" not in text


def test_a_rubric_changed_after_the_results_is_flagged(evidenced: Repo):
    evidenced.write(
        "registry/rubrics/labels.yaml",
        evidenced.read("registry/rubrics/labels.yaml").replace(
            "  acceptable: {require: [valid_json]}", "  acceptable: {require: [label]}"
        ),
    )
    text = _criteria(_page(evidenced))
    assert "**⚠ Criteria changed after the evidence:**" in text
    assert "The rubric `labels`: changed here, not committed yet." in text
    late = evidenced.commit("loosen the rubric after seeing results")
    text = _criteria(_page(evidenced))
    assert "**⚠ Criteria changed after the evidence:**" in text
    assert f"The rubric `labels` last changed in `{late[:12]}`" in text


def test_a_policy_edited_beside_the_first_results_is_flagged(live: Repo, cli):
    repo = live
    assert cli(repo, "run", "--candidate", "rules").code == 0
    repo.write(
        "registry/selections/labels.yaml",
        repo.read("registry/selections/labels.yaml").replace("min: 0.5", "min: 0.25"),
    )
    text = _criteria(_page(repo))
    assert (
        "**⚠ Criteria changed after the evidence:** criteria changed after the evidence they "
        "judge first existed: results first in the working tree; policy changed in the "
        "working tree (not committed yet)"
    ) in text
    repo.commit("results and a lower gate")
    assert "**⚠ Criteria changed after the evidence:**" in _criteria(_page(repo))


def test_results_written_before_their_commit_read_the_same_once_committed(live: Repo, cli):
    repo = live
    assert cli(repo, "run", "--candidate", "rules").code == 0
    assert cli(repo, "report").code == 0
    before = repo.read("reports/labels.md")
    repo.commit("results and report")
    assert cli(repo, "report").code == 0
    assert repo.read("reports/labels.md") == before
    assert "**Criteria fixed before evidence:**" in before


def test_outside_git_the_criteria_cannot_be_dated(tmp_path: Path, repo: Repo):
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(repo.root, plain, ignore=shutil.ignore_patterns(".git"))
    page = render(load_registry(plain))["reports/labels.md"].decode()
    assert "When the criteria were fixed cannot be told from git" in _criteria(page)


def test_before_the_first_commit_the_report_says_nothing_is_committed(tmp_path: Path):
    fresh = Repo(tmp_path / "fresh")
    build_registry(fresh)
    page = render(load_registry(fresh.root))["reports/labels.md"].decode()
    assert "cannot be told from git: nothing is committed yet." in _criteria(page)


# ---------------------------------------------------------------- decision and candidates
def test_a_waiver_with_the_rationale_as_its_reason_prints_it_once(repo: Repo):
    reason = "Keep the baseline until the model has run."
    repo.write(
        "registry/selections/labels.yaml",
        repo.read("registry/selections/labels.yaml").replace("rationale: Baseline.", "")
        + f"rationale: {reason}\n"
        "waivers:\n"
        f"  - candidate: rules\n    reason: {reason}\n    approver: Ops Lead\n"
        "    date: 2026-01-02\n",
    )
    decision = _page(repo).split("## 1. Decision", 1)[1].split("Why the policy", 1)[0]
    assert "**Waiver:**" in decision
    assert decision.count("Keep the baseline") == 1
    assert "Reason: the rationale below — approved by Ops Lead" in decision


def test_params_show_the_declared_in_full_and_others_as_the_keys_that_differ(repo: Repo):
    pin = repo.read("registry/models/mini.yaml")
    repo.write(
        "registry/models/mini.yaml",
        pin.replace("  temperature: 0\n", "  temperature: 0\n  seed: 7\n"),
    )
    repo.write(
        "registry/models/warm.yaml",
        pin.replace("  temperature: 0\n", "  temperature: 0.7\n  seed: 7\n  top_p: 0.9\n"),
    )
    selection = repo.read("registry/selections/labels.yaml")
    repo.write(
        "registry/selections/labels.yaml",
        selection.replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: warm\n    pin: warm\n",
        ).replace("selected: rules", "selected: mini"),
    )
    rows = {
        line.split(" | ")[0].strip("| `"): line.split(" | ")[4]
        for line in _page(repo).split("| candidate | pin |", 1)[1].split("\n\n", 1)[0].splitlines()
        if line.startswith("| `")
    }
    assert rows["mini"] == "seed: 7, temperature: 0"
    assert rows["warm"] == "temperature: 0 → 0\\.7, top\\_p: 0\\.9"
    assert "seed" not in rows["warm"]
    assert rows["rules"] == "seed: none \\(declared 7\\), temperature: none \\(declared 0\\)"


def test_benchmark_sources_are_links_only_for_http_urls(repo: Repo):
    pin = repo.read("registry/models/mini.yaml")
    repo.write(
        "registry/models/mini.yaml",
        pin + "benchmarks:\n"
        "  - {name: MMLU, score: 82, date: 2024-07-18, source: 'https://example.com/a_(b)'}\n"
        "  - {name: Evil, score: 1, date: 2024-07-18, source: 'javascript:alert(1)'}\n",
    )
    tokens = MarkdownIt("commonmark").enable("table").parse(_page(repo))
    links = [c.attrs["href"] for t in tokens for c in t.children or [] if c.type == "link_open"]
    assert links == ["https://example.com/a_%28b%29"]
    assert all("javascript" not in str(href) for href in links)


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", "data:text/html,x", "/relative", "https://a b", "http://x/<script>"],
)
def test_a_source_that_is_not_an_absolute_http_url_is_text(url: str):
    rendered = MarkdownIt("commonmark").render(link(url))
    assert "<a " not in rendered


def test_a_https_url_is_a_link_with_its_address_as_text():
    assert (
        link("https://www.example.com/x")
        == "[www\u200b\\.example\\.com/x](https://www.example.com/x)"
    )


# ---------------------------------------------------------------- slices, gates, wording
def test_slices_under_the_minimum_are_collapsed_with_counts_and_pass_rates(evidenced: Repo):
    page = _page(evidenced)
    details = page.split("<details>", 1)[1].split("</details>", 1)[0]
    assert "<summary>2 slices under 10 items" in details
    assert "| common | 2 | 100.0% (34.2–100.0) |" in details
    assert "| edge | 2 | 0.0% (0.0–65.8) |" in details
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(page)
    assert re.search(r"<details><summary>[^<]+</summary>\s*<table>", html)


def test_no_sentence_written_for_the_example_reaches_another_registry(evidenced: Repo):
    page = _page(evidenced)
    assert "tone, helpfulness" not in page and "summary" not in page.lower().split("## 7.")[1]
    assert "every criterion is checked by code" in page


# ---------------------------------------------------------------- drift
def _drift_report(cell: CellDrift) -> DriftReport:
    return DriftReport(sample=20, seed=0, threshold=0.1, cells=[cell])


def test_the_drift_section_shows_the_last_check_and_the_workflow_schedule(evidenced: Repo):
    earlier = CellDrift("labels/mini", "mini", "gpt-4o-mini", compared=20, same_level=20)
    later = CellDrift(
        "labels/mini",
        "mini",
        "gpt-4o-mini",
        compared=20,
        same_level=14,
        reasons=["levels differ on 30% of samples"],
    )
    append_log(evidenced.root, _drift_report(earlier), datetime(2026, 1, 5, 6, 17, tzinfo=UTC))
    append_log(evidenced.root, _drift_report(later), datetime(2026, 1, 12, 6, 17, tzinfo=UTC))
    page = _page(evidenced)
    drift = page.split("## 6. Drift", 1)[1].split("## 7.", 1)[0]
    assert "No drift workflow" in drift
    assert (
        "| `mini` | 2026-01-12T06:17:00Z | 🔻 drifted | 14 of 20 samples at the same level; "
        "levels differ on 30% of samples |"
    ) in drift
    evidenced.write(
        ".github/workflows/drift.yml",
        "on:\n  schedule:\n    - cron: '17 6 * * 1'\n  workflow_dispatch:\n"
        "jobs:\n  d:\n    runs-on: ubuntu-latest\n    steps:\n      - run: evalreg drift\n",
    )
    drift = _page(evidenced).split("## 6. Drift", 1)[1]
    assert "runs on the schedule `17 6 * * 1` (cron, UTC)" in drift


def test_the_drift_log_holds_no_output_and_reads_back(tmp_path: Path):
    cell = CellDrift("t/c", "c", "m", compared=3, same_level=2, reasons=["model changed"])
    append_log(tmp_path, _drift_report(cell), datetime(2026, 1, 1, tzinfo=UTC))
    line = json.loads((tmp_path / DRIFT_LOG).read_text())
    assert set(line) == {
        "cell",
        "checked_at",
        "compared",
        "detail",
        "result",
        "same_level",
        "sample",
        "seed",
        "threshold",
    }
    [check] = read_drift_log(WorkspaceTree(tmp_path))
    assert (check.cell, check.checked_at, check.result) == (
        "t/c",
        "2026-01-01T00:00:00Z",
        "drifted",
    )
    assert last_checks(WorkspaceTree(tmp_path))["t/c"] == check


def test_a_bad_drift_log_line_is_named_by_its_line(tmp_path: Path):
    (tmp_path / "reports").mkdir()
    (tmp_path / DRIFT_LOG).write_text('{"cell": "t/c"}\n\n{broken\n')
    with pytest.raises(RegistryError) as caught:
        read_drift_log(WorkspaceTree(tmp_path))
    assert caught.value.findings[0].line == 1 and DRIFT_LOG in str(caught.value)


def test_a_workflow_that_never_runs_drift_is_not_the_drift_workflow(tmp_path: Path):
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/ci.yml").write_text("on: push\njobs: {}\n")
    assert drift_workflow(WorkspaceTree(tmp_path)) is None
    (tmp_path / ".github/workflows/drift.yaml").write_text(
        "on:\n  workflow_dispatch:\njobs:\n  d:\n    steps:\n      - run: evalreg drift\n"
    )
    found = drift_workflow(WorkspaceTree(tmp_path))
    assert found is not None and found.schedules == ()


# ---------------------------------------------------------------- charts
def test_the_overall_chart_marks_each_gate_threshold_and_is_deterministic(evidenced: Repo):
    first = render(load_registry(evidenced.root))
    second = render(load_registry(evidenced.root))
    assert first == second
    svg = ET.fromstring(first["reports/labels.svg"])
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "gate 1: pass_rate on common ≥ 0.5" in texts
    assert "≥ 0.5" in texts
    dashed = [line for line in svg.iter(f"{SVG}line") if line.get("stroke-dasharray")]
    assert len(dashed) == 1
    # The threshold's x is 50 % of the axis (190 + 420 * 0.5).
    assert dashed[0].get("x1") == "400.0"


def test_the_slice_heatmap_has_a_cell_per_reported_slice_and_candidate():
    root = Path(__file__).resolve().parents[1]
    registry = load_registry(root)
    files = render(registry)
    svg = ET.fromstring(files["reports/support-triage-slices.svg"])
    page = files["reports/support-triage.md"].decode()
    table = page.split("### Pass rate by slice", 1)[1].split("<details>", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    ranked = rows[0].count("`") // 2
    shaded = [r for r in svg.iter(f"{SVG}rect") if r.get("stroke") == "#d1d9e0"]
    assert len(shaded) == (len(rows) - 1) * ranked
    first = [t.text for t in svg.iter(f"{SVG}text") if t.text and t.text.endswith("%")][:ranked]
    assert [f"{v}" for v in first] == [c.split(" (")[0] for c in rows[1].split(" | ")[2:]]
    assert "![Pass rate by slice and candidate](support-triage-slices.svg)" in page


# ---------------------------------------------------------------- the audit HTML
class _Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self._tag: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag))
        self._tag = tag

    def handle_data(self, data: str) -> None:
        if self._tag in ("h2", "h3") and data.strip():
            self.events.append((self._tag, data.strip()))


def test_the_audit_html_opens_with_the_decision_before_the_history(
    evidenced: Repo, cli, tmp_path: Path
):
    site = tmp_path / "site"
    assert cli(evidenced, "audit", "HEAD", "--no-verify", "--html", str(site)).code == 0
    page = (site / "index.html").read_text()
    outline = _Outline()
    outline.feed(page)
    headings = [text for kind, text in outline.events if kind == "h2"]
    assert headings.index("Decisions") < headings.index("Use cases") < headings.index("Changes")
    tags = [tag for kind, tag in outline.events if kind == "start"]
    assert "script" not in tags and "img" not in tags
    decisions = page.split("<h2>Decisions</h2>", 1)[1].split("<h2>Use cases</h2>", 1)[0]
    assert "<strong>Declared candidate:</strong> <code>rules</code>" in decisions
    assert "<strong>Policy recommends:</strong> <code>rules</code>" in decisions
    assert "✅ pass: pass rate 1 ≥ min 0.5" in decisions
    assert "<svg " in decisions and "gate 1: pass_rate on common ≥ 0.5" in decisions
    assert "<h3>Gate results</h3>" in decisions


def test_the_audit_html_says_why_when_the_decision_cannot_be_read(
    evidenced: Repo, cli, tmp_path: Path
):
    evidenced.write("registry/rubrics/labels.yaml", "criteria: [")
    broken = evidenced.commit("a broken rubric")
    site = tmp_path / "site"
    assert cli(evidenced, "audit", broken, "--no-verify", "--html", str(site)).code == 0
    page = (site / "index.html").read_text()
    assert "Not readable at this revision:" in page
    assert "<h2>Use cases</h2>" in page


def test_drift_record_logs_the_check_the_report_then_shows(live: Repo, cli, server):
    assert cli(live, "run", "--no-push").code == 0
    live.commit("results")
    assert cli(live, "drift", "--record").code == 0
    checks = {c.cell: c for c in read_drift_log(WorkspaceTree(live.root))}
    assert checks["labels/rules"].result == "skipped"
    check = checks["labels/mini"]
    assert (check.result, check.compared, check.same_level) == ("no drift", 4, 4)
    drift = _page(live).split("## 6. Drift", 1)[1].split("## 7.", 1)[0]
    assert f"| `mini` | {check.checked_at} | no drift | 4 of 4 samples at the same level |" in drift


def test_a_new_drift_check_makes_the_committed_report_out_of_date(evidenced: Repo, cli):
    assert cli(evidenced, "report").code == 0
    assert cli(evidenced, "check").code == 0
    cell = CellDrift("labels/mini", "mini", "gpt-4o-mini", compared=4, same_level=4)
    append_log(evidenced.root, _drift_report(cell), datetime(2026, 2, 2, tzinfo=UTC))
    stale = cli(evidenced, "check")
    assert stale.code == 1
    assert "report" in (stale.out + stale.err).lower()


@pytest.mark.parametrize(
    "text",
    [
        "<img src=x onerror=alert(1)> and <script>alert(1)</script>",
        "![p](https://evil.test/p.png) [click](javascript:alert(1))",
        "# heading",
        "- a list",
        "1. ordered",
        "2) ordered",
        "= setext",
        "ping @octocat about org/repo#12 and GH-3",
        "`code` *em* _em_ ~~del~~ $x$ | cell",
        "https://evil.test and www.evil.test",
    ],
)
def test_team_prose_is_inert_markdown(text: str):
    from evalreg.text.escape import prose

    tokens = (
        MarkdownIt("commonmark", {"html": True})
        .enable(["table", "strikethrough"])
        .parse(prose(text))
    )
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    [inline] = [t for t in tokens if t.type == "inline"]
    assert [c.type for c in inline.children or []] == ["text"] * len(inline.children or [])
    shown = "".join(c.content for c in inline.children or []).replace("\u200b", "")
    assert shown == text


def test_team_prose_keeps_plain_punctuation_as_written():
    from evalreg.text.escape import prose

    text = "Interim choice (49.6 % against 31.3 %): re-run later; see #notes!"
    assert prose(text) == text
