"""Purging an item's stored responses on real git + DVC repositories."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections import Counter

import pytest
from test_judges_human import JUDGE_CRITERION, JUDGE_PIN, judge_or_label

from evalreg import __version__, dvcrepo
from evalreg.errors import UsageError
from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS
from evalreg.store.purge import purge_item
from evalreg.store.purge_log import PURGE_LOG
from evalreg.store.segments import STORE_DIR, ResponseStore

from conftest import Repo, items_jsonl

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


def test_every_copy_of_a_purged_response_goes_also_twice_in_one_segment(live: Repo, cli):
    """A segment may hold a key twice (two processes bought it at once and one wrote
    late): the copy the store does not answer with is the item's data as much as the
    first, and goes with it."""
    from evalreg.store.segments import SegmentWriter

    assert cli(live, "run").code == 0
    live.commit("results")
    store = ResponseStore.open(live.root)
    (key, *_) = sorted(recorded_keys(live)["m-001"])
    line = store.line(key)
    assert line is not None
    with SegmentWriter(live.root, label="late") as writer:
        for _ in range(2):
            writer.put(line + b"\n")
    dvcrepo.track(live.root, [f"{STORE_DIR}/{writer.name}"], push=False)

    purge_item(live.root, "m-001", reason="customer asked for erasure")

    held = b"".join(p.read_bytes() for p in (live.root / STORE_DIR).glob("*.jsonl"))
    assert key.encode() not in held
    assert key not in set(ResponseStore.open(live.root).keys())


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


# ---------------------------------------------------------------- judge verdicts

SECRET = "Ada Lovelace asks us to refund order 4412"
SECRET_EXPECTED = "refund-order-4412-lovelace"
JUDGED_PROMPT = """\
        Input: {{ input | tojson }}
        Answer: {{ output }}
        Expected: {{ expected | tojson }}
"""


def add_item(repo: Repo, cli, item_id: str, text: str, expected: str) -> None:
    row = {"id": item_id, "input": {"text": text}, "expected": {"label": expected}}
    repo.write(
        "evalsets/messages.jsonl", items_jsonl() + json.dumps(row | {"tags": ["common"]}) + "\n"
    )
    assert cli(repo, "evalset", "add", str(repo.root / "evalsets/messages.jsonl")).code == 0


@pytest.fixture
def judged(live: Repo, cli, server) -> Repo:
    """The live registry with a fifth item of distinctive text and expected value, and a
    judge criterion whose prompt quotes the item's input, the output and the expected value."""
    server.responder = judge_or_label
    add_item(live, cli, "m-004", SECRET, SECRET_EXPECTED)
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    criterion = JUDGE_CRITERION.replace(JUDGE_CRITERION.split("prompt: |\n")[1], JUDGED_PROMPT)
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace("levels:", criterion + "levels:"),
    )
    live.commit("a fifth item and a judged criterion")
    return live


def store_files(repo: Repo) -> dict[str, bytes]:
    """Every file under the store directory, and the DVC objects (in this clone's cache and
    on the remote) that the store's current pointers name."""
    out = {
        p.relative_to(repo.root).as_posix(): p.read_bytes()
        for p in sorted((repo.root / STORE_DIR).rglob("*"))
        if p.is_file()
    }
    for rel, data in list(out.items()):
        if rel.endswith(".dvc"):
            md5 = dvcrepo.pointer_md5(data)
            assert md5 is not None
            for cache in (".dvc/cache/files/md5", "dvc-storage/files/md5"):
                path = repo.root / cache / md5[:2] / md5[2:]
                if path.exists():
                    out[f"{cache}/{md5}"] = path.read_bytes()
    return out


def holding(repo: Repo, *texts: str) -> list[str]:
    """The store files (see ``store_files``) that hold any of ``texts``, raw or JSON-escaped."""
    needles = {t.encode() for t in texts} | {json.dumps(t)[1:-1].encode() for t in texts}
    return [rel for rel, data in store_files(repo).items() if any(n in data for n in needles)]


def stored_requests(repo: Repo) -> dict[str, dict]:
    """Every stored record's request, by key."""
    store = ResponseStore.open(repo.root)
    keys = list(store.keys())
    return {key: store.get(key)["request"] for key in keys}


def is_judge(request: dict) -> bool:
    return request["messages"][0]["content"] == JUDGE_INSTRUCTIONS


def quotes(request: dict, text: str) -> bool:
    return text in json.dumps(request, ensure_ascii=False)


