"""``evalreg run --batch``: responses bought through OpenAI's Batch API and Anthropic's
Message Batches are the same evidence as live ones, priced at the batch prices; partial
failures and expired batches are errors per item, bought again by the next run."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from evalreg.cells import cells
from evalreg.providers.base import Completion
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry.loader import load_registry
from evalreg.selection.evidence import gather
from evalreg.store.batches import BatchJournal
from evalreg.store.segments import ResponseStore

from conftest import LIVE_KEY, Repo

POLL = ("--batch-poll", "0.01")
BATCH_PRICES = (
    "  output_per_mtok: 0.6\n  batch_input_per_mtok: 0.075\n  batch_output_per_mtok: 0.3\n"
)


def _records(root: Path) -> dict[str, dict]:
    store = ResponseStore.open(root)
    keys = list(store.keys())
    return {key: store.get(key) for key in keys}


def _summary(repo: Repo, cell_id: str) -> dict:
    registry = load_registry(repo.root)
    (cell,) = [c for c in cells(registry) if c.id == cell_id]
    return json.loads((repo.root / cell.summary_path).read_bytes())


def _with_batch_prices(repo: Repo) -> None:
    pin = repo.read("registry/models/mini.yaml")
    repo.write("registry/models/mini.yaml", pin.replace("  output_per_mtok: 0.6\n", BATCH_PRICES))
    repo.commit("batch prices")


def test_a_batched_run_stores_the_same_requests_under_the_same_keys_as_a_live_run(
    live: Repo, server, cli, tmp_path: Path
):
    other = Repo(tmp_path / "live-copy")
    shutil.copytree(live.root, other.root, symlinks=True)
    assert cli(other, "run").code == 0
    live_records = _records(other.root)
    assert server.batch_requests == []

    done = cli(live, "run", "--batch", *POLL)
    assert done.code == 0, done.err
    batched = _records(live.root)
    assert set(batched) == set(live_records)
    mini = [k for k, r in batched.items() if r["provider"] == "openai"]
    assert len(mini) == 4 and sorted(r.custom_id for r in server.batch_requests) == sorted(mini)
    for key in mini:
        ours, theirs = batched[key], live_records[key]
        assert ours["request"] == theirs["request"]  # the same exact body
        assert ours["response"]["text"] == theirs["response"]["text"]
        assert ours["response"]["batch"] is True and "batch" not in theirs["response"]
        assert ours["batch_id"].startswith("batch_") and "latency_ms" not in ours
    # The python baseline has no batch API: bought live, and the run says so.
    assert "bought live, without a batch API here: python" in done.err
    assert BatchJournal.load(live.root).batches == []
    assert server.count(lambda r: r.path == "/v1/chat/completions") == 4  # the copy's, live
    # Nothing was bought that the store does not hold, and the evidence replays.
    assert cli(live, "run").code == 0 and len(server.batch_requests) == 4
    live.commit("results")
    assert cli(live, "reproduce", "HEAD").code == 0


def test_a_batched_cell_has_no_latency_so_a_latency_gate_cannot_pass(live: Repo, server, cli):
    selection = live.read("registry/selections/labels.yaml")
    live.write(
        "registry/selections/labels.yaml",
        selection.replace(
            "  gates:\n", "  gates:\n    - metric: latency_p95_ms\n      max: 60000\n"
        ),
    )
    live.commit("a latency gate")
    assert cli(live, "run", "--batch", *POLL).code == 0
    summary = _summary(live, "labels/mini")
    # Every graded response came from a batch: none has a latency to count.
    assert summary["totals"]["batched"] == summary["totals"]["graded"] == 4
    items = (live.root / "reports/results/labels/mini.items.jsonl").read_text().splitlines()
    assert all(json.loads(line)["batch"] is True for line in items)
    # The live baseline's summary keeps the fields it always had.
    assert "batched" not in _summary(live, "labels/rules")["totals"]
    live.commit("results")
    report = cli(live, "report")
    assert report.code == 0, report.err
    text = (live.root / "reports/labels.md").read_text()
    assert "n/a (batch)" in text
    decision = gather(load_registry(live.root), "labels").decision
    (gate,) = [g for g in decision.assessments["mini"].gates if g.gate.metric == "latency_p95_ms"]
    assert not gate.passed
    assert gate.note == "no latency measured: its responses were bought through a batch API"
    # The live baseline's latency was measured: its gate is decided on it.
    (live_gate,) = [
        g for g in decision.assessments["rules"].gates if g.gate.metric == "latency_p95_ms"
    ]
    assert live_gate.passed


def test_batch_responses_cost_the_batch_price_and_dry_run_shows_the_saving(live: Repo, server, cli):
    _with_batch_prices(live)
    dry = cli(live, "run", "--batch", "--dry-run")
    assert dry.code == 0, dry.err
    line = next(x for x in dry.out.splitlines() if x.startswith("Bought in batches"))
    batch_usd, live_usd = [float(w.strip("$,")) for w in line.split() if w.startswith("$")][:2]
    assert batch_usd == pytest.approx(live_usd / 2, abs=2e-6) and "saving" in line
    assert server.count() == 0  # a dry run buys nothing

    assert cli(live, "run", "--batch", *POLL).code == 0
    registry = load_registry(live.root)
    price = registry.pins["mini"].price
    assert price is not None
    records = [r for r in _records(live.root).values() if r["provider"] == "openai"]
    expected = sum(cost_micro_usd(price, Completion.from_record(r["response"])) for r in records)
    live_price = sum(
        cost_micro_usd(price, Completion.from_record({**r["response"], "batch": False}))
        for r in records
    )
    cost = _summary(live, "labels/mini")["totals"]["cost_micro_usd"]
    assert cost == expected and 0 < cost < live_price


def test_the_report_says_what_the_monthly_volume_would_cost_at_batch_prices(
    live: Repo, server, cli
):
    task = live.read("registry/tasks/labels.yaml")
    live.write(
        "registry/tasks/labels.yaml",
        task.replace("monthly_volume: 1000", "monthly_volume: 50000000"),
    )
    _with_batch_prices(live)
    assert cli(live, "run").code == 0  # bought live, at live prices
    totals = _summary(live, "labels/mini")["totals"]
    monthly = totals["cost_micro_usd"] / totals["graded"] / 1e6 * 50_000_000
    live.commit("results")
    assert cli(live, "report").code == 0
    text = (live.root / "reports/labels.md").read_text()
    (line,) = [x for x in text.splitlines() if x.startswith("- `mini`: $")]
    at_batch, at_live = [float(w.strip("$,")) for w in line.split() if w.startswith("$")]
    # The pin's batch prices are half its live ones, and it has no per-call fee.
    assert at_live == pytest.approx(monthly, rel=0.01)
    assert at_batch == pytest.approx(monthly / 2, rel=0.01)
    assert "a month instead of" in line and "at the pin's batch prices" in line
    # The python baseline has no batch prices: nothing is said for it.
    assert not any(x.startswith("- `rules`: $") for x in text.splitlines())
    # Bought through the batch API instead (a changed pin asks again), the same figures:
    # not discounted twice.
    pin = live.read("registry/models/mini.yaml")
    live.write("registry/models/mini.yaml", pin.replace("temperature: 0", "temperature: 0.1"))
    assert cli(live, "run", "--batch", *POLL, "--candidate", "mini").code == 0
    assert _summary(live, "labels/mini")["totals"]["batched"] == 4
    live.commit("results bought through the batch API")
    assert cli(live, "report").code == 0
    text = (live.root / "reports/labels.md").read_text()
    (again,) = [x for x in text.splitlines() if x.startswith("- `mini`: $")]
    batched_at_batch, batched_at_live = [
        float(w.strip("$,")) for w in again.split() if w.startswith("$")
    ]
    assert batched_at_batch == pytest.approx(at_batch, rel=0.01)
    assert batched_at_live == pytest.approx(at_live, rel=0.01)


def test_max_cost_admits_batched_requests_at_the_batch_price(
    live: Repo, server, cli, tmp_path: Path
):
    _with_batch_prices(live)
    other = Repo(tmp_path / "live-copy")
    shutil.copytree(live.root, other.root, symlinks=True)
    dry = cli(live, "run", "--dry-run", "--candidate", "mini")
    live_usd = float(dry.out.split("Estimated cost of missing responses: $")[1].split()[0])
    budget = f"{live_usd * 0.75:.6f}"  # three of four requests live, all four in a batch
    capped = cli(other, "run", "--max-cost", budget, "--candidate", "mini", "--no-push")
    assert capped.code == 1 and "budget" in capped.out
    assert server.count(lambda r: r.path == "/v1/chat/completions") == 3
    batched = cli(live, "run", "--batch", *POLL, "--max-cost", budget, "--candidate", "mini")
    assert batched.code == 0, batched.err
    assert len(server.batch_requests) == 4


def test_no_wait_submits_and_a_later_run_collects_without_buying_again(live: Repo, server, cli):
    submitted = cli(live, "run", "--batch", "--no-wait", "--candidate", "mini")
    assert submitted.code == 0, submitted.err
    assert "4 responses waiting in submitted batches" in submitted.out
    assert "waiting: 4 responses in submitted batches" in submitted.out
    (batch,) = BatchJournal.load(live.root).batches
    assert batch.state == "submitted" and batch.batch_id and len(batch.keys) == 4
    assert _records(live.root) == {}
    # status says what waits, where, and what collects it (the JSON stays the cells').
    for args in ((), ("--json",)):
        shown = cli(live, "status", *args)
        assert shown.code == 0, shown.err
        assert "waiting: 4 responses in 1 batch not collected yet" in shown.err
        assert f"  mini: {batch.batch_id}, 4 requests, since {batch.created_utc}" in shown.err
    assert {c["cell"] for c in json.loads(shown.out)} >= {"labels/mini"}

    # A live run meanwhile buys none of them again: they wait in the batch.
    plain = cli(live, "run", "--candidate", "mini")
    assert plain.code == 0, plain.err
    assert server.count(lambda r: r.path == "/v1/chat/completions") == 0

    server.batch_polls = 0
    collected = cli(live, "run", "--batch", "--no-wait", "--candidate", "mini")
    assert collected.code == 0, collected.err
    assert len(server.batch_requests) == 4  # nothing submitted twice
    assert BatchJournal.load(live.root).batches == []
    assert "waiting:" not in cli(live, "status").err
    assert {r["batch_id"] for r in _records(live.root).values()} == {batch.batch_id}
    assert _summary(live, "labels/mini")["totals"]["errors"] == 0


def test_requests_that_fail_inside_a_batch_are_item_errors_bought_again_next_run(
    live: Repo, server, cli
):
    server.batch_errors_matching = ["message 1"]
    first = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert first.code == 1
    assert "labels/mini/m-001#0: server: HTTP 500 in a batch" in first.err
    assert _summary(live, "labels/mini")["totals"]["errors"] == 1
    failed = [r.custom_id for r in server.batch_requests if "message 1" in r.raw.decode()]
    assert len(failed) == 1 and failed[0] not in _records(live.root)

    server.batch_errors_matching = []
    again = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert again.code == 0, again.err
    assert [r.custom_id for r in server.batch_requests[4:]] == failed  # only that one
    assert _summary(live, "labels/mini")["totals"]["errors"] == 0


def test_an_expired_batch_leaves_its_unanswered_requests_as_errors_retried_next_run(
    live: Repo, server, cli
):
    server.batch_expire_after = 3
    first = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert first.code == 1
    assert "batch_expired" in first.err and "completion window expired" in first.err
    assert len(_records(live.root)) == 3
    assert BatchJournal.load(live.root).batches == []
    again = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert again.code == 0, again.err
    assert len(server.batch_requests) == 5 and len(_records(live.root)) == 4


ANTHROPIC_PIN = """\
schema_version: 1
provider: anthropic
model: claude-test-1
base_url: {url}
api_key_env: OPENAI_API_KEY
params:
  temperature: 0
  max_tokens: 64
