"""A ``run --batch`` stopped at any moment (SIGKILL included) resumes its batches: the
next run polls and collects them instead of buying again, as the servers' counts show.

Real ``evalreg`` processes in their own process group, a real git + DVC repository and a
loopback server speaking the batch APIs; moments are observed from outside (the server's
requests, the batch journal in the state directory, the store).
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from evalreg.store.batches import BATCHES
from evalreg.store.lock import state_dir

from conftest import Repo, registry_template, replace_tree
from support import runs
from support.cloud_servers import GeminiServer
from support.llm_server import LLMServer
from support.matrix import every_nth

ITEMS = 30  # x 2 pins: 60 requests, two batches
POLL = ("--batch", "--batch-poll", "0.05")


@pytest.fixture
def server(server_port: int):
    with LLMServer(
        api_key=runs.KEY, responder=runs.label_of, latency=0.01, port=server_port
    ) as srv:
        srv.batch_polls = 4
        yield srv


@pytest.fixture(scope="module")
def registry_on_dvc(tmp_path_factory, server_port: int) -> Path:
    with LLMServer(api_key=runs.KEY, port=server_port) as srv:
        return registry_template(
            tmp_path_factory, lambda r: runs.live_registry(r, srv, items=ITEMS)
        )


@pytest.fixture
def registry(repo: Repo, server: LLMServer, registry_on_dvc: Path) -> Repo:
    return replace_tree(repo, registry_on_dvc)


def journalled(repo: Repo) -> list[dict]:
    try:
        return list(json.loads((state_dir(repo.root) / BATCHES).read_bytes())["batches"])
    except (OSError, ValueError, KeyError):
        return []


def _posted(server: LLMServer, path: str) -> int:
    return server.count(lambda r: r.method == "POST" and r.path == path)


@dataclass(frozen=True)
class BatchMoment:
    """A moment of a batched run, and what the server does so that the run waits there:
    ``hold`` holds batch creations' (``"create"``) or results' (``"results"``) answers
    after the first ``after`` until the signal has been sent; ``create_errors`` refuses
    that many creations (the run waits out a backoff, its file uploaded)."""

    moment: runs.Moment
    hold: tuple[Literal["create", "results"], int] | None = None
    create_errors: int = 0

    @property
    def name(self) -> str:
        return self.moment.name


def _held(repo: Repo, srv: LLMServer | GeminiServer, before: set[str]) -> bool:
    return srv.batch_held() >= 1


POLLING = BatchMoment(
    runs.Moment(
        "polling",
        lambda repo, srv, before: sum(b["state"] == "submitted" for b in journalled(repo)) == 2,
    )
)
COLLECTING = BatchMoment(runs.Moment("collecting", _held), ("results", 0))

MOMENTS = [
    BatchMoment(
        runs.Moment(
            "file uploaded, batch not created",
            lambda repo, srv, before: any(b["state"] == "uploaded" for b in journalled(repo)),
        ),
        create_errors=1,
    ),
    BatchMoment(runs.Moment("batch created, its id not journalled", _held), ("create", 0)),
    POLLING,
    COLLECTING,
    # The first batch's results are answered and stored, the second's held.
    BatchMoment(
        runs.Moment(
            "collecting, a batch's responses stored",
            lambda repo, srv, before: (
                _held(repo, srv, before) and len(runs.stored_keys(repo)) >= ITEMS
            ),
        ),
        ("results", 1),
    ),
]


def signal_at(
    repo: Repo, server: LLMServer | GeminiServer, at: BatchMoment, signum: int
) -> tuple[str, int | None]:
    """``runs.signal_at`` for a batched run, the server holding it at ``at`` until the
    signal has been sent."""
    if at.create_errors:
        assert isinstance(server, LLMServer)
        server.batch_create_errors = at.create_errors
    with contextlib.ExitStack() as held:
        if at.hold is not None:
            held.enter_context(server.hold_batch(*at.hold))
        return runs.signal_at(repo, server, at.moment, signum, *POLL)


def assert_bought_once(
    repo: Repo, server: LLMServer | GeminiServer, live: str = "/v1/chat/completions"
) -> None:
    """Every request was submitted in exactly one batch, answered once, none bought live
    (at ``live``, the path of the pins' live requests); the results are whole, tracked,
    pushed, and reproduce."""
    submitted = Counter(r.custom_id for r in server.batch_requests)
    assert len(submitted) == 2 * ITEMS
    assert max(submitted.values()) == 1, "a request was submitted in two batches"
    answered = Counter(r.custom_id for r in server.batch_answered)
    assert len(answered) == 2 * ITEMS and max(answered.values()) == 1
    assert server.count(lambda r: r.path.endswith(live)) == 0
    assert journalled(repo) == []
    assert set(runs.stored_keys(repo)) == set(submitted)
    status = runs.in_process(repo, "status", "--json")
    assert {c["state"] for c in json.loads(status.stdout)} == {"fresh"}, status.stderr
    assert runs.untracked_data(repo) == []
    assert runs.unpushed_md5s(repo) == []
    repo.commit("results")
    assert runs.raw_in_git(repo) == []
    reproduced = runs.in_process(repo, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr


@pytest.mark.parametrize("moment", every_nth(MOMENTS, 2, ids=lambda m: m.name))
def test_a_batched_run_killed_at_any_moment_resumes_and_buys_nothing_twice(
    registry: Repo, server: LLMServer, moment: BatchMoment
):
    err, code = signal_at(registry, server, moment, signal.SIGKILL)
    assert code is not None, f"the run ended before {moment.name}: {err}"
    if moment.name.endswith("stored"):
        assert len(runs.stored_keys(registry)) == ITEMS  # one batch's, in the run's segment

    resumed = runs.evalreg(registry, "run", *POLL)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert_bought_once(registry, server)


def test_a_batched_run_interrupted_while_waiting_says_how_to_collect(
    registry: Repo, server: LLMServer
):
    err, code = signal_at(registry, server, POLLING, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    # The command that resumes it keeps the flags it was started with.
    assert "evalreg -C" in err and f" run {' '.join(POLL)}`" in err
    assert len(journalled(registry)) == 2  # still journalled: a later run collects them
    resumed = runs.evalreg(registry, "run", *POLL)
    assert resumed.returncode == 0, resumed.stderr
    assert_bought_once(registry, server)


def test_a_ci_job_submits_and_a_later_one_collects(registry: Repo, server: LLMServer):
    first = runs.evalreg(registry, "run", "--batch", "--no-wait")
    assert first.returncode == 0, first.stderr
    assert "60 responses waiting in submitted batches" in first.stdout
    assert len(journalled(registry)) == 2
    server.batch_polls = 0
    second = runs.evalreg(registry, "run", "--batch", "--no-wait")
    assert second.returncode == 0, second.stderr
    assert_bought_once(registry, server)


def _anthropic(repo: Repo, server: LLMServer) -> Repo:
    for name in ("mini", "mini2"):
        path = f"registry/models/{name}.yaml"
        pin = repo.read(path).replace("provider: openai", "provider: anthropic")
        pin = pin.replace(server.base_url, server.root_url).replace(
            "temperature: 0", "temperature: 0\n  max_tokens: 64"
        )
        repo.write(path, pin)
    repo.commit("Anthropic pins")
    return repo


def test_anthropic_batch_killed_before_its_id_was_journalled_is_found_and_collected_once(
    registry: Repo, server: LLMServer
):
    # Message Batches take no idempotency key and no name: the resumed run finds the batch
    # among those created since its intent, by its number of requests, and collects it.
    _anthropic(registry, server)
    created = BatchMoment(runs.Moment("created", _held), ("create", 0))
    _, code = signal_at(registry, server, created, signal.SIGKILL)
    assert code is not None
    assert [b["state"] for b in journalled(registry)] == ["intent"]
    resumed = runs.evalreg(registry, "run", *POLL)
    assert resumed.returncode == 0, resumed.stderr
    assert "created since, holds that many: it is collected" in resumed.stderr
    assert _posted(server, "/v1/messages/batches") == 2  # one batch a pin, each made once
    submitted = Counter(r.custom_id for r in server.batch_requests)
    assert len(submitted) == 2 * ITEMS and max(submitted.values()) == 1
    assert server.count(lambda r: r.path == "/v1/messages") == 0
    assert journalled(registry) == []
    registry.commit("results")
    assert runs.in_process(registry, "reproduce", "HEAD").returncode == 0


def test_anthropic_batch_killed_while_polling_is_collected_once(registry: Repo, server: LLMServer):
    _anthropic(registry, server)
    err, code = signal_at(registry, server, POLLING, signal.SIGKILL)
    assert code is not None, err
    resumed = runs.evalreg(registry, "run", *POLL)
    assert resumed.returncode == 0, resumed.stderr
    submitted = Counter(r.custom_id for r in server.batch_requests)
    assert len(submitted) == 2 * ITEMS and max(submitted.values()) == 1
    answered = Counter(r.custom_id for r in server.batch_answered)
    assert len(answered) == 2 * ITEMS and max(answered.values()) == 1
    assert journalled(registry) == []
    registry.commit("results")
    assert runs.evalreg(registry, "reproduce", "HEAD").returncode == 0


GEMINI_PIN = """\
schema_version: 1
provider: gemini
model: {model}
base_url: {url}
api_key_env: CRASH_TEST_KEY
params:
  temperature: 0
  maxOutputTokens: 64
price:
  input_per_mtok: 0.3
  output_per_mtok: 2.5
  batch_input_per_mtok: 0.15
  batch_output_per_mtok: 1.25
  as_of: 2026-11-01
"""


def _gemini_label(request) -> str:
    text = request.body["contents"][-1]["parts"][0]["text"]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5", "7", "9")) else "b"})


@pytest.fixture
def gemini() -> Iterator[GeminiServer]:
    with GeminiServer(api_key=runs.KEY, responder=_gemini_label) as srv:
        srv.batch_polls = 4
        yield srv


def _on_gemini(repo: Repo, gemini: GeminiServer) -> Repo:
    for name, model in (("mini", "gemini-2.5-flash"), ("mini2", "gemini-2.5-flash-lite")):
        pin = GEMINI_PIN.format(model=model, url=gemini.root_url)
        repo.write(f"registry/models/{name}.yaml", pin)
    repo.commit("Gemini API pins")
    return repo


GEMINI_MOMENTS = [
    BatchMoment(runs.Moment("batch created, its name not journalled", _held), ("create", 0)),
    POLLING,
    COLLECTING,
]


@pytest.mark.parametrize("moment", every_nth(GEMINI_MOMENTS, 3, ids=lambda m: m.name))
def test_a_gemini_batched_run_killed_at_a_moment_resumes_and_buys_nothing_twice(
    registry: Repo, gemini: GeminiServer, moment: BatchMoment
):
    _on_gemini(registry, gemini)
    # Gemini batch creation is not idempotent, but named: a resumed run finds the batch.
    err, code = signal_at(registry, gemini, moment, signal.SIGKILL)
    assert code is not None, f"the run ended before {moment.name}: {err}"

    resumed = runs.evalreg(registry, "run", *POLL)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    if "not journalled" in moment.name:
        assert "the Gemini API has it (batches/" in resumed.stderr
    assert_bought_once(registry, gemini, live=":generateContent")