def test_a_purge_leaves_no_segment_holding_the_items_text(judged: Repo, cli):
    assert cli(judged, "run").code == 1  # m-002's verdict is unusable (an error): see judging
    judged.commit("judged results")
    requests = stored_requests(judged)
    judge_keys = {k for k, r in requests.items() if is_judge(r) and quotes(r, SECRET)}
    assert len(judge_keys) == 2  # the two candidates answered differently
    assert all(quotes(requests[k], SECRET_EXPECTED) for k in judge_keys)
    assert holding(judged, SECRET) and holding(judged, SECRET_EXPECTED)

    result = cli(judged, "store", "purge", "m-004", "--reason", "erasure request", "--no-push")

    assert result.code == 0, result.err
    assert holding(judged, SECRET, SECRET_EXPECTED) == []
    remaining = stored_requests(judged)
    assert not judge_keys & set(remaining)
    assert set(remaining) == {k for k, r in requests.items() if not quotes(r, SECRET)}
    (entry,) = (json.loads(x) for x in judged.read(PURGE_LOG).splitlines())
    assert entry["removed"] == {"candidate": 2, "judge": 2} and entry["keys_removed"] == 4
    assert (
        "Purged 4 stored records of item m-004 (evalsets/messages.jsonl): 2 candidate "
        "responses, 2 judge verdicts, no drift records (drift checks store none)"
    ) in " ".join(result.out.split())


def test_verdicts_under_an_earlier_judge_prompt_are_purged_too(judged: Repo, cli, server):
    assert cli(judged, "run").code == 1
    judged.commit("judged results")
    rubric = "registry/rubrics/labels.yaml"
    # v2 quotes no input: its verdicts are found by the keys computed from the outputs.
    judged.write(
        rubric,
        judged.read(rubric)
        .replace("prompt_version: v1", "prompt_version: v2")
        .replace("        Input: {{ input | tojson }}\n", ""),
    )
    assert cli(judged, "run").code == 0  # m-002's verdict no longer quotes "message 2"
    judged.commit("judge prompt v2")
    verdicts = [r.body for r in server.requests if is_judge(r.body)]
    mine = [b for b in verdicts if quotes(b, SECRET_EXPECTED)]
    assert [quotes(b, SECRET) for b in mine] == [True, True, False, False]
    # Candidates, verdicts under v1, under v2 (which, quoting no input, some items share).
    assert len(ResponseStore.open(judged.root)) == 10 + 8 + 5

    record = purge_item(judged.root, "m-004", reason="erasure request", push=False)

    assert record.removed == {"candidate": 2, "judge": 4}
    assert holding(judged, SECRET, SECRET_EXPECTED) == []
    assert len(ResponseStore.open(judged.root)) == 23 - 6


def test_other_items_keep_every_record_of_every_kind(judged: Repo, cli):
    assert cli(judged, "run").code == 1
    judged.commit("judged results")

    def by_item(requests: dict[str, dict]) -> Counter[tuple[str, str]]:
        counts: Counter[tuple[str, str]] = Counter()
        for request in requests.values():
            text = next(
                t for t in [SECRET, *(f"message {i}" for i in range(4))] if quotes(request, t)
            )
            counts[text, "judge" if is_judge(request) else "candidate"] += 1
        return counts

    before = by_item(stored_requests(judged))
    record = purge_item(judged.root, "m-004", reason="erasure request", push=False)
    after = by_item(stored_requests(judged))

    assert after == {k: n for k, n in before.items() if k[0] != SECRET}
    assert (
        record.removed
        == {kind: before[SECRET, kind] for kind in ("candidate", "judge")}
        == {"candidate": 2, "judge": 2}
    )
    assert sum(n for (_t, kind), n in after.items() if kind == "judge") == 6


def test_a_short_input_purges_only_its_own_records(live: Repo, cli, server):
    """An item whose input is "a" takes no record that merely holds the letter, or the
    string "a" (the label every other verdict quotes): only whole values match."""
    server.responder = judge_or_label
    add_item(live, cli, "m-004", "a", "b")
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace("levels:", JUDGE_CRITERION + "levels:"),
    )
    live.commit("an item whose input is one letter, judged")
    assert cli(live, "run").code == 1
    live.commit("results")
    # Prompts never committed, whose results are dropped: only content finds their records.
    edits = {
        "registry/tasks/labels.yaml": ('"Message: {{ text }}"', '"{{ text }}"'),
        "registry/rubrics/labels.yaml": (
            "Input: {{ input | tojson }}",
            "Under review: {{ input }}",
        ),
    }
    for path, (old, new) in edits.items():
        live.write(path, live.read(path).replace(old, new))
    assert cli(live, "run").code == 1
    live.git("checkout", "--", "registry", "reports")
    requests = stored_requests(live)
    mine = {
        k
        for k, r in requests.items()
        if r.get("input") == {"text": "a"}
        or r["messages"][-1]["content"] in ("a", "Message: a")
        or any(q in r["messages"][-1]["content"] for q in ('{"text": "a"}', "{'text': 'a'}"))
    }
    # Two candidates under two prompts; two outputs judged under two judge prompts.
    assert len(mine) == 4 + 4
    # Every other item's verdict on the rules candidate quotes its output {"label": "a"}.
    others = [r for k, r in requests.items() if k not in mine]
    assert sum(1 for r in others if is_judge(r) and '\\"a\\"' in json.dumps(r)) == 8

    record = purge_item(live.root, "m-004", reason="erasure request", push=False)

    assert set(stored_requests(live)) == set(requests) - mine
    assert record.removed == {"candidate": 4, "judge": 4}


