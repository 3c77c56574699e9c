"""``evalreg propose`` against loopback stand-ins for the providers' model lists."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from evalreg.propose.listing import LIST_LIMITS, model_ids, source
from evalreg.providers.http import HttpLayer
from evalreg.registry.loader import load_registry

from conftest import Repo, assert_refused
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
    # Copies: a test may change what its lists hold.
    with model_lists(ModelLists([*OPENAI_IDS], [*ANTHROPIC_IDS], [*GEMINI_IDS])) as served:
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
    # All that could be done is done; the status says a list went unread (an expired key
    # must not leave the weekly job green).
    assert done.code == 1, done.err
    assert f"1 model list(s) could not be read: {lists.url}/v1/models" in done.err
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
                where, lambda url, headers: http.call("p", LIST_LIMITS, "GET", url, headers)
            )

    return asyncio.run(go())


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


# --- the branches --------------------------------------------------------------------------


def _git(repo: Repo, *args: str) -> str:
    return repo.git(*args).strip()


def test_each_newer_snapshot_is_a_branch_that_check_accepts(team: Repo, cli, tmp_path):
    head, before = _git(team, "rev-parse", "HEAD"), team.snapshot()
    done = cli(team, "propose")
    assert done.code == 0, done.err
    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    flash = "evalreg/propose/flash-gemini-1.5-flash-002"
    assert f"{mini}: created" in done.out and f"{flash}: created" in done.out
    assert "ready for a pull request" in done.err
    # Nothing else moved: the checked-out branch, its files, the other pins' branches.
    assert _git(team, "rev-parse", "HEAD") == head and team.snapshot() == before
    branches = _git(team, "branch", "--list", "evalreg/propose/*", "--format=%(refname:short)")
    assert branches.split() == [flash, mini, "evalreg/propose/retired-haiku"]
    # One commit on HEAD: the new pin, and a candidate for it where the old pin is one.
    assert _git(team, "rev-parse", f"{mini}^") == head
    changed = _git(team, "diff", "--name-status", head, mini).splitlines()
    assert changed == [
        "A\tregistry/models/mini-2026-10-01.yaml",
        "M\tregistry/selections/labels.yaml",
    ]
    old = team.read("registry/models/mini.yaml")
    new = _git(team, "show", f"{mini}:registry/models/mini-2026-10-01.yaml") + "\n"
    assert new == old.replace("gpt-4o-mini-2024-07-18", "gpt-4o-mini-2026-10-01").replace(
        "price:\n",
        'price:\n  review: "copied from mini (gpt-4o-mini-2024-07-18) by evalreg '
        f"propose: {team.read('registry/models/mini.yaml').split('base_url: ')[1].split()[0]}"
        '/models lists gpt-4o-mini-2026-10-01 without prices"\n',
    )
    selection = _git(team, "show", f"{mini}:registry/selections/labels.yaml")
    assert "  - id: mini-2026-10-01\n    pin: mini-2026-10-01\n    description:" in selection
    # The branch checks: a warning for the prices, nothing else.
    work = tmp_path / "work"
    team.git("worktree", "add", "-q", str(work), mini)
    checked = cli(work, "check")
    assert checked.code == 0, checked.out + checked.err
    said = checked.out + checked.err
    assert "registry/models/mini-2026-10-01.yaml:" in said and "to be confirmed" in said


def test_proposing_again_changes_nothing_and_a_moved_base_updates_the_branch(team: Repo, cli):
    first = cli(team, "propose", "--json")
    again = cli(team, "propose", "--json")
    one, two = (json.loads(r.out)["proposals"] for r in (first, again))
    assert [p["outcome"] for p in one] == ["created"] * 3
    assert [p["outcome"] for p in two] == ["unchanged"] * 3
    assert [p["commit"] for p in one] == [p["commit"] for p in two]
    team.write("README.md", "A registry.\n")
    head = team.commit("a note")
    moved = json.loads(cli(team, "propose", "--json").out)["proposals"]
    assert [p["outcome"] for p in moved] == ["updated"] * 3
    assert all(_git(team, "rev-parse", f"{p['branch']}^") == head for p in moved)
    assert len(_git(team, "branch", "--list", "evalreg/propose/*").split()) == 3


def test_a_dry_run_makes_no_branch(team: Repo, cli):
    done = cli(team, "propose", "--dry-run")
    assert done.code == 0 and "newer snapshot gpt-4o-mini-2026-10-01" in done.out
    assert _git(team, "branch", "--list", "evalreg/propose/*") == ""


def test_names_and_edits_keep_to_what_git_and_yaml_hold():
    from evalreg.propose.branches import branch_name, new_pin_id, pin_text, selection_text

    assert branch_name("bedrock-sonnet", "anthropic.claude-3-5-sonnet-20241022-v2:0") == (
        "evalreg/propose/bedrock-sonnet-anthropic.claude-3-5-sonnet-20241022-v2-0"
    )
    assert branch_name("x", "a..b~c^d e") == "evalreg/propose/x-a.b-c-d-e"
    assert (
        new_pin_id(
            "haiku-20241022", "claude-3-5-haiku-20241022", "claude-3-5-haiku-20251001", set()
        )
        == "haiku-20251001"
    )
    assert (
        new_pin_id("mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-2026-10-01", {"mini-2026-10-01"})
        == "mini-2026-10-01-2"
    )
    assert (
        new_pin_id(
            "sonnet",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "anthropic.claude-3-5-sonnet-20241022-v2:0",
            set(),
        )
        == "sonnet-20241022-v2-0"
    )
    text = (
        "# The small model.\nschema_version: 1\nprovider: bedrock\n"
        "model: 'us.anthropic.claude-3-5-haiku-20241022-v1:0'  # pinned\n"
        "price:\n    input_per_mtok: 0.8  # per million\n    as_of: 2026-11-01\n"
    )
    edited = pin_text(text, "us.anthropic.claude-3-5-haiku-20251001-v1:0", "to check")
    assert edited == (
        "# The small model.\nschema_version: 1\nprovider: bedrock\n"
        "model: us.anthropic.claude-3-5-haiku-20251001-v1:0  # pinned\n"
        'price:\n    review: "to check"\n    input_per_mtok: 0.8  # per million\n'
        "    as_of: 2026-11-01\n"
    )
    selection = (
        "task: t\ncandidates:\n- id: a\n  pin: mini\n# the rules\n- id: b\n  pin: rules\n\n"
        "policy: {}\n"
    )
    assert selection_text(selection, "mini", "mini-2", "new") == (
        "task: t\ncandidates:\n- id: a\n  pin: mini\n"
        '- id: mini-2\n  pin: mini-2\n  description: "new"\n'
        "# the rules\n- id: b\n  pin: rules\n\npolicy: {}\n"
    )
    last = "candidates:\n  - id: a\n    pin: mini\n"
    assert selection_text(last, "mini", "mini-2", "new") == (
        last + '  - id: mini-2\n    pin: mini-2\n    description: "new"\n'
    )
    assert selection_text(last, "rules", "rules-2", "new") is None


# --- pull requests ---------------------------------------------------------------------------

TOKEN = "ghs_proposetoken0123456789"
BOT = "github-actions[bot]"


@pytest.fixture
def github(team: Repo, tmp_path, monkeypatch: pytest.MonkeyPatch):
    """The team's repository on a GitHub stand-in: a bare ``origin`` it reads branches from."""
    from support.github_api import GitHubAPI

    origin = tmp_path / "origin.git"
    team.git("clone", "-q", "--bare", str(team.root), str(origin))
    team.git("remote", "add", "origin", str(origin))
    with GitHubAPI(tokens={TOKEN: BOT}, repository="acme/registry") as api:
        api.git_dir = origin
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_REPOSITORY", "acme/registry")
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        yield api


