"""``evalreg run --until-decided`` end to end: real git and DVC, the loopback model server,
an eval set of 2,000 items bought in rounds until the use case is decided."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator

import pytest
from test_judges_human import JUDGE_CRITERION, JUDGE_PIN, records

from evalreg.compare.diff_document import DiffDocument
from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS

from conftest import Repo, assert_refused
from support import runs
from support.llm_server import LLMServer, Request
from support.runs import in_process, live_registry

ITEMS = 2000
FEW = 400
"""The eval set of the tests about something other than how far a run goes."""


def triage_well(request: Request) -> str:
    """Right on nine items in ten (message i's label is "a" for odd i), by the message."""
    text = request.body["messages"][-1]["content"]
    i = int(text.rsplit(" ", 1)[-1])
    right = "a" if i % 2 else "b"
    wrong = "b" if right == "a" else "a"
    return json.dumps({"label": wrong if i % 10 == 3 else right})


def _policy(repo: Repo, gate: float, sequential: str = "") -> None:
    """Two candidates: ``mini`` (the server) against ``mini2`` (the server, answering
    the same unless told otherwise); one pass-rate gate at ``gate``."""
    path = "registry/selections/labels.yaml"
    text = repo.read(path)
    start = text.index("policy:")
    end = text.index("selected:")
    repo.write(
        path,
        text[:start]
        + "policy:\n  gates:\n    - metric: pass_rate\n"
        + f"      min: {gate}\n"
        + "  objective:\n    lexicographic:\n      - maximize: pass_rate\n"
        + sequential
        + text[end:],
    )


@pytest.fixture
def server(server_port: int) -> Iterator[LLMServer]:
    with LLMServer(api_key=runs.KEY, port=server_port) as srv:
        yield srv


@pytest.fixture
def two_pins(repo: Repo, server: LLMServer) -> Repo:
    live_registry(repo, server, items=ITEMS, pins=2)
    return repo


@pytest.fixture
def few(repo: Repo, server: LLMServer) -> Repo:
    live_registry(repo, server, items=FEW, pins=2)
    return repo


def _summary(repo: Repo, candidate: str) -> dict:
    return json.loads(repo.read(f"reports/results/labels/{candidate}.json"))


def _clear_cut(repo: Repo, server: LLMServer) -> None:
    """mini triages well (90 %); mini2 always answers "a" (50 %): a gate at 0.7, decided
    sequentially from 100 items in rounds of 100, is clear-cut for both, and so is the
    ranking."""
    server.responder = lambda request: (
        json.dumps({"label": "a"})
        if request.body["model"] == "gpt-test-2"
        else triage_well(request)
    )
    _policy(repo, 0.7, "  sequential:\n    min_items: 100\n    round: 100\n")


def test_a_clear_cut_use_case_stops_early_and_reproduces(two_pins: Repo, server: LLMServer) -> None:
    repo = two_pins
    _clear_cut(repo, server)
    repo.commit("policy: one gate, decided sequentially")
    done = in_process(repo, "run", "--no-push", "--max-concurrency", "16")
    assert done.returncode == 0, done.stderr + done.stdout
    bought = len(server.requests)
    assert bought < ITEMS, done.stdout  # two cells of 2,000 items, stopped well before
    for candidate in ("mini", "mini2"):
        stop = _summary(repo, candidate)["sequential"]
        assert stop["of"] == ITEMS and stop["items"] < ITEMS // 2, stop
    assert "decided after" in done.stdout
    status = in_process(repo, "status")
    assert "decided (" in status.stdout, status.stdout
    repo.commit("results, decided sequentially")
    # A second run buys nothing.
    again = in_process(repo, "run", "--no-push", "--until-decided")
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == bought
    reproduced = in_process(repo, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr
    # A stop the rule does not reach again is a difference: here, a first look recorded
    # as taken after 50 items, where the rule has already settled the decision.
    for candidate in ("mini", "mini2"):
        path = f"reports/results/labels/{candidate}.json"
        repo.write(path, repo.read(path).replace('"min_items": 100', '"min_items": 50'))
    repo.commit("a stopping point edited by hand")
    tampered = in_process(repo, "reproduce", "HEAD")
    assert tampered.returncode == 1
    assert "stopping point: recorded after 100 of 2000 items, the rule stops after 50" in (
        tampered.stdout
    )
    repo.git("revert", "--no-edit", "HEAD")
    checked = in_process(repo, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    written = in_process(repo, "report")
    assert written.returncode == 0, written.stderr
    report = repo.read("reports/labels.md")
    assert "### Decided on part of the items" in report
    assert "Waudby-Smith & Ramdas 2023" in report
    assert "rests on at most 100 of the 2,000 items" in report
    # Every item, when anyone wants them: the rest is bought, the cells read as usual.
    whole = in_process(repo, "run", "--no-push", "--all-items")
    assert whole.returncode == 0, whole.stderr
    assert len(server.requests) == bought + 2 * (ITEMS - 100)
    for candidate in ("mini", "mini2"):
        summary = _summary(repo, candidate)
        assert "sequential" not in summary and summary["totals"]["items"] == ITEMS
    assert "decided (" not in in_process(repo, "status").stdout


def close_pair(request: Request) -> str:
    """mini and mini2 right on the same share of items (85 %), wrong on different ones:
    their pass rates tie exactly, so no round settles which is better."""
    text = request.body["messages"][-1]["content"]
    i = int(text.rsplit(" ", 1)[-1])
    right = "a" if i % 2 else "b"
    wrong = "b" if right == "a" else "a"
    odd_one = 7 if request.body["model"] == "gpt-test-2" else 9
    return json.dumps({"label": wrong if i % 10 == 3 or i % 20 == odd_one else right})


def test_a_close_use_case_runs_to_the_end_and_reads_as_a_full_run(
    two_pins: Repo, server: LLMServer
) -> None:
    repo = two_pins
    server.responder = close_pair
    _policy(repo, 0.5, "  sequential:\n    min_items: 100\n    round: 700\n")
    repo.commit("policy: decided sequentially, rounds of 700")
    done = in_process(repo, "run", "--no-push")
    assert done.returncode == 0, done.stderr + done.stdout
    assert len(server.requests) == 2 * ITEMS
    assert [line for line in done.stderr.splitlines() if line.startswith("round ")] == [
        f"round {n}: items bought: labels/mini {k:,}, labels/mini2 {k:,}"
        for n, k in enumerate((100, 800, 1500, 2000), start=1)
    ]
    for candidate in ("mini", "mini2"):
        summary = _summary(repo, candidate)
        assert "sequential" not in summary and summary["totals"]["items"] == ITEMS
    repo.commit("results")
    reproduced = in_process(repo, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout
    assert in_process(repo, "check").returncode == 0


@pytest.mark.slow  # a kill and a resume: `nox -s slow`, which CI runs too
def test_killed_between_rounds_a_run_resumes_without_buying_anything_twice(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    server.responder = close_pair
    _policy(repo, 0.5, "  sequential:\n    min_items: 100\n    round: 100\n")
    repo.commit("policy: decided sequentially")
    proc = runs.start(repo, "run", "--no-push", "--max-concurrency", "8")
    # Caught in its second round, some of it bought.
    assert runs.wait_until(proc, lambda: len(server.requests) > 2 * 100 + 50)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = runs.stored_keys(repo)  # what reached the store before the signal
    assert len(server.requests) - len(kept) <= 8  # at most the requests in flight
    server.reset()
    done = in_process(repo, "run", "--no-push")
    assert done.returncode == 0, done.stderr + done.stdout
    received = [runs.request_key_of(r, server) for r in server.requests]
    assert not set(received) & kept  # nothing stored is bought again
    assert len(received) == len(set(received))
    assert len(set(received) | kept) == 2 * FEW
    repo.commit("results")
    assert in_process(repo, "reproduce", "HEAD").returncode == 0


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--batch",), "--until-decided cannot be combined with --batch"),
        (("--shard", "1/2"), "--until-decided cannot be combined with --shard"),
        (("--limit", "5"), "--until-decided cannot be combined with --limit"),
    ],
)
def test_options_that_buy_otherwise_are_refused(
    repo: Repo, cli, args: tuple[str, ...], why: str
) -> None:
    assert_refused(repo, cli, "run", "--until-decided", *args, expect=(why,))


def test_a_decision_that_needs_every_item_is_refused_with_the_reason(repo: Repo, cli) -> None:
    path = "registry/selections/labels.yaml"
    repo.write(
        path,
        repo.read(path).replace(
            "    - metric: pass_rate\n      slice: common\n      min: 0.5\n",
            "    - metric: latency_p95_ms\n      max: 900\n",
        ),
    )
    repo.commit("a latency gate")
    assert_refused(
        repo,
        cli,
        "run",
        "--until-decided",
        expect=("use case labels cannot be decided on part of its items", "latency_p95_ms"),
    )
    # Written into the policy, the same is a finding at its place.
    repo.write(
        path, repo.read(path).replace("  objective:", "  sequential: {alpha: 0.05}\n  objective:")
    )
    found = cli(repo, "check")
    assert found.code != 0
    line = repo.read(path).splitlines().index("  sequential: {alpha: 0.05}") + 1
    assert f"{path}:{line}:" in found.out + found.err
    assert "gate 1 is on latency_p95_ms" in found.out + found.err


def test_judges_are_bought_round_by_round_with_their_candidates(
    few: Repo, server: LLMServer
) -> None:
    repo = few

    def respond(request: Request) -> str:
        if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
            return json.dumps({"score": 0.9, "reason": "calm"})
        if request.body["model"] == "gpt-test-2":
            return json.dumps({"label": "a"})
        return triage_well(request)

    server.responder = respond
    repo.write(
        "registry/models/judge.yaml",
        JUDGE_PIN.format(url=server.base_url).replace("OPENAI_API_KEY", "CRASH_TEST_KEY"),
    )
    rubric = "registry/rubrics/labels.yaml"
    repo.write(rubric, repo.read(rubric).replace("levels:", JUDGE_CRITERION + "levels:"))
    _policy(repo, 0.7, "  sequential:\n    min_items: 100\n    round: 100\n")
    repo.commit("a judged criterion; decided sequentially")
    done = in_process(repo, "run", "--no-push")
    assert done.returncode == 0, done.stderr + done.stdout
    judge = [r for r in server.requests if r.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS]
    asked = [r for r in server.requests if r not in judge]
    assert len(asked) == 200  # decided at the first look
    # Each judged answer is one of the 200 bought (two alike are judged once); none other.
    bought = {int(r.body["messages"][-1]["content"].rsplit(" ", 1)[-1]) for r in asked}
    judged = set()
    for r in judge:
        found = re.search(r'"message (\d+)"', r.body["messages"][1]["content"])
        assert found is not None
        judged.add(int(found.group(1)))
    assert judged == bought and len(bought) == 100
    assert 100 <= len(judge) <= 200
    mini = records(repo, "reports/results/labels/mini")
    assert len(mini) == 100 and all(r["criteria"]["tone"]["passed"] for r in mini)
    repo.commit("results")
    assert in_process(repo, "reproduce", "HEAD").returncode == 0


@pytest.mark.slow  # a kill and a resume: `nox -s slow`, which CI runs too
def test_a_round_cut_short_by_max_cost_writes_nothing_and_the_next_run_goes_on(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    _clear_cut(repo, server)
    repo.commit("policy: decided sequentially")
    cut = in_process(repo, "run", "--no-push", "--max-cost", "0.0002")
    assert cut.returncode == 1, cut.stderr + cut.stdout
    assert "not decided" in cut.stdout and "--max-cost" in cut.stdout
    assert not (repo.root / "reports/results/labels/mini.json").exists()
    first = len(server.requests)
    assert 0 < first < 200
    done = in_process(repo, "run", "--no-push")
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 200  # the rest of the first round, nothing again
    assert _summary(repo, "mini")["sequential"]["items"] == 100


def test_a_shard_leaves_a_sequential_use_case_to_a_run_without_it_and_says_so(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    _clear_cut(repo, server)
    repo.commit("policy: decided sequentially")
    shard = in_process(repo, "run", "--no-push", "--shard", "1/2")
    assert shard.returncode == 0, shard.stderr
    assert "use case labels is bought until decided" in shard.stderr
    assert "a run with --shard leaves its cells to a run without it" in shard.stderr
    assert len(server.requests) == 0


def test_a_sequential_policy_changed_after_the_run_makes_its_cells_stale(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    _clear_cut(repo, server)
    repo.commit("policy: decided sequentially")
    assert in_process(repo, "run", "--no-push").returncode == 0
    repo.commit("results")
    path = "registry/selections/labels.yaml"
    repo.write(path, repo.read(path).replace("    min_items: 100", "    min_items: 300"))
    repo.commit("a first look after 300 items")
    status = json.loads(in_process(repo, "status", "--json").stdout)
    assert {c["state"] for c in status} == {"stale"}
    assert all("changed: the sequential policy of labels" in c["reasons"] for c in status)
    bought = len(server.requests)
    again = in_process(repo, "run", "--no-push")
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == bought + 2 * 200  # items 101 to 300 of each cell
    assert _summary(repo, "mini")["sequential"]["items"] == 300


def test_what_the_rounds_bought_reaches_the_remote_and_a_teammates_clone_reproduces_it(
    few: Repo, server: LLMServer, tmp_path
) -> None:
    repo = few
    _clear_cut(repo, server)
    repo.commit("policy: decided sequentially")
    # Named candidates still decide the whole use case: every candidate is bought.
    done = in_process(repo, "run", "--candidate", "mini")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "recommends mini" in done.stdout
    assert _summary(repo, "mini2")["sequential"]["items"] == 100
    repo.commit("results")
    clone = Repo(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", str(repo.root), str(clone.root)], check=True)
    reproduced = in_process(clone, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr


def test_an_early_look_with_the_flag_is_completed_by_the_next_plain_run(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    _clear_cut(repo, server)
    path = "registry/selections/labels.yaml"
    repo.write(
        path, repo.read(path).replace("  sequential:\n    min_items: 100\n    round: 100\n", "")
    )
    repo.commit("policy: no sequential block")
    look = in_process(repo, "run", "--no-push", "--until-decided")
    assert look.returncode == 0, look.stderr
    assert "responses not bought" in look.stdout
    assert len(server.requests) == 2 * 100  # the defaults: a first look after 100 items
    assert "decided (100 of 400)" in in_process(repo, "status").stdout
    whole = in_process(repo, "run", "--no-push")
    assert whole.returncode == 0, whole.stderr
    assert len(server.requests) == 2 * FEW
    assert _summary(repo, "mini")["totals"]["items"] == FEW


def test_the_diff_of_a_completed_cell_says_what_its_results_rest_on(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    _clear_cut(repo, server)
    repo.commit("policy: decided sequentially")
    assert in_process(repo, "run", "--no-push").returncode == 0
    base = repo.commit("results decided on 100 items")
    assert in_process(repo, "run", "--no-push", "--all-items").returncode == 0
    repo.commit("every item")
    shown = in_process(repo, "diff", base, "HEAD", "--format", "md")
    assert shown.returncode == 0, shown.stderr
    assert "without a cause" not in shown.stdout  # other items, not other numbers
    assert "items decided on: 100 → 400 of 400" in shown.stdout
    text = in_process(repo, "diff", base, "HEAD", "--format", "json").stdout
    DiffDocument.model_validate_json(text)  # the published shape, the new field included
    document = json.loads(text)
    bought = {c["id"]: c.get("items_bought") for c in document["cells"]}
    assert bought["labels/mini"] == {"base": 100, "head": 400, "of": 400}


@pytest.mark.slow  # two processes at once: `nox -s slow`, which CI runs too
def test_two_sequential_runs_started_together_buy_each_response_once(
    few: Repo, server: LLMServer
) -> None:
    repo = few
    server.responder = close_pair  # rounds to the last item: the lock is held a while
    _policy(repo, 0.5, "  sequential:\n    min_items: 100\n    round: 100\n")
    repo.commit("policy: decided sequentially")
    procs = [runs.start(repo, "run", "--no-push", "--until-decided") for _ in range(2)]
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    refused = next(err for code, err in outcomes if code == 2)
    assert "another evalreg process is writing" in refused and "Traceback" not in refused
    again = in_process(repo, "run", "--no-push", "--until-decided")
    assert again.returncode == 0, again.stderr
    keys = [runs.request_key_of(r, server) for r in server.requests]
    assert len(keys) == len(set(keys)) == 2 * FEW  # nothing bought twice, nothing lost
    repo.commit("results")
    assert in_process(repo, "reproduce", "HEAD").returncode == 0
