"""Providers, the shared HTTP layer and the response store, against a real loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from evalreg.providers import get_provider
from evalreg.providers.fetch import fetch, make_job
from evalreg.providers.http import Backoff, HttpLayer
from evalreg.registry.schema import Pin
from evalreg.registry.tree import GitTree
from evalreg.store.segments import (
    STORE_DIR,
    Prefetch,
    ResponseStore,
    SegmentKeys,
    SegmentWriter,
    encode_record,
    keepable,
    lookup,
    request_key,
)

from conftest import Repo
from support.llm_server import LLMServer


def track_segments(root: Path) -> list[str]:
    """Give every segment on disk without a pointer its own (torn tails repaired first),
    as a run does for the segment it wrote."""
    from evalreg import dvcrepo

    store = root / STORE_DIR
    untracked = sorted(
        f"{STORE_DIR}/{p.name}"
        for p in store.glob("*.jsonl")
        if not p.with_name(p.name + ".dvc").exists()
    )
    paths = keepable(root, untracked)
    if paths:
        dvcrepo.track(root, paths, push=False)
    return paths


KEY = "sk-test-SECRET-7f3a9c1e5b"
HERE = Path(__file__).parent


def pin(provider: str, base_url: str, **limits: object) -> Pin:
    data: dict[str, object] = {
        "schema_version": 1,
        "provider": provider,
        "model": "snapshot-2026-01-01",
        "base_url": base_url,
        "api_key_env": "EVALREG_TEST_KEY",
        "params": {"temperature": 0, "max_tokens": 50},
        "limits": {"concurrency": 8, "timeout_s": 5, "max_retries": 4, **limits},
    }
    return Pin.model_validate(data)


def jobs_for(p: Pin, n: int, *, name: str = "p", offset: int = 0) -> list:
    provider = get_provider(p.provider)
    return [
        make_job(
            name,
            p,
            provider,
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"item {i}"}],
            None,
            0,
            f"item-{i}",
        )
        for i in range(offset, offset + n)
    ]


def run_fetch(root: Path, jobs: list, **kwargs: object):
    async def go():
        store = ResponseStore.open(root)
        async with HttpLayer(backoff=Backoff(initial=0.01, maximum=0.05)) as http:
            with SegmentWriter(root) as writer:
                report = await fetch(jobs, store, writer, http, **kwargs)
        return report, store

    return asyncio.run(go())


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALREG_TEST_KEY", KEY)


@pytest.fixture
def server():
    with LLMServer(api_key=KEY) as srv:
        yield srv


def test_openai_responses_are_stored_once_and_never_bought_again(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    report, _ = run_fetch(tmp_path, jobs_for(p, 20))
    assert (report.fetched, report.cached, report.errors) == (20, 0, [])
    assert server.count() == 20
    request = server.requests[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert request.body["temperature"] == 0

    again, store = run_fetch(tmp_path, jobs_for(p, 20))
    assert (again.fetched, again.cached) == (0, 20)
    assert server.count() == 20
    record = store.get(jobs_for(p, 1)[0].key)
    assert record is not None
    assert record["response"]["model"] == "snapshot-2026-01-01"
    assert record["response"]["system_fingerprint"] == "fp_test01"
    assert record["response"]["usage"]["input_tokens"] > 0
    assert record["created_utc"].endswith("Z")


def test_the_key_hashes_the_exact_bytes_sent(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    job = jobs_for(p, 1)[0]
    run_fetch(tmp_path, [job])
    sent = server.requests[0].raw
    assert request_key("openai", f"{server.base_url}/chat/completions", sent, 0) == job.key


def test_anthropic_messages_api(tmp_path, key_env, server):
    p = pin("anthropic", server.root_url)
    report, store = run_fetch(tmp_path, jobs_for(p, 3))
    assert report.fetched == 3, report.errors
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["system"] == "Be brief."
    assert [m["role"] for m in request.body["messages"]] == ["user"]
    record = store.get(jobs_for(p, 1)[0].key)
    assert record["response"]["usage"]["output_tokens"] > 0


def test_conversation_items_run_like_single_turn(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    turns = [
        {"role": "user", "content": "my order is late"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "#4411"},
    ]
    job = make_job("p", p, get_provider("openai"), turns, None, 0, "conv")
    report, _ = run_fetch(tmp_path, [job])
    assert report.fetched == 1
    assert server.requests[0].body["messages"] == turns


@pytest.mark.parametrize(
    "fault", ["429", "500", "502", "503", "529", "reset", "malformed", "missing_fields"]
)
def test_transient_faults_are_retried_until_stored(tmp_path, key_env, server, fault):
    p = pin("openai", server.base_url)
    server.fail_next(fault, times=3)
    report, store = run_fetch(tmp_path, jobs_for(p, 5))
    assert report.fetched == 5, report.errors
    assert len(store) == 5
    assert server.count() == 8


def test_timeouts_are_retried(tmp_path, key_env, server):
    p = pin("openai", server.base_url, timeout_s=0.3)
    server.fail_next("timeout", times=1, delay=2.0)
    report, _ = run_fetch(tmp_path, jobs_for(p, 1))
    assert report.fetched == 1, report.errors
    assert server.count() == 2


def test_retry_after_is_honoured(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    server.fail_next("429", times=1, retry_after=0.4)
    started = time.monotonic()
    report, _ = run_fetch(tmp_path, jobs_for(p, 1))
    assert report.fetched == 1
    assert time.monotonic() - started >= 0.4


def test_auth_errors_are_not_retried_and_never_stored(tmp_path, monkeypatch, server):
    monkeypatch.setenv("EVALREG_TEST_KEY", "sk-wrong")
    p = pin("openai", server.base_url)
    report, store = run_fetch(tmp_path, jobs_for(p, 2))
    # The first is refused with 401, not retried; the pin's second is then not sent at all.
    assert [e.kind for e in report.errors] == ["auth", "refused"]
    assert server.count() == 1
    assert len(store) == 0
    assert ResponseStore.open(tmp_path).stats.records == 0


@pytest.mark.parametrize("fault", ["400", "401", "403", "404", "405", "422", "501"])
def test_answers_that_will_not_change_are_never_retried(tmp_path, key_env, server, fault):
    p = pin("openai", server.base_url)  # four retries allowed
    server.fail_matching("item 0", fault)
    report, store = run_fetch(tmp_path, jobs_for(p, 1))
    [error] = report.errors
    assert (error.status, error.attempts) == (int(fault), 1)
    assert server.count() == 1
    assert len(store) == 0


def test_requests_a_refused_pin_does_not_send_spend_nothing_of_the_budget(
    tmp_path, key_env, server
):
    p = pin("openai", server.base_url)
    server.fail_next("501")
    admitted = []

    def admit(job) -> bool:
        admitted.append(job.label)
        return True

    report, _ = run_fetch(tmp_path, jobs_for(p, 5), admit=admit)
    assert [e.kind for e in report.errors] == ["server", *["refused"] * 4]
    assert admitted == ["item-0"]  # the others were refused before their turn came


def test_exhausted_retries_are_errors_and_the_next_run_retries_them(tmp_path, key_env, server):
    p = pin("openai", server.base_url, max_retries=1)
    server.fail_matching('"item 3"', "500")
    report, _ = run_fetch(tmp_path, jobs_for(p, 5))
    assert report.fetched == 4
    assert [(e.label, e.kind, e.status) for e in report.errors] == [("item-3", "server", 500)]
    server.clear_faults()
    before = server.count()
    again, store = run_fetch(tmp_path, jobs_for(p, 5))
    assert (again.fetched, again.cached, again.errors) == (1, 4, [])
    assert server.count() == before + 1
    assert len(store) == 5


def test_random_faults_every_request_ends_stored_or_counted(tmp_path, key_env, server):
    p = pin("openai", server.base_url, max_retries=2, timeout_s=0.5)
    for fault, rate in (
        ("429", 0.1),
        ("500", 0.1),
        ("reset", 0.05),
        ("malformed", 0.05),
        ("missing_fields", 0.05),
    ):
        server.fail_randomly(fault, rate=rate, seed=7)
    jobs = jobs_for(p, 200)
    report, _ = run_fetch(tmp_path, jobs, concurrency=32)
    assert report.fetched + len(report.errors) == 200
    stored = ResponseStore.open(tmp_path)
    assert stored.stats.records == report.fetched
    assert stored.stats.duplicates == 0
    assert {e.key for e in report.errors}.isdisjoint(stored.keys())


def test_identical_requests_in_one_run_are_sent_once(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    job = jobs_for(p, 1)[0]
    report, _ = run_fetch(tmp_path, [job, job, job])
    assert server.count() == 1
    assert report.fetched + report.shared + report.cached == 3


def test_offline_mode_never_calls_and_names_the_item(tmp_path, key_env, server):
    p = pin("openai", server.base_url)
    report, _ = run_fetch(tmp_path, jobs_for(p, 2), offline=True)
    assert server.count() == 0
    assert [(e.kind, e.label) for e in report.errors] == [
        ("offline_miss", "item-0"),
        ("offline_miss", "item-1"),
    ]
    assert "no stored response for item-0" in report.errors[0].message


def test_per_pin_concurrency_is_respected(tmp_path, key_env):
    with LLMServer(api_key=KEY, latency=0.1) as srv:
        p = pin("openai", srv.base_url, concurrency=2)
        started = time.monotonic()
        report, _ = run_fetch(tmp_path, jobs_for(p, 6), concurrency=64)
        elapsed = time.monotonic() - started
    assert report.fetched == 6
    # Six requests of 100 ms, two at a time, cannot finish in under three rounds.
    assert elapsed >= 0.3


def test_python_provider_calls_the_repository_callable(repo: Repo):
    p = Pin.model_validate(
        {"schema_version": 1, "provider": "python", "callable": "registry/systems/rules.py:answer"}
    )
    provider = get_provider("python", repo.root)
    job = make_job("rules", p, provider, [{"role": "user", "content": "x"}], {"text": "x"}, 0, "i")
    report, store = run_fetch(repo.root, [job])
    assert report.fetched == 1
    assert json.loads(store.get(job.key)["response"]["text"]) == {"label": "a"}
    # The callable's source is part of the request: editing the system is a new request.
    repo.write("registry/systems/rules.py", repo.read("registry/systems/rules.py") + "# v2\n")
    changed = make_job(
        "rules",
        p,
        get_provider("python", repo.root),
        [{"role": "user", "content": "x"}],
        {"text": "x"},
        0,
        "i",
    )
    assert changed.key != job.key


def test_python_callable_errors_are_counted_not_stored(repo: Repo):
    repo.write(
        "registry/systems/broken.py", "def answer(request):\n    raise RuntimeError('boom')\n"
    )
    p = Pin.model_validate(
        {"schema_version": 1, "provider": "python", "callable": "registry/systems/broken.py:answer"}
    )
    job = make_job(
        "b", p, get_provider("python", repo.root), [{"role": "user", "content": "x"}], {}, 0, "i"
    )
    report, store = run_fetch(repo.root, [job])
    assert [(e.kind, e.message) for e in report.errors] == [
        ("system", "registry/systems/broken.py:answer raised RuntimeError: boom")
    ]
    assert len(store) == 0


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "def answer(request):\n    raise SystemExit(3)\n",
            "registry/systems/broken.py:answer raised SystemExit: 3",
        ),
        (
            "import sys\nsys.exit(4)\n",
            "importing registry/systems/broken.py raised SystemExit: 4",
        ),
    ],
)
def test_a_callable_that_exits_is_a_system_error_not_the_end_of_the_run(
    repo: Repo, source, message
):
    repo.write("registry/systems/broken.py", source)
    p = Pin.model_validate(
        {"schema_version": 1, "provider": "python", "callable": "registry/systems/broken.py:answer"}
    )
    job = make_job(
        "b", p, get_provider("python", repo.root), [{"role": "user", "content": "x"}], {}, 0, "i"
    )
    report, store = run_fetch(repo.root, [job])
    assert [(e.kind, e.message) for e in report.errors] == [("system", message)]
    assert len(store) == 0


def test_a_torn_last_line_is_dropped_and_repaired(tmp_path):
    directory = tmp_path / STORE_DIR
    directory.mkdir(parents=True)
    good = encode_record("a" * 64, {"response": {"text": "ok"}})
    torn = encode_record("b" * 64, {"response": {"text": "cut"}})[:30]
    (directory / "seg.jsonl").write_bytes(good + torn)
    store = ResponseStore.open(tmp_path)
    assert list(store.keys()) == ["a" * 64]
    assert store.stats.torn == 1


def test_a_record_beside_a_long_run_of_digits_is_read_by_the_fast_parser(tmp_path, monkeypatch):
    """A key of hex digits can hold a run of 19 decimal ones; only its own line is then
    left to ``json``, not every record of its segment."""
    from evalreg.store import segments

    directory = tmp_path / STORE_DIR
    directory.mkdir(parents=True)
    digits, plain = "1234567890" * 6 + "1234", "ab" * 32
    record = {"response": {"text": "ok"}, "latency_ms": 5}
    (directory / "a.jsonl").write_bytes(
        encode_record(digits, record) + encode_record(plain, record)
    )
    store = ResponseStore.open(tmp_path)
    read_by_json: list[bytes] = []
    reference = segments.json.loads

    def counted(data: bytes) -> object:
        read_by_json.append(data)
        return reference(data)

    monkeypatch.setattr(segments.json, "loads", counted)
    assert store.get(plain) is not None and read_by_json == []
    assert store.get(digits) is not None and len(read_by_json) == 1


def test_stored_numbers_read_back_exactly_whatever_the_segment_holds(tmp_path):
    """Segments are searched once for numbers a fast parser would round, and the lines
    holding one are read by ``json``: a record beside one in its segment, the one itself
    and records remembered one by one all read back exactly."""
    directory = tmp_path / STORE_DIR
    directory.mkdir(parents=True)
    big = {"response": {"text": "ok", "usage": {"input_tokens": 2**70}}, "latency_ms": 10**19}
    small = {"response": {"text": "ok", "usage": {"input_tokens": 3}}, "latency_ms": 1.5}
    (directory / "a.jsonl").write_bytes(encode_record("a" * 64, small))
    (directory / "b.jsonl").write_bytes(
        encode_record("b" * 64, small) + encode_record("c" * 64, big)
    )
    store = ResponseStore.open(tmp_path)
    store.remember("d" * 64, encode_record("d" * 64, big))
    segments = sorted(directory.glob("*.jsonl"))
    assert [len(SegmentKeys(path).long_numbers) > 0 for path in segments] == [False, True]
    for key, want in (("a", small), ("b", small), ("c", big), ("d", big)):
        got = store.get(key * 64)
        assert got is not None and got.pop("key") == key * 64
        # json.dumps tells an int from the float a rounding parser would give.
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_segments_get_their_own_dvc_pointer_and_read_back_at_a_revision(
    repo: Repo, key_env, server
):
    from evalreg import dvcrepo

    dvcrepo.init(repo.root, None)
    p = pin("openai", server.base_url)
    run_fetch(repo.root, jobs_for(p, 3))
    run_fetch(repo.root, jobs_for(p, 3, offset=3))
    tracked = track_segments(repo.root)
    assert len(tracked) == 2
    for rel in tracked:
        assert (repo.root / (rel + ".dvc")).is_file()
    rev = repo.commit("responses")
    store = ResponseStore.load(GitTree(repo.root, rev))
    assert len(store) == 6
    assert {j.key for j in jobs_for(p, 6)} == set(store.keys())

    # Scanned ahead from the DVC cache (one scan for a segment both revisions share),
    # the segments answer as the store does at each revision.
    run_fetch(repo.root, jobs_for(p, 2, offset=6))
    track_segments(repo.root)
    later = repo.commit("more responses")
    trees = [GitTree(repo.root, rev), GitTree(repo.root, later)]
    prefetch = Prefetch(trees, repo.root)
    assert len(prefetch.sources) == 3
    first, second = prefetch.result()
    assert (len(first), len(second)) == (2, 3)
    keys = [j.key for j in jobs_for(p, 8)]
    for tree, scanned in zip(trees, (first, second), strict=True):
        full = ResponseStore.load(tree)
        assert lookup(tree, keys, scanned) == {k: full.get(k) for k in keys if k in full}


def test_secrets_never_reach_disk(repo: Repo, key_env, server):
    from evalreg import dvcrepo

    dvcrepo.init(repo.root, None)
    p = pin("openai", server.base_url)
    server.fail_next("500", times=2)
    report, _ = run_fetch(repo.root, jobs_for(p, 5))
    assert report.fetched == 5
    (repo.root / ".evalreg-errors.log").write_text(
        "\n".join(json.dumps(e.as_dict()) for e in report.errors)
    )
    track_segments(repo.root)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    leaks = [
        str(path)
        for path in repo.root.rglob("*")
        if path.is_file() and KEY.encode() in path.read_bytes()
    ]
    assert leaks == []


def test_sigkill_loses_at_most_the_requests_in_flight(repo: Repo, key_env):
    n, concurrency = 400, 16
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE / "support") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    with LLMServer(api_key=KEY) as srv:
        fetch = [
            sys.executable,
            str(HERE / "support" / "fetch_script.py"),
            str(repo.root),
            srv.base_url,
            str(n),
            str(concurrency),
        ]
        # 200 answers, then every response held until the kill: the fetch cannot end first.
        with srv.hold(after=200) as held:
            proc = subprocess.Popen(
                fetch,
                env=env,
            )
            deadline = time.monotonic() + 60
            while held.waiting == 0 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        sent_before_kill = srv.count()
        first = ResponseStore.open(repo.root)
        stored_keys = set(first.keys())
        assert 100 <= len(stored_keys) < n
        # Every request the server answered is stored, but for the ones in flight.
        assert sent_before_kill - len(stored_keys) <= concurrency

        srv.reset()
        done = subprocess.run(
            fetch,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        rebought = [
            r
            for r in srv.requests
            if request_key("openai", f"{srv.base_url}/chat/completions", r.raw, 0) in stored_keys
        ]
        assert rebought == []
        keys = [
            request_key("openai", f"{srv.base_url}/chat/completions", r.raw, 0)
            for r in srv.requests
        ]
        assert srv.count() == n - len(stored_keys), f"{len(keys) - len(set(keys))} sent twice"
    final = ResponseStore.open(repo.root)
    assert len(final) == n
    assert final.stats.duplicates == 0


# ---------------------------------------------------------------- the connection pool
class ScriptedServer:
    """A loopback HTTP/1.1 server that answers each request with the next scripted bytes.

    ``script`` items are raw responses; ``("close", raw)`` answers and then closes the
    connection; ``None`` closes it without answering; ``"silence"`` never answers.
    """

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.connections = 0
        self.requests: list[bytes] = []

    async def __aenter__(self) -> ScriptedServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.script:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.script.pop(0)
                if answer is None:
                    break
                if answer == "silence":
                    await asyncio.sleep(3600)
                close = isinstance(answer, tuple)
                writer.write(answer[1] if close else answer)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def ok(body: bytes = b'{"ok":true}', *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + b"".join(extra)
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def pool_run(script: list, *requests: dict, **pool_options: object):
    """Send ``requests`` (httpx.AsyncClient.post kwargs) one after another through a
    ConnectionPool; return the server and the responses (or the exceptions raised)."""
    from evalreg.providers.http import ConnectionPool

    async def go():
        async with ScriptedServer(script) as srv:
            out = []
            async with httpx.AsyncClient(
                transport=ConnectionPool(**pool_options), timeout=2
            ) as client:
                for kwargs in requests:
                    try:
                        out.append(await client.post(f"{srv.url}/v1/x", **kwargs))
                    except httpx.HTTPError as exc:
                        out.append(exc)
            return srv, out

    return asyncio.run(go())


def test_the_pool_reuses_one_connection_for_sequential_requests():
    srv, out = pool_run([ok(), ok(), ok()], {"content": b"1"}, {"content": b"2"}, {"content": b"3"})
    assert [r.json() for r in out] == [{"ok": True}] * 3
    assert srv.connections == 1


def test_a_chunked_body_with_extensions_and_trailers_is_read_whole():
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b'5;name=x\r\n{"a":\r\n6\r\n [1,2]\r\n1\r\n}\r\n0\r\nx-trailer: 1\r\n\r\n'
    )
    srv, out = pool_run([chunked, ok()], {"content": b"1"}, {"content": b"2"})
    assert out[0].json() == {"a": [1, 2]}
    assert out[1].json() == {"ok": True}
    assert srv.connections == 1


def test_a_body_without_length_is_read_to_the_close_and_the_connection_not_reused():
    srv, out = pool_run(
        [("close", b'HTTP/1.1 200 OK\r\n\r\n{"closed":1}'), ok()],
        {"content": b"1"},
        {"content": b"2"},
    )
    assert out[0].json() == {"closed": 1}
    assert out[1].json() == {"ok": True}
    assert srv.connections == 2


def test_informational_responses_are_skipped():
    _srv, out = pool_run([b"HTTP/1.1 100 Continue\r\n\r\n" + ok()], {"content": b"1"})
    assert out[0].status_code == 200 and out[0].json() == {"ok": True}


def test_connection_close_from_the_server_is_honoured():
    srv, out = pool_run(
        [ok(b"{}", b"connection: close\r\n"), ok()], {"content": b"1"}, {"content": b"2"}
    )
    assert [r.status_code for r in out] == [200, 200]
    assert srv.connections == 2


def test_a_connection_dropped_without_an_answer_is_an_error_and_not_reused():
    srv, out = pool_run([ok(), None, ok()], {"content": b"1"}, {"content": b"2"}, {"content": b"3"})
    assert isinstance(out[1], httpx.RemoteProtocolError)
    assert out[0].status_code == out[2].status_code == 200
    assert srv.connections == 2


def test_a_kept_alive_connection_the_server_closed_while_idle_costs_no_error():
    from evalreg.providers.http import ConnectionPool

    async def go():
        # The first answer says nothing about closing; the server closes right after it.
        async with ScriptedServer([("close", ok()), ok()]) as srv:
            async with httpx.AsyncClient(transport=ConnectionPool(), timeout=2) as client:
                await client.post(f"{srv.url}/a", content=b"1")
                await asyncio.sleep(0.05)  # the FIN reaches the idle connection
                second = await client.post(f"{srv.url}/a", content=b"2")
            return srv, second

    srv, second = asyncio.run(go())
    assert second.status_code == 200
    assert srv.connections == 2


def test_header_injection_is_refused_before_anything_is_sent():
    srv, out = pool_run([ok()], {"content": b"1", "headers": {"x-note": "a\r\nx-evil: 1"}})
    assert isinstance(out[0], httpx.LocalProtocolError)
    assert srv.requests == []


def test_malformed_responses_are_protocol_errors():
    _srv, out = pool_run(
        [
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
            b"garbage\r\n\r\n",
        ],
        {"content": b"1"},
        {"content": b"2"},
    )
    assert [type(e) for e in out] == [httpx.RemoteProtocolError, httpx.RemoteProtocolError]


# Answers read as h11 (httpx's own transport) reads them: the pool's outcome is httpx's.
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
LENIENT_OR_STRICT = {
    "folded header": b"HTTP/1.1 200 OK\r\nx-a: one\r\n  two\r\ncontent-length: 2\r\n\r\n{}",
    "bare LF": b"HTTP/1.1 200 OK\nx-a: lf\ncontent-length: 2\n\n{}",
    "bare LF, then CRLF": b"HTTP/1.1 200 OK\r\nx-a: mixed\ncontent-length: 2\r\n\n{}",
    "a length sent twice in one field": b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\n{}",
    "two lengths": b"HTTP/1.1 200 OK\r\ncontent-length: 2, 3\r\n\r\n{}",
    "chunked, then identity": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: identity\r\n"
        b"\r\n2\r\n{}\r\n0\r\n\r\n"
    ),
    "gzip, chunked": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    ),
    "chunk size 0x2": CHUNKED + b"0x2\r\n{}\r\n0\r\n\r\n",
    "chunk size 0_2": CHUNKED + b"0_2\r\n{}\r\n0\r\n\r\n",
    "chunk size after a space": CHUNKED + b" 2\r\n{}\r\n0\r\n\r\n",
    "NUL in a value": b"HTTP/1.1 200 OK\r\nx-a: a\x00b\r\ncontent-length: 2\r\n\r\n{}",
    "space in a name": b"HTTP/1.1 200 OK\r\nx a: b\r\ncontent-length: 2\r\n\r\n{}",
    "a fold first": b"HTTP/1.1 200 OK\r\n  x-a: b\r\ncontent-length: 2\r\n\r\n{}",
    "control byte in a value": b"HTTP/1.1 200 OK\r\nx-a: a\x01b\r\ncontent-length: 2\r\n\r\n{}",
}


@pytest.mark.parametrize("answer", LENIENT_OR_STRICT.values(), ids=LENIENT_OR_STRICT.keys())
def test_an_answer_is_read_or_refused_as_httpxs_own_transport_does(answer: bytes):
    from evalreg.providers.http import ConnectionPool

    async def outcome(transport: httpx.AsyncBaseTransport) -> tuple:
        async with (
            ScriptedServer([answer]) as srv,
            httpx.AsyncClient(transport=transport, timeout=2) as client,
        ):
            try:
                got = await client.post(f"{srv.url}/v1/x", content=b"1")
            except httpx.HTTPError as exc:
                return ("error", isinstance(exc, httpx.ProtocolError))
            return ("read", got.status_code, got.content, got.headers.get("x-a"))

    ours = asyncio.run(outcome(ConnectionPool()))
    assert ours == asyncio.run(outcome(httpx.AsyncHTTPTransport()))
    if ours[0] == "error":  # a protocol error, never a timeout or a reset
        assert ours[1] is True


def test_a_connection_closed_right_after_its_answer_is_not_reused_for_the_next_request():
    """A server that closes after each answer without saying so: its end has reached this
    side's socket, but the event loop has not yet run to tell the connection."""
    import socket
    import threading

    from evalreg.providers.http import ConnectionPool

    listener = socket.create_server(("127.0.0.1", 0))
    closed = threading.Semaphore(0)
    connections = []

    def serve() -> None:
        for _ in range(3):
            conn, _ = listener.accept()
            connections.append(conn)
            with conn:
                data = b""
                while not data.endswith(b"\r\n\r\n1"):
                    data += conn.recv(65536)
                conn.sendall(ok())
            closed.release()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/x"

    async def go() -> list[int]:
        statuses = []
        async with httpx.AsyncClient(transport=ConnectionPool(), timeout=5) as client:
            for _ in range(3):
                statuses.append((await client.post(url, content=b"1")).status_code)
                # Waited for without running the loop: the close is unseen by it.
                assert closed.acquire(timeout=10)
        return statuses

    try:
        assert asyncio.run(go()) == [200, 200, 200]
    finally:
        listener.close()
        server.join(timeout=10)
    assert len(connections) == 3


