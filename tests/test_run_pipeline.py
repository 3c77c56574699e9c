"""``evalreg run`` buys while it plans: its first requests go out while later ones are still
being keyed, and nothing about the run changes but when the work is done."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalreg.providers import get_provider
from evalreg.providers.base import Completion
from evalreg.providers.fetch import FetchReport, Job, fetch, make_job, put_response
from evalreg.providers.http import HttpLayer
from evalreg.registry.schema import Pin
from evalreg.report import terminal
from evalreg.runner.planning import CellPlan, Prepared, RunOptions, prepare
from evalreg.store.segments import ResponseStore, SegmentWriter
from evalreg.text.numbers import usd_micro

from conftest import LIVE_KEY, Repo, assert_refused, items_jsonl
from support import runs
from support.llm_server import LLMServer

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
    post = HttpLayer.post

    async def counted_post(self: HttpLayer, *args: object, **kwargs: object) -> object:
        # Counted where the request is handed to the HTTP layer, in the thread that keys:
        # what the server sees first depends on when its thread gets to run.
        if not keyed_at_first_request:
            keyed_at_first_request.append(sum(len(p.keys) for p in shown))
        return await post(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HttpLayer, "post", counted_post)
    monkeypatch.setattr(terminal, "RunProgress", Display)
    result = cli(live, "run")
    assert result.code == 0, result.err
    # The display had its totals before a single request was keyed.
    assert keyed_when_built == [0, 0]
    assert [p.in_shard for p in shown] == [3000, 3000]
    assert keyed_at_first_request[0] < sum(p.in_shard for p in shown)
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


def buy_while_keying(prepared: Prepared, output_tokens: int) -> None:
    """Key every cell of ``prepared`` (made with ``keyed=False``), storing each request's
    response as soon as the request is made."""
    for plan in prepared.plans:
        for job in prepared.requests(plan):
            completion = Completion('{"label": "a"}', "m", "fp", 10, output_tokens)
            put_response(
                prepared.store, None, job.key, job.provider.name, job.endpoint, job.sample,
                job.content, completion, {"latency_ms": 1, "attempts": 1},
            )  # fmt: skip


def test_a_plan_keyed_while_buying_is_the_plan_made_before(live: Repo, cli, server):
    assert cli(live, "run", "--limit", "2").code == 0  # the cell's output length: 2 stored
    with_items(live, cli, items_jsonl(8))
    whole = prepare(live.root, RunOptions())
    keyed_later = prepare(live.root, RunOptions(), keyed=False)
    assert all(p.keys == [] for p in keyed_later.plans)
    # Bought at once, as a run would while later requests are still being keyed, with an
    # output length unlike any stored before.
    buy_while_keying(keyed_later, output_tokens=999)
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


def made_jobs(server: LLMServer, n: int) -> Iterator[Job]:
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "openai",
            "model": "snapshot-2026-01-01",
            "base_url": server.base_url,
            "api_key_env": "EVALREG_TEST_KEY",
            "limits": {"concurrency": 8, "timeout_s": 5},
        }
    )
    provider = get_provider("openai")
    for i in range(n):
        yield make_job("p", pin, provider, [{"role": "user", "content": f"item {i}"}], None, 0, "")


def fetch_from(root: Path, jobs: Iterator[Job]) -> FetchReport:
    async def go() -> FetchReport:
        async with HttpLayer() as http:
            with SegmentWriter(root) as writer:
                return await fetch(jobs, ResponseStore(), writer, http, concurrency=8)

    return asyncio.run(go())


def test_fetch_sends_requests_while_its_jobs_are_still_being_made(
    tmp_path: Path, server: LLMServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EVALREG_TEST_KEY", LIVE_KEY)
    server.responder = None
    answered_when_made: list[int] = []

    def slowly_made() -> Iterator[Job]:
        for job in made_jobs(server, 2000):
            answered_when_made.append(server.count())
            time.sleep(0.0005)  # a job that takes a while to make, like a long prompt
            yield job

    report = fetch_from(tmp_path, slowly_made())
    assert report.fetched == 2000
    assert answered_when_made[0] == 0
    assert answered_when_made[-1] > 0


def test_fetch_stops_its_requests_when_a_job_cannot_be_made(
    tmp_path: Path, server: LLMServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EVALREG_TEST_KEY", LIVE_KEY)
    server.responder = None
    server.latency = 0.05

    def broken() -> Iterator[Job]:
        yield from made_jobs(server, 100)
        raise ValueError("this job cannot be made")

    with pytest.raises(ValueError, match="cannot be made"):
        fetch_from(tmp_path, broken())
    time.sleep(0.3)
    # The jobs were made while the pin's first request was out: none of the others went.
    assert server.count() <= 1


@pytest.mark.parametrize(
    "options",
    [RunOptions(), RunOptions(shard=(1, 2)), RunOptions(shard=(2, 2)), RunOptions(limit=5)],
    ids=["whole", "shard1", "shard2", "limit"],
)
def test_a_plan_keyed_in_forked_processes_is_the_plan_keyed_here(
    live: Repo, cli, server, monkeypatch: pytest.MonkeyPatch, options: RunOptions
):
    """Keyed in workers, a cell's keys are looked at as one column and only the samples
    the store lacks are walked: the plan is the one keyed item by item."""
    from evalreg import forked

    live.write(
        "registry/tasks/labels.yaml",
        live.read("registry/tasks/labels.yaml").replace("repeats: 1", "repeats: 3"),
    )
    live.commit("three samples an item")
    assert cli(live, "run", "--limit", "4").code == 0
    with_items(live, cli, items_jsonl(7))
    monkeypatch.setattr(forked, "parts", lambda units, min_part=0: 1)
    here = prepare(live.root, options)
    monkeypatch.setattr(forked, "parts", lambda units, min_part=0: 2)
    in_workers = prepare(live.root, options)
    assert [plan_facts(p) for p in in_workers.plans] == [plan_facts(p) for p in here.plans]
    assert all(len(p.keys) == 3 * len(p.items) for p in here.plans)
    # Some samples are stored and some are not (a shard may hold none of either).
    assert 0 < sum(p.missing for p in here.plans) < sum(p.in_shard for p in here.plans)


def add_twin_candidate(live: Repo) -> None:
    """A second candidate, ``twin``, on mini's pin and prompt: the same requests."""
    selection = "registry/selections/labels.yaml"
    live.write(
        selection,
        live.read(selection).replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: twin\n    pin: mini\n",
        ),
    )
    live.commit("a second candidate on the same pin and prompt")


