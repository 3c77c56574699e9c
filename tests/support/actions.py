"""Run a GitHub Actions job's steps here, in order, the way a runner would.

``run_job`` executes each ``run:`` step under ``bash --noprofile --norc -eo pipefail`` (the
runner's default shell on Linux) with GitHub's variables (``GITHUB_EVENT_PATH``,
``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_ENV``, ``GITHUB_REPOSITORY``,
``GITHUB_SHA``, ``GITHUB_API_URL``, ``RUNNER_TEMP``...), evaluates ``if:`` and the
``${{ ... }}`` expressions in ``env:``/``with:``, and hands each ``uses:`` step to a local
stand-in the caller supplies (a checkout becomes a ``git clone``, an artifact a copied
directory). Only the expressions these workflows use are understood: ``github.*``,
``env.*``, ``steps.<id>.outputs.*``/``outcome``/``conclusion``, ``runner.temp``,
``secrets.*``, literals, ``== != && || !`` and ``success() failure() cancelled() always()
hashFiles()``. Anything else raises, so a workflow that grows a new construct fails the
test instead of being run wrongly.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Job", "StepRun", "UnsupportedExpression", "run_job"]

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class UnsupportedExpression(Exception):
    """An expression this stand-in does not evaluate: extend it, never guess."""


@dataclass
class StepRun:
    name: str
    outcome: str  # success | failure | skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""


@dataclass
class Job:
    conclusion: str
    steps: list[StepRun]
    summary: str
    ran: bool = True

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} [{s.outcome}]\n{s.stdout}" for s in self.steps)

    def step(self, name_or_id: str) -> StepRun:
        return next(s for s in self.steps if s.name == name_or_id)


Uses = Callable[[str, dict[str, str], Path], None]


class _Context:
    def __init__(self, data: dict[str, Any], statuses: dict[str, bool], workspace: Path) -> None:
        self.data = data
        self.statuses = statuses
        self.workspace = workspace

    def lookup(self, name: str) -> Any:
        root, *rest = name.split(".")
        if root not in self.data:
            raise UnsupportedExpression(f"unknown context {root!r} in {name!r}")
        node: Any = self.data[root]
        for part in rest:
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def call(self, fn: str, args: list[Any]) -> Any:
        if fn == "success":
            return not self.statuses["failed"]
        if fn == "failure":
            return self.statuses["failed"]
        if fn == "cancelled":
            return False
        if fn == "always":
            return True
        if fn == "hashFiles":
            paths = [self.workspace / str(a) for a in args]
            found = [p for p in paths if p.is_file()]
            if not found:
                return ""
            return hashlib.sha256(b"".join(p.read_bytes() for p in found)).hexdigest()
        raise UnsupportedExpression(f"unknown function {fn}()")


class _Parser:
    def __init__(self, text: str, ctx: _Context) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise UnsupportedExpression(f"cannot read {text[pos:]!r} in {text!r}")
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match.group(kind)))
            pos = match.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0
        self.ctx = ctx
        self.text = text

    def parse(self) -> Any:
        value = self._or()
        if self.i != len(self.tokens):
            raise UnsupportedExpression(f"trailing {self.tokens[self.i :]} in {self.text!r}")
        return value

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, value: str) -> bool:
        if self._peek() == ("op", value):
            self.i += 1
            return True
        return False

    def _or(self) -> Any:
        left = self._and()
        while self._take("||"):
            right = self._and()
            left = left or right
        return left

    def _and(self) -> Any:
        left = self._cmp()
        while self._take("&&"):
            right = self._cmp()
            left = left and right
        return left

    def _cmp(self) -> Any:
        left = self._unary()
        for op in ("==", "!="):
            if self._take(op):
                right = self._unary()
                equal = _loose(left) == _loose(right)
                return equal if op == "==" else not equal
        return left

    def _unary(self) -> Any:
        if self._take("!"):
            return not self._unary()
        if self._take("("):
            value = self._or()
            if not self._take(")"):
                raise UnsupportedExpression(f"unbalanced parentheses in {self.text!r}")
            return value
        token = self._peek()
        if token is None:
            raise UnsupportedExpression(f"unexpected end of {self.text!r}")
        self.i += 1
        kind, value = token
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if kind == "name":
            if value in ("true", "false"):
                return value == "true"
            if value == "null":
                return None
            if self._take("("):
                args: list[Any] = []
                while not self._take(")"):
                    args.append(self._or())
                    self._take(",")
                return self.ctx.call(value, args)
            return self.ctx.lookup(value)
        raise UnsupportedExpression(f"unexpected {value!r} in {self.text!r}")


def _loose(value: Any) -> Any:
    # GitHub compares strings case-insensitively and null as ''.
    if value is None:
        return ""
    return value.lower() if isinstance(value, str) else value


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _scalar(value: Any) -> str:
    # YAML typed `fetch-depth: 0` and `persist-credentials: false`; the runner sees strings.
    return value if isinstance(value, str) else _render(value)


def _substitute(text: str, ctx: _Context) -> str:
    return _EXPR.sub(lambda m: _render(_Parser(m.group(1), ctx).parse()), text)


def _condition(raw: Any, ctx: _Context) -> bool:
    if raw is None:
        return bool(ctx.call("success", []))
    text = str(raw).strip()
    match = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    value = _Parser(match.group(1) if match else text, ctx).parse()
    return bool(value)


def _read_outputs(path: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            body: list[str] = []
            i += 1
            while lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            outputs[key] = "\n".join(body)
        elif line:
            key, _, value = line.partition("=")
            outputs[key] = value
        i += 1
    return outputs


def run_job(
    workflow: Mapping[str, Any],
    job_id: str,
    *,
    workspace: Path,
    event_name: str,
    event: dict[str, Any],
    repository: str,
    sha: str,
    ref: str,
    api_url: str,
    runner_temp: Path,
    path: str,
    uses: Uses,
    secrets: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> Job:
    """Run one job of ``workflow``; ``path`` leads every ``PATH`` (the job's Python)."""
    job = workflow["jobs"][job_id]
    runner_temp.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(parents=True, exist_ok=True)  # empty until a checkout fills it
    event_path = runner_temp / "event.json"
    event_path.write_text(json.dumps(event), encoding="utf-8")
    github: dict[str, Any] = {
        "event_name": event_name,
        "event": event,
        "repository": repository,
        "sha": sha,
        "ref": ref,
        "ref_name": ref.rpartition("/")[2],
        "base_ref": (event.get("pull_request") or {}).get("base", {}).get("ref", ""),
        "head_ref": (event.get("pull_request") or {}).get("head", {}).get("ref", ""),
        "token": (secrets or {}).get("GITHUB_TOKEN", ""),
        "workspace": str(workspace),
        "api_url": api_url,
        "server_url": "https://github.com",
        **(extra or {}),
    }
    env: dict[str, str] = {
        "PATH": os.pathsep.join([path, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": os.environ.get("HOME", str(runner_temp)),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": repository,
        "GITHUB_SHA": sha,
        "GITHUB_REF": ref,
        "GITHUB_REF_NAME": github["ref_name"],
        "GITHUB_BASE_REF": github["base_ref"],
        "GITHUB_HEAD_REF": github["head_ref"],
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "RUNNER_TEMP": str(runner_temp),
        # No network in tests: an install that tries to reach an index fails here.
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        **(extra_env or {}),
    }
    steps_ctx: dict[str, Any] = {}
    statuses = {"failed": False}
    data = {
        "github": github,
        "env": env,
        "steps": steps_ctx,
        "runner": {"temp": str(runner_temp), "os": "Linux"},
        "secrets": dict(secrets or {}),
    }
    ctx = _Context(data, statuses, workspace)
    if not _condition(job.get("if", "success()"), ctx):
        return Job("skipped", [], "", ran=False)
    for scope in (workflow.get("env") or {}, job.get("env") or {}):
        env.update({k: _substitute(_scalar(v), ctx) for k, v in scope.items()})
    runs: list[StepRun] = []
    summary: list[str] = []
    for n, step in enumerate(job["steps"]):
        name = str(step.get("name") or step.get("uses") or step.get("run", "")).strip()
        record = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
        if not _condition(step.get("if"), ctx):
            runs.append(StepRun(name, "skipped", "skipped"))
            if "id" in step:
                steps_ctx[step["id"]] = record
            continue
        step_env = {
            **env,
            **{k: _substitute(_scalar(v), ctx) for k, v in (step.get("env") or {}).items()},
        }
        outputs: dict[str, str] = {}
        stdout = ""
        if "uses" in step:
            given = {k: _substitute(_scalar(v), ctx) for k, v in (step.get("with") or {}).items()}
            try:
                uses(str(step["uses"]).split("@")[0], given, workspace)
                ok = True
            except Exception as exc:  # a failing action fails its step, like on a runner
                ok, stdout = False, f"{type(exc).__name__}: {exc}"
        else:
            out_file = runner_temp / f"output-{n}"
            summary_file = runner_temp / f"summary-{n}"
            env_file = runner_temp / f"env-{n}"
            for f in (out_file, summary_file, env_file):
                f.write_text("", encoding="utf-8")
            step_env.update(
                GITHUB_OUTPUT=str(out_file),
                GITHUB_STEP_SUMMARY=str(summary_file),
                GITHUB_ENV=str(env_file),
            )
            cwd = workspace / str(step.get("working-directory", "."))
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", str(step["run"])],
                cwd=cwd,
                env=step_env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            ok, stdout = proc.returncode == 0, proc.stdout + proc.stderr
            outputs = _read_outputs(out_file)
            summary.append(summary_file.read_text(encoding="utf-8"))
            env.update(_read_outputs(env_file))
        outcome = "success" if ok else "failure"
        conclusion = "success" if ok or step.get("continue-on-error") else "failure"
        if conclusion == "failure":
            statuses["failed"] = True
        record = {"outputs": outputs, "outcome": outcome, "conclusion": conclusion}
        if "id" in step:
            steps_ctx[step["id"]] = record
        runs.append(StepRun(name, outcome, conclusion, outputs, stdout))
    return Job("failure" if statuses["failed"] else "success", runs, "".join(summary))