@pytest.mark.parametrize(
    "headers",
    [{"x-a:b": "z"}, {"x a": "z"}, {"x-a": " padded"}, {"x-a": "padded\t"}],
    ids=["colon in a name", "space in a name", "value begins with a space", "ends with a tab"],
)
def test_a_header_h11_would_refuse_to_write_is_refused_before_anything_is_sent(headers):
    srv, out = pool_run([ok()], {"content": b"1", "headers": headers})
    assert isinstance(out[0], httpx.LocalProtocolError)
    assert srv.requests == []
    # httpx's own transport refuses it too.
    with pytest.raises(httpx.LocalProtocolError):
        asyncio.run(_through_httpx(headers))


async def _through_httpx(headers: dict[str, str]) -> None:
    async with (
        ScriptedServer([ok()]) as srv,
        httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(), timeout=2) as client,
    ):
        await client.post(f"{srv.url}/v1/x", content=b"1", headers=headers)


def test_a_silent_server_is_a_read_timeout():
    from evalreg.providers.http import ConnectionPool

    async def go():
        async with (
            ScriptedServer(["silence"]) as srv,
            httpx.AsyncClient(transport=ConnectionPool(), timeout=0.2) as client,
        ):
            with pytest.raises(httpx.ReadTimeout):
                await client.post(f"{srv.url}/a", content=b"1")

    asyncio.run(go())


