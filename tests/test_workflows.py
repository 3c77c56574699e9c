"""The GitHub Actions workflows: this repository's and the ones ``evalreg init`` scaffolds.

actionlint and zizmor find nothing in them, and the properties the fork-safe eval-on-PR
design rests on hold: the pull-request workflow runs untrusted code with no secrets and a
read-only token; the comment workflow holds the write token, never checks out the pull
request's code, and treats the artifact it downloads as untrusted data.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_SETS = {
    "repository": ROOT / ".github" / "workflows",
    # `evalreg init` copies template/github/ to .github/ in the new registry.
    "scaffold": ROOT / "runners" / "evalreg" / "scaffold" / "template" / "github" / "workflows",
}
PR, COMMENT, MAIN = "evalreg-pr.yml", "evalreg-comment.yml", "evalreg-main.yml"
DOCS = "docs.yml"  # this repository's own: a team registry has no Sphinx site
ARTIFACT = "evalreg-diff"
SHA_PIN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(?:/[^@\s]+)?@[0-9a-f]{40}$")
# Findings that are by design; anything else must be fixed, not ignored.
ALLOWED_IGNORES = {(COMMENT, "dangerous-triggers")}

TOOL_MISSING = (
    "{name} is not installed. It is part of the test extra: python -m pip install -e '.[test]'"
)


def _all_files() -> list[Path]:
    files = [p for d in WORKFLOW_SETS.values() for p in sorted(d.glob("*.yml"))]
    assert files, "no workflow files found"
    return files


def _tool(name: str) -> str | None:
    """``name`` from this interpreter's environment first, then from PATH."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which(name, path=search)


def _required_tool(name: str) -> str:
    found = _tool(name)
    if found is None:
        pytest.fail(TOOL_MISSING.format(name=name), pytrace=False)
    return found


def _load(path: Path) -> dict[str, Any]:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def _workflow(kind: str, name: str) -> dict[str, Any]:
    return _load(WORKFLOW_SETS[kind] / name)


def _steps(workflow: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for job in workflow["jobs"].values():
        yield from job.get("steps", [])


def _uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).split("@")[0] == action


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _effective_permissions(workflow: dict[str, Any], job: dict[str, Any]) -> Any:
    # A job's `permissions` replaces the workflow's; absent both, GitHub's broad default.
    return job["permissions"] if "permissions" in job else workflow.get("permissions")


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow["on"]
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on)


# --- the linters ------------------------------------------------------------------------


