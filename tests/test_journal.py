"""The run journal on disk: written once by the first step that needs it, before the files
recovery would act on (a run's first segment, a temporary result) exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalreg.store import journal as journal_module
from evalreg.store.journal import Journal


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Each durable write of the journal, as the state it recorded."""
    done: list[dict[str, object]] = []
    write = journal_module.write_durably

    def counted(path: Path, data: bytes) -> None:
        write(path, data)
        if path.name == journal_module.JOURNAL:
            done.append(json.loads(data))

    monkeypatch.setattr(journal_module, "write_durably", counted)
    return done


def test_a_live_run_writes_its_journal_once_with_its_first_segment(
    tmp_path: Path, writes: list[dict[str, object]]
):
    journal = Journal.begin(tmp_path, push=False)
    assert not journal.path.exists() and writes == []
    journal.add_segment("store/run-1.seg")
    assert [w["segments"] for w in writes] == [["store/run-1.seg"]]
    assert Journal.load(tmp_path) == journal
    journal.tmp_name("reports/results/t/c.items.jsonl")  # already on disk: no second write
    assert len(writes) == 1


def test_a_temporary_result_is_named_only_once_the_journal_is_on_disk(
    tmp_path: Path, writes: list[dict[str, object]]
):
    journal = Journal.begin(tmp_path, push=False)  # an offline run: no segment
    name = journal.tmp_name("reports/results/t/c.items.jsonl")
    assert name == f"reports/results/t/c.items.jsonl.{journal.run}.tmp"
    assert [(w["run"], w["phase"], w["segments"]) for w in writes] == [(journal.run, "fetch", [])]
    loaded = Journal.load(tmp_path)
    assert loaded is not None and loaded.written and loaded.run == journal.run
