"""What judges cost is counted: in the dry run's estimate, against --max-cost, in the run
summary, in a cell's cost, and on the record of a sample whose judge failed."""

from __future__ import annotations

import json
import re

import pytest
import test_judges_human
from test_judges_human import MINI, records

from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS
from evalreg.text.numbers import usd_micro

from conftest import Repo, items_jsonl

judged = test_judges_human.judged  # the fixture: a judge pin and a judged criterion
RULES = "reports/results/labels/rules"
FEW_RETRIES = "limits:\n  max_retries: 2\nprice:"


def _judge_requests(server) -> int:
    return server.count(lambda r: r.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS)


def _candidate_requests(server) -> int:
    return server.count(lambda r: r.body["messages"][0]["content"] != JUDGE_INSTRUCTIONS)


def _dollars(text: str) -> float:
    return float(text.removeprefix("$").replace(",", ""))


def _estimates(out: str) -> tuple[float, float, float, int]:
    """(total, candidates, judges, judge requests) from a dry run's estimate line."""
    line = " ".join(out.split("Estimated cost of missing responses: ")[1].split())
    found = re.match(
        r"(\$[\d.,]+) \(candidates (\$[\d.,]+), (\d+) judge requests (\$[\d.,]+): one per "
        r"judge criterion that applies, per candidate request to buy\)",
        line,
    )
    assert found is not None, line
    total, candidates, count, judges = found.groups()
    return _dollars(total), _dollars(candidates), _dollars(judges), int(count)


def _flaky_judge(repo: Repo, server) -> None:
    """Every judge request fails with HTTP 500 (three attempts each)."""
    repo.write(
        "registry/models/judge.yaml",
        repo.read("registry/models/judge.yaml").replace("price:", FEW_RETRIES),
    )
    repo.commit("the judge retries twice")
    server.fail_matching("You grade one response against one criterion", "500")


def test_dry_run_counts_one_judge_request_per_candidate_request_to_buy(judged: Repo, cli):
    result = cli(judged, "run", "--dry-run")
    assert result.code == 0
    total, candidates, judges, count = _estimates(result.out)
    # 4 items x 2 candidates, one judge criterion that applies to every item.
    assert count == 8
    # No judge history: each judge request is estimated with its max_tokens default of
    # 256 output tokens at $2 per million, and a prompt of some hundred tokens at $1.
    assert 8 * 256 * 2e-6 < judges < 8 * (256 * 2e-6 + 1000e-6)
    assert total == pytest.approx(candidates + judges, abs=2e-4)
    assert "judge req." in result.out and "judge est." in result.out


def test_dry_run_of_a_cell_without_a_judge_shows_no_judge_columns(live: Repo, cli):
    result = cli(live, "run", "--dry-run")
    assert result.code == 0
    assert "judge" not in result.out
    assert "Estimated cost of missing responses: $" in result.out


def test_max_cost_stops_when_the_judges_cost_would_exceed_it(judged: Repo, cli, server):
    _, candidates, judges, _ = _estimates(cli(judged, "run", "--dry-run").out)
    # Room for every candidate request, but not for their judges as well (nor for the mini
    # cell's half of them: the estimates are shown exactly enough for that to fit).
    cap = candidates + judges / 4
    result = cli(judged, "run", "--max-cost", f"{cap:.6f}")
    assert result.code == 1
    assert _candidate_requests(server) < 4  # the mini cell's 4 requests did not all fit
    assert "budget" in result.out
    assert not (judged.root / MINI).with_suffix(".items.jsonl").exists()


def test_max_cost_with_room_for_the_judges_buys_everything(judged: Repo, cli, server):
    total, *_ = _estimates(cli(judged, "run", "--dry-run").out)
    result = cli(judged, "run", "--max-cost", f"{total * 1.01:.6f}")
    assert "budget" not in result.out + result.err
    assert _candidate_requests(server) == 4
    assert _judge_requests(server) == 6


def test_judge_http_500s_are_counted_in_the_summary_and_fail_the_run(judged: Repo, cli, server):
    _flaky_judge(judged, server)
    result = cli(judged, "run")
    assert result.code == 1  # README: 1 if responses are missing or errored
    out = " ".join(result.out.split())
    assert "errors: none" not in out.split("candidates:")[0]
    # 6 distinct judge requests (where the two candidates answered alike, the second
    # waits for the first and fails with it), 3 attempts each.
    assert _judge_requests(server) == 18
    assert "Requests: 8 bought, 0 from the store, 0 shared; errors: server 6, shared_error 2" in out
    assert "judges: 0 bought, 0 from the store, 0 shared; errors: server 6, shared_error 2" in out
    assert "candidates: 8 bought, 0 from the store, 0 shared; errors: none" in out
    assert "server: HTTP 500: The server had an error" in result.err
    assert "(after 3 attempts)" in result.err
    # The progress line of each cell counts its judge's errors.
    progress = " ".join(result.err.split())
    assert "labels/mini ━" in progress
    assert progress.count("judge: bought 0 errors 4") == 2
    totals = json.loads(judged.read(MINI + ".json"))["totals"]
    assert totals["errors"] == 4 and totals["graded"] == 0