def test_a_refused_connection_is_a_connect_error():
    from evalreg.providers.http import ConnectionPool

    async def go():
        async with httpx.AsyncClient(transport=ConnectionPool(), timeout=2) as client:
            with pytest.raises(httpx.ConnectError):
                await client.post("http://127.0.0.1:9/a", content=b"1")

    asyncio.run(go())


def test_compressed_bodies_are_decoded():
    import gzip

    body = gzip.compress(b'{"zipped":true}')
    _srv, out = pool_run([ok(body, b"content-encoding: gzip\r\n")], {"content": b"1"})
    assert out[0].json() == {"zipped": True}


def bounded(limit: int) -> dict:
    """Request options asking the pool to read at most ``limit`` bytes of the body."""
    from evalreg.providers.http import MAX_BODY_EXTENSION

    return {"content": b"1", "extensions": {MAX_BODY_EXTENSION: limit}}


def test_a_body_declared_longer_than_the_bound_is_refused_unread():
    from evalreg.providers.http import ResponseTooLarge

    # The server declares a gigabyte and sends nothing more: waiting for it would time out
    # (a ``ReadTimeout``, not the refusal).
    srv, out = pool_run(
        [b"HTTP/1.1 200 OK\r\ncontent-length: 1000000000\r\n\r\n{", ok()],
        bounded(4096),
        {"content": b"2"},
    )
    assert isinstance(out[0], ResponseTooLarge)
    assert str(out[0]) == "the response body is longer than 4,096 bytes"
    assert out[1].status_code == 200
    assert srv.connections == 2  # the refused connection is not reused


