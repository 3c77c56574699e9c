"""The shipped example registry: valid, realistic, reproducible, and regenerable from seed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from evalreg.dvcrepo import pointer_md5
from evalreg.registry.loader import load_registry

ROOT = Path(__file__).resolve().parents[1]
SLICES = ("common", "messy", "edge", "adversarial", "regression")


def _module(rel: str):
    spec = importlib.util.spec_from_file_location("example_" + Path(rel).stem, ROOT / rel)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def registry():
    return load_registry(ROOT)


def test_the_example_passes_check(cli):
    result = cli(ROOT, "check")
    assert result.code == 0, result.err


def test_the_committed_results_reproduce(cli):
    result = cli(ROOT, "reproduce", "HEAD")
    assert result.code == 0, result.out
    assert "support-triage/naive-bayes: identical" in result.out


def test_the_eval_set_has_five_real_slices_and_conversations(registry):
    items = registry.evalset_of("support-triage").items
    assert len(items) >= 200
    first_tags = Counter(item.tags[0] for item in items)
    assert set(first_tags) == set(SLICES)
    assert min(first_tags.values()) >= 40
    assert sum(item.messages is not None for item in items) >= 10
    assert all(item.cluster for item in items if "regression" in item.tags)


def test_the_generator_reproduces_the_tracked_eval_set_byte_for_byte():
    rows = _module("evalsets/generators/support_tickets.py").build()
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    tracked = pointer_md5((ROOT / "evalsets/support_tickets.jsonl.dvc").read_bytes())
    assert hashlib.md5(data.encode()).hexdigest() == tracked


def test_the_two_offline_systems_genuinely_differ_in_quality():
    def correct(candidate: str) -> int:
        path = ROOT / f"reports/results/support-triage/{candidate}.json"
        return json.loads(path.read_text())["totals"]["levels"]["correct"]

    assert correct("naive-bayes") >= correct("keyword-rules") + 25


def test_the_classifier_was_not_trained_on_the_eval_set(registry):
    eval_bodies = {
        item.input["body"].strip()
        for item in registry.evalset_of("support-triage").items
        if item.input is not None and item.input["body"].strip()
    }
    training = (ROOT / "registry/systems/training/tickets.jsonl").read_text().splitlines()
    train_bodies = {json.loads(line)["body"].strip() for line in training}
    assert len(train_bodies) > 1000
    assert eval_bodies.isdisjoint(train_bodies)


def test_the_selection_has_a_baseline_a_prompt_variant_and_the_cloud_providers(registry):
    selection = registry.selections["support-triage"]
    providers = {registry.pins[c.pin].provider for c in selection.candidates}
    assert providers == {"python", "openai", "anthropic", "azure_openai", "bedrock", "gemini"}
    assert any(c.prompt is not None for c in selection.candidates)
    assert selection.policy.gates
    assert selection.selected in {c.id for c in selection.candidates}


def test_the_committed_report_is_what_evalreg_report_writes(registry):
    """The example's report is what an auditor reads first: it must be today's rendering of
    the committed results (a change to the report's text shows up here, in review)."""
    from evalreg.redaction import current
    from evalreg.report.writer import render

    redactor = current()
    for rel, data in render(registry).items():
        committed = (ROOT / rel).read_bytes()
        assert redactor.data(data) == committed, f"{rel} is stale: run `evalreg report`"
        assert b"\n\n\n" not in committed, f"{rel} has a run of blank lines"


def test_the_invoice_generator_reproduces_the_tracked_set_and_files_byte_for_byte():
    rows, files = _module("evalsets/generators/invoices.py").build()
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    tracked = pointer_md5((ROOT / "evalsets/invoices.jsonl.dvc").read_bytes())
    assert hashlib.md5(data.encode()).hexdigest() == tracked
    assert 20 <= len(files) <= 30
    for rel, content in files.items():
        assert len(content) < 32 * 1024, f"{rel} is not small"
        pointer = pointer_md5((ROOT / f"{rel}.dvc").read_bytes())
        assert hashlib.md5(content).hexdigest() == pointer, f"{rel} differs from its pointer"


def test_the_invoices_are_pdfs_and_pngs_every_provider_can_take(registry):
    from evalreg.providers.attachments import LIMITS, limit_problem

    items = registry.evalset_of("invoice-fields").items
    types = Counter(f.media_type for item in items for f in item.files)
    assert types == {"application/pdf": 12, "image/png": 12}
    for provider in LIMITS:
        assert all(
            limit_problem(provider, f.media_type, len(f.data)) is None
            for item in items
            for f in item.files
        )


def test_the_offline_invoice_reader_reads_most_fields_and_fails_where_it_should():
    path = ROOT / "reports/results/invoice-fields/invoice-reader.json"
    summary = json.loads(path.read_text())
    criteria = summary["totals"]["criteria"]
    assert criteria["valid_json"]["passed"] == 24
    # It reads ISO dates only, knows TOTAL and not AMOUNT DUE, and loses characters to speckle.
    assert 12 <= criteria["total"]["passed"] < 24
    assert 10 <= criteria["date"]["passed"] < 24
    slices = summary["slices"]
    assert slices["pdf"]["levels"]["correct"] > slices["scan_noise"]["levels"]["correct"]
