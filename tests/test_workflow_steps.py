"""The scaffolded workflows, executed step by step as a fresh GitHub runner would run them.

A registry made by ``evalreg init`` (two branches: main and a pull request that changes a
result) is served as the "GitHub" repository; every ``run:`` step of each workflow runs in
order in a fresh virtual environment whose evalreg comes from the workflow's own install
step (``--evalreg-spec`` points at a wheel of this checkout, so no index is needed), with
GitHub's variables and a realistic event payload, ``uses:`` steps replaced by local
equivalents (``tests/support/actions.py``) and the GitHub API stand-in on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from evalreg.cli import main

from conftest import session_environment
from support.actions import Job, run_job
from support.github_api import GitHubAPI
from support.s3 import AWS, s3_server

ROOT = Path(__file__).resolve().parents[1]
REPO = "acme/registry"
BOT = "github-actions[bot]"
TOKEN = "ghs_workflowtoken0123456789"
GIT = ["git", "-c", "user.name=Dana", "-c", "user.email=dana@example.com"]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="steps run under bash")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@dataclass
class Runner:
    """A fresh Python for the jobs, and the wheel its install step installs."""

    bin: Path
    wheel: Path


def copy_checkout(dest: Path, *paths: str) -> None:
    """Copy this checkout's files as they are now (tracked, or new and not ignored; below
    ``paths``, or all of them) to ``dest``: what a clone of it would hold, uncommitted
    changes included, and none of a developer's environments and caches."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z", *paths],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for rel in filter(None, (f.decode() for f in files)):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, dest / rel)


@pytest.fixture(scope="session")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    base = tmp_path_factory.mktemp("runner")
    # A wheel of this checkout as it is now, built from a copy so the tree stays clean.
    source = base / "src"
    copy_checkout(source, "pyproject.toml", "README.md", "runners")
    wheels = base / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(source),
            "-w",
            str(wheels),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("evalreg-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # An old bundled setuptools would shadow the one that builds evalreg (`pip install -e .`).
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "setuptools"],
        check=True,
        capture_output=True,
    )
    # evalreg's dependencies, already installed here, are visible to the fresh environment
    # (pip finds them satisfied, so the install step needs no index); evalreg itself is not.
    deps = base / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("evalreg", "__editable__")):
            (deps / entry.name).symlink_to(entry)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "outer-deps.pth").write_text(f"{deps}\n")
    # What installing evalreg's dependency dvc would put on PATH, run by this Python.
    dvc = venv / "bin" / "dvc"
    dvc.write_text(f'#!/bin/sh\nexec "{venv / "bin" / "python"}" -m dvc "$@"\n')
    dvc.chmod(0o755)
    # The wheel's requirements are resolved against them once, here, as a job's install
    # step resolves them. Then the runner's pip resolves nothing more (its configuration,
    # read from the environment's own pip.conf): a job's install installs what it names,
    # where resolving a hundred installed requirements again cost two seconds a job.
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-index", str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    (venv / "pip.conf").write_text("[install]\nno-deps = true\n")
    return Runner(venv / "bin", wheel)


@dataclass
class Registry:
    origin: Path  # the "GitHub" repository (a bare clone of the author's)
    author: Path
    base_sha: str
    pr_sha: str
    broken_sha: str
    main_after_merge: str


@dataclass
class LaterBranches:
    """Branches only the scenarios of ``nox -s slow`` use, made on demand."""

    main_after_fork: str
    """Main once a fork's pull request (#9) whose run never pushed is merged."""
    moved_sha: str
    """A pull request that moves the DVC remote to a copy holding its new results."""


def _evalreg(cwd: Path, *args: str) -> None:
    """The author's ``evalreg ARGS`` in ``cwd``, in this process (what is tested here is
    the workflows' steps, each a process of the runner's own)."""
    assert main(["-C", str(cwd), *args]) == 0