def test_a_chunked_body_is_refused_at_the_chunk_that_passes_the_bound():
    from evalreg.providers.http import ResponseTooLarge

    chunk = b"800\r\n" + b"x" * 0x800 + b"\r\n"
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunk * 2
    _srv, out = pool_run([chunked + b"fffffffffff\r\n"], bounded(8192))
    assert isinstance(out[0], ResponseTooLarge)


def test_a_body_read_to_the_close_stops_at_the_bound():
    from evalreg.providers.http import ResponseTooLarge

    _srv, out = pool_run([b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 100_000, "silence"], bounded(8192))
    assert isinstance(out[0], ResponseTooLarge)


def test_a_body_within_the_bound_is_read_whole():
    body = json.dumps({"text": "x" * 4000}).encode()
    _srv, out = pool_run([ok(body)], bounded(len(body)))
    assert out[0].json() == {"text": "x" * 4000}


def layer_error(answer: bytes, **limits: int):
    """The ProviderError the HTTP layer raises when the server answers ``answer``."""
    from evalreg.providers.base import Completion, ProviderError
    from evalreg.registry.schema import Limits

    async def go() -> ProviderError:
        async with ScriptedServer([answer]) as srv, HttpLayer() as http:
            with pytest.raises(ProviderError) as caught:
                await http.post(
                    "p",
                    Limits(max_retries=0, **limits),
                    f"{srv.url}/v1/chat/completions",
                    {},
                    b"{}",
                    lambda data: Completion(text=""),
                )
            return caught.value

    return asyncio.run(go())


