"""A sealed hold-out set: runs only when asked, is reported apart, reproduces like the rest."""

from __future__ import annotations

import json

from conftest import Repo


def holdout_items(n: int = 4, prefix: str = "h") -> str:
    rows = [
        {
            "id": f"{prefix}-{i:03d}",
            "input": {"text": f"held {i}"},
            "expected": {"label": "a" if i % 2 else "b"},
            "tags": ["common"],
        }
        for i in range(n)
    ]
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def with_holdout(repo: Repo, cli, content: str) -> None:
    repo.write("evalsets/holdout.jsonl", content)
    assert cli(repo, "evalset", "add", str(repo.root / "evalsets/holdout.jsonl")).code == 0
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace(
            "evalset: evalsets/messages.jsonl",
            "evalset: evalsets/messages.jsonl\nholdout: evalsets/holdout.jsonl",
        ),
    )


def test_the_holdout_runs_only_when_asked_and_is_reported_apart(live: Repo, cli, server):
    with_holdout(live, cli, holdout_items())
    assert cli(live, "run").code == 0
    assert server.count() == 4
    assert not (live.root / "reports/results/labels/mini.holdout.json").exists()
    cells = {c["cell"] for c in json.loads(cli(live, "status", "--json").out)}
    assert cells == {"labels/mini", "labels/rules"}

    assert cli(live, "run", "--holdout").code == 0
    assert server.count() == 8
    held = json.loads(live.read("reports/results/labels/mini.holdout.json"))
    assert held["evalset"]["path"] == "evalsets/holdout.jsonl"
    assert held["totals"]["items"] == 4
    assert cli(live, "report").code == 0
    page = live.read("reports/labels.md")
    assert "### Sealed hold-out" in page
    assert "| `mini` | 100.0% (51.0–100.0) | 100.0% (51.0–100.0) | 4 |" in page
    live.commit("dev and hold-out results")
    result = cli(live, "reproduce", "HEAD")
    assert result.code == 0, result.out
    assert "labels/mini@holdout: identical" in result.out


def test_a_holdout_sharing_items_with_the_development_set_is_refused(live: Repo, cli):
    with_holdout(live, cli, holdout_items(prefix="m"))
    result = cli(live, "check")
    assert result.code == 2
    assert "the hold-out set must be sealed from the development set: 4 items are in both" in (
        result.err
    )


def test_without_a_holdout_the_report_says_so(live: Repo, cli):
    assert cli(live, "run").code == 0
    assert cli(live, "report").code == 0
    assert "No sealed hold-out set" in live.read("reports/labels.md")