@pytest.fixture(scope="module")
def registry(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> Registry:
    with session_environment(tmp_path_factory) as env:
        env.delenv("OPENAI_API_KEY")  # the author has no key for the example's hosted model
        return _registry(runner, tmp_path_factory.mktemp("registry"))


def _registry(runner: Runner, base: Path) -> Registry:
    author = base / "author"
    _evalreg(base, "init", str(author), f"--evalreg-spec={runner.wheel}")
    # The author has no key for the example's hosted model: its cell stays pending.
    _evalreg(author, "run", "--allow-pending")
    # The example's baseline misses a gate, so keeping it as the declared choice takes a
    # waiver, as it would in a team's registry.
    _evalreg(
        author,
        "select",
        "faq-routing",
        "keyword-router",
        "--reason",
        "baseline until a model is approved",
        "--approver",
        "dana",
    )
    _evalreg(author, "report")
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "Start an eval registry")
    base_sha = _git(author, "rev-parse", "HEAD")
    # The pull request: a rule of the keyword router changes, its results are re-run.
    _git(author, "checkout", "-qb", "better-router")
    router = author / "registry/systems/keyword_router.py"
    text = router.read_text()
    router.write_text(text + "\n# Also route refunds.\n")
    _evalreg(author, "run", "--allow-pending")
    _evalreg(author, "report")
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "Keyword router: note on refunds")
    pr_sha = _git(author, "rev-parse", "HEAD")
    # A pull request whose numbers nobody can reproduce: the remote points nowhere.
    _git(author, "checkout", "-qb", "broken-remote", base_sha)
    config = author / ".dvc/config"
    config.write_text(config.read_text().replace("../dvc-storage", "../no-such-remote"))
    _git(author, "commit", "-qam", "Move the DVC remote")
    broken_sha = _git(author, "rev-parse", "HEAD")
    # What main becomes when the pull request merges (for the push-to-main job).
    _git(author, "checkout", "-qb", "merged", "main")
    _git(author, "merge", "-q", "--no-ff", "better-router", "-m", "Merge pull request #7")
    main_after_merge = _git(author, "rev-parse", "HEAD")
    _git(author, "checkout", "-q", "main")
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(author), str(origin)], check=True)
    # GitHub keeps each pull request's head under refs/pull/N/head; a plain clone lacks it.
    subprocess.run(["git", "-C", str(origin), "update-ref", "refs/pull/7/head", pr_sha], check=True)
    return Registry(origin, author, base_sha, pr_sha, broken_sha, main_after_merge)


@pytest.fixture(scope="module")
def later(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> LaterBranches:
    with session_environment(tmp_path_factory) as env:
        env.delenv("OPENAI_API_KEY")
        return _later_branches(registry, tmp_path_factory.mktemp("later"))


def _later_branches(registry: Registry, base: Path) -> LaterBranches:
    author, base_sha = registry.author, registry.base_sha
    router = author / "registry/systems/keyword_router.py"
    config = author / ".dvc/config"
    text = router.read_text()  # main's, as at base_sha
    # A pull request that points the remote at a copy and buys its new results into it.
    copy = base / "copy-remote"
    shutil.copytree(author / "dvc-storage", copy)
    _git(author, "checkout", "-qb", "moved-remote", base_sha)
    config.write_text(config.read_text().replace("../dvc-storage", str(copy)))
    router.write_text(text + "\n# Also route invoices.\n")
    _evalreg(author, "run", "--allow-pending")
    _evalreg(author, "report")
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "Keyword router: note on invoices, on our copy of the remote")
    moved_sha = _git(author, "rev-parse", "HEAD")
    # A fork's pull request whose results were bought with --no-push, merged anyway.
    _git(author, "checkout", "-qb", "fork-no-push", base_sha)
    router.write_text(text + "\n# Also route returns.\n")
    _evalreg(author, "run", "--allow-pending", "--no-push")
    _evalreg(author, "report")
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "Keyword router: note on returns")
    _git(author, "checkout", "-qb", "merged-fork", "main")
    _git(author, "merge", "-q", "--no-ff", "fork-no-push", "-m", FORK_MERGE)
    main_after_fork = _git(author, "rev-parse", "HEAD")
    _git(author, "checkout", "-q", "main")
    for branch in ("moved-remote", "merged-fork"):
        _git(author, "push", "-q", str(registry.origin), branch)
    return LaterBranches(main_after_fork, moved_sha)


FORK_MERGE = "Merge pull request #9 from outsider/registry"


def _workflow(path: Path) -> dict[str, Any]:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