def test_a_small_body_that_decompresses_past_the_bound_is_refused():
    import gzip

    bomb = gzip.compress(b" " * (64 << 20))  # 64 MiB of spaces in about 64 KiB
    error = layer_error(ok(bomb, b"content-encoding: gzip\r\n"), max_response_bytes=1 << 20)
    assert error.kind == "too_large" and not error.retryable
    assert "longer than 1,048,576 bytes" in str(error)


def test_a_body_that_does_not_decode_is_malformed_not_a_crash():
    error = layer_error(ok(b"not gzip", b"content-encoding: gzip\r\n"))
    assert error.kind == "malformed" and error.retryable


def test_a_body_nested_too_deep_to_parse_is_malformed_not_a_crash():
    error = layer_error(ok(b"[" * 100_000 + b"]" * 100_000))
    assert error.kind == "malformed"


def test_a_body_holding_nan_is_malformed_not_stored():
    error = layer_error(ok(b'{"usage": {"prompt_tokens": NaN}}'))
    assert error.kind == "malformed"
    assert str(error) == "response is not JSON: NaN is not a finite number"


def test_a_response_no_record_can_hold_is_that_requests_error(tmp_path, key_env):
    # A lone surrogate escape parses into text that no UTF-8 record can hold.
    body = b'{"choices": [{"message": {"role": "assistant", "content": "a\\ud800"}}]}'
    p = pin("openai", "https://api.example.test/v1", max_retries=0)

    async def go():
        store = ResponseStore.open(tmp_path)
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        async with HttpLayer(transport=transport) as http:
            with SegmentWriter(tmp_path) as writer:
                return await fetch(jobs_for(p, 1), store, writer, http), store

    report, store = asyncio.run(go())
    assert [e.kind for e in report.errors] == ["malformed"]
    assert "the response cannot be stored" in report.errors[0].message
    assert len(store) == 0


