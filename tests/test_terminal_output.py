"""The terminal is not a target: text evalreg does not control (provider errors, model output,
registry values) reaches stdout and stderr of every command, run as a real program, without
escape sequences, control characters, bidi controls or rich markup taking effect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import Repo
from support.github_api import GitHubAPI

HOSTILE = (
    "\x1b[2J\x1b[1;31mred"  # CSI: clear the screen, colour
    "\x1b]0;pwned\x07"  # OSC 0: the window title, BEL-terminated
    "\x1b]8;;https://evil.test\x1b\\link\x1b]8;;\x1b\\"  # OSC 8: a hyperlink, ST-terminated
    "\x9b2J\x9d0;t\x9c"  # the 8-bit CSI and OSC (C1 controls)
    "\u202eevil\u2066x\u2069"  # bidi override and isolate
    "over\rwrite\x08"  # lone carriage return, backspace
    "[bold red]markup[/bold red]"
)
RAW = [b"\x1b", b"\x07", b"\x08", b"\r", *(c.encode() for c in "\x9b\x9c\x9d\u202e\u2066\u2069")]
TOKEN = "ghs_terminaltest0123456789"


@pytest.fixture
def hostile(live: Repo, cli, server) -> Repo:
    """Results on main; on a branch, a provider whose errors and outputs carry HOSTILE."""
    assert cli(live, "run").code == 0
    live.commit("results on main")

    def answer(request) -> str:
        text = request.body["messages"][-1]["content"]
        return HOSTILE if text.endswith("1") else json.dumps({"label": "a"})

    server.responder = answer
    server.error_text = lambda request: HOSTILE
    server.fail_matching("message 2", "401", times=1)
    live.git("checkout", "-q", "-b", "hostile")
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.5"),
    )
    live.commit("a warmer pin")
    return live


def evalreg(repo: Repo, *args: str, env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """Run the installed program; its exit code and everything it printed."""
    environ = {**os.environ, **(env or {}), "TERM": "dumb"}
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        environ.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "evalreg", "-C", str(repo.root), *args],
        capture_output=True,
        env=environ,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def assert_inert(printed: bytes) -> None:
    assert [raw for raw in RAW if raw in printed] == []


def test_provider_errors_reach_the_terminal_stripped_and_without_markup(hostile: Repo, server):
    code, printed = evalreg(hostile, "run")
    assert code == 1  # the 401
    assert [r.fault for r in server.requests].count("401") == 1
    assert_inert(printed)
    # What is left is the text, with the markup shown as it was written.
    line = next(x for x in printed.decode().splitlines() if "auth: HTTP 401" in x)
    assert line.endswith("HTTP 401: redlinkevilxover write[bold red]markup[/bold red]")


def test_model_output_in_diffs_drift_and_comments_reaches_the_terminal_stripped(
    hostile: Repo, cli, server, tmp_path
):
    assert cli(hostile, "run").code == 1
    head = hostile.commit("hostile results")
    server.responder = lambda request: HOSTILE  # drift shows what the model says now
    diff_file = tmp_path / "diff.json"
    outputs = [
        evalreg(hostile, "diff", "main"),
        evalreg(hostile, "diff", "main", "--format", "json"),
        evalreg(hostile, "diff", "main", "--format", "json", "-o", str(diff_file)),
        evalreg(hostile, "drift", "--sample", "4"),
        evalreg(hostile, "drift", "--sample", "4", "--json"),
    ]
    with GitHubAPI(tokens={TOKEN: "github-actions[bot]"}) as gh:
        gh.add_pull(12, head)
        env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": gh.repository, "GITHUB_API_URL": gh.url}
        args = ("--diff", str(diff_file), "--pr", "12", "--head-sha", head, "--dry-run")
        outputs.append(evalreg(hostile, "comment", *args, env=env))
    for code, printed in outputs:
        assert code in (0, 1), printed
        assert_inert(printed)
    assert_inert(diff_file.read_bytes())
    # The JSON still carries the output as it was stored: escaped, not lost.
    mini = next(c for c in json.loads(diff_file.read_text())["cells"] if c["id"] == "labels/mini")
    assert HOSTILE in [f["head_output"] for f in mini["flips"]["regressions"]]
    assert b"redlink" in outputs[0][1]  # the Markdown shows it, stripped


def test_check_findings_reach_the_terminal_stripped(repo: Repo):
    # A YAML double-quoted key may spell any control character; the finding names the key.
    hostile_key = '  "\\e[2J\\u202e\\x9b2Jtoken": nope-nope-nope\n'
    pin = repo.read("registry/models/mini.yaml")
    repo.write("registry/models/mini.yaml", pin.replace("  temperature: 0\n", hostile_key))
    repo.commit("a hostile param name")
    code, printed = evalreg(repo, "check")
    assert code == 2
    assert_inert(printed)
    assert b"params.token: params may not hold credentials" in printed


def test_recorded_text_is_shown_literally_inside_rich_markup(live: Repo, cli):
    assert cli(live, "run").code == 0
    for path in (live.root / "reports/results").rglob("*.json"):
        data = json.loads(path.read_text())
        data["evalreg_version"] = "\x1b]0;pwned\x07[bold]0.0.9[/bold]"
        path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n")
    live.commit("results that claim an odd version")
    code, printed = evalreg(live, "reproduce", "HEAD")
    assert code == 1
    assert_inert(printed)
    assert b"recorded with evalreg [bold]0.0.9[/bold]" in printed


def test_show_prints_item_text_and_model_output_stripped_and_markup_literal(
    live: Repo, cli, server
):
    rows = [json.loads(line) for line in live.read("evalsets/messages.jsonl").splitlines()]
    rows[1]["input"]["text"] = HOSTILE
    live.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert cli(live, "evalset", "add", "evalsets/messages.jsonl", "--replace").code == 0
    server.responder = lambda request: (
        HOSTILE if "markup" in request.body["messages"][-1]["content"] else '{"label": "a"}'
    )
    assert cli(live, "run").code == 0
    code, printed = evalreg(live, "show", "m-001")
    assert code == 0, printed
    assert_inert(printed)
    # The item's text in the input and in the request, and the model's output: all three.
    assert printed.count(b"[bold red]markup[/bold red]") == 3
    code, printed = evalreg(live, "show", "m-001", "--json")
    assert code == 0
    assert_inert(printed)
    [view] = json.loads(printed)
    assert view["candidates"][1]["samples"][0]["output"] == HOSTILE  # kept, escaped