def test_a_response_bought_while_planning_is_still_to_buy_for_a_later_cell(live: Repo, cli, server):
    """Two cells ask the same requests: what the first bought is in the store by the time
    the second is keyed, and is still one of its requests to buy (the fetch shares it)."""
    with_items(live, cli, items_jsonl(6))
    add_twin_candidate(live)
    whole = prepare(live.root, RunOptions())
    keyed_later = prepare(live.root, RunOptions(), keyed=False)
    store = keyed_later.store
    buy_while_keying(keyed_later, output_tokens=20)
    twins = [p for p in keyed_later.plans if p.status.cell.candidate.id == "twin"]
    assert twins and all(p.missing == len(p.items) == 6 for p in twins)
    assert all(all(k in store for k in p.keys) for p in twins)
    assert [plan_facts(p) for p in keyed_later.plans] == [plan_facts(p) for p in whole.plans]


def test_two_cells_asking_the_same_requests_buy_each_response_once(live: Repo, cli, server):
    with_items(live, cli, items_jsonl(500))
    add_twin_candidate(live)
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 500
    twin = json.loads(live.read("reports/results/labels/twin.json"))
    mini = json.loads(live.read(MINI + ".json"))
    assert twin["totals"] == mini["totals"]


def add_twin_task(live: Repo) -> None:
    """A second task, ``labels2``, on the same eval set, prompt and rubric, and a use case
    that runs it on mini's pin: its requests are the ``labels`` task's, one for one."""
    live.write("registry/tasks/labels2.yaml", live.read("registry/tasks/labels.yaml"))
    live.write(
        "registry/selections/labels2.yaml",
        live.read("registry/selections/labels.yaml")
        .replace("task: labels", "task: labels2")
        .replace("  - id: rules\n    pin: rules\n", "")
        .replace("selected: rules", "selected: mini"),
    )
    live.commit("a second task asking what the first asks")


PROGRESS_LINE = re.compile(r"^\s*(\S+/\S+)\s.*?(\d+)/(\d+)\s+bought (\d+)\s", re.MULTILINE)


def progress_lines(err: str) -> dict[str, tuple[int, int, int]]:
    """The progress display's last line of each cell: (done, total, bought)."""
    return {
        cell: (int(done), int(total), int(bought))
        for cell, done, total, bought in PROGRESS_LINE.findall(err)
    }


@pytest.mark.parametrize("shard", [(), ("--shard", "1/2")], ids=["whole", "shard 1/2"])
def test_cells_sending_the_same_requests_each_count_their_own_in_the_progress(
    live: Repo, cli, server, shard: tuple[str, ...]
):
    with_items(live, cli, items_jsonl(60))
    add_twin_task(live)
    result = cli(live, "run", *shard)
    assert result.code == 0, result.err
    lines = progress_lines(result.err)
    assert set(lines) == {"labels/mini", "labels/rules", "labels2/mini"}
    # Each cell's share of the requests, done to the last: never past its total.
    assert all(done == total > 0 for done, total, _ in lines.values()), lines
    assert lines["labels/mini"][1] == lines["labels2/mini"][1]
    # A request the two cells send is bought once, for the first, and shared by the second.
    assert lines["labels/mini"][2] == lines["labels/mini"][1] == server.count()
    assert lines["labels2/mini"][2] == 0
    bought = sum(b for _, _, b in lines.values())
    assert f"Requests: {bought} bought, " in " ".join(result.out.split())