@pytest.mark.parametrize(
    "spliced",
    [
        ("request",),  # between the others
        ("aaa",),  # first
        ("zzz",),  # last
        ("aaa", "request", "zzz"),
        ("request", "response"),  # next to each other
        ("provider", "request", "response", "sample"),  # all of them
    ],
)
def test_pre_encoded_fields_give_the_same_store_line(spliced: tuple[str, ...]):
    from evalreg.canonical import canonical_bytes

    body = {"model": "m", "messages": [{"role": "user", "content": 'é "q" \u2028'}], "n": 1.5}
    record = {
        "provider": "openai",
        "sample": 0,
        "response": {"text": "ü", "usage": {}},
        "request": body,
        "aaa": [1, None, True],
        "zzz": "\x00\u2029",
    }
    apart = {name: value for name, value in record.items() if name not in spliced}
    encoded = {name: canonical_bytes(record[name]) for name in spliced}
    assert encode_record("k" * 64, record) == encode_record("k" * 64, apart, encoded=encoded)
    # A field given both ways is stored as given encoded.
    both = {**apart, **dict.fromkeys(spliced, "stale")}
    assert encode_record("k" * 64, record) == encode_record("k" * 64, both, encoded=encoded)


def test_a_cookie_one_response_sets_never_rides_on_later_requests() -> None:
    import httpx

    from evalreg.providers.base import Completion
    from evalreg.registry.schema import Limits

    seen: list[str | None] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, json={"ok": True}, headers={"set-cookie": "lb=node-7; Path=/"})

    async def go() -> None:
        async with HttpLayer(transport=httpx.MockTransport(reply)) as http:
            for pin_id in ("a", "b", "a"):
                await http.post(
                    pin_id,
                    Limits(),
                    "https://api.example.test/v1/chat/completions",
                    {"authorization": f"Bearer {pin_id}"},
                    b"{}",
                    lambda data: Completion(text="", model="m"),
                )

    asyncio.run(go())
    assert seen == [None, None, None]