def test_actionlint_finds_nothing():
    actionlint = _required_tool("actionlint")
    shellcheck = _tool("shellcheck")  # checks the `run:` scripts too when it is installed
    result = subprocess.run(
        [
            actionlint,
            "-no-color",
            "-format",
            "{{json .}}",
            f"-shellcheck={shellcheck or ''}",
            "-pyflakes=",
            *map(str, _all_files()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode in (0, 1), f"actionlint failed to run:\n{result.stderr}"
    errors = json.loads(result.stdout or "[]") or []
    assert errors == [], "actionlint:\n" + "\n".join(
        f"{e['filepath']}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]" for e in errors
    )
    assert result.returncode == 0, result.stderr


def test_zizmor_finds_nothing():
    zizmor = _required_tool("zizmor")
    result = subprocess.run(
        # Offline: no GitHub API calls. No config file: every ignore is inline, justified.
        [zizmor, "--offline", "--no-config", "--format", "json", *map(str, _all_files())],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        findings = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"zizmor failed to run (exit {result.returncode}):\n{result.stderr}")
    assert findings == [], "zizmor:\n" + "\n".join(
        f"{loc['symbolic']['key']['Local']['verbatim_path']}:"
        f"{loc['concrete']['location']['start_point']['row'] + 1}: "
        f"{f['ident']}: {f['desc']} ({loc['symbolic'].get('annotation', '')})"
        for f in findings
        for loc in f["locations"][:1]
    )
    assert result.returncode == 0, result.stderr


def test_zizmor_ignores_are_few_and_justified():
    seen = set()
    for path in _all_files():
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.search(r"#\s*zizmor:\s*ignore\[([^\]]*)\](.*)$", line)
            if match is None:
                continue
            for audit in (a.strip() for a in match.group(1).split(",")):
                assert (path.name, audit) in ALLOWED_IGNORES, (
                    f"{path}: zizmor ignore[{audit}] is not one of the by-design findings; "
                    "fix the workflow instead"
                )
                seen.add((path.parent, path.name, audit))
            assert len(match.group(2).strip()) >= 40, f"{path}: ignore without a reason: {line}"
    # Each set carries the comment workflow's one ignore, and nothing else.
    assert {(name, audit) for _, name, audit in seen} <= ALLOWED_IGNORES
    assert len(seen) == len(WORKFLOW_SETS) * len(ALLOWED_IGNORES)


# --- properties of every workflow -------------------------------------------------------


def test_a_team_registry_gets_the_workflows_this_repository_runs():
    scaffold = {p.name for p in WORKFLOW_SETS["scaffold"].glob("*.yml")}
    assert {PR, COMMENT, MAIN} <= scaffold
    assert scaffold <= {p.name for p in WORKFLOW_SETS["repository"].glob("*.yml")}


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_action_is_pinned_to_a_commit_with_its_version_noted(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for step in _steps(_load(path)):
        ref = step.get("uses")
        if ref is None or str(ref).startswith("./"):
            continue
        assert SHA_PIN.match(ref), f"{path.name}: {ref} is not pinned to a 40-hex commit"
        line = next(line for line in lines if f"uses: {ref}" in line)
        assert re.search(r"#\s*v\d", line), f"{path.name}: {ref} has no version comment"


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_checkout_has_full_history_and_keeps_no_credentials(path: Path):
    for step in _steps(_load(path)):
        if _uses(step, "actions/checkout"):
            options = step.get("with") or {}
            assert options.get("fetch-depth") == 0, f"{path.name}: checkout without full history"
            assert options.get("persist-credentials") is False, (
                f"{path.name}: checkout leaves the token in .git/config"
            )


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_no_expression_is_spliced_into_a_script(path: Path):
    # Values reach scripts through `env:` only: an expression inside `run:` is template
    # injection waiting for an attacker-chosen branch name or title.
    for step in _steps(_load(path)):
        assert "${{" not in str(step.get("run", "")), f"{path.name}: {step.get('name')}"


# --- the pull-request workflow ----------------------------------------------------------


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_pr_workflow_runs_without_secrets_or_write_access(kind: str):
    workflow = _workflow(kind, PR)
    assert set(_triggers(workflow)) == {"pull_request"}
    assert not any("secrets." in s for s in _strings(workflow)), "secrets in the PR workflow"
    assert workflow["permissions"] == {"contents": "read"}
    for job in workflow["jobs"].values():
        assert _effective_permissions(workflow, job) == {"contents": "read"}


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_pr_workflow_validates_reproduces_diffs_and_uploads(kind: str):
    workflow = _workflow(kind, PR)
    steps = list(_steps(workflow))
    scripts = "\n".join(str(s.get("run", "")) for s in steps)
    # A pull request cannot read a team's remote (no secrets here): that must not stop CI.
    assert re.search(r"^(dvc pull \|\| |if dvc pull; then$)", scripts, re.M), scripts
    assert 'evalreg check "$@" --json > "$ARTIFACT_DIR/check.json"' in scripts
    assert "set -- --remote" in scripts  # a same-repository PR leaves its objects on the remote
    assert '--check "$ARTIFACT_DIR/check.json"' in scripts
    reproduce = next(s for s in steps if s.get("run") == "evalreg reproduce HEAD")
    # Without the stored responses there is nothing to re-grade: skipped, and said so.
    assert "steps.dvc.outputs.pulled == 'true'" in reproduce["if"]
    verdict = next(s for s in steps if s.get("id") == "reproduction")
    assert verdict["env"]["FROM_FORK"] == (
        "${{ github.event.pull_request.head.repo.full_name != github.repository }}"
    )
    # The last step fails the job when a same-repository PR's results were not reproduced.
    assert "steps.reproduction.outputs.status == 'failed'" in steps[-1]["if"]
    assert "exit 1" in steps[-1]["run"]
    assert re.search(r'^evalreg diff "origin/\$BASE_REF" --format json --output ', scripts, re.M)
    assert '--reproduction "$REPRODUCTION" --reproduction-reason "$REPRODUCTION_REASON"' in scripts
    assert "GITHUB_STEP_SUMMARY" in scripts
    diff_step = next(s for s in steps if "evalreg diff" in str(s.get("run", "")))
    assert diff_step["env"]["BASE_REF"] == "${{ github.base_ref }}"
    record = next(s for s in steps if "pr.json" in str(s.get("run", "")))
    assert record["env"]["PR_NUMBER"] == "${{ github.event.pull_request.number }}"
    assert record["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    upload = next(s for s in steps if _uses(s, "actions/upload-artifact"))
    assert upload["with"]["name"] == ARTIFACT
    uploaded = {Path(p.strip()).name for p in upload["with"]["path"].split("\n") if p.strip()}
    assert uploaded == {"diff.json", "pr.json"}


# --- the comment workflow ---------------------------------------------------------------


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_comment_workflow_runs_after_the_pr_workflow_with_least_privilege(kind: str):
    workflow = _workflow(kind, COMMENT)
    triggers = _triggers(workflow)
    assert set(triggers) == {"workflow_run"}
    assert triggers["workflow_run"]["workflows"] == [_workflow(kind, PR)["name"]]
    assert triggers["workflow_run"]["types"] == ["completed"]
    assert workflow.get("permissions") in ({}, {"pull-requests": "write", "actions": "read"})
    for job in workflow["jobs"].values():
        assert _effective_permissions(workflow, job) == {
            "pull-requests": "write",
            "actions": "read",
        }
        assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
        # Two runs for the same pull-request head never race on the sticky comment.
        assert "concurrency" in job or "concurrency" in workflow


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_comment_workflow_never_checks_out_the_pull_requests_code(kind: str):
    workflow = _workflow(kind, COMMENT)
    checkouts = [s for s in _steps(workflow) if _uses(s, "actions/checkout")]
    if kind == "scaffold":
        assert checkouts == [], "a team's comment workflow installs evalreg; it needs no code"
    for step in checkouts:
        options = step.get("with") or {}
        # No `ref` and no `repository`: the default branch of this repository, nothing else.
        assert "ref" not in options and "repository" not in options, options
    for step in _steps(workflow):
        for text in _strings({k: v for k, v in step.items() if k != "name"}):
            assert "workflow_run.head_branch" not in text, step
            assert "pull_request.head" not in text, step


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_comment_workflow_treats_the_artifact_as_untrusted_data(kind: str):
    workflow = _workflow(kind, COMMENT)
    steps = list(_steps(workflow))
    download = next(s for s in steps if _uses(s, "actions/download-artifact"))
    assert download["with"]["name"] == ARTIFACT
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["github-token"]
    # Extracted outside the workspace, so it can never overwrite anything that runs.
    assert download["with"]["path"].startswith("${{ runner.temp }}/")
    validate = next(s for s in steps if s.get("id") == "pr")
    assert validate["env"]["RUN_HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    post = next(s for s in steps if "evalreg comment" in str(s.get("run", "")))
    assert post["run"].strip() == (
        'evalreg comment --diff "$DIFF" --pr "$PR" --head-sha "$HEAD_SHA"'
    )
    assert post["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    assert post["env"]["PR"] == "${{ steps.pr.outputs.number }}"
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "steps.pr.outcome == 'success'" in post["if"]


HEAD = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.skipif(shutil.which("bash") is None, reason="the step runs under bash")
@pytest.mark.parametrize("kind", WORKFLOW_SETS)
@pytest.mark.parametrize(
    ("pr_json", "accepted"),
    [
        pytest.param(json.dumps({"pr_number": 42, "head_sha": HEAD}), True, id="valid"),
        pytest.param(json.dumps({"pr_number": "42", "head_sha": HEAD}), False, id="number-str"),
        pytest.param(json.dumps({"pr_number": 42.0, "head_sha": HEAD}), False, id="float"),
        pytest.param(json.dumps({"pr_number": True, "head_sha": HEAD}), False, id="bool"),
        pytest.param(json.dumps({"pr_number": 0, "head_sha": HEAD}), False, id="zero"),
        pytest.param(json.dumps({"pr_number": -7, "head_sha": HEAD}), False, id="negative"),
        pytest.param(json.dumps({"pr_number": 10**40, "head_sha": HEAD}), False, id="huge"),
        pytest.param(json.dumps({"pr_number": 42, "head_sha": HEAD.upper()}), False, id="upper"),
        pytest.param(json.dumps({"pr_number": 42, "head_sha": HEAD + "\n"}), False, id="nl"),
        pytest.param(json.dumps({"pr_number": 42, "head_sha": "f" * 40}), False, id="other-sha"),
        pytest.param(json.dumps({"pr_number": 42, "head_sha": HEAD[:39]}), False, id="short"),
        pytest.param(json.dumps({"pr_number": 42}), False, id="no-sha"),
        pytest.param(json.dumps([42, HEAD]), False, id="array"),
        pytest.param('{"pr_number": 42, "head_sha": "' + HEAD + '"', False, id="truncated"),
        pytest.param("[" * 4000, False, id="deep"),
        pytest.param("", False, id="empty"),
    ],
)
def test_comment_workflow_refuses_a_forged_artifact(
    kind: str, pr_json: str, accepted: bool, tmp_path: Path
):
    step = next(s for s in _steps(_workflow(kind, COMMENT)) if s.get("id") == "pr")
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "pr.json").write_text(pr_json, encoding="utf-8")
    (artifact / "diff.json").write_text("{}", encoding="utf-8")
    output = tmp_path / "github_output"
    output.touch()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "ARTIFACT_DIR": str(artifact),
        "RUN_HEAD_SHA": HEAD,
        "GITHUB_OUTPUT": str(output),
    }
    # GitHub's default shell for `run:` on Linux.
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if accepted:
        assert result.returncode == 0, result.stdout + result.stderr
        assert output.read_text(encoding="utf-8") == "number=42\n"
    else:
        assert result.returncode != 0
        assert "::error::" in result.stdout
        assert output.read_text(encoding="utf-8") == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="the step runs under bash")
@pytest.mark.parametrize("missing", ["pr.json", "diff.json"])
def test_comment_workflow_refuses_an_incomplete_artifact(missing: str, tmp_path: Path):
    step = next(s for s in _steps(_workflow("repository", COMMENT)) if s.get("id") == "pr")
    (tmp_path / "pr.json").write_text(json.dumps({"pr_number": 1, "head_sha": HEAD}))
    (tmp_path / "diff.json").write_text("{}")
    (tmp_path / missing).unlink()
    (tmp_path / missing).symlink_to(tmp_path / "elsewhere.json")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "ARTIFACT_DIR": str(tmp_path),
        "RUN_HEAD_SHA": HEAD,
        "GITHUB_OUTPUT": str(tmp_path / "out"),
    }
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert f"{missing} is missing or not a regular file" in result.stdout


# --- the push-to-main workflow ----------------------------------------------------------


@pytest.mark.parametrize("kind", WORKFLOW_SETS)
def test_main_workflow_verifies_and_writes_the_audit_record_read_only(kind: str):
    workflow = _workflow(kind, MAIN)
    assert _triggers(workflow) == {"push": {"branches": ["main"]}}
    assert workflow["permissions"] == {"contents": "read"}
    for job in workflow["jobs"].values():
        permissions = _effective_permissions(workflow, job)
        assert set(permissions.values()) == {"read"}, permissions
        assert set(permissions) <= {"contents", "pull-requests"}, permissions
    steps = list(_steps(workflow))
    scripts = "\n".join(str(s.get("run", "")) for s in steps)
    assert re.search(r"^dvc pull \|\| ", scripts, re.M)
    assert re.search(r"^evalreg check$", scripts, re.M)
    assert re.search(r"^evalreg reproduce HEAD$", scripts, re.M)
    assert re.search(r"^evalreg audit HEAD --html site --output site/audit.md$", scripts, re.M)
    assert re.search(r"^evalreg view --output site/explorer$", scripts, re.M)
    upload = next(s for s in steps if _uses(s, "actions/upload-artifact"))
    assert upload["with"]["path"].rstrip("/") == "site"


# --- the documentation workflow ---------------------------------------------------------

DEPLOYING = {("push", "refs/heads/main"), ("workflow_dispatch", "refs/heads/main")}
CONDITION_TOKEN = re.compile(r"\s*(github\.ref|github\.event_name|'[^']*'|==|!=|&&|\|\||[()])")
EVENTS_AND_REFS = [
    (event, ref)
    for event in ("push", "pull_request", "workflow_dispatch")
    for ref in ("refs/heads/main", "refs/heads/feature", "refs/pull/7/merge", "refs/tags/v1.0.0")
]


def _runs(condition: str | None, event: str, ref: str) -> bool:
    """Whether an ``if:`` built from ``github.ref``, ``github.event_name``, string literals,
    ``==``, ``!=``, ``&&``, ``||`` and parentheses holds for this event and ref."""
    if condition is None:
        return True
    expression = condition.strip()
    if expression.startswith("${{") and expression.endswith("}}"):
        expression = expression[3:-2]
    tokens = CONDITION_TOKEN.findall(expression)
    assert "".join(tokens).replace(" ", "") == expression.replace(" ", ""), (
        f"the test cannot evaluate this condition: {condition}"
    )
    values = {"github.ref": repr(ref), "github.event_name": repr(event), "&&": "and", "||": "or"}
    python = " ".join(values.get(t.strip(), t.strip()) for t in tokens)
    return bool(eval(python, {"__builtins__": {}}, {}))  # only literals and operators remain


def test_docs_workflow_builds_strictly_on_pull_requests_and_main_pushes():
    workflow = _workflow("repository", DOCS)
    triggers = _triggers(workflow)
    assert triggers["push"] == {"branches": ["main"]}
    assert "pull_request" in triggers
    assert set(triggers) <= {"push", "pull_request", "workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}
    build = workflow["jobs"]["build"]
    assert "if" not in build and "needs" not in build
    assert _effective_permissions(workflow, build) == {"contents": "read"}
    assert build["timeout-minutes"] <= 30
    runs = [str(s["run"]).strip() for s in build["steps"] if "run" in s]
    assert 'python -m pip install "nox>=2024.10,<2027" "uv>=0.5,<0.14"' in runs
    (docs,) = (s for s in build["steps"] if str(s.get("run", "")).strip() == "nox -s docs")
    assert "if" not in docs and not docs.get("continue-on-error")


def test_docs_workflow_deploys_to_pages_from_main_pushes_only():
    workflow = _workflow("repository", DOCS)
    jobs = workflow["jobs"]
    assert set(jobs) == {"build", "deploy"}
    deploy = jobs["deploy"]
    assert deploy["needs"] == "build"
    upload = next(s for s in jobs["build"]["steps"] if _uses(s, "actions/upload-pages-artifact"))
    assert upload["with"]["path"].rstrip("/") == "docs/_build/html"
    for event, ref in EVENTS_AND_REFS:
        deploys = (event, ref) in DEPLOYING
        assert _runs(deploy.get("if"), event, ref) is deploys, (event, ref)
        # Uploaded exactly when deployed: a pull request's build leaves no Pages artifact.
        assert _runs(upload.get("if"), event, ref) is deploys, (event, ref)
    # Only the deploy job gets to write to Pages, and it runs no code of the repository's.
    assert _effective_permissions(workflow, deploy) == {"pages": "write", "id-token": "write"}
    assert not any(_uses(s, "actions/checkout") or "run" in s for s in deploy["steps"])
    (step,) = deploy["steps"]
    assert _uses(step, "actions/deploy-pages")
    assert deploy["environment"] == {
        "name": "github-pages",
        "url": f"${{{{ steps.{step['id']}.outputs.page_url }}}}",
    }
    # Deployments queue behind one another; a deployment under way is never cancelled.
    assert deploy["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    cancel = workflow["concurrency"]["cancel-in-progress"]
    for event, ref in DEPLOYING:
        assert cancel is False or (isinstance(cancel, str) and not _runs(cancel, event, ref))


def test_docs_workflow_pins_every_action_to_a_commit():
    workflow = _workflow("repository", DOCS)
    refs = [str(s["uses"]) for s in _steps(workflow) if "uses" in s]
    assert {r.split("@")[0] for r in refs} >= {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    }
    for ref in refs:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[^@\s]+)?@[0-9a-f]{40}", ref), ref
    # The same commits as the other workflows for the actions they share.
    ci = {str(s["uses"]) for s in _steps(_workflow("repository", "ci.yml")) if "uses" in s}
    for ref in refs:
        shared = {r for r in ci if r.split("@")[0] == ref.split("@")[0]}
        assert shared <= {ref}, (ref, shared)


# --- installing evalreg -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOW_SETS["scaffold"].glob("*.yml")))
def test_installs_evalreg_from_this_checkout_here_and_pinned_in_a_team_repo(name: str):
    def installs(kind: str) -> list[dict[str, Any]]:
        return [s for s in _steps(_workflow(kind, name)) if "pip install" in str(s.get("run", ""))]

    assert [str(s["run"]).strip() for s in installs("repository")] == ["python -m pip install -e ."]
    (step,) = installs("scaffold")
    # The spec reaches the shell through the environment, quoted: never spliced into the
    # script. `evalreg init` fills in the exact version, or --evalreg-spec.
    assert str(step["run"]).strip() == 'python -m pip install "$EVALREG_SPEC"'
    assert step["env"] == {"EVALREG_SPEC": "@EVALREG_SPEC@"}
