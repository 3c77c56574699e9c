"""``provider: http``: a team's own JSON service, reached through ``evalreg run`` over a real
loopback socket. The service is not a model API: its request and answer are the team's."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalreg.compare.drift import drift
from evalreg.registry.loader import load_registry

from conftest import Repo, assert_refused
from support import runs
from support.leaks import leaks
from support.runs import stored_records as stored
from support.team_service import Answer, Received, TeamService, answer_json

KEY = "svc-loopback-key-7d1f0c2b9e"
PIN = "registry/models/mini.yaml"


def label(received: Received) -> Answer:
    """The FAQ service: reads the question, answers with the label JSON the task expects."""
    question = received.body["question"]
    data = {"label": "a" if question.endswith(("1", "3", "5")) else "b"}
    return answer_json(
        {"answer": {"text": json.dumps(data), "sources": ["kb/42"]}, "meta": {"ms": 3}}
    )


def http_pin(url: str, *, version: str = "2026.11.3", extra: str = "") -> str:
    return f"""\
schema_version: 1
provider: http
url: {url}/answer
version: "{version}"
headers:
  X-Service-Key: {{env: FAQ_SERVICE_KEY}}
  Accept-Language: en
body:
  question: "{{{{ messages[-1].content }}}}"
  history: "{{{{ messages }}}}"
  item_id_like: "q-{{{{ text | replace(' ', '-') }}}}"
  options: {{top_k: 3, rerank: true}}
output_path: answer.text
price:
  per_call: 0.002
  as_of: 2026-11-01