def test_lookup_answers_as_the_full_index_does(tmp_path: Path) -> None:
    """First segment by name and first line win, damaged lines answer None, a torn tail is
    not a record, and keys that are not stored are simply absent."""
    import hashlib
    import random

    from evalreg.registry.tree import WorkspaceTree

    def key(i: int) -> str:
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        # Keys 0-9 share their first 8 characters: the scan's coarse match must not do.
        return "0" * 8 + digest[8:] if i < 10 else digest

    store_dir = tmp_path / STORE_DIR
    store_dir.mkdir(parents=True)
    rng = random.Random(4)
    for segment in range(3):
        lines = []
        for i in rng.sample(range(60), 40):
            lines.append(encode_record(key(i), {"response": {"text": f"{segment}:{i}"}}))
        lines.insert(5, b'{"key":"' + key(7).encode() + b'",broken\n')
        lines.insert(9, b"not a record at all\n")
        data = b"".join(lines) + b'{"key":"' + key(99).encode() + b'","torn'
        (store_dir / f"2026010{segment}T000000Z-run-{segment:08x}.jsonl").write_bytes(data)
    tree = WorkspaceTree(tmp_path)
    full = ResponseStore.load(tree)
    wanted = [key(i) for i in range(0, 100, 3)] + [key(7), "0" * 64, "short"]
    found = lookup(tree, wanted)
    assert found == {k: full.get(k) for k in wanted if k in full}
    assert found[key(7)] is None or "broken" not in str(found[key(7)])
    assert key(99) not in found
    # Segments scanned ahead (on a thread) answer the same; a segment left out is read.
    (scanned,) = Prefetch([tree], tmp_path).result()
    assert len(scanned) == 3
    assert lookup(tree, wanted, scanned) == found
    del scanned[min(scanned)]
    assert lookup(tree, wanted, scanned) == found