def test_a_failed_judge_keeps_the_candidates_usage_and_names_http_500(judged: Repo, cli, server):
    _flaky_judge(judged, server)
    cli(judged, "run")
    for record in records(judged, MINI):
        assert record["error"] == "judge: judge judge: HTTP 500 after 3 attempts"
        assert record["level"] is None
        assert record["tokens"]["input"] > 0 and record["tokens"]["output"] > 0
        # gpt-4o-mini's price: the candidate's response was bought, and is paid for.
        tokens = record["tokens"]
        expected = round(tokens["input"] * 0.15 + tokens["output"] * 0.6)
        assert record["cost_micro_usd"] == expected > 0
        assert record["judge_cost_micro_usd"] == 0  # the judge never answered
    totals = json.loads(judged.read(MINI + ".json"))["totals"]
    # The production cost counts graded samples only; the eval's spend counts them all.
    assert totals["cost_micro_usd"] == 0
    assert totals["spend_micro_usd"] == sum(r["cost_micro_usd"] for r in records(judged, MINI))


def test_a_judge_that_recovers_is_bought_on_the_next_run(judged: Repo, cli, server):
    _flaky_judge(judged, server)
    cli(judged, "run")
    server.clear_faults()
    before = _candidate_requests(server)
    judged.commit("results with judge errors")
    result = cli(judged, "run", "--force")
    assert _candidate_requests(server) == before  # the candidates' responses are stored
    assert "judges: 6 bought" in " ".join(result.out.split())
    assert records(judged, MINI)[1]["criteria"]["tone"]["passed"] is True


def test_judge_requests_from_the_store_are_counted_on_a_rerun(judged: Repo, cli, server):
    cli(judged, "run")
    judged.commit("judged results")
    count = server.count()
    result = cli(judged, "run", "--force", "--offline")
    assert server.count() == count
    out = " ".join(result.out.split())
    assert "judges: 0 bought, 8 from the store, 0 shared; errors: none" in out
    assert "candidates: 0 bought, 8 from the store, 0 shared; errors: none" in out


def _judge_costs(repo: Repo) -> set[int]:
    """What each stored judge response cost at the judge pin's price ($1 / $2 a million)."""
    costs = set()
    for segment in (repo.root / "reports/store").glob("*.jsonl"):
        for line in segment.read_text().splitlines():
            record = json.loads(line)
            request = record["request"]
            if request["messages"][0]["content"] != JUDGE_INSTRUCTIONS:
                continue
            usage = record["response"]["usage"]
            costs.add(round(usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0))
    return costs


def test_a_cells_cost_includes_its_judges_cost(judged: Repo, cli):
    result = cli(judged, "run")
    mini = records(judged, MINI)
    stored = _judge_costs(judged)
    for record in mini:
        assert record["judge_cost_micro_usd"] in stored
    totals = json.loads(judged.read(MINI + ".json"))["totals"]
    judge = sum(r["judge_cost_micro_usd"] for r in mini)
    assert totals["judge_cost_micro_usd"] == judge > 0
    # Candidate cost over graded samples: what production pays (it has no judge).
    graded = [r for r in mini if r["error"] is None]
    assert totals["cost_micro_usd"] == sum(r["cost_micro_usd"] for r in graded)
    assert totals["spend_micro_usd"] == sum(r["cost_micro_usd"] for r in mini) + judge
    # The run summary's cost of the cell is its spend.
    assert "Run of labels" in result.out  # one task: the rows name the candidate
    row = next(line for line in result.out.splitlines() if line.split()[:1] == ["mini"])
    spend = usd_micro(totals["spend_micro_usd"])
    share = usd_micro(totals["judge_cost_micro_usd"])
    assert spend in row and share in row
    # The python candidate is free; its cell's spend is its judge's.
    rules = json.loads(judged.read(RULES + ".json"))["totals"]
    assert rules["spend_micro_usd"] == rules["judge_cost_micro_usd"] > 0


def test_a_cell_without_a_judge_writes_no_judge_cost(live: Repo, cli):
    assert cli(live, "run").code == 0
    summary = json.loads(live.read(MINI + ".json"))
    assert "judge_cost_micro_usd" not in summary["totals"]
    assert "spend_micro_usd" not in summary["totals"]
    assert all("judge_cost_micro_usd" not in r for r in records(live, MINI))


def test_dry_run_learns_the_judges_output_length_from_the_store(judged: Repo, cli):
    _, _, before, count = _estimates(cli(judged, "run", "--dry-run").out)
    cli(judged, "run")
    judged.commit("judged results")
    judged.write("evalsets/messages.jsonl", items_jsonl(8))
    assert cli(judged, "evalset", "add", str(judged.root / "evalsets/messages.jsonl")).code == 0
    result = cli(judged, "run", "--dry-run")
    out = " ".join(result.out.split())
    assert "judge estimate: " in out and "mean of stored judge responses of the cell" in out
    _, _, after, new = _estimates(result.out)
    assert new == count == 8  # four new items, two candidates
    # A verdict is a dozen tokens, not the 256 a judge request may return.
    assert after < before / 2


def test_results_with_a_failed_judge_reproduce_with_its_cause(judged: Repo, cli, server):
    _flaky_judge(judged, server)
    cli(judged, "run")
    judged.commit("results with judge errors")
    result = cli(judged, "reproduce", "HEAD")
    assert result.code == 0, result.out + result.err