def test_a_shards_table_shows_what_it_bought_for_each_cell(live: Repo, cli, server):
    with_items(live, cli, items_jsonl(60))
    add_twin_task(live)
    shown: list[dict[str, str]] = []
    for shard in ("1/2", "2/2"):
        result = cli(live, "run", "--shard", shard)
        assert result.code == 0, result.err
        costs, task = {}, ""
        # task, candidate, state, to buy, errors, cost (a task is named on its first row)
        for row in re.findall(
            r"^(labels2?)?\s+(mini|rules)\s+pending\s+\d+\s+\d+\s+(\S+)", result.out, re.M
        ):
            task = row[0] or task
            costs[f"{task}/{row[1]}"] = row[2]
        shown.append(costs)
    assert cli(live, "run", "--offline").code == 0  # the results, from what the shards bought
    items = live.read(MINI + ".items.jsonl").splitlines()
    cost = {1: 0, 2: 0}
    for record in map(json.loads, items):
        cost[int(record["key"][:12], 16) % 2 + 1] += record["cost_micro_usd"]
    assert cost[1] > 0 and cost[2] > 0
    for n, table in enumerate(shown, start=1):
        # The shared requests are paid for once, by the cell that bought them.
        assert table == {
            "labels/mini": usd_micro(cost[n]),
            "labels/rules": "$0",
            "labels2/mini": "$0",
        }


@pytest.mark.dvc_child
def test_a_run_without_a_push_leaves_everything_tracked_and_the_repository_free(
    live: Repo, cli, server
):
    with_items(live, cli, items_jsonl(200))
    result = cli(live, "run", "--no-push")
    assert result.code == 0, result.err
    assert runs.untracked_data(live) == []
    assert runs.journal_phase(live) is None
    again = cli(live, "run", "--no-push")  # the lock is free, the DVC child gone
    assert again.code == 0, again.err
    assert "Nothing to run" in again.out


CLOSING = [m for m in runs.MOMENTS if m.name in ("closing step begins", "journal closed (pushing)")]


@pytest.mark.parametrize("moment", CLOSING, ids=[m.name for m in CLOSING])
def test_a_run_without_a_push_killed_while_closing_is_completed_by_the_next(
    live: Repo, cli, server, moment: runs.Moment
):
    with_items(live, cli, items_jsonl(200))
    runs.signal_at(live, server, moment, signal.SIGKILL, "--no-push")
    bought = server.count()
    resumed = cli(live, "run", "--no-push")
    assert resumed.code == 0, resumed.err
    assert server.count() == bought  # every response kept, none bought again
    assert runs.untracked_data(live) == []
    assert runs.journal_phase(live) is None
    assert json.loads(live.read(MINI + ".json"))["totals"]["samples"] == 200


def test_grading_as_responses_arrive_reads_each_item_a_bounded_number_of_times(
    live: Repo, cli, server: LLMServer, monkeypatch: pytest.MonkeyPatch
):
    # Items are read back from the eval set's file; grading each response as it arrives
    # must not read a block of items again for every response (3,000 responses once read
    # over four million items).
    from evalreg.evalsets import evalset
    from evalreg.evalsets.evalset import FileItems

    with_items(live, cli, items_jsonl(3000))
    # As in a command of its own: not the eval set `evalset add` parsed in this process.
    monkeypatch.setattr(evalset, "_RECENT", [])
    read = FileItems._read
    parsed: list[int] = []

    def counted(self: FileItems, start: int, stop: int) -> list:
        items = read(self, start, stop)
        parsed.append(len(items))
        return items

    monkeypatch.setattr(FileItems, "_read", counted)
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert server.count() == 3000
    # Two cells of 3,000 items: each cell reads its items in a few passes (loading,
    # keying, grading), never a block of them again for each response.
    assert 0 < sum(parsed) <= 12 * 3000


def test_a_column_of_keys_is_split_in_shards_as_each_key_is() -> None:
    import hashlib

    from evalreg.runner.planning import key_in_shard, keys_in_shard
    from evalreg.store.keycolumn import KeyColumn

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(500)]
    keys.append("f" * 64)  # the largest leading number there is
    for shard in ((1, 1), (1, 3), (2, 3), (3, 3), (5, 7), (1000, 1000)):
        mask = keys_in_shard(KeyColumn(keys), shard)
        assert mask.tolist() == [key_in_shard(k, shard) for k in keys]


def test_the_keys_between_positions_left_out_are_the_others_in_order() -> None:
    import hashlib

    from evalreg.runner.planning import _others
    from evalreg.store.keycolumn import KeyColumn

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(6)]
    column = KeyColumn(keys)
    for left_out in ([], [0], [5], [0, 2, 3], [1, 4], list(range(6)), range(6)):
        assert list(_others(column, left_out)) == [
            k for i, k in enumerate(keys) if i not in left_out
        ]
