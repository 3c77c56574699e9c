"""Purging an item's stored responses on real git + DVC repositories."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from evalreg import __version__
from evalreg.errors import UsageError
from evalreg.store.purge import PURGE_LOG, purge_item
from evalreg.store.segments import STORE_DIR, ResponseStore

from conftest import Repo

RESULTS = "reports/results/labels"


def recorded_keys(repo: Repo) -> dict[str, set[str]]:
    """Response keys in the cells' per-item records, by item."""
    out: dict[str, set[str]] = {}
    for candidate in ("mini", "rules"):
        for line in repo.read(f"{RESULTS}/{candidate}.items.jsonl").splitlines():
            record = json.loads(line)
            out.setdefault(record["item"], set()).add(record["key"])
    return out


def pointers(repo: Repo) -> list[str]:
    return sorted(p.name for p in (repo.root / STORE_DIR).glob("*.jsonl.dvc"))


def test_a_purge_removes_the_items_responses_and_keeps_every_other(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    keys = recorded_keys(live)
    before = pointers(live)

    record = purge_item(live.root, "m-001", reason="customer asked for erasure (ticket 4411)")

    store = ResponseStore.open(live.root)
    assert not keys["m-001"] & set(store.keys())
    assert set(store.keys()) == keys["m-000"] | keys["m-002"] | keys["m-003"]
    assert record.keys_removed == 2
    assert record.cells == ["labels/mini", "labels/rules"]
    assert record.results == {  # the records graded on the purged responses
        f"labels/{c}": json.loads(live.read(f"{RESULTS}/{c}.json"))["items_file"]["md5"]
        for c in ("mini", "rules")
    }
    assert record.segments_removed == [name.removesuffix(".dvc") for name in before]
    assert record.segment_written is not None and "-purge-" in record.segment_written
    assert pointers(live) == [record.segment_written + ".dvc"]
    assert len(record.purged_objects) == len(before)
    assert live.git("status", "--porcelain", "--", STORE_DIR)  # pointers changed for git


def test_the_purge_log_records_what_why_and_the_steps_that_erase_it(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    record = purge_item(live.root, "m-001", reason="GDPR request", at="2026-04-02")

    (entry,) = (json.loads(x) for x in live.read(PURGE_LOG).splitlines())
    assert entry == record.log_entry()
    assert entry["item"] == "m-001" and entry["evalset"] == "evalsets/messages.jsonl"
    assert entry["reason"] == "GDPR request" and entry["at"] == "2026-04-02"
    assert entry["keys_removed"] == 2 and entry["evalreg_version"] == __version__
    assert entry["segments_removed"] and entry["segment_written"]
    assert entry["next_steps"][-2:] == [
        "dvc gc --workspace --all-branches --all-tags --cloud --dry",
        "dvc gc --workspace --all-branches --all-tags --cloud --force",
    ]
    assert any("stay in DVC objects" in note for note in entry["notes"])
    assert any("evalsets/messages.jsonl still holds item m-001" in n for n in entry["notes"])

    for step in record.next_steps:
        argv = shlex.split(step)
        if argv[0] == "dvc":
            argv = [sys.executable, "-m", "dvc", *argv[1:]]
        if argv[:2] != ["git", "push"]:  # the test repository has no git remote
            subprocess.run(argv, cwd=live.root, check=True, capture_output=True)
    for md5 in record.purged_objects:
        for store in (".dvc/cache/files/md5", "dvc-storage/files/md5"):
            assert not (live.root / store / md5[:2] / md5[2:]).exists()
    assert len(ResponseStore.open(live.root)) == 6


def test_after_a_purge_an_offline_run_reports_the_item_as_missing(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    live.commit("results")
    purge_item(live.root, "m-001", reason="erasure request")
    live.commit("purge m-001")

    states = {c["cell"]: c["reasons"] for c in json.loads(cli(live, "status", "--json").out)}
    assert "responses purged: m-001" in states["labels/mini"]
    result = cli(live, "run", "--offline", "--force")
    assert result.code == 1
    assert "labels/mini/m-001#0: offline_miss" in result.err
    assert "labels/rules/m-001#0: offline_miss" in result.err
    assert "m-000" not in result.err and "m-002" not in result.err
    assert server.count() == 4  # nothing bought again


def test_responses_recorded_under_an_earlier_prompt_are_purged_too(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    live.commit("results")
    old = recorded_keys(live)["m-001"]
    live.write(
        "registry/tasks/labels.yaml",
        live.read("registry/tasks/labels.yaml").replace("Message: ", "Customer message: "),
    )
    assert cli(live, "run").code == 0
    live.commit("a new prompt")
    new = recorded_keys(live)["m-001"]
    assert not old & new

    record = purge_item(live.root, "m-001", reason="erasure request")

    assert record.keys_removed == 4
    assert not (old | new) & set(ResponseStore.open(live.root).keys())
    assert len(ResponseStore.open(live.root)) == 16 - 4


def test_an_unknown_item_changes_nothing(live: Repo):
    before = live.snapshot()
    with pytest.raises(UsageError, match="no item 'm-404' in any eval set"):
        purge_item(live.root, "m-404", reason="typo")
    with pytest.raises(UsageError, match=r"no item 'm-001' in evalsets/other\.jsonl"):
        purge_item(live.root, "m-001", reason="wrong set", evalset="evalsets/other.jsonl")
    with pytest.raises(UsageError, match="needs a reason"):
        purge_item(live.root, "m-001", reason="  ")
    assert live.snapshot() == before


def test_an_item_with_nothing_stored_is_still_logged(live: Repo):
    record = purge_item(live.root, "m-003", reason=" erasure request\n before any run ")
    assert record.reason == "erasure request before any run"
    assert (record.keys_removed, record.segments_removed, record.segment_written) == (0, [], None)
    assert record.next_steps == [
        f"git add {PURGE_LOG} {STORE_DIR}",
        "git commit -m 'Purge the stored responses of item m-003'",
        "git push",
    ]
    assert json.loads(live.read(PURGE_LOG))["item"] == "m-003"