class Actions:
    """Local stand-ins for the actions the workflows use."""

    def __init__(self, origin: Path, ref: str, artifacts: Path) -> None:
        self.origin, self.ref, self.artifacts = origin, ref, artifacts

    def __call__(self, action: str, given: dict[str, str], workspace: Path) -> None:
        if action == "actions/checkout":
            assert given.get("fetch-depth") == "0" and given.get("persist-credentials") == "false"
            subprocess.run(["git", "clone", "-q", str(self.origin), str(workspace)], check=True)
            _git(workspace, "checkout", "-q", self.ref)
        elif action == "actions/setup-python":
            pass  # the fresh virtual environment leads PATH
        elif action == "actions/upload-artifact":
            target = self.artifacts / given["name"]
            if target.exists():
                assert given.get("overwrite") == "true", "artifact uploaded twice"
                shutil.rmtree(target)
            target.mkdir(parents=True)
            paths = [p.strip() for p in given["path"].splitlines() if p.strip()]
            for raw in paths:
                src = Path(raw) if Path(raw).is_absolute() else workspace / raw
                if src.is_dir():
                    shutil.copytree(src, target, dirs_exist_ok=True)
                elif src.is_file():
                    shutil.copyfile(src, target / src.name)
            if given.get("if-no-files-found") == "error" and not any(target.iterdir()):
                raise RuntimeError(f"no files found for artifact {given['name']}")
        elif action == "actions/download-artifact":
            source = self.artifacts / given["name"]
            if not source.is_dir():
                raise RuntimeError(f"artifact {given['name']} not found")
            shutil.copytree(source, Path(given["path"]), dirs_exist_ok=True)
        else:
            raise AssertionError(f"no local stand-in for {action}")


def _pull_request_event(registry: Registry, sha: str, branch: str, *, fork: bool) -> dict[str, Any]:
    head_repo = "outsider/registry" if fork else REPO
    return {
        "action": "synchronize",
        "number": 7,
        "pull_request": {
            "number": 7,
            "title": "Keyword router: note on refunds",
            "head": {"ref": branch, "sha": sha, "repo": {"full_name": head_repo, "fork": fork}},
            "base": {"ref": "main", "sha": registry.base_sha, "repo": {"full_name": REPO}},
        },
        "repository": {"full_name": REPO, "default_branch": "main"},
    }


def _run(
    runner: Runner,
    registry: Registry,
    tmp: Path,
    name: str,
    *,
    event_name: str,
    event: dict[str, Any],
    ref: str,
    sha: str,
    api: GitHubAPI,
    artifacts: Path,
    extra_env: dict[str, str] | None = None,
) -> Job:
    # The workflows `evalreg init` wrote into the registry, spec filled in.
    workflow = _workflow(registry.author / ".github" / "workflows" / name)
    (job_id,) = workflow["jobs"]
    workspace = tmp / f"work-{name}"
    return run_job(
        workflow,
        job_id,
        workspace=workspace,
        event_name=event_name,
        event=event,
        repository=REPO,
        sha=sha,
        ref=f"refs/heads/{ref}",
        api_url=api.url,
        runner_temp=tmp / f"temp-{name}",
        path=str(runner.bin),
        uses=Actions(registry.origin, sha, artifacts),
        secrets={"GITHUB_TOKEN": TOKEN},
        extra_env=extra_env,
    )


def _push_event(before: str, after: str) -> dict[str, Any]:
    """The payload of a push to main from ``before`` to ``after``."""
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "head_commit": {"id": after},
    }


@pytest.fixture
def api() -> Iterator[GitHubAPI]:
    with GitHubAPI(tokens={TOKEN: BOT}, repository=REPO) as gh:
        yield gh


def test_a_pull_request_is_checked_reproduced_diffed_and_commented_on(
    runner: Runner, registry: Registry, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = _pull_request_event(registry, registry.pr_sha, "better-router", fork=False)
    pr = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-pr.yml",
        event_name="pull_request",
        event=event,
        ref="better-router",
        sha=registry.pr_sha,
        api=api,
        artifacts=artifacts,
    )
    assert pr.conclusion == "success", pr.log
    assert pr.step("Install evalreg").outcome == "success"
    assert pr.step("evalreg reproduce HEAD").outcome == "success", pr.log
    diff = json.loads((artifacts / "evalreg-diff" / "diff.json").read_text())
    assert diff["reproduction"]["status"] == "reproduced"
    assert diff["check"]["ok"] is True  # checked with --remote: every object is there
    assert json.loads((artifacts / "evalreg-diff" / "pr.json").read_text()) == {
        "pr_number": 7,
        "head_sha": registry.pr_sha,
    }
    assert "### Reproduction: reproduced" in pr.summary

    # The comment job: default-branch code, the artifact as data, a write token.
    api.add_pull(7, registry.pr_sha)
    run_event = {
        "action": "completed",
        "workflow_run": {
            "id": 4242,
            "event": "pull_request",
            "conclusion": pr.conclusion,
            "head_sha": registry.pr_sha,
            "head_branch": "better-router",
            "head_repository": {"full_name": REPO},
        },
        "repository": {"full_name": REPO},
    }
    comment = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-comment.yml",
        event_name="workflow_run",
        event=run_event,
        ref="main",
        sha=registry.base_sha,
        api=api,
        artifacts=artifacts,
    )
    assert comment.conclusion == "success", comment.log
    (posted,) = api.comments(7)
    assert posted.login == BOT
    assert posted.body.startswith("<!-- evalreg:diff -->\n## evalreg: eval diff")
    assert "| messy | 3 |" in posted.body