# ---------------------------------------------------------------- reproduce


def gc(repo: Repo, record) -> None:
    for step in record.next_steps:
        argv = shlex.split(step)
        if argv[0] == "dvc":
            subprocess.run(
                [sys.executable, "-m", "dvc", *argv[1:]],
                cwd=repo.root,
                check=True,
                capture_output=True,
            )


def test_reproducing_results_whose_responses_were_purged_names_the_purge(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    purge_item(live.root, "m-001", reason="erasure request", at="2026-04-02")
    live.commit("purge m-001")

    result = cli(live, "reproduce", "HEAD")

    assert result.code == 1, result.err
    out = " ".join(result.out.split())
    assert "m-001#0: no stored response: purged (reports/purges.jsonl line 1)" in out
    assert "offline miss" not in out and "m-000#0" not in out
    assert (
        "Evidence purged: the stored records of item m-001 (evalsets/messages.jsonl) were "
        "removed, requested 2026-04-02 (reports/purges.jsonl line 1: erasure request)."
    ) in out
    assert "cannot be reproduced in full" in out and out.endswith(
        "DIFFERENT (2 cells with results)"
    )


def test_a_commit_before_the_purge_reproduces_until_gc_then_names_it(live: Repo, cli):
    assert cli(live, "run").code == 0
    before = live.commit("results")
    record = purge_item(live.root, "m-001", reason="erasure request")
    live.commit("purge m-001")

    kept = cli(live, "reproduce", before)  # the retired segments are still in the cache
    assert kept.code == 0, kept.out
    kept_out = " ".join(kept.out.split())
    assert "Evidence purged: the stored records of item m-001" in kept_out
    assert "once `dvc gc` (the purge's next steps) removes them" in kept_out

    gc(live, record)
    result = cli(live, "reproduce", before)

    assert result.code == 1 and result.err == ""
    out = " ".join(result.out.split())
    gone = ", ".join(record.segments_removed)
    assert (
        f"Store segments of {before[:12]} retired by a purge are gone from this clone: {gone}"
        in out
    )
    # What the purge kept of them stands in: only the purged item cannot be reproduced.
    assert "m-001#0: no stored response: purged (reports/purges.jsonl line 1)" in out
    assert "offline miss" not in out and "m-000#0" not in out


def test_a_purge_logged_before_counts_by_kind_is_named_alike(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    purge_item(live.root, "m-001", reason="erasure request")
    entry = json.loads(live.read(PURGE_LOG))
    del entry["removed"]  # as purges logged it before verdicts were counted apart
    live.write(PURGE_LOG, "\n" + json.dumps(entry) + "\n")
    live.commit("purge m-001")

    result = cli(live, "reproduce", "HEAD")

    assert result.code == 1
    assert "purged (reports/purges.jsonl line 2)" in result.out


def test_a_damaged_purge_log_is_named_at_its_line(live: Repo, cli):
    assert cli(live, "run").code == 0
    live.commit("results")
    live.write(PURGE_LOG, '{"item": "m-001"}\n')

    result = cli(live, "reproduce", "HEAD")

    assert result.code == 2 and "Traceback" not in result.err
    assert "reports/purges.jsonl:1" in result.err and "not a purge record (KeyError" in result.err


@pytest.mark.parametrize("command", ["status", "check"])
def test_a_purge_log_line_that_is_not_json_is_named_by_every_reader(live: Repo, cli, command):
    assert cli(live, "run").code == 0
    live.commit("results")
    live.write(PURGE_LOG, '{"item": "m-001", "evalset": "e", "reason": "r"}\n{not json\n')

    result = cli(live, command)

    assert result.code == 2 and "Traceback" not in result.err
    assert "reports/purges.jsonl:2" in result.err and "not a purge record" in result.err
