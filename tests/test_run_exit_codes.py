"""``evalreg run`` exit codes: never success for work that did not happen."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from test_judges_human import judged

from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS

from conftest import LIVE_KEY, Repo, label_of
from support import runs
from support.llm_server import LLMServer

judged = judged  # the fixture: a judge pin and a judged criterion
RULES = "reports/results/labels/rules.json"
MINI = "reports/results/labels/mini.json"


def test_limit_with_failed_requests_exits_1(live: Repo, cli, server):
    server.fail_matching('"Message: message 2"', "401")
    result = cli(live, "run", "--candidate", "mini", "--limit", "4")
    assert result.code == 1, result.out
    assert "auth" in result.out


def test_a_limited_run_that_bought_nothing_does_not_say_it_did(live: Repo, cli, server):
    server.fail_matching("gpt-4o-mini", "501")  # an endpoint that does not do chat completions
    result = cli(live, "run", "--limit", "3")
    assert result.code == 1
    assert server.count() == 1
    rows = {line.split()[0]: line for line in result.out.splitlines() if line[:1].isalpha()}
    assert "incomplete (3 responses missing: refused, server); no results written" in rows["mini"]
    assert "every response stored; results are written by a run without" in rows["rules"]
    assert "bought;" not in result.out


def test_shard_with_failed_requests_exits_1(live: Repo, cli, server):
    server.fail_matching('"Message: message 2"', "401")
    assert cli(live, "run", "--candidate", "mini", "--shard", "1/1").code == 1


def test_a_named_cell_whose_key_is_unset_fails_naming_the_variable(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    result = cli(live, "run", "--candidate", "mini")
    assert result.code == 1
    assert "labels/mini cannot run: OPENAI_API_KEY is not set" in result.err


def test_an_online_run_that_leaves_a_cell_pending_for_its_key_fails_naming_it(
    live: Repo, cli, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY")
    result = cli(live, "run")
    assert result.code == 1
    assert "labels/mini cannot run: OPENAI_API_KEY is not set" in result.err
    assert "--allow-pending" in result.err  # what a job that means it can say
    # The cells that can run still do.
    assert (live.root / RULES).is_file()
    assert not (live.root / MINI).exists()


def test_allow_pending_leaves_a_cell_without_its_key_pending(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    result = cli(live, "run", "--allow-pending")
    assert result.code == 0, result.err
    assert "pending: OPENAI_API_KEY is not set" in result.out
    assert (live.root / RULES).is_file()
    # A cell named on the command line is asked for all the same.
    named = cli(live, "run", "--allow-pending", "--candidate", "mini")
    assert named.code == 1
    assert "labels/mini cannot run: OPENAI_API_KEY is not set" in named.err


def test_a_cell_left_out_by_candidate_or_task_does_not_fail_the_run(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    assert cli(live, "run", "--candidate", "rules").code == 0
    assert cli(live, "run", "--task", "labels").code == 1  # the task holds mini too


def test_offline_buys_nothing_so_a_pending_cell_fails_only_strict(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    assert cli(live, "run", "--candidate", "rules").code == 0
    offline = cli(live, "run", "--offline")
    assert offline.code == 0, offline.err
    assert "never run, and --offline buys nothing" in offline.out
    strict = cli(live, "run", "--offline", "--strict")
    assert strict.code == 1
    assert "labels/mini cannot run: never run, and --offline buys nothing" in strict.err


def test_strict_fails_for_a_pending_cell_and_cannot_allow_it(live: Repo, cli, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY")
    strict = cli(live, "run", "--strict")
    assert strict.code == 1
    assert "labels/mini cannot run: OPENAI_API_KEY is not set" in strict.err
    with pytest.raises(SystemExit) as exited:
        cli(live, "run", "--strict", "--allow-pending")
    assert exited.value.code == 2
    assert "not allowed with argument --strict" in capsys.readouterr().err


def test_a_dry_run_shows_a_pending_cell_without_failing(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    result = cli(live, "run", "--dry-run")
    assert result.code == 0, result.err
    assert "OPENAI_API_KEY is not set" in result.out


def _judge_key(judged: Repo, variable: str = "JUDGE_KEY") -> None:
    pin = judged.read("registry/models/judge.yaml")
    judged.write("registry/models/judge.yaml", pin.replace("OPENAI_API_KEY", variable))
    judged.commit("the judge has a key of its own")


def test_a_cell_whose_judge_key_is_unset_is_not_bought_and_fails_naming_it(
    judged: Repo, cli, server, monkeypatch
):
    _judge_key(judged)
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    result = cli(judged, "run")
    assert result.code == 1
    for cell in ("labels/mini", "labels/rules"):
        assert f"{cell} cannot run: JUDGE_KEY is not set (judge pin judge)" in result.err
    assert server.count() == 0  # nothing bought that could not be graded
    assert "Traceback" not in result.err
    allowed = cli(judged, "run", "--allow-pending")
    assert allowed.code == 0, allowed.err
    assert "pending: JUDGE_KEY is not set (judge pin judge)" in allowed.out


def test_stored_responses_whose_judge_key_is_unset_leave_the_cell_as_it_was(
    judged: Repo, cli, server, monkeypatch
):
    server.responder = _judge_always
    _judge_key(judged)
    monkeypatch.setenv("JUDGE_KEY", LIVE_KEY)
    assert cli(judged, "run", "--candidate", "rules").code == 0
    judged.commit("results")
    summary = judged.read(RULES)
    # A new judge prompt: the responses are stored, the judge's verdicts on them are not.
    rubric = judged.read("registry/rubrics/labels.yaml")
    judged.write(
        "registry/rubrics/labels.yaml", rubric.replace("Criterion:", "Be strict. Criterion:")
    )
    judged.commit("a stricter judge prompt")
    monkeypatch.delenv("JUDGE_KEY")
    sent = server.count()
    result = cli(judged, "run", "--candidate", "rules")
    assert result.code == 1
    assert "labels/rules cannot run: JUDGE_KEY is not set (judge pin judge)" in result.err
    assert "Traceback" not in result.err
    assert server.count() == sent
    assert judged.read(RULES) == summary


def _judge_always(request) -> str:
    if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
        return json.dumps({"score": 0.9, "reason": "ok"})
    return label_of(request)


@pytest.fixture
def hangup_port() -> Iterator[tuple[int, list[int]]]:
    """A port that accepts each connection and closes it at once; counts the connections."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], accepted
    stop.set()
    thread.join()
    listener.close()


