"""Terminal tables read at 80 columns: each row on one line, no line wider than the
terminal, long texts once below the table as notes, long lists cut with a count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Repo

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 80
LONG = "support-ticket-triage-for-the-enterprise-queue"


def lines(text: str) -> list[str]:
    assert text.strip()
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_wide == []
    return text.splitlines()


def row(text: str, first: str) -> str:
    """The one line whose first word is ``first``."""
    [found] = [line for line in text.splitlines() if line.split()[:1] == [first]]
    return found


@pytest.fixture
def many_slices(repo: Repo) -> Repo:
    """The standard registry with 40 slices, a long use-case id and a long candidate id."""
    rows = [
        {
            "id": f"m-{i:03d}",
            "input": {"text": f"message {i}"},
            "expected": {"label": "a"},
            "tags": [f"slice-{i:02d}"],
        }
        for i in range(40)
    ]
    repo.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    selection = repo.read("registry/selections/labels.yaml")
    repo.git("mv", "registry/selections/labels.yaml", f"registry/selections/{LONG}.yaml")
    repo.write(
        f"registry/selections/{LONG}.yaml",
        selection.replace("  - id: mini\n", "  - id: mini-with-a-much-longer-name\n").replace(
            "slice: common", "slice: all"
        ),
    )
    repo.commit("many slices")
    return repo


def test_check_fits_80_columns_with_a_row_per_use_case(many_slices: Repo, cli, narrow):
    result = cli(many_slices, "check")
    assert result.code == 0, result.err
    out = lines(result.out)
    assert "Registry: 2 model pins, 1 task, 1 rubric, 1 selection, 1 eval set" in out[0]
    # Too long for columns: each use case is a paragraph, broken between words.
    assert row(result.out, LONG) == LONG
    assert "  task labels, eval set evalsets/messages.jsonl (40 items), 2 candidates," in out
    listed = " ".join(result.out.split())
    assert "40 slices of evalsets/messages.jsonl (items in each): slice-00 1, slice-01 1," in listed
    assert "slice-23 1, … and 16 more (`evalreg evalset stats` lists every slice)" in listed


def test_status_and_run_fit_80_columns_long_reasons_as_notes(live: Repo, cli, narrow):
    dry = cli(live, "run", "--dry-run")
    assert dry.code == 0, dry.err
    lines(dry.out)
    assert "Dry run of labels: what would run" in dry.out
    mini = row(dry.out, "mini").split()
    assert mini[:3] == ["mini", "pending", "4"] and mini[-2:] == ["note", "1"]
    assert "note 1: never run; estimate: 256 output tokens: max_tokens, no history" in " ".join(
        dry.out.split()
    )
    assert cli(live, "run").code == 0
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.5"),
    )
    status = cli(live, "status")
    lines(status.out)
    assert row(status.out, "mini").split() == ["mini", "stale", "changed:", "pin"]
    run = cli(live, "run", "--offline")
    assert run.code == 1  # the warmer pin's responses are not in the store
    lines(run.out)
    assert row(run.out, "mini").split()[:3] == ["mini", "stale", "4"]


def test_several_tasks_get_a_task_column_named_once(live: Repo, cli, narrow):
    live.write("registry/tasks/labels-two.yaml", live.read("registry/tasks/labels.yaml"))
    live.write(
        "registry/selections/labels-two.yaml",
        live.read("registry/selections/labels.yaml").replace("task: labels", "task: labels-two"),
    )
    status = cli(live, "status")
    out = lines(status.out)
    assert "Cells" in out[0]
    tasks = [line.split()[0] for line in out if line.split()[-2:] == ["never", "run"]]
    assert tasks == ["labels-two", "rules", "labels", "rules"]  # the task on its first row


def test_the_example_registry_reads_at_80_columns(cli, narrow):
    check = cli(ROOT, "check")
    lines(check.out)
    # Two use cases with long eval-set paths: each is a short paragraph, not a table row.
    assert "  8 candidates, declared naive-bayes" in check.out.splitlines()
    assert "  5 candidates, declared invoice-reader" in check.out.splitlines()
    status = cli(ROOT, "status")
    lines(status.out)
    assert row(status.out, "naive-bayes").split() == ["naive-bayes", "fresh"]
    stats = cli(ROOT, "evalset", "stats")
    lines(stats.out)
    slice_row = row(stats.out, "injection.ignore_instructions").split()
    assert slice_row[1:4] == ["3", "0", "3"] and slice_row[-2:] == ["too", "small"]
    assert "single-rate MDE of each slice: in a terminal 100 columns wide" in stats.out
    show = cli(ROOT, "show", "st-0001", "--candidate", "naive-bayes")
    lines(show.out)
    assert row(show.out, "category*").split()[:2] == ["category*", "failed"]