def _pulls(api) -> dict[str, dict]:
    import httpx

    got = httpx.get(
        f"{api.url}/repos/acme/registry/pulls",
        params={"state": "all"},
        headers={"authorization": f"Bearer {TOKEN}"},
    ).json()
    return {p["head"]["ref"]: p for p in got}


def test_open_pr_pushes_each_branch_and_opens_its_pull_request_once(team: Repo, github, cli):
    done = cli(team, "propose", "--open-pr")
    assert done.code == 0, done.err
    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    pulls = _pulls(github)
    assert set(pulls) == {
        mini,
        "evalreg/propose/flash-gemini-1.5-flash-002",
        "evalreg/propose/retired-haiku",
    }
    pr = pulls[mini]
    assert pr["state"] == "open" and pr["base"]["ref"] == "main"
    assert pr["title"] == "Propose gpt-4o-mini-2026-10-01 for mini"
    assert pr["body"].startswith("<!-- evalreg:propose pin=mini -->\n")
    # Model ids are the provider's text: shown escaped, never as Markdown.
    assert "gpt\\-4o\\-mini\\-2025\\-06\\-30" in pr["body"] and "price.review" in pr["body"]
    # What GitHub shows is the pushed branch: its head is the proposal's commit.
    assert pr["head"]["sha"] == _git(team, "rev-parse", mini)
    assert f"#{pr['number']} opened: {mini}" in done.out
    again = cli(team, "propose", "--open-pr")
    assert again.code == 0, again.err
    assert f"#{pr['number']} unchanged: {mini}" in again.out
    assert len(_pulls(github)) == 3  # nothing opened twice


