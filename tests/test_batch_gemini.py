"""``evalreg run --batch`` on Gemini pins: the Gemini API's batch mode (inlined requests)
buys the exact requests a live run sends, under the same keys, at the batch price; errored
entries and expired batches are errors per item, bought again next run; Vertex AI pins are
bought live, and the run says why."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_batch import POLL, _records, _summary
from test_provider_gemini import API_KEY, PIN, adc, gemini_label

from evalreg.cells import cells
from evalreg.providers import batch, get_provider
from evalreg.providers.base import Completion
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry.loader import load_registry
from evalreg.runner.planning import cell_request
from evalreg.store.batches import BatchJournal

from conftest import Repo
from support.cloud_servers import GeminiServer
from support.clouds import VERTEX, gemini_pin

__all__ = ["adc"]  # the Vertex AI test's credentials fixture

BATCH_PRICES = "  batch_input_per_mtok: 0.15\n  batch_output_per_mtok: 1.25\n"
CREATE = "/v1beta/models/gemini-2.5-flash:batchGenerateContent"
LIVE = "/v1beta/models/gemini-2.5-flash:generateContent"


@pytest.fixture
def gemini() -> Iterator[GeminiServer]:
    with GeminiServer(api_key=API_KEY, responder=gemini_label) as srv:
        srv.batch_polls = 1
        yield srv


@pytest.fixture
def on_gemini(live: Repo, gemini: GeminiServer, monkeypatch) -> Repo:
    """The standard registry with its ``mini`` pin on the Gemini API stand-in, at batch
    prices half its live ones."""
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    pin = gemini_pin(gemini.root_url).replace("  as_of:", BATCH_PRICES + "  as_of:")
    live.write(PIN, pin)
    live.commit("mini on gemini, with batch prices")
    return live


def _gemini_records(root: Path) -> dict[str, dict]:
    return {k: r for k, r in _records(root).items() if r["provider"] == "gemini"}


def _live_calls(gemini: GeminiServer) -> int:
    return gemini.count(lambda r: r.path == LIVE)


def test_a_batched_gemini_run_stores_the_same_requests_under_the_same_keys_as_a_live_run(
    on_gemini: Repo, gemini: GeminiServer, cli, tmp_path: Path
):
    other = Repo(tmp_path / "live-copy")
    shutil.copytree(on_gemini.root, other.root, symlinks=True)
    assert cli(other, "run", "--candidate", "mini").code == 0
    live_records = _gemini_records(other.root)
    assert len(live_records) == 4 and _live_calls(gemini) == 4

    done = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    assert _live_calls(gemini) == 4  # the copy's: none bought live here
    batched = _gemini_records(on_gemini.root)
    # Same request bytes, same keys: a batched response is the same evidence as a live one.
    assert set(batched) == set(live_records)
    (create,) = [r for r in gemini.requests if r.method == "POST" and r.path == CREATE]
    assert create.headers["x-goog-api-key"] == API_KEY and API_KEY not in create.path
    assert create.body["batch"]["display_name"].startswith("evalreg-")
    submitted = create.body["batch"]["input_config"]["requests"]["requests"]
    assert sorted(e["metadata"]["key"] for e in submitted) == sorted(batched)
    for entry in submitted:
        key = entry["metadata"]["key"]
        assert entry["request"] == live_records[key]["request"]
    for key, record in batched.items():
        theirs = live_records[key]
        assert record["request"] == theirs["request"]
        assert record["response"]["text"] == theirs["response"]["text"]
        assert record["response"]["batch"] is True and "batch" not in theirs["response"]
        assert record["batch_id"].startswith("batches/") and "latency_ms" not in record
    assert BatchJournal.load(on_gemini.root).batches == []
    on_gemini.commit("results")
    assert cli(on_gemini, "reproduce", "HEAD").code == 0
    assert len(gemini.batch_requests) == 4 and _live_calls(gemini) == 4


def test_gemini_batch_responses_cost_the_batch_price_and_dry_run_shows_the_saving(
    on_gemini: Repo, gemini: GeminiServer, cli
):
    dry = cli(on_gemini, "run", "--batch", "--dry-run", "--candidate", "mini")
    assert dry.code == 0, dry.err
    line = next(x for x in dry.out.splitlines() if x.startswith("Bought in batches"))
    batch_usd, live_usd = [float(w.strip("$,")) for w in line.split() if w.startswith("$")][:2]
    # Half the price, give or take each request's estimate rounded to a micro-dollar.
    assert batch_usd == pytest.approx(live_usd / 2, abs=4e-6) and "saving" in line
    assert gemini.count() == 0  # a dry run buys nothing

    assert cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini").code == 0
    price = load_registry(on_gemini.root).pins["mini"].price
    assert price is not None
    records = _gemini_records(on_gemini.root).values()
    expected = sum(cost_micro_usd(price, Completion.from_record(r["response"])) for r in records)
    at_live = sum(
        cost_micro_usd(price, Completion.from_record({**r["response"], "batch": False}))
        for r in records
    )
    cost = _summary(on_gemini, "labels/mini")["totals"]["cost_micro_usd"]
    assert cost == expected and 0 < cost < at_live


def test_errored_gemini_entries_are_item_errors_bought_again_next_run(
    on_gemini: Repo, gemini: GeminiServer, cli
):
    gemini.batch_errors_matching = ["message 1"]
    first = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert first.code == 1
    assert "labels/mini/m-001#0: server: HTTP 500 in a batch: Internal error" in first.err
    assert _summary(on_gemini, "labels/mini")["totals"]["errors"] == 1
    failed = [r.custom_id for r in gemini.batch_requests if "message 1" in r.raw.decode()]
    assert len(failed) == 1 and failed[0] not in _records(on_gemini.root)
    assert len(_gemini_records(on_gemini.root)) == 3

    gemini.batch_errors_matching = []
    again = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert again.code == 0, again.err
    assert [r.custom_id for r in gemini.batch_requests[4:]] == failed  # only that one
    assert _summary(on_gemini, "labels/mini")["totals"]["errors"] == 0
    assert _live_calls(gemini) == 0


@pytest.mark.parametrize("state", ["EXPIRED", "FAILED", "CANCELLED"])
def test_a_gemini_batch_that_ends_unanswered_makes_its_items_errors_retried_next_run(
    on_gemini: Repo, gemini: GeminiServer, cli, state: str
):
    gemini.batch_end_state = f"BATCH_STATE_{state}"
    first = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert first.code == 1
    assert first.err.count(f"batch_{state.lower()}: the batch batches/") == 4
    assert _records(on_gemini.root) == {}
    assert BatchJournal.load(on_gemini.root).batches == []  # ended: forgotten
    again = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert again.code == 0, again.err
    submitted = Counter(r.custom_id for r in gemini.batch_requests)
    assert len(submitted) == 4 and set(submitted.values()) == {2}
    assert len(_gemini_records(on_gemini.root)) == 4 and _live_calls(gemini) == 0


def test_entries_without_their_key_are_matched_in_the_documented_order(
    on_gemini: Repo, gemini: GeminiServer, cli
):
    gemini.batch_without_keys = True
    done = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    records = _gemini_records(on_gemini.root)
    assert len(records) == 4
    for record in records.values():
        text = record["request"]["contents"][-1]["parts"][0]["text"]
        label = "a" if text.endswith(("1", "3", "5")) else "b"
        assert json.loads(record["response"]["text"]) == {"label": label}


def test_gemini_requests_are_split_into_batches_under_the_inline_byte_limit(
    on_gemini: Repo, gemini: GeminiServer, cli, monkeypatch
):
    registry = load_registry(on_gemini.root)
    (cell,) = [c for c in cells(registry) if c.id == "labels/mini"]
    provider = get_provider("gemini")
    items = registry.evalset_of(cell.task_id, cell.split).items
    sizes = {len(cell_request(cell, provider, item).content) for item in items}
    # Room for two requests (and their wrapping) a batch, not three.
    monkeypatch.setitem(batch.MAX_BYTES, "gemini", 2 * max(sizes) + 400 + min(sizes) - 1)
    done = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    creations = [r for r in gemini.requests if r.method == "POST" and r.path == CREATE]
    assert len(creations) == 2
    held = [len(c.body["batch"]["input_config"]["requests"]["requests"]) for c in creations]
    assert held == [2, 2]
    assert len({c.body["batch"]["display_name"] for c in creations}) == 2
    submitted = Counter(r.custom_id for r in gemini.batch_requests)
    assert len(submitted) == 4 and set(submitted.values()) == {1}
    assert set(submitted) == set(_gemini_records(on_gemini.root))


def test_a_request_too_large_for_any_batch_is_bought_live_and_said(
    on_gemini: Repo, gemini: GeminiServer, cli, monkeypatch
):
    registry = load_registry(on_gemini.root)
    (cell,) = [c for c in cells(registry) if c.id == "labels/mini"]
    provider = get_provider("gemini")
    items = registry.evalset_of(cell.task_id, cell.split).items
    largest = max(len(cell_request(cell, provider, item).content) for item in items)
    # No batch can hold one of them: they are bought live, not sent to fail in a batch.
    monkeypatch.setitem(batch.MAX_BYTES, "gemini", largest + 200 - 1)
    done = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    assert "bought live: 4 requests of mini too large for one batch of its API" in done.err
    assert _live_calls(gemini) == 4 and gemini.batch_requests == []
    records = _gemini_records(on_gemini.root)
    assert len(records) == 4 and not any(r["response"].get("batch") for r in records.values())
    # With room again, nothing is bought twice.
    monkeypatch.setitem(batch.MAX_BYTES, "gemini", largest + 200)
    assert cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini").code == 0
    assert _live_calls(gemini) == 4 and gemini.batch_requests == []


def test_no_wait_submits_a_gemini_batch_and_a_later_run_collects_it(
    on_gemini: Repo, gemini: GeminiServer, cli
):
    submitted = cli(on_gemini, "run", "--batch", "--no-wait", "--candidate", "mini")
    assert submitted.code == 0, submitted.err
    assert "4 responses waiting in submitted batches" in submitted.out
    (journalled,) = BatchJournal.load(on_gemini.root).batches
    assert journalled.api == "gemini" and journalled.state == "submitted"
    assert journalled.batch_id is not None and journalled.batch_id.startswith("batches/")
    # A live run meanwhile buys none of them again: they wait in the batch.
    assert cli(on_gemini, "run", "--candidate", "mini").code == 0
    assert _live_calls(gemini) == 0 and _records(on_gemini.root) == {}

    gemini.batch_polls = 0
    collected = cli(on_gemini, "run", "--batch", "--no-wait", "--candidate", "mini")
    assert collected.code == 0, collected.err
    assert len(gemini.batch_requests) == 4  # nothing submitted twice
    assert BatchJournal.load(on_gemini.root).batches == []
    records = _gemini_records(on_gemini.root)
    assert {r["batch_id"] for r in records.values()} == {journalled.batch_id}
    assert _summary(on_gemini, "labels/mini")["totals"]["errors"] == 0


def test_a_vertex_ai_pin_is_bought_live_under_batch_and_the_run_says_why(
    live: Repo, gemini: GeminiServer, adc: str, cli
):
    live.write(
        PIN, gemini_pin(gemini.root_url, VERTEX).replace("  as_of:", BATCH_PRICES + "  as_of:")
    )
    live.commit("mini on vertex")
    dry = cli(live, "run", "--batch", "--dry-run", "--candidate", "mini")
    assert dry.code == 0, dry.err
    assert not any(x.startswith("Bought in batches") for x in dry.out.splitlines())
    assert "mini (Vertex AI): bought live: Vertex AI batch prediction" in dry.err
    done = cli(live, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    assert (
        "mini (Vertex AI): bought live: Vertex AI batch prediction reads its requests from "
        "Cloud Storage or BigQuery, not inline" in " ".join(done.err.split())
    )
    assert gemini.batch_requests == []
    assert gemini.count(lambda r: r.path.endswith(":generateContent")) == 4
    assert all(not r["response"].get("batch") for r in _records(live.root).values())


def test_a_creation_that_timed_out_is_found_by_its_name_and_not_submitted_again(
    on_gemini: Repo, gemini: GeminiServer, cli
):
    pin = on_gemini.read(PIN)
    on_gemini.write(PIN, pin.replace("  max_retries: 2\n", "  max_retries: 2\n  timeout_s: 0.5\n"))
    on_gemini.commit("a short timeout")
    # The batch is created, but its answer comes after the client gave up waiting.
    with gemini.hold_batch("create"):
        done = cli(on_gemini, "run", "--batch", *POLL, "--candidate", "mini")
    assert done.code == 0, done.err
    creations = [r for r in gemini.requests if r.method == "POST" and r.path == CREATE]
    assert len(creations) == 1, "a creation of unknown outcome was sent again"
    assert gemini.count(lambda r: r.path.startswith("/v1beta/batches?")) >= 1
    assert len(gemini.batch_requests) == 4 and len(_gemini_records(on_gemini.root)) == 4
    assert BatchJournal.load(on_gemini.root).batches == []