def test_a_same_repository_pull_request_that_cannot_be_reproduced_fails(
    runner: Runner, registry: Registry, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = _pull_request_event(registry, registry.broken_sha, "broken-remote", fork=False)
    pr = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-pr.yml",
        event_name="pull_request",
        event=event,
        ref="broken-remote",
        sha=registry.broken_sha,
        api=api,
        artifacts=artifacts,
    )
    assert pr.conclusion == "failure", pr.log
    assert pr.step("evalreg reproduce HEAD").outcome == "skipped"
    assert "::error title=Results not reproduced::dvc pull could not read" in pr.log
    # The diff is still uploaded, so the comment can say why the check failed.
    diff = json.loads((artifacts / "evalreg-diff" / "diff.json").read_text())
    assert diff["reproduction"]["status"] == "failed"
    assert "dvc pull could not read the DVC remote" in diff["reproduction"]["reason"]
    # `check --remote` cannot find the objects either: the comment states that failure,
    # naming the move of the remote that lost them.
    assert pr.step("evalreg check").outcome == "failure"
    assert diff["check"]["ok"] is False
    moved = [f for f in diff["check"]["findings"] if "this change moves to" in f["message"]]
    assert moved and all("no-such-remote" in f["message"] for f in moved)


@pytest.mark.slow  # a scenario beyond the workflow's main paths
def test_a_pull_request_that_moves_the_remote_and_changes_results_fails(
    runner: Runner, registry: Registry, later: LaterBranches, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = _pull_request_event(registry, later.moved_sha, "moved-remote", fork=False)
    pr = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-pr.yml",
        event_name="pull_request",
        event=event,
        ref="moved-remote",
        sha=later.moved_sha,
        api=api,
        artifacts=artifacts,
    )
    assert pr.conclusion == "failure", pr.log
    # Its copy holds its new responses, so its numbers reproduce: the move is what fails.
    assert pr.step("evalreg reproduce HEAD").outcome == "success", pr.log
    assert pr.step("evalreg check").outcome == "failure"
    said = " ".join(pr.step("evalreg check").stdout.split())  # however the terminal wrapped it
    assert "move the remote in a pull request of its own" in said
    diff = json.loads((artifacts / "evalreg-diff" / "diff.json").read_text())
    assert diff["check"]["ok"] is False
    [finding] = [
        f
        for f in diff["check"]["findings"]
        if "move the remote in a pull request of its own" in f["message"]
    ]
    assert finding["path"] == ".dvc/config"
    assert "moves the default DVC remote from 'storage' (../dvc-storage) to" in finding["message"]
    assert "results (reports/" in finding["message"]


def test_a_fork_pull_request_is_labelled_as_its_own_unreproduced_claims(
    runner: Runner, registry: Registry, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = _pull_request_event(registry, registry.broken_sha, "broken-remote", fork=True)
    pr = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-pr.yml",
        event_name="pull_request",
        event=event,
        ref="broken-remote",
        sha=registry.broken_sha,
        api=api,
        artifacts=artifacts,
    )
    assert pr.conclusion == "success", pr.log
    assert "::warning title=Results not reproduced::A pull request from a fork" in pr.log
    assert "### Reproduction: not_attempted" in pr.summary
    assert "not reproduced" in pr.summary
    diff = json.loads((artifacts / "evalreg-diff" / "diff.json").read_text())
    assert diff["reproduction"]["status"] == "not_attempted"
    assert "own claims, not reproduced" in diff["reproduction"]["reason"]
    assert diff["check"] is not None  # checked, without asking a remote it cannot read