def test_a_newer_snapshot_supersedes_the_open_proposal_which_is_closed_with_a_comment(
    team: Repo, lists: ModelLists, github, cli
):
    assert cli(team, "propose", "--open-pr").code == 0
    first = _pulls(github)["evalreg/propose/mini-gpt-4o-mini-2026-10-01"]
    lists.openai.append("gpt-4o-mini-2026-12-01")
    done = cli(team, "propose", "--open-pr")
    assert done.code == 0, done.err
    pulls = _pulls(github)
    newer = pulls["evalreg/propose/mini-gpt-4o-mini-2026-12-01"]
    assert newer["state"] == "open"
    assert pulls["evalreg/propose/mini-gpt-4o-mini-2026-10-01"]["state"] == "closed"
    (comment,) = github.comments(first["number"])
    assert comment.body.startswith("<!-- evalreg:propose-superseded -->")
    assert f"Superseded by #{newer['number']}" in comment.body
    assert f"(closed as superseded: #{first['number']})" in done.out
    # The flash proposal is another pin's: left open.
    assert pulls["evalreg/propose/flash-gemini-1.5-flash-002"]["state"] == "open"


def test_a_retired_pin_is_marked_on_a_branch_and_check_warns_for_its_candidates(
    team: Repo, cli, tmp_path
):
    team.write(
        "registry/selections/labels.yaml",
        team.read("registry/selections/labels.yaml").replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: haiku\n    pin: haiku\n",
        ),
    )
    team.commit("haiku is a candidate")
    done = cli(team, "propose")
    assert done.code == 0, done.err
    assert "haiku (claude-3-5-haiku-20241022): RETIRED" in done.out
    assert "evalreg/propose/retired-haiku: created" in done.out
    pin = _git(team, "show", "evalreg/propose/retired-haiku:registry/models/haiku.yaml")
    assert 'model: claude-3-5-haiku-20241022\nretired: "' in pin
    assert 'no longer lists claude-3-5-haiku-20241022 (found by evalreg propose)"' in pin
    work = tmp_path / "retired"
    team.git("worktree", "add", "-q", str(work), "evalreg/propose/retired-haiku")
    checked = cli(work, "check")
    assert checked.code == 0, checked.out + checked.err
    said = " ".join((checked.out + checked.err).split())
    assert "candidate 'haiku' uses the retired pin 'haiku'" in said
    # Marked, it is not proposed again from that branch's registry.
    again = cli(work, "propose", "--json")
    kinds = [p["kind"] for p in json.loads(again.out)["proposals"]]
    assert "retired" not in kinds


# --- Amazon Bedrock: signed list requests ------------------------------------------------------


