"""Curation: sampling production logs into eval sets, sizing slices, redacting item text."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from evalreg import __version__
from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets.evalset import parse_evalset
from evalreg.evalsets.privacy import BUILTIN_PII, redact_fields, scrub_pii
from evalreg.evalsets.sampling import sample_logs
from evalreg.evalsets.slice_sizes import evalset_stats, items_needed
from evalreg.redaction import REDACTED
from evalreg.registry.schema import Item

CATEGORIES = {"billing": 30, "Bug Report": 20, "account": 10}


def log_rows() -> list[dict[str, Any]]:
    """60 distinct tickets in three categories, a day apart."""
    rows = []
    n = 0
    for category, count in CATEGORIES.items():
        for i in range(count):
            rows.append(
                {
                    "timestamp": f"2026-03-{1 + n % 28:02d}T09:30:00+02:00",
                    "category": category,
                    "subject": f"{category} question {i}",
                    "body": f"Ticket {n}: {hashlib.sha256(str(n).encode()).hexdigest()[:40]}",
                    "queue": category.lower(),
                }
            )
            n += 1
    return rows


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def sample(source: Path, out: Path, **overrides: Any) -> Any:
    options: dict[str, Any] = {
        "per_slice": None,
        "total": None,
        "stratify_by": "category",
        "seed": 7,
        "id_prefix": "tickets",
        "input_fields": ["subject", "body"],
        "expected_field": "queue",
    }
    options.update(overrides)
    return sample_logs(source, out, **options)


def read_items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- sampling
def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_sample(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    sample(source, tmp_path / "a.jsonl", per_slice=5)
    sample(source, tmp_path / "b.jsonl", per_slice=5)
    sample(source, tmp_path / "c.jsonl", per_slice=5, seed=8)
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    provenance = (tmp_path / "a.jsonl.provenance.json").read_text()
    assert (
        provenance.replace('"a.jsonl"', '"b.jsonl"')
        == (tmp_path / "b.jsonl.provenance.json").read_text()
    )


def test_the_sample_is_a_canonical_eval_set_with_ids_tags_and_log_lines(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    sample(source, tmp_path / "s.jsonl", per_slice=2)
    data = (tmp_path / "s.jsonl").read_bytes()
    evalset, findings = parse_evalset(data, "s.jsonl")
    assert findings == [] and evalset is not None
    items = read_items(tmp_path / "s.jsonl")
    assert [i["id"] for i in items] == [f"tickets-{n:04d}" for n in range(1, 7)]
    assert [i["tags"] for i in items] == [
        [t] for t in ("account", "billing", "bug-report") for _ in range(2)
    ]
    first = items[0]
    assert set(first) == {"id", "input", "expected", "tags", "meta"}
    assert set(first["input"]) == {"subject", "body"}
    assert first["meta"]["source"] == "tickets.jsonl"
    row = log_rows()[first["meta"]["log_line"] - 1]
    assert first["input"] == {"subject": row["subject"], "body": row["body"]}
    assert first["expected"] == row["queue"]
    assert data.endswith(b"\n")
    assert all(
        line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
        for line in data.decode().splitlines()
    )


def test_per_slice_caps_every_stratum(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    result = sample(source, tmp_path / "s.jsonl", per_slice=15)
    assert {name: s.sampled for name, s in result.strata.items()} == {
        "account": 10,
        "billing": 15,
        "bug-report": 15,
    }
    assert result.items == 40


def test_a_total_is_shared_in_proportion_with_one_item_for_every_stratum(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    result = sample(source, tmp_path / "s.jsonl", total=12)
    # One each, then 9 in proportion to 29 : 19 : 9 (largest remainder).
    assert {name: s.sampled for name, s in result.strata.items()} == {
        "account": 2,
        "billing": 6,
        "bug-report": 4,
    }
    with pytest.raises(UsageError, match="smaller than the number of strata"):
        sample(source, tmp_path / "t.jsonl", total=2)


def test_rows_without_a_stratify_value_form_the_unknown_stratum(tmp_path: Path):
    rows = log_rows()[:4]
    rows[0]["category"] = None
    del rows[1]["category"]
    rows[2]["category"] = ""
    source = write_jsonl(tmp_path / "tickets.jsonl", rows)
    result = sample(source, tmp_path / "s.jsonl")
    assert {name: s.rows for name, s in result.strata.items()} == {"billing": 1, "unknown": 3}


def test_a_stratify_field_no_row_has_is_a_usage_error(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    with pytest.raises(UsageError, match="no row has the field 'categroy'"):
        sample(source, tmp_path / "s.jsonl", stratify_by="categroy")
    assert not (tmp_path / "s.jsonl").exists()


def test_exact_and_near_duplicates_are_removed_and_counted(tmp_path: Path):
    rows = log_rows()[:10]  # all billing
    duplicates = [
        dict(rows[0], timestamp="2026-03-20T10:00:00Z"),  # same input: exact
        dict(rows[1]),  # exact
        dict(rows[2], body=rows[2]["body"].upper() + "!!"),  # case and punctuation: near
        dict(rows[3], body=rows[3]["body"][:-1]),  # a character lost: near
    ]
    different = dict(rows[4], body="Something else entirely, about a refund")
    source = write_jsonl(tmp_path / "tickets.jsonl", rows + duplicates + [different])
    result = sample(source, tmp_path / "s.jsonl")
    assert (result.exact_duplicates, result.near_duplicates) == (2, 2)
    assert result.items == 11
    lines = sorted(item["meta"]["log_line"] for item in read_items(tmp_path / "s.jsonl"))
    assert lines == [*range(1, 11), 15]  # the first of each group is kept

    kept_all = sample(source, tmp_path / "all.jsonl", dedupe=False)
    assert (kept_all.items, kept_all.exact_duplicates, kept_all.near_duplicates) == (15, 0, 0)
    stricter = sample(source, tmp_path / "strict.jsonl", near_threshold=0.999)
    assert (stricter.exact_duplicates, stricter.near_duplicates) == (2, 1)


def test_a_csv_log_is_sampled_with_line_numbers_across_quoted_newlines(tmp_path: Path):
    source = tmp_path / "tickets.csv"
    with source.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["category", "subject", "body", "queue"])
        writer.writerow(["billing", "Invoice", "Line one\nline two", "billing"])
        writer.writerow(["account", "Login", "Cannot log in", "account"])
    result = sample(source, tmp_path / "s.jsonl")
    items = read_items(tmp_path / "s.jsonl")
    assert result.rows == 2
    by_tag = {item["tags"][0]: item for item in items}
    assert by_tag["billing"]["input"]["body"] == "Line one\nline two"
    assert by_tag["billing"]["meta"]["log_line"] == 2
    assert by_tag["account"]["meta"]["log_line"] == 4


def test_a_gzipped_log_gives_the_same_items_as_the_plain_one(tmp_path: Path):
    plain = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    packed = tmp_path / "tickets.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    sample(plain, tmp_path / "a.jsonl", per_slice=3)
    sample(packed, tmp_path / "b.jsonl", per_slice=3)
    a, b = (read_items(tmp_path / name) for name in ("a.jsonl", "b.jsonl"))
    assert [i["meta"]["source"] for i in b] == ["tickets.jsonl.gz"] * 9
    assert [{**i, "meta": None} for i in a] == [{**i, "meta": None} for i in b]


def test_a_csv_log_needs_input_fields(tmp_path: Path):
    source = tmp_path / "tickets.csv"
    source.write_text("category,body\nbilling,hello\n", encoding="utf-8")
    with pytest.raises(UsageError, match="needs input fields"):
        sample(source, tmp_path / "s.jsonl", input_fields=None, expected_field=None)


def test_conversation_rows_become_conversation_items(tmp_path: Path):
    rows = [
        {
            "channel": "chat",
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello, how can I help?"},
                {"role": "user", "content": "My parcel is late"},
            ],
        },
        {"channel": "email", "input": {"text": "Refund please"}},
    ]
    source = write_jsonl(tmp_path / "chats.jsonl", rows)
    sample(
        source,
        tmp_path / "s.jsonl",
        stratify_by="channel",
        input_fields=None,
        expected_field=None,
    )
    chat, email = read_items(tmp_path / "s.jsonl")
    assert chat["messages"][-1] == {"role": "user", "content": "My parcel is late"}
    assert "input" not in chat and "expected" not in chat
    assert email["input"] == {"text": "Refund please"}


def test_bad_rows_are_reported_with_line_numbers_and_nothing_is_written(tmp_path: Path):
    rows = [json.dumps(r) for r in log_rows()[:3]]
    rows[1] = '{"category": "billing", "subject": "x"'
    text = "\n".join([*rows, "[1, 2]", json.dumps({"category": "billing", "subject": "s"})])
    source = tmp_path / "tickets.jsonl"
    source.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        sample(source, tmp_path / "s.jsonl")
    rendered = [f.render() for f in caught.value.findings]
    assert rendered[0].startswith(f"{source}:2:")
    assert "invalid JSON" in rendered[0]
    assert rendered[1] == f"{source}:4:1: expected a JSON object (one row a line)"
    assert rendered[2:] == [
        f"{source}:5: no field 'body' (an input field)",
        f"{source}:5: no field 'queue' (the expected answer)",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tickets.jsonl"]


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("body", "[" * 5000 + "]" * 5000, "3:619: invalid JSON: nested more than 512 deep"),
        ("body", "1" * 5000, "3: an integer of 5,000 digits (at most 4,300 are read)"),
        ("body", "NaN", "3: NaN is not a finite number"),
        ("queue", '"\\ud800"', "3: the expected answer is not JSON data: 'utf-8' codec"),
        ("body", "[" * 200 + "]" * 200, "3: objects and lists nested more than 100 levels deep"),
    ],
)
def test_a_row_no_item_can_hold_is_reported_at_its_line_and_nothing_is_written(
    tmp_path: Path, field, raw, message
):
    rows = [json.dumps(r) for r in log_rows()[:3]]
    rows[2] = rows[2].replace(json.dumps(log_rows()[2][field]), raw)
    source = tmp_path / "tickets.jsonl"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        sample(source, tmp_path / "s.jsonl")
    assert caught.value.findings[0].render().startswith(f"{source}:{message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tickets.jsonl"]


def test_a_csv_row_with_the_wrong_number_of_columns_is_reported(tmp_path: Path):
    source = tmp_path / "tickets.csv"
    source.write_text("category,subject,body,queue\nbilling,a,b,c\nbilling,a,b\n", encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        sample(source, tmp_path / "s.jsonl")
    assert [f.render() for f in caught.value.findings] == [
        f"{source}:3: expected 4 columns, found 3"
    ]
    assert not (tmp_path / "s.jsonl").exists()


def test_an_existing_eval_set_is_never_overwritten(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    out = tmp_path / "s.jsonl"
    out.write_text("keep me\n", encoding="utf-8")
    with pytest.raises(UsageError, match="eval sets are frozen"):
        sample(source, out)
    assert out.read_text(encoding="utf-8") == "keep me\n"


def test_provenance_records_the_source_the_parameters_and_what_was_removed(tmp_path: Path):
    rows = log_rows()
    source = write_jsonl(tmp_path / "tickets.jsonl", [*rows, rows[0]])
    result = sample(source, tmp_path / "s.jsonl", per_slice=3, scrub=BUILTIN_PII)
    record = json.loads((tmp_path / "s.jsonl.provenance.json").read_text(encoding="utf-8"))
    items_data = (tmp_path / "s.jsonl").read_bytes()
    assert result.provenance == str(tmp_path / "s.jsonl.provenance.json")
    assert record == {
        "schema_version": 1,
        "evalreg_version": __version__,
        "source": {
            "path": source.as_posix(),
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "rows": 61,
            # The newest row is 2026-03-28 09:30 at +02:00, which is 07:30 UTC that day.
            "newest_row_date": "2026-03-28",
        },
        "parameters": {
            "per_slice": 3,
            "total": None,
            "stratify_by": "category",
            "seed": 7,
            "id_prefix": "tickets",
            "input_fields": ["subject", "body"],
            "expected_field": "queue",
            "dedupe": True,
            "near_threshold": 0.9,
            "scrub": "builtin:pii",
        },
        "duplicates": {"exact": 1, "near": 0},
        "scrubber": {"name": "builtin:pii", "sha256": None},
        "strata": {
            "account": {"rows": 10, "unique": 10, "sampled": 3},
            "billing": {"rows": 31, "unique": 30, "sampled": 3},
            "bug-report": {"rows": 20, "unique": 20, "sampled": 3},
        },
        "items": {
            "path": "s.jsonl",
            "count": 9,
            "md5": hashlib.md5(items_data, usedforsecurity=False).hexdigest(),
        },
    }


def test_without_a_timestamp_field_the_newest_row_date_is_null(tmp_path: Path):
    rows = [{k: v for k, v in r.items() if k != "timestamp"} for r in log_rows()]
    source = write_jsonl(tmp_path / "tickets.jsonl", rows)
    sample(source, tmp_path / "s.jsonl")
    record = json.loads((tmp_path / "s.jsonl.provenance.json").read_text(encoding="utf-8"))
    assert record["source"]["newest_row_date"] is None


# ---------------------------------------------------------------- scrubbing
def test_the_builtin_scrubber_masks_emails_phones_ibans_and_cards():
    text = (
        "Mail jo.doe+billing@example.co.uk or call +44 20 7946 0958 or (555) 123-4567. "
        "IBAN DE89 3704 0044 0532 0130 00, card 4111 1111 1111 1111."
    )
    assert scrub_pii({"body": text, "n": 3, "tags": ["x@y.io"]}) == {
        "body": "Mail <EMAIL> or call <PHONE> or <PHONE>. IBAN <IBAN>, card <CARD>.",
        "n": 3,
        "tags": ["<EMAIL>"],
    }


def test_the_builtin_scrubber_leaves_order_numbers_dates_and_failed_luhn_checks():
    text = "Order 123456789 from 2026-03-14 at 10:30, ref 4111111111111112."
    assert scrub_pii(text) == text


def test_the_builtin_scrubber_runs_before_duplicates_are_looked_for(tmp_path: Path):
    rows = [
        {"category": "billing", "subject": "Refund", "body": "Write to ann@example.com"},
        {"category": "billing", "subject": "Refund", "body": "Write to bob@example.org"},
    ]
    source = write_jsonl(tmp_path / "tickets.jsonl", rows)
    result = sample(source, tmp_path / "s.jsonl", expected_field=None, scrub=BUILTIN_PII)
    assert result.exact_duplicates == 1
    (item,) = read_items(tmp_path / "s.jsonl")
    assert item["input"]["body"] == "Write to <EMAIL>"


SCRUBBER = '''\
"""Masks customer numbers the way our support desk writes them."""
import re


def scrub(data):
    return {k: re.sub(r"CUST-\\d+", "<CUSTOMER>", v) for k, v in data.items()}
'''


def test_a_scrubber_from_the_repository_runs_on_every_row_and_is_recorded(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / "registry/systems").mkdir(parents=True)
    hook = repo / "registry/systems/scrub.py"
    hook.write_text(SCRUBBER, encoding="utf-8")
    rows = [{"category": "billing", "subject": f"CUST-{n} billing", "body": "b"} for n in (1, 2)]
    source = write_jsonl(tmp_path / "tickets.jsonl", rows)
    spec = "registry/systems/scrub.py:scrub"
    result = sample(source, repo / "evalsets/s.jsonl", expected_field=None, scrub=spec, root=repo)
    assert result.exact_duplicates == 1  # equal once scrubbed
    assert read_items(repo / "evalsets/s.jsonl")[0]["input"]["subject"] == "<CUSTOMER> billing"
    record = json.loads((repo / "evalsets/s.jsonl.provenance.json").read_text(encoding="utf-8"))
    assert record["scrubber"] == {
        "name": spec,
        "sha256": hashlib.sha256(hook.read_bytes()).hexdigest(),
    }


def test_a_scrubber_that_fails_is_reported_against_the_row(tmp_path: Path):
    (tmp_path / "scrub.py").write_text(
        "def scrub(data):\n    if data['subject'] == 'bad':\n        raise ValueError('no')\n"
        "    return data\n",
        encoding="utf-8",
    )
    rows = [
        {"category": "billing", "subject": "good", "body": "b"},
        {"category": "billing", "subject": "bad", "body": "b"},
    ]
    source = write_jsonl(tmp_path / "tickets.jsonl", rows)
    with pytest.raises(RegistryError) as caught:
        sample(
            source, tmp_path / "s.jsonl", expected_field=None, scrub="scrub.py:scrub", root=tmp_path
        )
    assert [f.render() for f in caught.value.findings] == [
        f"{source}:2: the scrubber raised ValueError: no"
    ]
    assert not (tmp_path / "s.jsonl").exists()


def test_a_scrubber_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path):
    source = write_jsonl(tmp_path / "tickets.jsonl", log_rows())
    with pytest.raises(UsageError, match=r"missing\.py"):
        sample(source, tmp_path / "s.jsonl", scrub="missing.py:scrub", root=tmp_path)
    with pytest.raises(UsageError, match=r"expected builtin:pii or path/to/file\.py:function"):
        sample(source, tmp_path / "s.jsonl", scrub="pii")


# ---------------------------------------------------------------- slice sizes
def evalset_of(tags: dict[str, int], clusters: int | None = None) -> Any:
    rows = []
    for tag, count in tags.items():
        for i in range(count):
            row: dict[str, Any] = {"id": f"{tag}-{i}", "input": {"t": str(i)}, "tags": [tag]}
            if clusters is not None:
                row["cluster"] = f"c{i % clusters}"
            rows.append(row)
    evalset, findings = parse_evalset(
        "".join(json.dumps(r) + "\n" for r in rows).encode(), "evalsets/e.jsonl"
    )
    assert findings == []
    return evalset


def test_a_40_item_slice_is_too_small_for_a_5_point_change_and_400_items_are_enough():
    stats = {s.slice: s for s in evalset_stats(evalset_of({"edge": 40, "common": 400}))}
    assert list(stats) == ["all", "common", "edge"]
    assert stats["edge"].verdict == "too small to detect a 5-point change (MDE 14 points)"
    assert not stats["edge"].detectable
    assert stats["common"].verdict == "can detect a 5-point change (MDE 4.4 points)"
    assert stats["common"].detectable
    assert stats["all"].items == 440
    assert round(stats["edge"].mde_rate, 4) == 0.2215  # 2.8016 * sqrt(0.25 / 40)
    assert stats["edge"].discordance == 0.10


def test_items_needed_is_the_first_size_that_can_detect_the_change():
    needed = items_needed(0.05, 0.5)
    assert (needed.rate, needed.paired) == (785, 314)
    just = {s.slice: s for s in evalset_stats(evalset_of({"a": 314, "b": 313}))}
    assert just["a"].detectable and not just["b"].detectable
    assert items_needed(0.05, 0.9).rate < needed.rate  # rates near 0 or 1 vary less


def test_clustered_items_count_once_per_cluster():
    (all_items,) = evalset_stats(evalset_of({"edge": 400}, clusters=40))[:1]
    assert (all_items.items, all_items.units) == (400, 40)
    assert not all_items.detectable


def test_a_conversation_count_is_reported_per_slice():
    rows = [
        {"id": "a", "messages": [{"role": "user", "content": "hi"}], "tags": ["chat"]},
        {"id": "b", "input": {"t": "x"}, "tags": ["form"]},
    ]
    evalset, _ = parse_evalset("".join(json.dumps(r) + "\n" for r in rows).encode(), "e.jsonl")
    assert evalset is not None
    counts = {s.slice: s.conversations for s in evalset_stats(evalset)}
    assert counts == {"all": 1, "chat": 1, "form": 0}


def test_an_impossible_change_to_detect_is_a_usage_error():
    with pytest.raises(UsageError, match="between 0 and 1"):
        items_needed(5, 0.5)


# ---------------------------------------------------------------- redaction
ITEM = {
    "id": "t-1",
    "input": {"body": "Call me on 0151 555 0101", "account": {"email": "a@b.c", "tier": "gold"}},
    "expected": {"reply": "We will call you", "queue": "billing"},
    "tags": ["billing"],
}


def test_redact_replaces_nested_fields_and_leaves_the_rest():
    assert redact_fields(ITEM, ["input.body", "input.account.email", "expected.reply"]) == {
        "id": "t-1",
        "input": {"body": REDACTED, "account": {"email": REDACTED, "tier": "gold"}},
        "expected": {"reply": REDACTED, "queue": "billing"},
        "tags": ["billing"],
    }
    assert ITEM["input"]["body"] == "Call me on 0151 555 0101"  # never modified


def test_redact_covers_every_turn_or_one_turn_of_a_conversation():
    item = Item.validate(
        {
            "id": "c-1",
            "messages": [
                {"role": "user", "content": "I am Ann"},
                {"role": "assistant", "content": "Hello Ann"},
                {"role": "user", "content": "Where is my parcel?"},
            ],
        }
    )
    every = redact_fields(item, ["messages.content"])
    assert [m["content"] for m in every["messages"]] == [REDACTED] * 3
    first = redact_fields(item, ["messages.0.content"])
    assert [m["content"] for m in first["messages"]] == [
        REDACTED,
        "Hello Ann",
        "Where is my parcel?",
    ]
    assert first["messages"][0]["role"] == "user"


def test_redact_ignores_paths_that_lead_nowhere():
    assert (
        redact_fields(ITEM, ["input.missing", "messages.content", "expected.reply.deeper"]) == ITEM
    )