price:
  input_per_mtok: 1.0
  output_per_mtok: 5.0
  batch_input_per_mtok: 0.5
  batch_output_per_mtok: 2.5
  as_of: 2026-01-01
"""


@pytest.fixture
def with_anthropic(live: Repo, server) -> Repo:
    live.write("registry/models/claude.yaml", ANTHROPIC_PIN.format(url=server.root_url))
    selection = live.read("registry/selections/labels.yaml")
    live.write(
        "registry/selections/labels.yaml",
        selection.replace("  - id: mini\n", "  - id: claude\n    pin: claude\n  - id: mini\n"),
    )
    live.commit("an Anthropic candidate")
    return live


def test_anthropic_message_batches_store_the_live_request_and_errors_per_item(
    with_anthropic: Repo, server, cli
):
    server.batch_expire_after = 3
    first = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", "claude")
    assert first.code == 1
    assert "batch_expired" in first.err
    records = _records(with_anthropic.root)
    assert len(records) == 3
    for request in server.batch_requests:
        if request.custom_id in records:
            record = records[request.custom_id]
            assert record["request"] == request.body
            assert record["response"]["batch"] is True
            assert record["batch_id"].startswith("msgbatch_")
    assert server.count(lambda r: r.path == "/v1/messages") == 0  # nothing bought live
    again = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", "claude")
    assert again.code == 0, again.err
    assert len(server.batch_requests) == 5 and len(_records(with_anthropic.root)) == 4
    summary = _summary(with_anthropic, "labels/claude")
    assert summary["totals"]["errors"] == 0


SHORT_TIMEOUT = "limits:\n  timeout_s: 0.5\n  max_retries: 2\n"
CREATE_ANTHROPIC = "/v1/messages/batches"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_creation_that_timed_out_is_found_and_not_submitted_again(
    with_anthropic: Repo, server, cli, protocol: str
):
    candidate, path = (
        ("mini", "/v1/batches") if protocol == "openai" else ("claude", CREATE_ANTHROPIC)
    )
    pin = f"registry/models/{candidate}.yaml"
    with_anthropic.write(pin, with_anthropic.read(pin) + SHORT_TIMEOUT)
    with_anthropic.commit("a short timeout")
    # The batch is created, but its answer comes after the client gave up waiting: a retry
    # sent as it was would create a second batch and buy every request twice.
    with server.hold_batch("create"):
        done = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", candidate)
    assert done.code == 0, done.err
    creations = [r for r in server.requests if r.method == "POST" and r.path == path]
    assert len(creations) == 1, "a creation of unknown outcome was sent again"
    assert server.count(lambda r: r.method == "GET" and r.path == path) >= 1  # looked for
    assert sorted(Counter(r.custom_id for r in server.batch_requests).values()) == [1] * 4
    assert len(_records(with_anthropic.root)) == 4
    assert BatchJournal.load(with_anthropic.root).batches == []


def test_an_anthropic_creation_whose_batch_is_not_listed_is_sent_again(
    with_anthropic: Repo, server, cli
):
    # The first creation fails with a 500 before the server makes the batch: whether it was
    # made is unknown to the client, the list has no batch of that size since the intent,
    # so the retry is the one purchase.
    server.batch_create_errors = 1
    done = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", "claude")
    assert done.code == 0, done.err
    posted = [r for r in server.requests if r.method == "POST" and r.path == CREATE_ANTHROPIC]
    assert len(posted) == 2
    assert server.count(lambda r: r.method == "GET" and r.path == CREATE_ANTHROPIC) == 1
    assert sorted(Counter(r.custom_id for r in server.batch_requests).values()) == [1] * 4
    assert len(_records(with_anthropic.root)) == 4


def test_a_results_url_elsewhere_is_not_sent_the_key(with_anthropic: Repo, server, cli):
    server.batch_results_base = "http://127.0.0.2:9"
    done = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", "claude")
    assert done.code == 1
    assert "is kept for a later run" in done.err and "is not at the API" in done.err
    assert LIVE_KEY not in done.err
    assert "waiting: 4 responses in submitted batches" in done.out
    assert server.count(lambda r: r.path.endswith("/results")) == 0
    # The batch stays journalled: a later run collects it from the API itself.
    assert len(BatchJournal.load(with_anthropic.root).batches) == 1
    server.batch_results_base = None
    again = cli(with_anthropic, "run", "--batch", *POLL, "--candidate", "claude")
    assert again.code == 0, again.err
    assert len(server.batch_requests) == 4 and BatchJournal.load(with_anthropic.root).batches == []


def test_a_batch_that_cannot_be_polled_is_kept_and_fails_the_run(live: Repo, server, cli):
    assert cli(live, "run", "--batch", "--no-wait", "--candidate", "mini").code == 0
    server.api_key = "sk-rotated"
    stuck = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert stuck.code == 1
    assert "is kept for a later run: auth 401" in stuck.err and "Traceback" not in stuck.err
    assert len(BatchJournal.load(live.root).batches) == 1
    server.api_key = LIVE_KEY
    done = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    assert len(server.batch_requests) == 4


def test_no_wait_without_batch_is_refused(live: Repo, cli):
    done = cli(live, "run", "--no-wait")
    assert done.code == 2 and "--no-wait goes with --batch" in done.err


@pytest.mark.parametrize("content", [b"{}", b'{"version": 1, "batches": [{"id": 1}]}', b"[1]"])
def test_a_batch_journal_in_another_shape_is_left_alone(live: Repo, server, cli, content):
    path = BatchJournal(live.root).path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    done = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    assert "Traceback" not in done.err and len(server.batch_requests) == 4