limits:
  max_retries: 2
{extra}"""


@pytest.fixture
def service() -> Iterator[TeamService]:
    with TeamService(label, key=KEY) as srv:
        yield srv


@pytest.fixture
def on_service(live: Repo, service: TeamService, monkeypatch) -> Repo:
    monkeypatch.setenv("FAQ_SERVICE_KEY", KEY)
    live.write(PIN, http_pin(service.url))
    live.commit("mini is our FAQ service")
    return live


def files_holding(root: Path, secret: str) -> list[str]:
    """The files under ``root`` holding ``secret`` in any form a key leaks in (raw,
    JSON-escaped, percent-encoded, base64)."""
    written = ((str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    return sorted({where for where, _, _ in leaks(written, [secret])})


def test_run_sends_the_rendered_body_and_reads_the_output_path(on_service: Repo, cli, service):
    result = cli(on_service, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len(service.received) == 4
    first = service.received[0]
    assert (first.method, first.path) == ("POST", "/answer")
    assert first.headers["x-service-key"] == KEY
    assert first.headers["accept-language"] == "en"
    assert first.headers["content-type"] == "application/json"
    question = first.body["question"]
    assert question.startswith("Message: message ")
    # one expression keeps its JSON type: the messages are a list, not their text
    assert first.body == {
        "question": question,
        "history": [
            {"role": "system", "content": "Answer with JSON."},
            {"role": "user", "content": question},
        ],
        "item_id_like": "q-" + question.removeprefix("Message: ").replace(" ", "-"),
        "options": {"top_k": 3, "rerank": True},
    }
    records = stored(on_service)
    assert len(records) == 4
    assert {r["provider"] for r in records} == {"http"}
    # the stored request is the exact body sent; the output is what output_path found
    canonical = [json.dumps(r["request"], sort_keys=True, separators=(",", ":")) for r in records]
    assert {c.encode() for c in canonical} == {r.raw for r in service.received}
    assert all(json.loads(r["response"]["text"])["label"] in "ab" for r in records)
    assert not files_holding(on_service.root, KEY)
    # graded as any model's answers: every item's label is right
    items = (on_service.root / "reports/results/labels/mini.items.jsonl").read_text()
    assert [json.loads(row)["level"] for row in items.splitlines()] == ["correct"] * 4


def test_show_prints_the_body_the_service_was_sent(on_service: Repo, cli, service):
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    shown = cli(on_service, "show", "m-001", "--candidate", "mini")
    assert shown.code == 0, shown.err
    assert "body sent to the service:" in shown.out
    assert '"question": "Message: message 1"' in shown.out and '"top_k": 3' in shown.out
    [view] = json.loads(cli(on_service, "show", "m-001", "--candidate", "mini", "--json").out)
    (candidate,) = view["candidates"]
    (sent,) = [r.body for r in service.received if r.body["question"].endswith("message 1")]
    assert candidate["body"] == sent  # the exact body, as stored


def test_a_replay_sends_nothing_and_a_new_version_buys_again(on_service: Repo, cli, service):
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    assert len(service.received) == 4  # stored: nothing sent again
    on_service.write(PIN, http_pin(service.url, version="2026.12.1"))
    on_service.commit("the service was redeployed")
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    assert len(service.received) == 8  # a changed pin, not a cache hit
    keys = {r["key"] for r in stored(on_service)}
    assert len(keys) == 8


def test_reproduce_replays_the_service_and_drift_finds_a_change_under_one_version(
    on_service: Repo, cli, service
):
    assert cli(on_service, "run", "--no-push").code == 0
    on_service.commit("results")
    result = cli(on_service, "reproduce", "HEAD")
    assert result.code == 0, result.out + result.err
    assert len(service.received) == 4  # replayed from the store

    def one_label_wrong(received: Received) -> Answer:
        if received.body["question"].endswith("2"):
            return answer_json({"answer": {"text": json.dumps({"label": "z"})}})
        return label(received)

    service.answer = one_label_wrong  # redeployed without a new version
    cell = next(c for c in drift(on_service.root).cells if c.cell == "labels/mini")
    assert (cell.compared, cell.same_level, cell.drifted) == (4, 3, True)
    assert len(service.received) == 8


def test_the_key_is_the_request_not_the_secret(on_service: Repo, cli, service, monkeypatch):
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    # another key to the same service: the same requests, already stored
    monkeypatch.setenv("FAQ_SERVICE_KEY", "svc-another-key-000111222")
    service.key = "svc-another-key-000111222"
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    assert len(service.received) == 4


def test_a_service_that_echoes_its_key_is_stored_redacted(on_service: Repo, cli, service):
    def echo(received: Received) -> Answer:
        got = received.headers["x-service-key"]
        return answer_json({"answer": {"text": json.dumps({"label": "a", "key": got})}})

    service.answer = echo
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    texts = [r["response"]["text"] for r in stored(on_service)]
    assert all("[redacted]" in t for t in texts)
    assert not files_holding(on_service.root, KEY)


def test_retries_a_server_error_and_stops_the_pin_on_a_bad_key(on_service: Repo, cli, service):
    service.fail_next(503, {"detail": "warming up"})
    assert cli(on_service, "run", "--candidate", "mini").code == 0
    assert len(service.received) == 5
    # a wrong key: the first request is the preflight, and the rest are not sent
    on_service.write(PIN, http_pin(service.url, version="2"))
    on_service.commit("v2")
    service.key = "another"
    result = cli(on_service, "run", "--candidate", "mini")
    assert result.code != 0
    assert len(service.received) == 6
    assert "401" in result.out + result.err
    assert KEY not in result.out + result.err


def test_an_answer_without_the_output_path_is_an_error_never_stored(on_service: Repo, cli, service):
    service.answer = lambda received: answer_json({"result": "moved"})
    result = cli(on_service, "run", "--candidate", "mini")
    assert result.code != 0
    assert "output_path 'answer.text' finds nothing in the answer" in result.out + result.err
    assert stored(on_service) == []


def test_without_output_path_the_whole_answer_is_the_output(live: Repo, cli, monkeypatch):
    def plain(received: Received) -> Answer:
        return Answer(200, b'{"label": "b"}\n', "text/plain; charset=utf-8")

    with TeamService(plain) as service:
        pin = http_pin(service.url).replace("output_path: answer.text\n", "")
        pin = pin.replace("  X-Service-Key: {env: FAQ_SERVICE_KEY}\n", "")
        live.write(PIN, pin + "method: PUT\n")
        live.commit("plain answers, PUT")
        assert cli(live, "run", "--candidate", "mini").code == 0
        assert {r.method for r in service.received} == {"PUT"}
    assert {r["response"]["text"] for r in stored(live)} == {'{"label": "b"}\n'}


def test_check_renders_every_items_body(on_service: Repo, cli, service):
    pin = http_pin(service.url).replace("{{ messages }}", "{{ item.history }}")
    on_service.write(PIN, pin)
    on_service.commit("history from a field the items lack")
    result = cli(on_service, "check")
    assert result.code != 0
    assert (
        "evalsets/messages.jsonl:1: item 'm-000': the request body of "
        "registry/models/mini.yaml cannot be rendered for it"
    ) in result.out + result.err
    assert "body.history: 'dict object' has no attribute 'history'" in result.out + result.err
    run = cli(on_service, "run", "--candidate", "mini")
    assert run.code != 0 and service.received == []


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (
            ("  X-Service-Key: {env: FAQ_SERVICE_KEY}", f"  X-Service-Key: {KEY}"),
            "registry/models/mini.yaml:6:18: headers.X-Service-Key: names a credential",
        ),
        (('version: "2026.11.3"\n', ""), "an 'http' pin needs 'version'"),
        (("output_path: answer.text", "output_path: answer[?"), "is not a JMESPath expression"),
        (("{{ messages }}", "{{ messages "), "body.history: is not a valid template"),
        (("provider: http", "provider: http\nmodel: faq"), "an 'http' pin takes no 'model'"),
        (("{top_k: 3, rerank: true}", "{1: 3}"), "is not JSON: the key 1 is not text"),
        (("{top_k: 3, rerank: true}", "{top_k: .nan}"), "12:20: '.nan' is not a finite number"),
    ],
)
def test_a_bad_http_pin_is_refused_where_it_is_wrong(
    on_service: Repo, cli, service, change: tuple[str, str], expect: str
):
    on_service.write(PIN, http_pin(service.url).replace(*change))
    err = assert_refused(on_service, cli, "check", expect=(expect,))
    assert KEY not in err


def test_a_secret_header_over_plain_http_to_another_host_is_refused(live: Repo, cli):
    live.write(PIN, http_pin("http://faq.internal.example"))
    assert_refused(
        live,
        cli,
        "check",
        expect=("would travel in clear text to faq.internal.example", "allow_insecure_http"),
    )
    live.write(PIN, http_pin("http://faq.internal.example", extra="allow_insecure_http: true\n"))
    registry = load_registry(live.root)
    assert registry.pins["mini"].cleartext_host() == "faq.internal.example"


def test_a_task_with_tools_cannot_run_on_an_http_pin(on_service: Repo, cli, service):
    task = on_service.read("registry/tasks/labels.yaml")
    tools = "tools:\n  - name: lookup\n    parameters: {type: object}\n"
    on_service.write("registry/tasks/labels.yaml", task + tools)
    on_service.commit("the task gains a tool")
    result = cli(on_service, "check")
    assert result.code != 0
    assert (
        "registry/tasks/labels.yaml: labels/mini: an 'http' pin (registry/models/mini.yaml) "
        "cannot run a task with tools"
    ) in result.err
    assert cli(on_service, "run", "--candidate", "mini").code != 0
    assert service.received == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["KILL", "INT"])
def test_a_run_signalled_mid_purchase_resumes_without_buying_anything_twice(
    on_service: Repo, cli, service, signum: int
):
    release = threading.Event()

    def held(received: Received) -> Answer:
        if len(service.received) > 2:  # answers the first two, then holds the rest
            release.wait(30)
        return label(received)

    service.answer = held
    proc = runs.start(on_service, "run", "--candidate", "mini", "--no-push")
    try:
        # the moment: two answers stored, the third request held at the service
        caught = runs.wait_until(
            proc, lambda: len(service.received) > 2 and len(runs.stored_keys(on_service)) == 2
        )
        assert caught, proc.communicate()
        os.killpg(proc.pid, signum)
        proc.wait(60)
    finally:
        release.set()
        runs.wait_group_gone(proc.pid)
    kept = {r["key"]: r["request"] for r in stored(on_service)}
    assert len(kept) == 2
    service.answer = label
    result = cli(on_service, "run", "--candidate", "mini", "--no-push")
    assert result.code == 0, result.out + result.err
    sent = [r.raw for r in service.received]
    for request in kept.values():
        body = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
        assert sent.count(body) == 1  # stored before the signal: never bought again
    assert len({r["key"] for r in stored(on_service)}) == 4


def test_two_runs_started_together_ask_the_service_once_per_item(on_service: Repo, cli, service):
    release = threading.Event()

    def held(received: Received) -> Answer:
        release.wait(30)  # the first run holds its lock until the other has been refused
        return label(received)

    service.answer = held
    procs = [runs.start(on_service, "run", "--candidate", "mini", "--no-push") for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting for an observed event: one process ended
    finally:
        release.set()
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes  # the second refused
    refused = next(err for code, err in outcomes if code == 2)
    assert "another evalreg process is writing" in refused and "Traceback" not in refused
    assert cli(on_service, "run", "--candidate", "mini", "--no-push").code == 0
    sent = [r.raw for r in service.received]
    assert len(sent) == len(set(sent)) == 4  # nothing asked twice, nothing lost
    assert len({r["key"] for r in stored(on_service)}) == 4
