"""``evalreg run`` and ``check`` exit codes: never success for work that did not happen."""

from __future__ import annotations

import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Repo
from support import runs
from support.llm_server import LLMServer


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


def test_unattended_pending_cells_stay_pending_unless_strict(live: Repo, cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    result = cli(live, "run")
    assert result.code == 0, result.err
    assert "OPENAI_API_KEY is not set" in result.out
    strict = cli(live, "run", "--strict")
    assert strict.code == 1
    assert "labels/mini cannot run: OPENAI_API_KEY is not set" in strict.err


def test_check_outside_a_registry_exits_2(tmp_path: Path, cli, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli(empty, "check")
    assert result.code == 2
    assert "not an evalreg registry" in result.err and "Traceback" not in result.err
    monkeypatch.chdir(empty)
    assert "not an evalreg registry" in cli(None, "check").err


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
    with LLMServer(api_key=runs.KEY, responder=runs.label_of, latency=0.05) as server:
        registry = runs.live_registry(repo, server, items=200, pins=1)
        process = runs.start(registry, "run", "--no-push")
        deadline = time.monotonic() + 60
        while server.count() < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, err
    kept = len(runs.stored_keys(registry))
    assert kept > 0
    assert f"interrupted: {kept} responses bought by this run are kept" in err
    assert f"Resume with `evalreg -C {registry.root} run --no-push`" in err
