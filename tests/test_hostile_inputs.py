"""Hostile input reaching the commands that run, report and compare: each stops with a
clear message and exit 2 before anything is bought or written; a hostile response is one
request's error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evalreg.store.segments import ResponseStore

from conftest import Repo, assert_refused, items_jsonl

EVALSET = "evalsets/messages.jsonl"
DEEP = '{"id": "deep", "input": {"text": "x", "a": %s}}\n' % ("[" * 10_000 + "]" * 10_000)
DEEP_FINDING = f"{EVALSET}:5:142: objects and lists nested more than 100 levels deep"


@pytest.mark.parametrize(
    "command",
    [
        ("run",),
        ("run", "--dry-run"),
        ("status",),
        ("report",),
        ("diff", "HEAD"),
        ("evalset", "stats"),
    ],
)
def test_a_deeply_nested_item_stops_every_command_that_loads_the_registry(
    live: Repo, cli, server, command
):
    live.write(EVALSET, items_jsonl() + DEEP)
    assert_refused(live, cli, *command, expect=(DEEP_FINDING,))
    assert server.count() == 0


def test_the_command_line_program_refuses_it_without_a_traceback(live: Repo, server):
    live.write(EVALSET, items_jsonl() + DEEP)
    before = live.snapshot()
    proc = subprocess.run(
        [sys.executable, "-m", "evalreg", "-C", str(live.root), "run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert DEEP_FINDING in proc.stderr
    assert live.snapshot() == before
    assert server.count() == 0


def test_a_lone_surrogate_never_reaches_a_request(live: Repo, cli, server):
    live.write(EVALSET, items_jsonl() + '{"id": "s", "input": {"text": "\\udfff"}}\n')
    assert_refused(live, cli, "run", expect=(f"{EVALSET}:5:32: \\udfff is half of",))
    assert server.count() == 0


def test_a_prompt_that_cannot_render_stops_the_run_before_anything_is_bought(
    live: Repo, cli, server
):
    text = live.read("registry/tasks/labels.yaml")
    live.write(
        "registry/tasks/labels.yaml",
        text.replace('"Message: {{ text }}"', "\"{{ text }}{{ '!' * 10**9 }}\""),
    )
    live.commit("a template that cannot render")
    assert_refused(
        live,
        cli,
        "run",
        expect=(
            "evalreg: error: cell labels/mini, item 'm-000': the prompt template cannot be "
            "rendered: a repeated value would be 1,000,000,000 characters long",
            "`evalreg check` shows the template and the item",
        ),
    )
    assert server.count() == 0


def test_a_response_over_the_pins_bound_is_that_requests_error_and_never_stored(
    live: Repo, cli, server
):
    server.responder = lambda request: (
        "x" * 20_000 if request.body["messages"][-1]["content"].endswith("2") else '{"label":"b"}'
    )
    pin = live.read("registry/models/mini.yaml")
    live.write("registry/models/mini.yaml", pin + "limits:\n  max_response_bytes: 8192\n")
    live.commit("a tight response bound")
    result = cli(live, "run", "--candidate", "mini")
    assert result.code == 1, result.err
    assert "too_large 1" in result.out
    assert (
        "labels/mini/m-002#0: too_large: the response body is longer than 8,192 bytes "
        "(the pin's limits.max_response_bytes); not stored"
    ) in result.err
    assert server.count() == 4  # not retried
    store = ResponseStore.open(live.root)
    assert len(store) == 3
    summary = json.loads(live.read("reports/results/labels/mini.json"))
    assert summary["totals"]["errors"] == 1


SUMMARY = "reports/results/labels/rules.json"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            '{"fingerprint": ',
            f"{SUMMARY}:1:17: not a results summary (invalid JSON: Expecting value)",
        ),
        ("[1, 2]\n", f"{SUMMARY}: not a results summary (expected a JSON object)"),
        (
            '{"items_file": null}\n',
            f"{SUMMARY}: not a results summary ('items_file' is not a dict)",
        ),
        ("[" * 100_000, f"{SUMMARY}:1:513: not a results summary (invalid JSON: nested more"),
    ],
)
@pytest.mark.parametrize("command", [("check",), ("status",), ("report",), ("run", "--offline")])
def test_a_damaged_results_summary_is_named_by_every_command(
    live: Repo, cli, command, content, problem
):
    assert cli(live, "run", "--candidate", "rules").code == 0
    live.commit("results")
    live.write(SUMMARY, content)
    assert_refused(live, cli, *command, expect=(problem, f"`git checkout -- {SUMMARY}`"))


def test_reproduce_names_a_damaged_per_item_record(live: Repo, cli):
    assert cli(live, "run", "--candidate", "rules").code == 0
    items = "reports/results/labels/rules.items.jsonl"
    lines = (live.root / items).read_text().splitlines(keepends=True)
    (live.root / items).write_text(lines[0] + '["not", "a", "record"]\n' + "".join(lines[2:]))
    live.git("rm", "-q", "--cached", items + ".dvc")
    live.git("add", "-f", items)  # committed as it is, damaged
    live.commit("damaged records")
    assert_refused(
        live, cli, "reproduce", "HEAD", expect=(f"{items}:2: not a per-item record (TypeError",)
    )


@pytest.mark.parametrize(
    "pointer",
    [
        "outs:\n- md5: ../../../../etc/passwd\n  path: messages.jsonl\n",
        "outs:\n- md5: " + "[" * 5000 + "\n",
    ],
)
def test_a_pointer_whose_md5_names_no_cache_file_is_refused(live: Repo, cli, pointer):
    live.write(f"{EVALSET}.dvc", pointer)
    assert_refused(
        live, cli, "check", expect=(f"{EVALSET}.dvc: not a single-file DVC pointer with an md5",)
    )
