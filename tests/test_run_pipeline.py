"""``evalreg run`` buys while it plans: its first requests go out while later ones are still
being keyed, and nothing about the run changes but when the work is done."""

from __future__ import annotations

import json

import pytest

from evalreg.providers.base import Completion
from evalreg.providers.fetch import put_response
from evalreg.report import terminal
from evalreg.runner.run import CellPlan, RunOptions, prepare

from conftest import Repo, assert_refused, items_jsonl
from support.llm_server import LLMServer, Request, default_text

EVALSET = "evalsets/messages.jsonl"
MINI = "reports/results/labels/mini"


def with_items(repo: Repo, cli, rows: str) -> None:
    repo.write(EVALSET, rows)
    assert cli(repo, "evalset", "add", str(repo.root / EVALSET)).code == 0
    repo.commit("items")


def test_the_first_request_is_sent_before_the_last_one_is_keyed(
    live: Repo, cli, server: LLMServer, monkeypatch: pytest.MonkeyPatch
):
    with_items(live, cli, items_jsonl(3000))
    shown: list[CellPlan] = []
    keyed_when_built: list[int] = []

    class Display(terminal.RunProgress):
        def __init__(self, plans: list[CellPlan]) -> None:
            super().__init__(plans)
            shown.extend(plans)
            keyed_when_built.extend(len(p.keys) for p in plans)

    keyed_at_first_request: list[int] = []

    def respond(request: Request) -> str:
        if not keyed_at_first_request:
            mini = next(p for p in shown if p.status.cell.id == "labels/mini")
            keyed_at_first_request.append(len(mini.keys))
        assert request.body is not None
        return default_text(request.body["messages"])

    server.responder = respond
    monkeypatch.setattr(terminal, "RunProgress", Display)
    result = cli(live, "run")
    assert result.code == 0, result.err
    # The display had its totals before a single request was keyed.
    assert keyed_when_built == [0, 0]
    assert [p.in_shard for p in shown] == [3000, 3000]
    assert keyed_at_first_request[0] < 3000
    assert server.count() == 3000
    assert json.loads(live.read(MINI + ".json"))["totals"]["samples"] == 3000


def plan_facts(plan: CellPlan) -> dict[str, object]:
    return {
        "keys": plan.keys,
        "to_buy": [job.key for job in plan.to_buy],
        "missing": plan.missing,
        "in_shard": plan.in_shard,
        "estimated": plan.estimated_micro_usd,
        "output_tokens": plan.output_tokens,
        "observed": plan.observed_tokens,
        "blocked": plan.blocked,
    }


def test_a_plan_keyed_while_buying_is_the_plan_made_before(live: Repo, cli, server):
    assert cli(live, "run", "--limit", "2").code == 0  # the cell's output length: 2 stored
    with_items(live, cli, items_jsonl(8))
    whole = prepare(live.root, RunOptions())
    keyed_later = prepare(live.root, RunOptions(), keyed=False)
    assert all(p.keys == [] for p in keyed_later.plans)
    store = keyed_later.store
    for plan in keyed_later.plans:
        for job in keyed_later.requests(plan):
            # Bought at once, as a run would while later requests are still being keyed,
            # with an output length unlike any stored before.
            completion = Completion('{"label": "a"}', "m", "fp", 10, 999)
            put_response(
                store, None, job.key, job.provider.name, job.endpoint, job.sample,
                job.content, completion, {"latency_ms": 1, "attempts": 1},
            )  # fmt: skip
    assert [plan_facts(p) for p in keyed_later.plans] == [plan_facts(p) for p in whole.plans]
    assert sum(p.missing for p in whole.plans) == 6 + 6  # both cells, 2 of 8 stored each


def test_a_prompt_that_cannot_be_rendered_for_a_late_item_stops_the_run_before_it_buys(
    live: Repo, cli, server
):
    rows = [json.loads(line) for line in items_jsonl(300).splitlines()]
    for row in rows:
        row["input"]["emphasis"] = 3
    rows[-1]["input"]["emphasis"] = 10**9
    with_items(live, cli, "".join(json.dumps(r) + "\n" for r in rows))
    task = "registry/tasks/labels.yaml"
    live.write(task, live.read(task).replace("{{ text }}", "{{ text }}{{ '!' * emphasis }}"))
    live.commit("an emphasis too long to render for the last item")
    err = assert_refused(live, cli, "run", expect=("m-299", "a repeated value would be"))
    assert "m-298" not in err
    assert server.count() == 0