def test_bought_requests_leave_no_reference_cycles_for_the_collector(tmp_path, key_env, server):
    """A response, its request and their streams are freed as soon as they are dropped:
    cycles among them would make a large fetch stop for the collector every few thousand
    requests (a tenth of a second each)."""
    import gc

    p = pin("openai", server.base_url)
    jobs = jobs_for(p, 40)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        report, _ = run_fetch(tmp_path, jobs)
        gc.collect()
        left = [o for o in gc.garbage if type(o).__module__.startswith(("httpx", "evalreg"))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert report.fetched == 40
    assert [type(o).__qualname__ for o in left] == []


def _line(i: int) -> bytes:
    return encode_record(f"{i:064x}", {"response": {"text": f"answer {i}"}})


def test_a_segment_syncs_on_a_thread_of_its_own_and_is_whole_once_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A run's event loop does not stop for the store's fsyncs: they run beside it, and
    closing the segment waits for them."""
    import threading

    from evalreg.store import segments

    on_main: list[bool] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        on_main.append(threading.current_thread() is threading.main_thread())
        real_fsync(fd)

    monkeypatch.setattr(segments.os, "fsync", fsync)
    count = segments.FSYNC_EVERY * 3 + 1
    with SegmentWriter(tmp_path) as writer:
        for i in range(count):
            writer.put(_line(i))
    assert on_main[0] is False  # the first group's, while lines went on being written
    # Closing waited for the last one, and synced what followed it.
    assert not [t for t in threading.enumerate() if t.name == "segment fsync"]
    assert writer.path.read_bytes() == b"".join(_line(i) for i in range(count))


def test_a_failed_sync_is_raised_with_the_segment_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import errno

    from evalreg.store import segments

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segments.os, "fsync", fsync)
    writer = SegmentWriter(tmp_path)
    for i in range(segments.FSYNC_EVERY):
        writer.put(_line(i))  # the last starts a sync beside the writes
    with pytest.raises(OSError, match="Input/output error") as raised:
        writer.sync()
    assert raised.value.filename == str(writer.path)
    writer.close()


# A request the layer writes out itself, and the same request through httpx's models.
HEADER_SETS = [
    {"authorization": "Bearer sk-test-1"},
    {"x-api-key": "k", "anthropic-version": "2023-06-01", "anthropic-beta": "a,b"},
    {"X-Service-Key": "s", "Accept-Language": "en", "user-agent": "team/1.0"},
    {"api-key": "k", "accept": "application/json", "connection": "close"},
    {"content-type": "application/x-ndjson", "x-note": 'a b; c="d"'},
]
BODIES = [b"{}", json.dumps({"q": "é" * 3, "n": 1}).encode(), b"x" * 200_000]
ANSWERS = [
    ok(b'{"a":1}'),
    b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\ncontent-length: 2\r\n\r\n{}",
    b"HTTP/1.1 503 Busy\r\ncontent-length: 43\r\n\r\n"
    + b'{"error":{"message":"over","status":"BUSY"}}'[:43],
    ok(__import__("gzip").compress(b'{"zipped":true}'), b"content-encoding: gzip\r\n"),
    b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\n{"b\r\n4\r\n":2}\r\n0\r\n\r\n',
    ok(b"y" * 2048),  # longer than the request allows
    b"HTTP/1.1 401 Unauthorized\r\nx-amzn-ErrorType: Denied:x\r\ncontent-length: 2\r\n\r\n{}",
]


def _both_ways(headers: dict[str, str], body: bytes, answer: bytes) -> list:
    """The bytes a server received, and what ``HttpLayer.call`` returned or raised, sent
    the layer's own way and through an ``httpx.Request``: two lists."""
    from evalreg.providers.base import ProviderError
    from evalreg.registry.schema import Limits

    limits = Limits(max_retries=0, max_response_bytes=1024)

    async def go() -> list:
        seen = []
        async with ScriptedServer([answer, answer]) as srv:
            for direct in (True, False):
                async with HttpLayer() as layer:
                    if not direct:
                        layer._direct.clear()  # every request through httpx.Client.send
                    try:
                        out: object = await layer.call(
                            "p", limits, "POST", f"{srv.url}/v1/x?a=1", headers, body
                        )
                    except ProviderError as exc:
                        out = (exc.kind, exc.status, str(exc), exc.retry_after, exc.retryable)
                seen.append((srv.requests[-1], out))
        return seen

    return asyncio.run(go())


@pytest.mark.parametrize("headers", HEADER_SETS, ids=range(len(HEADER_SETS)))
def test_a_request_written_out_by_the_layer_is_byte_for_byte_httpxs(headers):
    for body in BODIES:
        (sent, got), (expected_sent, expected) = _both_ways(headers, body, ok(b'{"a":1}'))
        assert sent == expected_sent and sent.endswith(b"\r\n\r\n" + body)
        assert got == expected == b'{"a":1}'


@pytest.mark.parametrize("answer", ANSWERS, ids=range(len(ANSWERS)))
def test_an_answer_read_without_httpxs_models_is_what_httpxs_would_give(answer):
    (sent, got), (expected_sent, expected) = _both_ways(HEADER_SETS[0], b"{}", answer)
    assert sent == expected_sent
    assert got == expected


def test_a_header_that_cannot_be_written_is_the_same_error_either_way_and_sends_nothing():
    from evalreg.providers.base import ProviderError
    from evalreg.registry.schema import Limits

    async def go() -> list[tuple[object, ...]]:
        said = []
        async with ScriptedServer([ok(), ok()]) as srv:
            for direct in (True, False):
                async with HttpLayer() as layer:
                    if not direct:
                        layer._direct.clear()
                    with pytest.raises(ProviderError) as caught:
                        await layer.call(
                            "p",
                            Limits(max_retries=0),
                            "POST",
                            f"{srv.url}/v1/x",
                            {"x-note": "a\r\nx-evil: 1"},
                            b"{}",
                        )
                    said.append((caught.value.kind, str(caught.value)))
            assert srv.requests == []
        return said

    direct, through_httpx = asyncio.run(go())
    assert direct == through_httpx and direct[0] == "connection"
    assert "CR, LF or NUL" in direct[1]
