"""``evalreg propose`` against loopback stand-ins for the providers' model lists."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from evalreg.propose.listing import model_ids, source
from evalreg.providers.http import HttpLayer
from evalreg.registry.loader import load_registry

from conftest import Repo
from support.model_lists import ModelLists, model_lists

OPENAI_IDS = [
    *("gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-2026-10-01"),
    *("gpt-4o-mini-2025-06-30", "gpt-4o-mini-audio-preview-2026-11-01", "gpt-4o-2024-11-20"),
]
ANTHROPIC_IDS = [
    "claude-3-5-sonnet-20241022",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-1-20250805",
]
GEMINI_IDS = [
    "gemini-1.5-flash-001",
    "gemini-1.5-flash-002",
    "gemini-1.5-flash",
    "gemini-2.0-flash-001",
]


def pin(provider: str, model: str, base_url: str, env: str) -> str:
    return f"""\
schema_version: 1
provider: {provider}
model: {model}
base_url: {base_url}
api_key_env: {env}
price:
  input_per_mtok: 1.0
  output_per_mtok: 2.0
  as_of: 2026-01-01
"""


@pytest.fixture
def lists() -> Iterator[ModelLists]:
    with model_lists(ModelLists(OPENAI_IDS, ANTHROPIC_IDS, GEMINI_IDS)) as served:
        yield served


@pytest.fixture
def team(repo: Repo, lists: ModelLists, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """The standard registry with pins on each listing provider, at the stand-in."""
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(env, lists.key)
    v1 = f"{lists.url}/v1"
    repo.write(
        "registry/models/mini.yaml", pin("openai", "gpt-4o-mini-2024-07-18", v1, "OPENAI_API_KEY")
    )
    repo.write(
        "registry/models/mini-alias.yaml", pin("openai", "gpt-4o-mini", v1, "OPENAI_API_KEY")
    )
    repo.write(
        "registry/models/haiku.yaml",
        pin("anthropic", "claude-3-5-haiku-20241022", lists.url, "ANTHROPIC_API_KEY"),
    )
    repo.write(
        "registry/models/flash.yaml",
        pin("gemini", "gemini-1.5-flash-001", lists.url, "GEMINI_API_KEY"),
    )
    repo.commit("pins at the stand-in")
    return repo


def test_propose_finds_newer_snapshots_and_retired_pins(team: Repo, lists: ModelLists, cli):
    done = cli(team, "propose")
    assert done.code == 0, done.err
    out = done.out
    assert "mini (gpt-4o-mini-2024-07-18): newer snapshot gpt-4o-mini-2026-10-01" in out
    assert "also newer, and superseded by it: gpt-4o-mini-2025-06-30" in out
    assert "haiku (claude-3-5-haiku-20241022): RETIRED" in out
    assert "flash (gemini-1.5-flash-001): newer snapshot gemini-1.5-flash-002" in out
    assert "mini-alias (gpt-4o-mini): up to date" in out
    assert "an alias the provider moves on its own" in out
    assert "rules: not asked: a python pin has no provider model list" in out
    # Every list paged to its end, each asked once however many pins share it.
    assert lists.asked == {"openai": 3, "anthropic": 2, "gemini": 2}


def test_propose_json_is_the_same_findings_as_data(team: Repo, cli):
    done = cli(team, "propose", "--json")
    assert done.code == 0, done.err
    pins = {p["pin"]: p for p in json.loads(done.out)["pins"]}
    assert pins["mini"]["newer"] == "gpt-4o-mini-2026-10-01"
    assert pins["mini"]["also_newer"] == ["gpt-4o-mini-2025-06-30"]
    assert pins["haiku"]["retired"] is True and pins["haiku"]["newer"] is None
    assert pins["flash"]["newer"] == "gemini-1.5-flash-002"
    assert pins["rules"] == {
        "pin": "rules",
        "model": None,
        "skipped": "a python pin has no provider model list",
    }


def test_a_provider_that_does_not_answer_is_reported_and_the_others_surveyed(
    team: Repo, lists: ModelLists, cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-wrong-key-0000")
    done = cli(team, "propose")
    assert done.code == 0, done.err
    assert "haiku (claude-3-5-haiku-20241022): the model list could not be read" in done.out
    assert "HTTP 401" in done.out and "sk-wrong-key-0000" not in done.out + done.err
    assert "newer snapshot gpt-4o-mini-2026-10-01" in done.out
    lists.fail = True
    done = cli(team, "propose")
    assert done.out.count("the model list could not be read") == 4, done.out
    assert "HTTP 503" in done.out and "RETIRED" not in done.out  # unknown is not retired


def _ours(lists: ModelLists, provider: str, base_url: str, env: str) -> list[str]:
    from evalreg.registry.schema import Pin

    where = source(
        Pin.model_validate(
            {
                "schema_version": 1,
                "provider": provider,
                "model": "x",
                "base_url": base_url,
                "api_key_env": env,
            }
        )
    )
    assert not isinstance(where, str)

    async def go() -> list[str]:
        async with HttpLayer() as http:
            return await model_ids(
                where, lambda url, headers: http.call("p", _limits(), "GET", url, headers)
            )

    return asyncio.run(go())


def _limits():
    from evalreg.propose.listing import LIST_LIMITS

    return LIST_LIMITS


def test_the_lists_are_read_as_the_official_sdks_read_them(
    lists: ModelLists, monkeypatch: pytest.MonkeyPatch
):
    """The Anthropic SDK pages the list itself; the OpenAI SDK reads one page (OpenAI's list
    has one): both name the ids evalreg reads, from the same stand-in."""
    import anthropic
    import openai

    monkeypatch.setenv("EVALREG_TEST_KEY", lists.key)
    sdk = anthropic.Anthropic(base_url=lists.url, api_key=lists.key, max_retries=0)
    expected = [m.id for m in sdk.models.list(limit=2)]
    assert expected == ANTHROPIC_IDS
    assert _ours(lists, "anthropic", lists.url, "EVALREG_TEST_KEY") == expected
    lists.page = 100
    client = openai.OpenAI(base_url=f"{lists.url}/v1", api_key=lists.key, max_retries=0)
    expected = [m.id for m in client.models.list()]
    assert expected == OPENAI_IDS
    assert _ours(lists, "openai", f"{lists.url}/v1", "EVALREG_TEST_KEY") == expected


def test_a_vertex_or_deployment_pin_is_not_asked(repo: Repo, cli):
    from evalreg.registry.schema import Pin

    vertex = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "gemini",
            "model": "gemini-1.5-pro-002",
            "vertex": {"project": "acme-evals", "location": "us-central1"},
        }
    )
    assert "Vertex AI" in str(source(vertex))
    assert load_registry(repo.root).pins["mini"].provider == "openai"