def _point_at(live: Repo, base_url: str) -> None:
    pin = re.sub(r"base_url: .*", f"base_url: {base_url}", live.read("registry/models/mini.yaml"))
    live.write("registry/models/mini.yaml", pin + "limits:\n  max_retries: 1\n")


def test_a_dead_endpoint_stops_its_pin_after_five_connection_failures(live: Repo, cli, hangup_port):
    port, accepted = hangup_port
    _point_at(live, f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    result = cli(live, "run", "--candidate", "mini")
    print(f"dead endpoint: {time.monotonic() - started:.2f}s")
    assert result.code == 1
    # Four items, two attempts each, would be eight connections. The four first attempts
    # fail together; the first retry is the fifth failure and opens the breaker, so the
    # other three requests are not retried.
    assert len(accepted) == 5
    assert "errors: connection 1, unreachable 3" in result.out
    line = f"pin mini: cannot connect to http://127.0.0.1:{port}/v1/chat/completions"
    assert result.err.count(line) == 1, result.err
    assert "is the server running?" in result.err


def test_a_closed_port_is_reported_unreachable(live: Repo, cli):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    _point_at(live, f"http://127.0.0.1:{port}/v1")
    result = cli(live, "run", "--candidate", "mini")
    assert result.code == 1
    assert "errors: connection 1, unreachable 3" in result.out
    assert "is the server running?" in result.err


def test_ctrl_c_says_what_was_kept_and_how_to_resume(repo: Repo):
    with LLMServer(api_key=runs.KEY, responder=runs.label_of) as server:
        registry = runs.live_registry(repo, server, items=200, pins=1)
        # 40 responses bought, the rest held until Ctrl-C has been sent: the run is still
        # fetching when it lands.
        with server.hold(after=40) as held:
            process = runs.start(registry, "run", "--no-push")
            assert runs.wait_until(process, lambda: held.waiting > 0), process.communicate()
            process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, err
    kept = len(runs.stored_keys(registry))
    assert kept > 0
    assert f"interrupted: {kept} responses bought by this run are kept" in err
    assert f"Resume with `evalreg -C {registry.root} run --no-push`" in err
