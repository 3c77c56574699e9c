"""The Markdown a reader sees, pinned byte for byte: the governance report, the diff comment
as posted on the pull request, and the audit record, from one deterministic history.

A change to any of them shows up in review as a change to ``tests/snapshots/*.md``; to accept
one, run ``EVALREG_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshots.py`` (see
``support/snapshots.py`` for what is normalised, and why).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.cli import main
from evalreg.providers import http as http_layer
from evalreg.providers import python as python_provider

from conftest import GIT_ENV, LIVE_KEY, Repo, build_registry, label_of
from support.github_api import GitHubAPI
from support.llm_server import LLMServer
from support.snapshots import assert_snapshot, normalise

BOT = "github-actions[bot]"
TOKEN = "ghs_snapshot0123456789"
HOSTILE = "<img src=x onerror=alert(1)> @octocat acme/registry#1 | pipe"
DATES = {
    "registry": "2026-01-05T09:00:00Z",
    "on DVC": "2026-01-05T09:30:00Z",
    "main results": "2026-01-06T10:00:00Z",
    "warmer pin": "2026-01-07T11:00:00Z",
}


class _FrozenClock:
    """The ``time`` module with ``perf_counter`` stopped: every measured latency is 0 ms.

    Latency is wall-clock time and differs on every run; everything else a provider answers
    here is deterministic, and the pages still print the latency columns."""

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    @staticmethod
    def perf_counter() -> float:
        return 1000.0


@dataclass(frozen=True)
class History:
    root: Path
    commits: dict[str, str]
    port: int

    def normalise(self, text: str) -> str:
        return normalise(text, self.commits, self.port)


def _worse(request) -> str:
    """The warmer pin's model: "b" for items 0-3, so wrong on items 1 and 3 (hostile text on 1)."""
    text = request.body["messages"][-1]["content"]
    if text.endswith("1"):
        return json.dumps({"label": "b", "note": HOSTILE})
    return json.dumps({"label": "b" if text.endswith(("0", "1", "2", "3")) else "a"})


def _cli(root: Path, *args: str) -> None:
    code = main(["-C", str(root), *args])
    assert code == 0, args


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """Main with the conftest registry on DVC and its results; a branch ``warmer`` whose pin
    change makes the model worse on two items, with its results. Fixed dates, identities and
    latencies; the model is the loopback server."""
    root = tmp_path_factory.mktemp("snapshots") / "repo"
    home = tmp_path_factory.mktemp("snapshots-home")
    commits: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp, LLMServer(api_key=LIVE_KEY) as server:
        for key, value in {**GIT_ENV, "HOME": str(home), "DVC_NO_ANALYTICS": "1"}.items():
            mp.setenv(key, value)
        mp.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        mp.setenv("OPENAI_API_KEY", LIVE_KEY)
        mp.setattr(http_layer, "time", _FrozenClock())
        mp.setattr(python_provider, "time", _FrozenClock())
        server.responder = label_of
        repo = Repo(root)

        def commit(name: str) -> None:
            mp.setenv("GIT_AUTHOR_DATE", DATES[name])
            mp.setenv("GIT_COMMITTER_DATE", DATES[name])
            commits[name] = repo.commit(name)

        build_registry(repo)
        commit("registry")
        repo.write(
            "registry/models/mini.yaml",
            repo.read("registry/models/mini.yaml").replace(
                "https://api.openai.com/v1", server.base_url
            ),
        )
        repo.git("rm", "-q", "--cached", "evalsets/messages.jsonl")
        dvcrepo.init(repo.root, remote=None)
        _cli(root, "evalset", "add", str(root / "evalsets/messages.jsonl"))
        commit("on DVC")
        _cli(root, "run")
        _cli(root, "report")
        commit("main results")
        repo.git("checkout", "-q", "-b", "warmer")
        server.responder = _worse
        repo.write(
            "registry/models/mini.yaml",
            repo.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.9"),
        )
        _cli(root, "run")
        _cli(root, "report")
        commit("warmer pin")
        port = server.port
    yield History(root, commits, port)


@pytest.fixture
def copy(history: History, tmp_path: Path) -> Repo:
    """This test's own copy of the history."""
    shutil.copytree(history.root, tmp_path / "repo", symlinks=True)
    return Repo(tmp_path / "repo")


def test_the_governance_report(copy: Repo, history: History, cli):
    result = cli(copy, "report")
    assert result.code == 0, result.err
    assert copy.git("status", "--porcelain") == ""  # the committed report is this one
    assert_snapshot("governance-report.md", history.normalise(copy.read("reports/labels.md")))


def test_the_diff_comment_as_posted(copy: Repo, history: History, cli, monkeypatch, tmp_path):
    diff_file = tmp_path / "diff.json"
    assert cli(copy, "diff", "main", "--format", "json", "-o", str(diff_file)).code == 0
    head = history.commits["warmer pin"]
    with GitHubAPI(tokens={TOKEN: BOT}) as gh:
        gh.add_pull(12, head)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_REPOSITORY", gh.repository)
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
        posted = cli(copy, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
        assert posted.code == 0, posted.err
        [comment] = gh.comments(12)
    assert_snapshot("diff-comment.md", history.normalise(comment.body))


def test_the_diff_markdown_is_the_comment_without_its_marker(copy: Repo, history: History, cli):
    markdown = cli(copy, "diff", "main").out
    pinned = (Path(__file__).parent / "snapshots" / "diff-comment.md").read_text(encoding="utf-8")
    assert history.normalise(markdown).strip() in pinned


def test_the_audit_record(copy: Repo, history: History, cli, tmp_path):
    out = tmp_path / "audit.md"
    result = cli(copy, "audit", "-o", str(out))
    assert result.code == 0, result.err
    assert_snapshot("audit-record.md", history.normalise(out.read_text(encoding="utf-8")))
