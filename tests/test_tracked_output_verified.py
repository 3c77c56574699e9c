"""What is committed is what is checked: a store segment or per-item records file that is
not the version its DVC pointer names (edited by hand, or left behind when the pointer
changed) is an error ``check`` names, ``run`` refuses to grade from, and ``reproduce``
never reads; each file's md5 is remembered by its ``stat``, so checking again reads
nothing.

Real runs against the loopback server, in a real git + DVC repository; files are edited as
a person would (a response's text changed, the JSON still valid) and restored with DVC.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.store import hashes
from evalreg.store.lock import state_dir
from evalreg.store.segments import STORE_DIR

from conftest import Repo

RECORDS = "reports/results/labels/mini.items.jsonl"


def dvc(repo: Repo, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=repo.root, capture_output=True, check=True
    )


def segment(repo: Repo) -> str:
    (name,) = [p.name for p in (repo.root / STORE_DIR).glob("*.jsonl")]
    return f"{STORE_DIR}/{name}"


def pointed(repo: Repo, rel: str) -> str:
    md5 = dvcrepo.pointer_md5((repo.root / f"{rel}.dvc").read_bytes())
    assert md5 is not None
    return md5


def edit_first_line(repo: Repo, rel: str, change) -> str:
    """Change the first JSON line of ``rel`` in place (as an editor would save it); return
    the md5 the file then holds."""
    path = repo.root / rel
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    change(record)
    lines[0] = json.dumps(record).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    return hashlib.md5(path.read_bytes()).hexdigest()


def forge_response(record: dict) -> None:
    record["response"]["text"] = "b" if record["response"]["text"] != "b" else "a"


def remembered(repo: Repo) -> dict[str, list]:
    return json.loads((state_dir(repo.root) / hashes.HASHES).read_bytes())["files"]


@pytest.fixture
def ran(live: Repo, cli) -> Repo:
    for args in (("run",), ("select", "labels", "mini", "--reason", "best"), ("report",)):
        result = cli(live, *args)
        assert result.code == 0, result.err
    live.commit("results")
    assert cli(live, "check").code == 0
    return live


def test_an_untouched_repository_is_clean_and_its_hashes_are_remembered(ran: Repo, cli):
    result = cli(ran, "check")
    assert result.code == 0, result.out + result.err
    tracked = [segment(ran), RECORDS, "reports/results/labels/rules.items.jsonl"]
    known = remembered(ran)
    for rel in tracked:
        st = (ran.root / rel).stat()
        assert known[rel] == [
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            pointed(ran, rel),
        ]


def test_a_second_check_answers_from_the_remembered_hashes(ran: Repo, cli):
    assert cli(ran, "check").code == 0
    rel = segment(ran)
    doc = json.loads((state_dir(ran.root) / hashes.HASHES).read_bytes())
    doc["files"][rel][4] = "0" * 32  # what a file with this stat was remembered to hold
    (state_dir(ran.root) / hashes.HASHES).write_text(json.dumps(doc))
    result = cli(ran, "check")
    assert result.code == 2  # the file was not read again: its stat is unchanged
    assert f"{rel}: not the version DVC tracks" in result.err
    os.utime(ran.root / rel)  # a new stat: hashed again, and found to be what it was
    assert cli(ran, "check").code == 0, cli(ran, "check").out


def test_a_hand_edited_segment_is_an_error_that_names_it(ran: Repo, cli):
    rel = segment(ran)
    recorded = pointed(ran, rel)
    holds = edit_first_line(ran, rel, forge_response)
    result = cli(ran, "check")
    assert result.code == 2, result.out + result.err
    assert (
        f"{rel}: not the version DVC tracks ({rel}.dvc names md5 {recorded}, the file holds "
        f"{holds})"
    ) in result.err
    # No other copy holds the edit: it is moved aside, never discarded.
    assert "move it out of the repository (no other copy holds this version), then " in result.err
    assert f"`dvc checkout {rel}.dvc` restores the committed content" in result.err
    (ran.root / rel).rename(ran.root.parent / "edited.jsonl")
    dvc(ran, "checkout", f"{rel}.dvc")
    assert cli(ran, "check").code == 0


def test_run_refuses_to_grade_from_an_edited_segment(ran: Repo, cli):
    rel = segment(ran)
    edit_first_line(ran, rel, forge_response)
    # A change of rubric makes every cell stale: the run would re-grade stored responses.
    ran.write(
        "registry/rubrics/labels.yaml", ran.read("registry/rubrics/labels.yaml") + "\n# again\n"
    )
    before = {p: (ran.root / p).read_bytes() for p in (RECORDS, f"{rel}.dvc")}
    result = cli(ran, "run", "--offline")
    assert result.code == 2
    assert f"{rel}: not the version DVC tracks" in result.err
    assert {p: (ran.root / p).read_bytes() for p in before} == before


def test_reproduce_reads_the_committed_segment_not_the_edited_file(ran: Repo, cli):
    edit_first_line(ran, segment(ran), forge_response)
    result = cli(ran, "reproduce", "HEAD")
    assert result.code == 0, result.out + result.err  # graded from the DVC cache's copy
    assert "identical" in result.out


def test_reproduce_refuses_a_copy_altered_in_the_dvc_cache(ran: Repo, cli):
    # As a cache that links its files to the working tree would leave it after an edit.
    rel = segment(ran)
    md5 = pointed(ran, rel)
    for place in (ran.root / ".dvc" / "cache", ran.root / dvcrepo.IN_REPO_REMOTE):
        copy = place / "files" / "md5" / md5[:2] / md5[2:]
        copy.chmod(0o644)
        if place.name == dvcrepo.IN_REPO_REMOTE:
            copy.unlink()  # no remote copy to fall back on
        else:
            edit_first_line(ran, str(copy.relative_to(ran.root)), forge_response)
    edit_first_line(ran, rel, forge_response)
    result = cli(ran, "reproduce", "HEAD")
    assert result.code == 2, result.out + result.err
    assert "identical" not in result.out
    assert f"{rel}.dvc: names md5 {md5}, but the copy of {rel} DVC read" in result.err
    assert "a copy was altered after DVC stored it" in result.err


def test_a_hand_edited_records_file_is_an_error_that_names_it(ran: Repo, cli):
    recorded = pointed(ran, RECORDS)

    def promote(record: dict) -> None:
        record["level"] = "unacceptable" if record["level"] == "correct" else "correct"

    holds = edit_first_line(ran, RECORDS, promote)
    result = cli(ran, "check")
    assert result.code == 2, result.out + result.err
    assert (
        f"{RECORDS}: not the version DVC tracks ({RECORDS}.dvc names md5 {recorded}, the "
        f"file holds {holds})"
    ) in result.err
    # reproduce reads the records REV committed, from the DVC cache, not this file.
    assert cli(ran, "reproduce", "HEAD").code == 0
    (ran.root / RECORDS).rename(ran.root.parent / "edited.items.jsonl")
    dvc(ran, "checkout", f"{RECORDS}.dvc")
    assert cli(ran, "check").code == 0


def test_a_file_not_checked_out_since_its_pointer_changed_is_an_error(ran: Repo, cli):
    first = ran.read(f"{RECORDS}.dvc")
    edit_first_line(ran, RECORDS, lambda r: r.update(latency_ms=r["latency_ms"] + 1))
    dvc(ran, "add", RECORDS)
    ran.commit("records edited and tracked")
    holds = pointed(ran, RECORDS)
    ran.write(f"{RECORDS}.dvc", first)  # as `git checkout` of the earlier pointer leaves it
    result = cli(ran, "check")
    assert result.code == 2, result.out + result.err
    assert f"the file holds {holds})" in result.err
    # This version is in the DVC cache: replacing the file loses nothing.
    assert f"`dvc checkout --force {RECORDS}.dvc` restores the committed content" in result.err
    dvc(ran, "checkout", "--force", f"{RECORDS}.dvc")
    assert cli(ran, "check").code == 0


def test_dvc_state_answers_for_the_files_it_hashed(ran: Repo):
    tracked = [segment(ran), RECORDS]
    assert dvcrepo.state_md5s(ran.root, [*tracked, "reports/absent.jsonl"]) == {
        rel: pointed(ran, rel) for rel in tracked
    }


def test_many_bytes_not_hashed_yet_are_asked_of_dvc_first(ran: Repo, monkeypatch):
    asked: list[list[str]] = []

    def state_md5s(root: Path, rels: list[str]) -> dict[str, str]:
        asked.append(list(rels))
        return {}

    monkeypatch.setattr(hashes.dvcrepo, "state_md5s", state_md5s)
    monkeypatch.setattr(hashes, "ASK_DVC_ABOVE", 0)
    (state_dir(ran.root) / hashes.HASHES).unlink()  # nothing remembered yet
    rel = segment(ran)
    assert hashes.file_md5s(ran.root, [rel]) == {rel: pointed(ran, rel)}  # hashed here
    assert asked == [[rel]]
    assert hashes.file_md5s(ran.root, [rel]) == {rel: pointed(ran, rel)}
    assert asked == [[rel]]  # remembered: neither DVC nor the file was asked again