def test_bedrock_lists_are_asked_signed_and_paged(
    repo: Repo, cli, monkeypatch: pytest.MonkeyPatch, tmp_path
):
    """ListFoundationModels for a model id, ListInferenceProfiles (paged) for a cross-region
    profile: each request SigV4-signed, the signature checked by the stand-in."""
    from support.cloud_servers import BedrockServer
    from support.clouds import aws_environment

    aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIALOOPBACK7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-loopback-secret-9Qx2")
    with BedrockServer(
        access_key="AKIALOOPBACK7EXAMPLE",
        secret_key="wJalrXUtnFEMI-loopback-secret-9Qx2",
        region="eu-west-1",
    ) as bedrock:
        bedrock.models = [
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "anthropic.claude-3-5-sonnet-20241022-v2:0",
            "amazon.nova-pro-v1:0",
        ]
        bedrock.profiles = [
            "eu.anthropic.claude-3-haiku-20240307-v1:0",
            "eu.amazon.nova-lite-v1:0",
            "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
            "eu.anthropic.claude-3-5-haiku-20241022-v1:0",
            "eu.anthropic.claude-3-5-haiku-20250601-v1:0",
        ]

        def pin(model: str) -> str:
            return (
                f"schema_version: 1\nprovider: bedrock\nmodel: {model}\n"
                f"aws:\n  region: eu-west-1\nbase_url: {bedrock.root_url}\n"
            )

        repo.write("registry/models/sonnet.yaml", pin("anthropic.claude-3-5-sonnet-20240620-v1:0"))
        repo.write("registry/models/haiku.yaml", pin("eu.anthropic.claude-3-5-haiku-20241022-v1:0"))
        repo.commit("bedrock pins")
        done = cli(repo, "propose", "--dry-run", "--json")
        # The example's own pin, at api.openai.com, is not reached from here.
        assert done.code == 1 and "https://api.openai.com/v1/models" in done.err, done.err
        asked = [r.path for r in bedrock.requests]
        signed = [r.headers.get("authorization", "") for r in bedrock.requests]
    pins = {p["pin"]: p for p in json.loads(done.out)["pins"]}
    assert pins["sonnet"]["newer"] == "anthropic.claude-3-5-sonnet-20241022-v2:0"
    assert pins["haiku"]["newer"] == "eu.anthropic.claude-3-5-haiku-20250601-v1:0"
    assert not pins["haiku"]["retired"] and not pins["sonnet"]["retired"]
    # The two lists are asked at once: their requests interleave.
    assert sorted(asked) == [
        "/foundation-models",
        "/inference-profiles?maxResults=1000",
        "/inference-profiles?maxResults=1000&nextToken=2",
        "/inference-profiles?maxResults=1000&nextToken=4",
    ]
    assert all(s.startswith("AWS4-HMAC-SHA256 Credential=AKIALOOPBACK7EXAMPLE/") for s in signed)


def test_a_bedrock_model_arn_is_not_asked(repo: Repo):
    from evalreg.registry.schema import Pin

    arn = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "bedrock",
            "model": "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.x",
            "aws": {"region": "eu-west-1"},
        }
    )
    assert "model ARN" in str(source(arn))


def test_a_list_that_names_no_model_retires_nothing(team: Repo, lists: ModelLists, cli):
    lists.openai.clear()
    done = cli(team, "propose", "--dry-run")
    assert done.code == 1 and "could not be read" in done.err, done.err
    assert "mini (gpt-4o-mini-2024-07-18): the model list could not be read" in done.out
    assert (
        "listed no model at all" in done.out
        and "mini (gpt-4o-mini-2024-07-18): RETIRED" not in done.out
    )


