"""``evalreg run``, ``status`` and ``reproduce`` on real git + DVC repos and a loopback server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evalreg.store.segments import STORE_DIR, ResponseStore

from conftest import LIVE_KEY, Repo, items_jsonl

EVALSET = "evalsets/messages.jsonl"
MINI = "reports/results/labels/mini"
RULES = "reports/results/labels/rules"


def files(repo: Repo, *prefixes: str) -> dict[str, bytes]:
    out = {}
    for prefix in prefixes:
        for suffix in (".json", ".items.jsonl"):
            path = repo.root / (prefix + suffix)
            out[prefix + suffix] = path.read_bytes()
    return out


def test_run_writes_results_then_has_nothing_to_do(live: Repo, cli, server):
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 4
    summary = json.loads(live.read(MINI + ".json"))
    assert summary["cell"] == {"candidate": "mini", "pin": "mini", "task": "labels"}
    assert summary["totals"]["levels"] == {"acceptable": 0, "correct": 4, "unacceptable": 0}
    assert summary["slices"]["edge"]["items"] == 2
    assert summary["totals"]["cost_micro_usd"] > 0
    rules = json.loads(live.read(RULES + ".json"))
    assert rules["totals"]["levels"]["correct"] == 2  # the baseline always answers "a"
    assert (live.root / (MINI + ".items.jsonl.dvc")).is_file()
    assert list((live.root / STORE_DIR).glob("*.jsonl.dvc"))
    assert "bought 4  errors 0  graded 4" in result.err  # the progress display, at the end
    live.commit("results")

    status = cli(live, "status", "--json")
    assert {c["state"] for c in json.loads(status.out)} == {"fresh"}
    again = cli(live, "run")
    assert again.code == 0
    assert "Nothing to run" in again.out
    assert server.count() == 4


def test_grading_twice_gives_byte_identical_files(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    first = files(live, MINI, RULES)
    live.commit("results")
    assert cli(live, "run", "--force").code == 0
    assert files(live, MINI, RULES) == first
    assert live.git("status", "--porcelain") == ""
    assert server.count() == 4


def test_a_grader_change_regrades_without_a_single_request(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    live.commit("results")
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace(
            "      field: label\n", "      field: label\n      ignore_case: true\n"
        ),
    )
    status = json.loads(cli(live, "status", "--json").out)
    assert {(c["cell"], c["state"], tuple(c["reasons"])) for c in status} == {
        ("labels/mini", "stale", ("changed: rubric",)),
        ("labels/rules", "stale", ("changed: rubric",)),
    }
    assert cli(live, "run").code == 0
    assert server.count() == 4
    summary = json.loads(live.read(MINI + ".json"))
    assert summary["fingerprint_parts"]["rubric"] != ""
    assert json.loads(cli(live, "status", "--json").out)[0]["state"] == "fresh"


def test_repeats_run_every_sample_end_to_end(live: Repo, cli, server):
    live.write(
        "registry/tasks/labels.yaml",
        live.read("registry/tasks/labels.yaml").replace("repeats: 1", "repeats: 3"),
    )
    assert cli(live, "run").code == 0
    assert server.count() == 12
    records = [json.loads(x) for x in live.read(MINI + ".items.jsonl").splitlines()]
    assert [(r["item"], r["sample"]) for r in records][:3] == [
        ("m-000", 0),
        ("m-000", 1),
        ("m-000", 2),
    ]
    assert json.loads(live.read(MINI + ".json"))["totals"]["samples"] == 12


def test_offline_miss_is_an_error_naming_the_item(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    live.commit("results")
    live.write(EVALSET, items_jsonl(5))
    assert cli(live, "evalset", "add", str(live.root / EVALSET)).code == 0
    before = (live.root / (MINI + ".json")).read_bytes()
    result = cli(live, "run", "--offline")
    assert result.code == 1
    assert "labels/mini/m-004#0: offline_miss: no stored response" in result.err
    assert server.count() == 4
    assert (live.root / (MINI + ".json")).read_bytes() == before
    assert "incomplete" in result.out


def test_offline_leaves_never_run_cells_pending(live: Repo, cli, server):
    result = cli(live, "run", "--offline")
    assert result.code == 0
    assert "never run, and --offline buys nothing" in result.out
    assert server.count() == 0
    assert not (live.root / (MINI + ".json")).exists()


def test_dry_run_shows_what_would_run_and_costs_nothing(live: Repo, cli, server):
    before = live.snapshot()
    result = cli(live, "run", "--dry-run")
    assert result.code == 0
    assert "Dry run of labels" in result.out  # one task: the rows name its candidates
    mini = next(line for line in result.out.splitlines() if line.startswith("mini "))
    assert "never run" in mini
    assert "Estimated cost of missing responses: $0.0" in result.out
    assert server.count() == 0
    assert live.snapshot() == before


def test_max_cost_stops_before_the_budget_is_exceeded(live: Repo, cli, server):
    # At $1,000 per million tokens each request is estimated at about 6 to 7 cents.
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml")
        .replace("input_per_mtok: 0.15", "input_per_mtok: 1000")
        .replace("output_per_mtok: 0.6", "output_per_mtok: 0")
        .replace("temperature: 0", "temperature: 0\n  max_tokens: 1"),
    )
    dry = cli(live, "run", "--dry-run", "--candidate", "mini")
    per_request = float(dry.out.split("Estimated cost of missing responses: $")[1].split()[0]) / 4
    budget = per_request * 2.5
    result = cli(live, "run", "--candidate", "mini", "--max-cost", f"{budget:.6f}")
    assert result.code == 1
    assert server.count() == 2
    assert "budget" in result.out
    # The two bought responses were graded as they arrived; the incomplete cell then
    # left neither a file nor a directory behind.
    assert not (live.root / "reports/results/labels").exists()
    spent = sum(
        r["response"]["usage"]["input_tokens"] * 1000 / 1e6
        for r in map(ResponseStore.open(live.root).get, ResponseStore.open(live.root).keys())
        if r is not None
    )
    assert spent <= budget


def test_limit_runs_n_items_a_cell_and_writes_no_results(live: Repo, cli, server):
    result = cli(live, "run", "--limit", "1")
    assert result.code == 0
    assert server.count() == 1
    assert not (live.root / (MINI + ".json")).exists()


def test_provider_errors_are_counted_and_retried_next_run(live: Repo, cli, server):
    # One retry is enough to show retrying; the default six would sleep half a minute.
    pin = live.read("registry/models/mini.yaml")
    live.write("registry/models/mini.yaml", pin + "limits:\n  max_retries: 1\n")
    live.commit("the pin retries once")
    server.fail_matching('"Message: message 2"', "500")
    result = cli(live, "run", "--candidate", "mini")
    assert result.code == 1
    assert server.count(lambda r: b"Message: message 2" in r.raw) == 2  # tried, retried once
    summary = json.loads(live.read(MINI + ".json"))
    assert summary["totals"]["errors"] == 1
    assert summary["totals"]["graded"] == 3
    live.commit("results with an error")
    status = json.loads(cli(live, "status", "--json").out)
    assert "1 provider errors to retry" in status[0]["reasons"]
    server.clear_faults()
    before = server.count()
    assert cli(live, "run", "--candidate", "mini").code == 0
    assert server.count() == before + 1
    assert json.loads(live.read(MINI + ".json"))["totals"]["errors"] == 0


def test_reproduce_an_older_commit_after_later_changes(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    first = live.commit("first results")

    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.5"),
    )
    live.write(EVALSET, items_jsonl(6))
    assert cli(live, "evalset", "add", str(live.root / EVALSET)).code == 0
    assert cli(live, "run").code == 0
    second = live.commit("warmer pin, more items")

    for rev in (first, second, "HEAD"):
        result = cli(live, "reproduce", rev)
        assert result.code == 0, result.out
        assert "identical" in result.out
    # Reproducing reads everything from DVC: no workspace copy or cache is needed.
    shutil.rmtree(live.root / ".dvc" / "cache")
    for path in (live.root / "reports").rglob("*.jsonl"):
        path.unlink()
    offline = cli(live, "reproduce", first)
    assert offline.code == 0, offline.err + offline.out
    assert server.count() == 4 + 6


def test_reproduce_lists_every_difference(live: Repo, cli):
    assert cli(live, "run").code == 0
    summary = json.loads(live.read(MINI + ".json"))
    summary["totals"]["levels"]["correct"] = 3
    live.write(MINI + ".json", json.dumps(summary, sort_keys=True, indent=2) + "\n")
    rev = live.commit("tampered")
    result = cli(live, "reproduce", rev)
    assert result.code == 1
    assert "labels/mini: 1 difference\n" in result.out
    assert "summary totals.levels.correct: recorded 3, reproduced 4" in result.out
    assert "labels/rules: identical" in result.out


def test_results_recorded_under_summary_schema_1_still_reproduce(live: Repo, cli):
    """Schema 2 added ``samples``; a commit written before it reproduces as it was written."""
    assert cli(live, "run").code == 0
    summary = json.loads(live.read(MINI + ".json"))
    assert summary["schema_version"] == 2 and summary["samples"]["levels"]
    del summary["samples"]
    summary["schema_version"] = 1
    live.write(MINI + ".json", json.dumps(summary, sort_keys=True, indent=2) + "\n")
    rev = live.commit("results as schema 1 wrote them")
    result = cli(live, "reproduce", rev)
    assert result.code == 0, result.out
    assert "labels/mini: identical" in result.out
    # The report and check read such a summary through its per-item records.
    assert cli(live, "report").code == 0


def test_shards_merge_into_the_single_run_result(live: Repo, cli, server, tmp_path: Path):
    single = tmp_path / "single"
    shutil.copytree(live.root, single)
    for shard in ("1/2", "2/2"):
        result = cli(live, "run", "--shard", shard)
        assert result.code == 0, result.err
        assert not (live.root / (MINI + ".json")).exists()
    segments = sorted((live.root / STORE_DIR).glob("*.jsonl"))
    assert len(segments) == 2
    assert server.count() == 4  # the shards bought disjoint halves
    assert cli(live, "run", "--offline").code == 0

    # A single process that holds the same responses in one segment, in another order.
    merged = b"".join(p.read_bytes() for p in reversed(segments))
    (single / STORE_DIR).mkdir(parents=True, exist_ok=True)
    (single / STORE_DIR / "20260101T000000Z-merged-00000000.jsonl").write_bytes(merged)
    assert cli(single, "run", "--offline").code == 0
    assert files(Repo(single), MINI, RULES) == files(live, MINI, RULES)


def test_secrets_never_reach_disk_through_a_run(live: Repo, cli, server):
    server.fail_next("429", times=2, retry_after=0.01)
    assert cli(live, "run").code == 0
    live.commit("results")
    leaks = [
        str(p) for p in live.root.rglob("*") if p.is_file() and LIVE_KEY.encode() in p.read_bytes()
    ]
    assert leaks == []


def test_compaction_merges_segments_and_old_revisions_still_reproduce(live: Repo, cli, server):
    assert cli(live, "run").code == 0
    first = live.commit("first results")
    live.write(EVALSET, items_jsonl(6))
    assert cli(live, "evalset", "add", str(live.root / EVALSET)).code == 0
    assert cli(live, "run").code == 0
    live.commit("more items")
    assert len(list((live.root / STORE_DIR).glob("*.jsonl.dvc"))) == 2

    result = cli(live, "store", "compact")
    assert result.code == 0, result.err
    assert "Compacted 2 segments" in result.out
    pointers = list((live.root / STORE_DIR).glob("*.jsonl.dvc"))
    assert len(pointers) == 1 and "-compact-" in pointers[0].name
    assert len(ResponseStore.open(live.root)) == 6 + 6
    live.commit("compact the store")

    assert cli(live, "run", "--offline", "--force").code == 0
    assert live.git("status", "--porcelain") == ""
    assert cli(live, "reproduce", first).code == 0
    assert cli(live, "reproduce", "HEAD").code == 0
    assert server.count() == 4 + 2  # the 2 new items only; nothing re-bought after compaction


def test_reproduce_names_the_version_that_recorded_the_results(live: Repo, cli):
    assert cli(live, "run").code == 0
    for path in (live.root / "reports/results").rglob("*.json"):
        data = json.loads(path.read_text())
        data["evalreg_version"] = "0.0.9"
        path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n")
    rev = live.commit("results from an older release")
    result = cli(live, "reproduce", rev)
    assert result.code == 1
    first_line = result.out.splitlines()[0]
    assert "recorded with evalreg 0.0.9" in first_line
    assert "install evalreg==0.0.9" in result.out


def test_spelling_out_a_default_does_not_stale_results(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace(
            "    critical: true\n", "    critical: true\n    weight: 1\n", 1
        ),
    )
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml") + "limits:\n  concurrency: 16\n",
    )
    states = {c["cell"]: c["state"] for c in json.loads(cli(live, "status", "--json").out)}
    assert states == {"labels/mini": "fresh", "labels/rules": "fresh"}


def test_regrading_in_several_processes_writes_the_bytes_of_one(
    live: Repo, cli, server, monkeypatch
):
    import evalreg.forked
    from evalreg.runner import _gradepool as gradepool

    live.write(
        "registry/tasks/labels.yaml",
        live.read("registry/tasks/labels.yaml").replace("repeats: 1", "repeats: 3"),
    )
    assert cli(live, "run").code == 0
    serial = files(live, MINI, RULES)
    live.commit("results")
    forked = []
    real_chunks = gradepool.chunks

    def chunks(samples, parts):
        pieces = real_chunks(samples, parts)
        forked.append(len(pieces) - 1)
        return pieces

    monkeypatch.setattr(evalreg.forked, "parts", lambda units, min_part=0: 4)
    monkeypatch.setattr(gradepool, "chunks", chunks)
    regraded = cli(live, "run", "--offline", "--force")
    assert regraded.code == 0
    assert forked == [3, 3]  # three of the four chunks of each cell went to workers
    assert regraded.err.count("graded 12") == 2  # the workers' samples are counted too
    assert files(live, MINI, RULES) == serial
    assert live.git("status", "--porcelain") == ""
