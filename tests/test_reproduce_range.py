"""``evalreg reproduce --range BASE..HEAD``: every first-parent commit that recorded results.

A real history in a real git + DVC repository: runs against the loopback server, a
commit that changes one candidate only, a compaction of the store, a merge, and a commit
whose results were edited by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalreg.cli import main
from evalreg.runner.reproduce import reproduce, reproduce_range

from conftest import EVALSET, Repo, items_jsonl, replace_tree, template_from_live

MINI, RULES = "labels/mini", "labels/rules"


def _history(live: Repo) -> list[str]:
    """Three commits that recorded results, with a commit that did not in between."""

    def cli(*args: str) -> None:
        assert main(["-C", str(live.root), *args]) == 0

    start = live.git("rev-parse", "HEAD").strip()
    cli("run")
    first = live.commit("first results")
    live.write("README.md", "notes\n")
    live.commit("docs only")
    # Only the rules baseline changes: its code is part of its fingerprint.
    live.write("registry/systems/rules.py", live.read("registry/systems/rules.py") + "# v2\n")
    cli("run")
    second = live.commit("rules v2")
    live.write(EVALSET, items_jsonl(6))
    cli("evalset", "add", str(live.root / EVALSET))
    cli("run")
    third = live.commit("more items")
    return [start, first, second, third]


@pytest.fixture(scope="module")
def history_template(
    tmp_path_factory: pytest.TempPathFactory, live_template: Path, server_port: int
) -> tuple[Path, list[str]]:
    """The history, made once for the module; copy it, never change it."""
    revs: list[str] = []
    root = template_from_live(
        tmp_path_factory, live_template, server_port, lambda r, _srv: revs.extend(_history(r))
    )
    return root, revs


@pytest.fixture
def history(live: Repo, history_template: tuple[Path, list[str]]) -> tuple[Repo, list[str]]:
    """This test's own copy of the history (``live``'s server and environment)."""
    template, revs = history_template
    return replace_tree(live, template), revs


def by_cell(rep) -> dict[str, tuple[bool, str | None]]:
    return {c.cell: (c.identical, c.same_as) for c in rep.cells}


def test_every_commit_that_recorded_results_is_reproduced_and_shared_evidence_named(history, cli):
    repo, (start, first, second, third) = history
    done = reproduce_range(repo.root, f"{start}..HEAD")
    assert [r.rev for r in done.revisions] == [first, second, third]  # not "docs only"
    assert done.identical
    first_rep, second_rep, third_rep = done.revisions
    assert by_cell(first_rep) == {MINI: (True, None), RULES: (True, None)}
    # At "rules v2" the model's cell rests on the same evidence as at the first commit.
    assert by_cell(second_rep) == {MINI: (True, first), RULES: (True, None)}
    assert by_cell(third_rep) == {MINI: (True, None), RULES: (True, None)}
    # The shared verdicts are the verdicts reproducing each revision alone gives.
    for rep in done.revisions:
        alone = reproduce(repo.root, rep.rev)
        assert {c.cell: c.identical for c in alone.cells} == {
            c.cell: c.identical for c in rep.cells
        }
    result = cli(repo, "reproduce", "--range", f"{start}..HEAD")
    assert result.code == 0, result.err
    assert f"labels/mini: identical (same evidence as at {first[:12]})" in result.out
    assert "identical (3 revisions; 5 cells graded, 1 with evidence already reproduced)" in (
        result.out
    )


def test_a_hand_edited_revision_in_the_range_is_named_and_fails(history, cli):
    repo, (start, _first, _second, _third) = history
    path = repo.root / f"reports/results/{MINI}.json"
    summary = json.loads(path.read_text())
    summary["totals"]["levels"]["correct"] += 1
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    edited = repo.commit("better numbers")
    result = cli(repo, "reproduce", "--range", f"{start}..HEAD")
    assert result.code == 1
    assert f"DIFFERENT at {edited[:12]}" in result.out
    assert "summary totals.levels.correct: recorded" in result.out
    # The earlier revisions keep their own verdicts.
    done = reproduce_range(repo.root, f"{start}..HEAD")
    assert [r.identical for r in done.revisions] == [True, True, True, False]


def test_a_compacted_store_is_graded_again_not_taken_on_trust(history, cli):
    repo, (start, *_rest, third) = history
    assert cli(repo, "store", "compact").code == 0
    compacted = repo.commit("compact the store")
    done = reproduce_range(repo.root, f"{third}..HEAD")
    assert [r.rev for r in done.revisions] == [compacted]
    # Same recorded files, but the responses now live in another segment: graded again.
    assert by_cell(done.revisions[0]) == {MINI: (True, None), RULES: (True, None)}
    everything = reproduce_range(repo.root, f"{start}..HEAD")
    assert by_cell(everything.revisions[-1]) == {MINI: (True, None), RULES: (True, None)}


def test_first_parent_history_only(history, cli):
    repo, (_start, *_rest, third) = history
    repo.git("checkout", "-q", "-b", "side")
    repo.write("registry/systems/rules.py", repo.read("registry/systems/rules.py") + "# v3\n")
    assert cli(repo, "run").code == 0
    side = repo.commit("rules v3 on a branch")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = repo.git("rev-parse", "HEAD").strip()
    done = reproduce_range(repo.root, f"{third}..HEAD")
    assert [r.rev for r in done.revisions] == [merge]  # the side commit is not walked
    assert side not in [r.rev for r in done.revisions]
    assert done.identical


@pytest.mark.parametrize("spec", ["HEAD", "HEAD...HEAD~1", "..HEAD", "nope..HEAD", "HEAD~1..nope"])
def test_a_bad_range_is_refused_and_nothing_is_written(history, cli, spec):
    repo, _ = history
    before = repo.snapshot()
    result = cli(repo, "reproduce", "--range", spec)
    assert result.code == 2, result.out
    assert "--range" in result.err
    assert "Traceback" not in result.err
    assert repo.snapshot() == before


def test_rev_and_range_together_are_refused(history, cli):
    repo, _ = history
    result = cli(repo, "reproduce", "HEAD", "--range", "HEAD~1..HEAD")
    assert result.code == 2
    assert "not both" in result.err


def test_a_changed_pin_is_keyed_again_not_given_the_keys_of_the_revision_before(history, cli):
    repo, (start, *_rest, third) = history
    pin = "registry/models/mini.yaml"
    repo.write(pin, repo.read(pin).replace("temperature: 0\n", "temperature: 0.5\n"))
    assert cli(repo, "run").code == 0  # new requests, bought from the loopback server
    hotter = repo.commit("mini: temperature 0.5")
    done = reproduce_range(repo.root, f"{start}..HEAD")
    assert [r.rev for r in done.revisions][-2:] == [third, hotter]
    assert done.identical, [c.differences for r in done.revisions for c in r.cells]
    assert by_cell(done.revisions[-1]) == {MINI: (True, None), RULES: (True, third)}


def test_a_cell_graded_in_forked_runs_of_items_reproduces_as_graded_in_one(
    history, cli, monkeypatch
):
    from evalreg import forked as _forked
    from evalreg.runner import reproduce as reproducing

    repo, (_start, *_rest, third) = history
    if _forked.parts(6, 1) < 2:
        pytest.skip("forked grading needs Linux and two CPUs")
    path = repo.root / f"reports/results/{MINI}.json"
    summary = json.loads(path.read_text())
    summary["totals"]["levels"]["correct"] += 1
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    edited = repo.commit("better numbers")
    whole = [reproduce(repo.root, rev) for rev in (third, edited)]
    monkeypatch.setattr(reproducing, "_MIN_PART", 1)  # the six items in two runs
    split = [reproduce(repo.root, rev) for rev in (third, edited)]
    assert split == whole
    assert split[0].identical
    assert not split[1].identical
    assert any("summary totals.levels.correct" in d for c in split[1].cells for d in c.differences)