def test_an_azure_pin_is_asked_and_reported_never_made_a_branch(
    repo: Repo, lists: ModelLists, cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", lists.key)
    lists.azure = ["gpt-4o-mini-2024-07-18", "gpt-4o-mini-2026-10-01"]
    azure = (
        "schema_version: 1\nprovider: azure_openai\nmodel: {model}\n"
        f"base_url: {lists.url}\napi_key_env: AZURE_OPENAI_API_KEY\n"
        "azure:\n  deployment: {deployment}\n  api_version: 2024-10-21\n"
    )
    repo.write(
        "registry/models/az.yaml",
        azure.format(model="gpt-4o-mini-2024-07-18", deployment="triage-mini"),
    )
    repo.write(
        "registry/models/az-v1.yaml",
        azure.format(model="triage-mini", deployment="triage-mini").replace(
            "  deployment: triage-mini\n  api_version: 2024-10-21\n", "  endpoint: v1\n"
        ),
    )
    repo.commit("azure pins")
    done = cli(repo, "propose")
    # The example's own pin, at api.openai.com, is not reached from here.
    assert done.code == 1 and "https://api.openai.com/v1/models" in done.err, done.err
    assert "az (gpt-4o-mini-2024-07-18): newer snapshot gpt-4o-mini-2026-10-01" in done.out
    assert "Azure OpenAI: no branch is made. Deploy a newer model" in done.out
    assert (
        "az-v1 (triage-mini): not asked: an Azure OpenAI pin whose model is a deployment"
        in done.out
    )
    assert "evalreg/propose/az" not in _git(repo, "branch", "--list", "evalreg/propose/*")
    assert lists.asked["azure"] == 1


def test_open_pr_without_a_token_or_repository_is_refused_before_anything_is_made(
    team: Repo, cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    before = team.snapshot()
    refused = assert_refused(team, cli, "propose", "--open-pr", expect=("GITHUB_TOKEN",))
    assert "Traceback" not in refused
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert_refused(team, cli, "propose", "--open-pr", expect=("GITHUB_REPOSITORY",))
    assert_refused(team, cli, "propose", "--open-pr", "--dry-run", expect=("--dry-run",))
    assert team.snapshot() == before
    assert _git(team, "branch", "--list", "evalreg/propose/*") == ""


# --- what a team's repository does to proposals ----------------------------------------------


def test_a_merged_proposal_is_not_proposed_again_nor_one_another_pin_proposes(team: Repo, cli):
    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    assert cli(team, "propose").code == 0
    team.git("merge", "-q", "--ff-only", mini)
    team.git("branch", "-q", "-D", mini)
    # A later snapshot than mini's, pinned by hand: it would propose the same one.
    team.write(
        "registry/models/mid.yaml",
        team.read("registry/models/mini.yaml").replace("2024-07-18", "2025-06-30"),
    )
    team.commit("merged, and a pin of the snapshot between")
    again = cli(team, "propose", "--json")
    assert again.code == 0, again.err
    data = json.loads(again.out)
    pins = {p["pin"]: p for p in data["pins"]}
    assert pins["mini"]["not_proposed"] == "gpt-4o-mini-2026-10-01 is already pinned as " + (
        "mini-2026-10-01"
    )
    assert pins["mid"]["not_proposed"] == pins["mini"]["not_proposed"]
    assert pins["mini-2026-10-01"]["newer"] is None
    assert all("gpt-4o-mini" not in p["model"] for p in data["proposals"])
    assert mini not in _git(team, "branch", "--list", "evalreg/propose/*")
    text = cli(team, "propose").out
    assert "not proposed: gpt-4o-mini-2026-10-01 is already pinned as mini-2026-10-01" in text


def test_of_two_pins_that_would_propose_one_snapshot_the_later_pin_does(team: Repo, cli):
    team.write(
        "registry/models/mid.yaml",
        team.read("registry/models/mini.yaml").replace("2024-07-18", "2025-06-30"),
    )
    team.commit("a pin of the snapshot between")
    data = json.loads(cli(team, "propose", "--json").out)
    pins = {p["pin"]: p for p in data["pins"]}
    assert pins["mini"]["not_proposed"] == "gpt-4o-mini-2026-10-01 is proposed for the pin mid"
    assert "not_proposed" not in pins["mid"]
    made = [p["branch"] for p in data["proposals"] if p["model"] == "gpt-4o-mini-2026-10-01"]
    assert made == ["evalreg/propose/mid-gpt-4o-mini-2026-10-01"]


def test_a_persons_commit_on_a_proposal_branch_or_a_checked_out_one_is_kept(
    team: Repo, cli, tmp_path
):
    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    flash = "evalreg/propose/flash-gemini-1.5-flash-002"
    assert cli(team, "propose").code == 0
    # A reviewer confirms the prices on mini's branch; flash's is checked out elsewhere.
    work = tmp_path / "review"
    team.git("worktree", "add", "-q", str(work), mini)
    pin = work / "registry/models/mini-2026-10-01.yaml"
    pin.write_text("".join(x for x in pin.read_text().splitlines(True) if "review:" not in x))
    team.git("-C", str(work), "commit", "-q", "-am", "prices confirmed")
    team.git("worktree", "remove", str(work))
    reviewed = _git(team, "rev-parse", mini)
    team.git("worktree", "add", "-q", str(tmp_path / "look"), flash)
    looked = _git(team, "rev-parse", flash)
    team.write("README.md", "A registry.\n")
    team.commit("main moves on")
    done = cli(team, "propose", "--json")
    assert done.code == 0, done.err
    outcome = {p["branch"]: (p["outcome"], p["kept"]) for p in json.loads(done.out)["proposals"]}
    assert outcome[mini] == ("kept", "its last commit is not evalreg propose's")
    assert outcome[flash] == ("kept", "it is checked out")
    assert outcome["evalreg/propose/retired-haiku"] == ("updated", None)
    assert _git(team, "rev-parse", mini) == reviewed and _git(team, "rev-parse", flash) == looked
    assert "review:" not in _git(team, "show", f"{mini}:registry/models/mini-2026-10-01.yaml")
    assert (
        f"{mini}: kept as it is: its last commit is not evalreg propose's"
        in cli(team, "propose").out
    )


def test_pins_at_one_url_with_different_keys_are_each_asked_with_their_own(
    team: Repo, lists: ModelLists, cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OTHER_OPENAI_KEY", "sk-another-team-key-000")
    team.write(
        "registry/models/other.yaml",
        team.read("registry/models/mini.yaml").replace("OPENAI_API_KEY", "OTHER_OPENAI_KEY"),
    )
    team.commit("a pin on another key")
    done = cli(team, "propose", "--dry-run", "--json")
    assert done.code == 1, done.err
    pins = {p["pin"]: p for p in json.loads(done.out)["pins"]}
    # The stand-in knows one key: the other is refused, for its own pin only.
    assert "401" in pins["other"]["error"] and "retired" not in pins["other"]
    assert pins["mini"]["newer"] == "gpt-4o-mini-2026-10-01"
    assert pins["mini-alias"]["retired"] is False
    assert "sk-another-team-key" not in done.out + done.err


def test_a_file_propose_cannot_edit_is_named_and_the_other_pins_still_proposed(team: Repo, cli):
    flow = team.read("registry/models/flash.yaml").split("price:")[0]
    team.write(
        "registry/models/flash.yaml",
        flow + "price: {input_per_mtok: 1.0, output_per_mtok: 2.0, as_of: 2026-01-01}\n",
    )
    team.commit("a flow-style price")
    done = cli(team, "propose")
    assert done.code == 1 and "Traceback" not in done.err
    assert "flash: no branch: registry/models/flash.yaml: its price is a flow mapping" in done.err
    made = _git(team, "branch", "--list", "evalreg/propose/*", "--format=%(refname:short)")
    assert made.split() == [
        "evalreg/propose/mini-gpt-4o-mini-2026-10-01",
        "evalreg/propose/retired-haiku",
    ]


def test_a_bad_repository_or_output_is_refused_before_any_branch(
    team: Repo, cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme")
    assert_refused(team, cli, "propose", "--open-pr", expect=("it must be OWNER/NAME",))
    assert_refused(team, cli, "propose", "-o", "nowhere/out.txt", expect=("does not exist",))
    assert _git(team, "branch", "--list", "evalreg/propose/*") == ""


def test_edits_keep_a_teams_files_whole():
    from evalreg.propose.branches import MAX_NOTE, _fit, branch_name, pin_text, selection_text

    # A pin proposed earlier whose prices were never confirmed: its review is replaced.
    text = (
        "model: m-2026-01-01\nprice:\n  review: |\n    copied\n    long ago\n\n"
        "  input_per_mtok: 1.0\nlimits: {}\n"
    )
    assert pin_text(text, "m-2026-06-01", "again") == (
        'model: m-2026-06-01\nprice:\n  review: "again"\n\n  input_per_mtok: 1.0\nlimits: {}\n'
    )
    # The new candidate is tried as the old one is (its prompt variant), and a line of the
    # old one's block scalar that begins with # stays in it.
    selection = (
        "candidates:\n"
        "  - id: a\n    pin: mini\n    prompt:\n      system: Be brief.\n"
        "    description: |\n      Our default.\n      # not a comment\n"
        "  # the rules\n  -\n    id: b\n    pin: rules\n"
    )
    assert selection_text(selection, "mini", "mini-2", "new") == (
        "candidates:\n"
        "  - id: a\n    pin: mini\n    prompt:\n      system: Be brief.\n"
        "    description: |\n      Our default.\n      # not a comment\n"
        '  - id: mini-2\n    pin: mini-2\n    description: "new"\n'
        "    prompt:\n      system: Be brief.\n"
        "  # the rules\n  -\n    id: b\n    pin: rules\n"
    )
    # A candidate written "-" then its keys below it.
    assert selection_text(selection, "rules", "rules-2", "new") == (
        selection + '  - id: rules-2\n    pin: rules-2\n    description: "new"\n'
    )
    # Names: two pins never share a branch; a long one fits a ref, and notes the schema.
    taken: set[str] = set()
    # (the same names whichever of them a run proposes: a hash of the id a ref cannot hold)
    assert branch_name("old-router", None, taken) == "evalreg/propose/retired-old-router"
    dotted = "evalreg/propose/retired-old-router.-598cad"
    assert branch_name("old-router.", None, taken) == branch_name("old-router.", None) == dotted
    long = branch_name("p" * 112, "gpt-4o-mini-ft-" + "x" * 170 + "-2026-10-01")
    assert len(long.encode()) <= 255 and long.startswith("evalreg/propose/ppp")
    assert long != branch_name("p" * 112, "gpt-4o-mini-ft-" + "x" * 170 + "-2026-10-02")
    assert len(_fit("n" * 600)) == MAX_NOTE and _fit("short") == "short"


def test_a_reviewers_amended_commit_is_a_persons_though_its_message_is_proposes(
    team: Repo, cli, tmp_path
):
    from evalreg.propose.branches import made_by_propose

    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    assert cli(team, "propose").code == 0
    assert made_by_propose(team.root, _git(team, "rev-parse", mini))
    work = tmp_path / "review"
    team.git("worktree", "add", "-q", str(work), mini)
    pin = work / "registry/models/mini-2026-10-01.yaml"
    pin.write_text("".join(x for x in pin.read_text().splitlines(True) if "review:" not in x))
    team.git("-C", str(work), "commit", "-q", "-a", "--amend", "--no-edit")
    team.git("worktree", "remove", str(work))
    amended = _git(team, "rev-parse", mini)
    assert not made_by_propose(team.root, amended)
    done = json.loads(cli(team, "propose", "--json").out)
    (outcome,) = [p for p in done["proposals"] if p["branch"] == mini]
    assert outcome["outcome"] == "kept" and _git(team, "rev-parse", mini) == amended


def test_a_newer_snapshot_of_a_retired_pin_is_not_born_retired(team: Repo, lists: ModelLists, cli):
    lists.openai.remove("gpt-4o-mini-2024-07-18")
    assert cli(team, "propose").code == 0
    team.git("merge", "-q", "--ff-only", "evalreg/propose/retired-mini")
    assert "retired:" in team.read("registry/models/mini.yaml")
    done = cli(team, "propose")
    assert done.code == 0, done.err
    new = _git(
        team,
        "show",
        "evalreg/propose/mini-gpt-4o-mini-2026-10-01:registry/models/mini-2026-10-01.yaml",
    )
    assert "retired" not in new and "model: gpt-4o-mini-2026-10-01" in new


def test_pins_of_one_model_asked_differently_each_get_their_proposal(team: Repo, cli):
    warm = team.read("registry/models/mini.yaml") + "params:\n  temperature: 1\n"
    team.write("registry/models/mini-warm.yaml", warm)
    team.commit("the same model, asked warmer")
    made = {p["branch"] for p in json.loads(cli(team, "propose", "--json").out)["proposals"]}
    assert {
        "evalreg/propose/mini-gpt-4o-mini-2026-10-01",
        "evalreg/propose/mini-warm-gpt-4o-mini-2026-10-01",
    } <= made
    # Once mini's is merged, mini-warm's successor is still missing: still proposed.
    team.git("merge", "-q", "--ff-only", "evalreg/propose/mini-gpt-4o-mini-2026-10-01")
    pins = {p["pin"]: p for p in json.loads(cli(team, "propose", "--json").out)["pins"]}
    assert pins["mini"]["not_proposed"].endswith("is already pinned as mini-2026-10-01")
    assert "not_proposed" not in pins["mini-warm"]


def test_a_branch_made_or_moved_while_propose_decides_is_decided_again(
    team: Repo, cli, monkeypatch: pytest.MonkeyPatch
):
    """Between propose's look at a branch and its write, a person makes the branch (or
    commits on it): the write is refused by git, the branch looked at again, and kept."""
    import evalreg.propose.branches as branches

    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    trailer = branches._trailer

    def holds(tree: str, path: str) -> bool:
        return _git(team, "ls-tree", "--name-only", tree, path) == path

    def kept() -> bool:
        done = cli(team, "propose", "--json")
        assert done.code == 0, done.err
        made = {p["branch"]: p for p in json.loads(done.out)["proposals"]}
        return (made[mini]["outcome"], made[mini]["kept"]) == (
            "kept",
            "its last commit is not evalreg propose's",
        )

    def meanwhile(tree: str) -> str:
        # As propose commits mini's new pin: a person makes the branch, just now.
        if holds(tree, "registry/models/mini-2026-10-01.yaml") and not _git(
            team, "branch", "--list", mini
        ):
            team.git("branch", mini, "HEAD")
        return trailer(tree)

    monkeypatch.setattr(branches, "_trailer", meanwhile)
    assert kept()
    assert _git(team, "rev-parse", mini) == _git(team, "rev-parse", "HEAD")
    # On a branch propose made, a person's commit lands while propose rebuilds it.
    monkeypatch.setattr(branches, "_trailer", trailer)
    team.git("branch", "-D", mini)
    assert cli(team, "propose").code == 0
    team.write("NEWS.md", "Main moves on.\n")
    team.commit("main moves on")
    ours = _git(team, "rev-parse", mini)

    def reviewed(tree: str) -> str:
        # As propose commits mini's pin on the new main: a reviewer's commit lands.
        fresh = holds(tree, "NEWS.md") and holds(tree, "registry/models/mini-2026-10-01.yaml")
        if fresh and _git(team, "rev-parse", mini) == ours:
            made = _git(team, "commit-tree", f"{ours}^{{tree}}", "-p", ours, "-m", "reviewed")
            team.git("update-ref", f"refs/heads/{mini}", made)
        return trailer(tree)

    monkeypatch.setattr(branches, "_trailer", reviewed)
    assert kept()
    assert _git(team, "log", "-1", "--format=%s", mini) == "reviewed"


def test_two_proposes_at_once_on_one_repository_make_each_branch_once(team: Repo, tmp_path):
    """Two processes started together, twice (the second time main has moved): both end
    well, each branch is written by one of them, and it is one commit of propose's on the
    current main."""
    import os
    import subprocess
    import sys

    for round in range(2):
        if round:
            team.write("README.md", "A registry.\n")
            team.commit("main moves on")
        both = [
            subprocess.Popen(
                [sys.executable, "-m", "evalreg", "-C", str(team.root), "propose"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=os.environ,
            )
            for _ in range(2)
        ]
        said = ""
        for p in both:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and "Traceback" not in err, err
            said += out
        # Each branch made (then moved) by one of the two; the other found it done.
        assert said.count(": updated (" if round else ": created (") == 3, said
        head = _git(team, "rev-parse", "HEAD")
        made = _git(team, "for-each-ref", "--format=%(refname:short)", "refs/heads/evalreg/")
        assert len(made.splitlines()) == 3, made
        for branch in made.splitlines():
            assert _git(team, "rev-list", "--parents", "-n", "1", branch).split()[1:] == [head]
            assert "Proposed-by: evalreg propose (tree " in _git(team, "log", "-1", branch)
    team.git("fsck", "--no-progress")


def test_a_branch_git_cannot_make_is_named_with_gits_reason(team: Repo, cli):
    mini = "evalreg/propose/mini-gpt-4o-mini-2026-10-01"
    team.git("branch", f"{mini}/wip", "HEAD")  # a ref below the name: git cannot make it
    done = cli(team, "propose", "--json")
    assert done.code == 1 and "Traceback" not in done.err
    assert f"'refs/heads/{mini}/wip' exists" in done.err
    made = {p["branch"] for p in json.loads(done.out)["proposals"]}
    assert mini not in made and "evalreg/propose/flash-gemini-1.5-flash-002" in made