def test_the_push_to_main_reverifies_and_writes_the_audit_record(
    runner: Runner, registry: Registry, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = _push_event(registry.base_sha, registry.main_after_merge)
    main = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-main.yml",
        event_name="push",
        event=event,
        ref="main",
        sha=registry.main_after_merge,
        api=api,
        artifacts=artifacts,
    )
    assert main.conclusion == "success", main.log
    assert main.step("evalreg check --remote").outcome == "success", main.log
    assert main.step("evalreg reproduce HEAD").outcome == "success"
    # The audit can read the pull requests' own commits (a squash leaves only its squash).
    assert main.step("Fetch the pull requests' own commits").outcome == "success", main.log
    fetched = _git(tmp_path / "work-evalreg-main.yml", "rev-parse", "refs/pull/7/head")
    assert fetched == registry.pr_sha
    assert (artifacts / "evalreg-audit" / "index.html").is_file()
    assert (artifacts / "evalreg-audit" / "audit.md").is_file()
    assert main.step("evalreg view").outcome == "success", main.log
    explorers = list((artifacts / "evalreg-audit" / "explorer").glob("*.html"))
    assert explorers and all(b"explorer-data" in p.read_bytes() for p in explorers)


@pytest.mark.slow  # a scenario beyond the workflow's main paths
def test_the_push_to_main_of_a_fork_merged_without_its_objects_fails_naming_them(
    runner: Runner, registry: Registry, later: LaterBranches, api: GitHubAPI, tmp_path: Path
):
    """The fork's pointers name objects its run never pushed: main's job stops at `check
    --remote`, which names each object and pull request #9, before anything reads them."""
    sha = later.main_after_fork
    event = _push_event(registry.base_sha, sha)
    main = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-main.yml",
        event_name="push",
        event=event,
        ref="main",
        sha=sha,
        api=api,
        artifacts=tmp_path / "artifacts",
    )
    assert main.conclusion == "failure", main.log
    step = main.step("evalreg check --remote")
    assert step.outcome == "failure", main.log
    lost = subprocess.run(
        ["git", "diff", "--name-only", f"{sha}^1", sha, "--", "reports"],
        cwd=registry.author,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pointers = [p for p in lost if p.endswith(".dvc")]
    assert pointers
    for pointer in pointers:
        line = next((ln for ln in main.log.splitlines() if pointer in ln), "")
        assert "pull request #9" in line and sha[:12] in line, main.log
    # The record is still written, and says the results did not reproduce.
    assert main.step("evalreg reproduce HEAD").outcome == "failure"
    assert "`evalreg run` buys its evidence again" in main.step("evalreg reproduce HEAD").stdout
    audit = (tmp_path / "artifacts" / "evalreg-audit" / "audit.md").read_text()
    assert "## Reproduction" in audit and "Could not reproduce" in audit, audit

    # A maintainer's `evalreg run` on main buys the fork's evidence again; its files
    # committed as the run lists them and pushed, main's job passes.
    fix = tmp_path / "maintainer"
    subprocess.run(["git", "clone", "-q", str(registry.origin), str(fix)], check=True)
    _git(fix, "checkout", "-q", "-b", "rebought", sha)
    done = subprocess.run(
        [sys.executable, "-m", "evalreg", "run", "--allow-pending"],
        cwd=fix,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "their responses are bought again" in done.stderr, done.stderr
    listed = done.stdout.split("To commit with the run:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    files = [ln.strip() for ln in listed if ln.startswith("  ")]
    assert "reports/rebought.jsonl" in files
    # As the note says: the report too (a re-run's latencies need not be the fork's).
    assert "Run `evalreg report` and commit them with reports/rebought.jsonl" in done.stderr
    _evalreg(fix, "report")
    _git(fix, "add", "--", *files, "reports")
    _git(fix, "commit", "-qm", "Buy again the evidence of #9")
    assert _git(fix, "status", "--porcelain") == ""
    _git(fix, "push", "-q", "origin", "rebought")
    fixed = _git(fix, "rev-parse", "HEAD")
    event = _push_event(sha, fixed)
    again = _run(
        runner,
        registry,
        tmp_path / "after",
        "evalreg-main.yml",
        event_name="push",
        event=event,
        ref="main",
        sha=fixed,
        api=api,
        artifacts=tmp_path / "artifacts-after",
    )
    assert again.conclusion == "success", again.log
    audit = (tmp_path / "artifacts-after" / "evalreg-audit" / "audit.md").read_text()
    assert "## Evidence bought again" in audit and "#9" in audit


def test_the_drift_job_installs_pulls_and_re_asks(
    runner: Runner, registry: Registry, api: GitHubAPI, tmp_path: Path
):
    artifacts = tmp_path / "artifacts"
    event = {"schedule": "17 6 * * 1", "repository": {"full_name": REPO}}
    drift = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-drift.yml",
        event_name="schedule",
        event=event,
        ref="main",
        sha=registry.base_sha,
        api=api,
        artifacts=artifacts,
    )
    assert drift.step("Install evalreg").outcome == "success", drift.log
    assert drift.step("Fetch eval sets and stored responses (DVC)").outcome == "success", drift.log
    assert drift.step("evalreg drift").outcome in ("success", "failure"), drift.log
    # Whatever it found, the report reached the summary and the artifact.
    assert (artifacts / "evalreg-drift" / "drift.md").is_file(), drift.log
    assert drift.summary.strip()


# --- a team's remote in object storage ---------------------------------------------------

BUCKET = "team-evals"


# What a team's CI gives the jobs that read its bucket (a secret in GitHub, fake here).
@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """A real S3 API (moto's server) on a loopback port, with an empty bucket: its URL."""
    with s3_server(BUCKET) as url:
        yield url


def _in(cwd: Path, *command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"
    return proc


@pytest.mark.slow  # a scenario beyond the workflow's main paths
def test_an_s3_remote_is_bought_into_by_shards_and_reproduced_by_the_workflow(
    runner: Runner, s3: str, api: GitHubAPI, tmp_path: Path
):
    evalreg, dvc = [sys.executable, "-m", "evalreg"], [sys.executable, "-m", "dvc"]
    author = tmp_path / "author"
    # `init` pushes the example eval set to the bucket (this once through boto's endpoint
    # variable: the endpoint is in no config yet).
    _in(
        tmp_path,
        *evalreg,
        "init",
        str(author),
        f"--remote=s3://{BUCKET}/evalreg",
        f"--evalreg-spec={runner.wheel}",
        env={**AWS, "AWS_ENDPOINT_URL": s3},
    )
    # Every install CI runs brings DVC's S3 plugin with evalreg.
    spec = f"{runner.wheel}[s3]"
    workflows = sorted((author / ".github/workflows").glob("*.yml"))
    assert len(workflows) == 5
    for workflow in workflows:
        assert f'EVALREG_SPEC: "{spec}"' in workflow.read_text(), workflow.name
    assert f'install: "{spec}"' in (author / "registry/evalreg.yaml").read_text()
    # The team's S3-compatible endpoint, committed as a team using MinIO would.
    _in(author, *dvc, "remote", "modify", "storage", "endpointurl", s3, env=AWS)
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "Start an eval registry")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(author), str(origin)], check=True)

    # A CI matrix: each shard buys its share in its own clone and process, and pushes it.
    shards = [tmp_path / f"shard{i}" for i in (1, 2)]
    for shard in shards:
        subprocess.run(["git", "clone", "-q", str(origin), str(shard)], check=True)
    procs = [
        subprocess.Popen(
            [*evalreg, "run", "--candidate", "keyword-router", "--shard", f"{i}/2"],
            cwd=shard,
            env={**os.environ, **AWS},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, shard in enumerate(shards, start=1)
    ]
    for proc in procs:
        out, _ = proc.communicate()
        assert proc.returncode == 0, out
    # The author takes the shards' segment pointers, pulls the segments and grades them.
    store = author / "reports/store"
    store.mkdir(parents=True, exist_ok=True)
    pointers = [p for shard in shards for p in (shard / "reports/store").glob("*.jsonl.dvc")]
    assert len(pointers) == 2, pointers
    for pointer in pointers:
        shutil.copyfile(pointer, store / pointer.name)
    _in(author, *dvc, "pull", env=AWS)
    _in(author, *evalreg, "run", "--offline", "--candidate", "keyword-router", env=AWS)
    _in(
        author,
        *evalreg,
        "select",
        "faq-routing",
        "keyword-router",
        "--reason",
        "baseline until a model is approved",
        "--approver",
        "dana",
        env=AWS,
    )
    _in(author, *evalreg, "report", env=AWS)
    _git(author, "add", "-A")
    _git(author, "commit", "-qm", "First results")
    sha = _git(author, "rev-parse", "HEAD")
    _git(author, "push", "-q", str(origin), "main")

    # The push-to-main job: a fresh clone, the workflow's own install, pull and reproduce.
    registry = Registry(origin, author, sha, sha, sha, sha)
    event = _push_event(sha, sha)
    main = _run(
        runner,
        registry,
        tmp_path,
        "evalreg-main.yml",
        event_name="push",
        event=event,
        ref="main",
        sha=sha,
        api=api,
        artifacts=tmp_path / "artifacts",
        extra_env=AWS,
    )
    assert main.step("Install evalreg").outcome == "success", main.log
    pulled = main.step("Fetch eval sets, responses and per-item records (DVC)")
    assert pulled.outcome == "success", main.log
    assert main.step("evalreg check").outcome == "success", main.log
    assert main.step("evalreg reproduce HEAD").outcome == "success", main.log
    assert "identical" in main.step("evalreg reproduce HEAD").stdout


# --- this repository's own workflows ----------------------------------------------------

OWN = ROOT / ".github" / "workflows"


@pytest.fixture(scope="module")
def own_repository(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A "GitHub" copy of this repository at its last commit, and a pull request on it."""
    base = tmp_path_factory.mktemp("own")
    author = base / "author"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(author)], check=True)
    _git(author, "checkout", "-qB", "main")
    base_sha = _git(author, "rev-parse", "HEAD")
    _git(author, "checkout", "-qb", "docs")
    (author / "README.md").write_text((author / "README.md").read_text() + "\nA note.\n")
    _git(author, "commit", "-qam", "README: a note")
    head_sha = _git(author, "rev-parse", "HEAD")
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(author), str(origin)], check=True)
    return origin, base_sha, head_sha


@pytest.mark.slow  # the scaffolded pull-request job's main path runs above in the fast suite
def test_this_repositorys_pull_request_workflow_runs_on_a_fresh_runner(
    runner: Runner, own_repository: tuple[Path, str, str], api: GitHubAPI, tmp_path: Path
):
    origin, base_sha, head_sha = own_repository
    workflow = _workflow(OWN / "evalreg-pr.yml")
    artifacts = tmp_path / "artifacts"
    event = {
        "number": 3,
        "pull_request": {
            "number": 3,
            "head": {"ref": "docs", "sha": head_sha, "repo": {"full_name": REPO}},
            "base": {"ref": "main", "sha": base_sha, "repo": {"full_name": REPO}},
        },
        "repository": {"full_name": REPO},
    }
    job = run_job(
        workflow,
        "evalreg",
        workspace=tmp_path / "work",
        event_name="pull_request",
        event=event,
        repository=REPO,
        sha=head_sha,
        ref="refs/pull/3/merge",
        api_url=api.url,
        runner_temp=tmp_path / "temp",
        path=str(runner.bin),
        uses=Actions(origin, head_sha, artifacts),
        # `pip install -e .` builds with the setuptools already here instead of an index.
        extra_env={"PIP_NO_BUILD_ISOLATION": "0"},
    )
    assert job.conclusion == "success", job.log
    assert job.step("evalreg reproduce HEAD").outcome == "success"
    diff = json.loads((artifacts / "evalreg-diff" / "diff.json").read_text())
    assert diff["reproduction"]["status"] == "reproduced"


@pytest.mark.parametrize(("tag", "ok"), [("v0.1.0", True), ("v9.9.9", False)])
def test_the_release_refuses_a_tag_that_is_not_the_packages_version(
    tag: str, ok: bool, runner: Runner, api: GitHubAPI, tmp_path: Path
):
    from evalreg import __version__

    assert __version__ == "0.1.0" or tag != "v0.1.0", "update this test's tag"
    workflow = _workflow(OWN / "release.yml")
    # The version check only: building needs an index, which a test has not.
    build = workflow["jobs"]["build"]
    build["steps"] = [
        s for s in build["steps"] if s.get("name") == "The tag names the version being built"
    ]
    assert build["steps"]
    copy_checkout(tmp_path / "work")
    job = run_job(
        workflow,
        "build",
        workspace=tmp_path / "work",
        event_name="push",
        event={"ref": f"refs/tags/{tag}"},
        repository=REPO,
        sha="0" * 40,
        ref=f"refs/tags/{tag}",
        api_url=api.url,
        runner_temp=tmp_path / "temp",
        path=str(runner.bin),
        uses=Actions(tmp_path, "HEAD", tmp_path / "artifacts"),
    )
    assert (job.conclusion == "success") is ok, job.log
    if not ok:
        assert "::error title=Tag and version differ::" in job.log


def test_this_repositorys_ci_commands_exist_where_ci_installs_them():
    # Running them here would run this test suite inside itself: check that each command
    # CI runs comes with the extra its job installs (installed here, or named by it).
    import re
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]

    def provided(extra: str) -> set[str]:
        names: set[str] = set()
        for requirement in extras[extra]:
            name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
            inner = re.fullmatch(r"evalreg\[(\w+)\]", requirement.split(";")[0].strip())
            names |= provided(inner.group(1)) if inner else {name}
        return names

    workflow = _workflow(OWN / "ci.yml")
    for job in workflow["jobs"].values():
        scripts = [str(s["run"]) for s in job["steps"] if "run" in s]
        installs = [s for s in scripts if "pip install -e" in s]
        assert installs, job
        installed: set[str] = set()
        for script in scripts:
            for command in script.split("&&"):
                words = command.split()
                if words[:3] == ["python", "-m", "pip"]:
                    extra = words[-1].strip("\"'").removeprefix(".[").removesuffix("]")
                    assert words[-1] == "." or extra in extras, command
                    installed |= provided(extra) if extra in extras else set()
                elif words[:2] == ["python", "-m"]:
                    __import__(words[2])
                else:
                    here = shutil.which(words[0], path=str(Path(sys.executable).parent))
                    assert here or words[0] in installed, words


# --- the weekly proposals ------------------------------------------------------------------


def test_the_propose_job_opens_a_pull_request_for_a_newer_snapshot(
    runner: Runner, api: GitHubAPI, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
):
    from support.model_lists import ModelLists, model_lists

    listed = ["gpt-4o-mini-2024-07-18", "gpt-4o-mini-2026-10-01", "gpt-4o-mini"]
    with model_lists(ModelLists(openai=listed)) as lists:
        author = tmp_path / "author"
        with session_environment(tmp_path_factory):
            _evalreg(tmp_path, "init", str(author), f"--evalreg-spec={runner.wheel}")
        pin = author / "registry/models/gpt-4o-mini.yaml"
        pin.write_text(pin.read_text().replace("https://api.openai.com/v1", f"{lists.url}/v1"))
        _git(author, "add", "-A")
        _git(author, "commit", "-qm", "Start an eval registry")
        sha = _git(author, "rev-parse", "HEAD")
        origin = tmp_path / "origin.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(author), str(origin)], check=True)
        api.git_dir = origin
        registry = Registry(origin, author, sha, sha, sha, sha)
        event = {"schedule": "41 5 * * 1", "repository": {"full_name": REPO}}
        workflow = _workflow(author / ".github/workflows/evalreg-propose.yml")
        job = run_job(
            workflow,
            "propose",
            workspace=tmp_path / "work",
            event_name="schedule",
            event=event,
            repository=REPO,
            sha=sha,
            ref="refs/heads/main",
            api_url=api.url,
            runner_temp=tmp_path / "temp",
            path=str(runner.bin),
            uses=Actions(registry.origin, sha, tmp_path / "artifacts"),
            secrets={"GITHUB_TOKEN": TOKEN, "OPENAI_API_KEY": lists.key},
        )
    assert job.conclusion == "success", job.log
    branch = "evalreg/propose/gpt-4o-mini-gpt-4o-mini-2026-10-01"
    pushed = subprocess.run(
        ["git", "rev-parse", f"refs/heads/{branch}"], cwd=origin, capture_output=True, text=True
    ).stdout.strip()
    assert pushed, job.log
    # The pull request GitHub would show: the pushed branch into main, opened by the bot.
    opened = [r for r in api.writes() if r.method == "POST" and r.path.endswith("/pulls")]
    assert [r.json["head"] for r in opened] == [branch] and opened[0].json["base"] == "main"
    assert opened[0].json["title"] == "Propose gpt-4o-mini-2026-10-01 for gpt-4o-mini"
    # The commit is the bot's, and the token never reached the repository's config.
    author_line = _git(origin, "log", "-1", "--format=%an <%ae>", pushed)
    assert author_line.startswith("github-actions[bot] <")
    assert TOKEN not in (tmp_path / "work/.git/config").read_text()
