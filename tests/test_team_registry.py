"""Every command that reads a registry, on a registry the way a team grows one: several use
cases sharing tasks and pins, pending cells, three eval sets (one multi-turn, one attaching
files), a judge and a waiver (``support.team_registry``), and on randomised variants of it.

No command may end in a traceback on a registry ``evalreg check`` accepts, and on one it
refuses (exit 2) every command refuses it too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evalreg.cli import main

from conftest import Repo, assert_refused, session_environment
from support.commands import reading_a_registry
from support.team_registry import (
    USE_CASES,
    TeamVariant,
    UseCase,
    apply_variant,
    build_team_registry,
    pinned_candidates,
    serving,
    team_environment,
)

IMPORTS = Path(__file__).parent / "data/importers"


def commands(commits: dict[str, str]) -> dict[tuple[str, ...], list[tuple[list[str], set[int]]]]:
    """Each command that reads a registry: invocations on the team's registry at its head
    (one stale cell, five pending ones, a report out of date) and the exit statuses each may
    give there."""
    start, results = commits["start"], commits["results"]
    return {
        ("check",): [(["check"], {1}), (["check", "--json", "--strict"], {1})],
        ("status",): [(["status"], {0}), (["status", "--json"], {0})],
        ("show",): [
            (["show", "t-001"], {0}),
            (["show", "c-002", "--use-case", "chat-support", "--json"], {0}),
            (["show", "r-003", "--rev", results], {0}),
        ],
        ("run",): [
            (["run", "--offline"], {1}),  # mini-warm's new requests are not stored
            (["run", "--dry-run"], {0}),
            (["run"], {1}),  # buys mini-warm; five cells stay pending for unset credentials
            (["run", "--allow-pending"], {0}),
        ],
        ("reproduce",): [
            (["reproduce", results], {0}),
            (["reproduce", "HEAD"], {1}),
            (["reproduce", "--range", f"{start}..HEAD"], {0, 1}),
        ],
        ("report",): [(["report"], {0})],
        ("view",): [(["view"], {0}), (["view", "triage-us", "--base", start], {0})],
        ("export",): [
            (["export", "chat-support"], {0}),
            (["export", "triage-us", "--format", "jsonl", "--rev", results], {0}),
        ],
        ("schema",): [(["schema"], {0})],
        ("resolve",): [(["resolve", "--no-push"], {1})],  # mini-warm needs a live run
        ("select",): [(["select", "triage-us", "haiku", "--reason", "Cheaper at par."], {0})],
        ("drift",): [(["drift", "--sample", "3"], {0})],
        # Exit 1: the team's pins at the real providers' lists are not reached from here.
        ("propose",): [(["propose", "--dry-run"], {1}), (["propose", "--json"], {1})],
        ("diff",): [
            (["diff", start], {0}),
            (["diff", results, "HEAD", "--format", "json"], {0}),
            (["diff", start, results, "--format", "md"], {0}),
        ],
        ("audit",): [(["audit", results], {0}), (["audit"], {1})],
        ("store", "compact"): [(["store", "compact"], {0})],
        ("store", "purge"): [
            (["store", "purge", "t-005", "--reason", "A customer asked.", "--no-push"], {0})
        ],
        ("evalset", "add"): [(["evalset", "add", "evalsets/chats.jsonl", "--no-push"], {0})],
        ("evalset", "stats"): [(["evalset", "stats"], {0}), (["evalset", "stats", "--json"], {0})],
        ("import", "promptfoo"): [
            (
                [
                    "import",
                    "promptfoo",
                    str(IMPORTS / "promptfoo/promptfooconfig.yaml"),
                    "--name",
                    "imported-pf",
                ],
                {0},
            ),
        ],
        ("import", "openai-evals"): [
            (
                [
                    "import",
                    "openai-evals",
                    str(IMPORTS / "openai_evals/samples.jsonl"),
                    "--name",
                    "imported-oe",
                    "--pin",
                    "mini",
                    "--pin",
                    "haiku",
                ],
                {0},
            ),
            (["check"], {1}),
        ],
    }


@pytest.fixture(scope="session")
def team_template(
    tmp_path_factory: pytest.TempPathFactory, server_port: int
) -> tuple[Path, dict[str, str]]:
    """The team's registry, built and run once; copy it, never change it."""
    root = tmp_path_factory.mktemp("team") / "repo"
    with session_environment(tmp_path_factory) as mp:
        for key, value in team_environment(os.environ).items():
            mp.setenv(key, value)
        for key in set(os.environ) - set(team_environment(os.environ)):
            mp.delenv(key)
        with serving(server_port) as server:
            commits = build_team_registry(Repo(root), server)
    return root, commits


@pytest.fixture
def team(tmp_path: Path, team_template, server_port: int) -> Iterator[tuple[Repo, dict]]:
    """This test's copy of the team's registry, its stand-in serving."""
    template, commits = team_template
    repo = Repo(tmp_path / "repo")
    shutil.copytree(template, repo.root, symlinks=True)
    with serving(server_port):
        yield repo, commits


def test_every_command_that_reads_a_registry_is_run_here():
    assert set(commands({"start": "", "results": ""})) == reading_a_registry()


@pytest.mark.parametrize("command", sorted(commands({"start": "", "results": ""})), ids=" ".join)
def test_a_command_on_a_team_registry(team, command, cli, monkeypatch: pytest.MonkeyPatch):
    repo, commits = team
    env = team_environment(os.environ)
    for key in set(os.environ) - set(env):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for argv, codes in commands(commits)[command]:
        done = cli(repo, *argv)
        assert "Traceback" not in done.err, done.err
        assert done.code in codes, f"evalreg {' '.join(argv)}: {done.err}"
        assert done.out or done.err


def test_shared_cells_are_each_use_cases_own(team, cli):
    """Two use cases running one task with the same candidates show the same cells, each
    with its own declared candidate."""
    repo, _ = team
    import json

    result = cli(repo, "show", "t-002", "--json")
    assert result.code == 0, result.err
    views = {v["use_case"]: v for v in json.loads(result.out)}
    assert set(views) == {"triage-eu", "triage-us", "triage-mobile"}
    eu = {c["id"]: c for c in views["triage-eu"]["candidates"]}
    us = {c["id"]: c for c in views["triage-us"]["candidates"]}
    assert set(us) == {"rules", "mini", "haiku", "bedrock-haiku"}
    assert eu["mini"]["samples"] == us["mini"]["samples"]
    assert eu["rules"]["declared"] and not us["rules"]["declared"]
    assert us["mini"]["declared"] and not eu["mini"]["declared"]


def test_a_candidate_id_two_use_cases_mean_differently_is_refused(team, cli):
    repo, _ = team
    path = "registry/selections/triage-us.yaml"
    repo.write(path, repo.read(path).replace("    pin: mini\n", "    pin: mini-warm\n"))
    repo.commit("triage-us's mini is another pin")
    for command in (["check"], ["status"], ["view"], ["run", "--offline"]):
        assert_refused(
            repo,
            cli,
            *command,
            expect=(
                f"{path}:8:10: candidate 'mini' of task 'triage' is another candidate in use "
                "case 'triage-eu' (registry/selections/triage-eu.yaml:7: pin 'mini'): use cases "
                "that run one task share each candidate's results by its id, so give this one "
                "an id of its own",
            ),
        )


# ---------------------------------------------------------------- randomised variants
TASK_SLICES = {
    "triage": ("all", "common", "edge", "messy", "adversarial", "regression"),
    "triage-brief": ("all", "common", "edge"),
    "chat-reply": ("all", "common", "follow-up"),
    "receipt-total": ("all", "scan", "pdf"),
}
RECORDED = (
    "triage/rules",
    "triage/mini",
    "triage/haiku",
    "triage-brief/mini-terse",
    "chat-reply/haiku",
    "receipt-total/echo",
)


@st.composite
def use_case(draw: st.DrawFn, ident: str) -> UseCase:
    task = draw(st.sampled_from(sorted(TASK_SLICES)))
    pins = [pin for pin, t in pinned_candidates() if t == task]
    chosen = draw(st.lists(st.sampled_from(pins), min_size=1, max_size=4, unique=True))
    candidates = []
    for pin in chosen:
        variant = draw(st.sampled_from([None, None, "Be brief."]))
        cid = draw(st.sampled_from([pin, f"{pin}-alt"]))
        candidates.append((cid, pin, variant))
    ids = [c[0] for c in candidates]
    if len(set(ids)) != len(ids):
        candidates = [(f"{c[0]}-{n}", c[1], c[2]) for n, c in enumerate(candidates)]
    return UseCase(
        ident,
        task,
        tuple(candidates),
        draw(st.sampled_from([c[0] for c in candidates])),
        gate_slice=draw(st.sampled_from(TASK_SLICES[task])),
        floor=draw(st.sampled_from([0.0, 0.5, 0.9])),
        waiver=draw(st.booleans()),
    )


@st.composite
def variants(draw: st.DrawFn) -> TeamVariant:
    idents = [uc.ident for uc in USE_CASES]
    drop = draw(st.frozensets(st.sampled_from(idents), max_size=3))
    added = tuple(
        draw(use_case(f"team-{n}")) for n in range(draw(st.integers(min_value=0, max_value=3)))
    )
    redeclare = {}
    for uc in USE_CASES:
        if uc.ident not in drop and draw(st.booleans()):
            redeclare[uc.ident] = draw(st.sampled_from([c[0] for c in uc.candidates]))
    unrecorded = draw(st.frozensets(st.sampled_from(RECORDED), max_size=3))
    return TeamVariant(drop, added, unrecorded, redeclare)


READERS = (
    ["status", "--json"],
    ["report"],
    ["show", "t-003"],
    ["evalset", "stats"],
    ["run", "--dry-run"],
    ["run", "--offline"],
    ["reproduce", "HEAD"],
    ["select", "triage-eu", "mini", "--reason", "Fuzzed."],
)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(variant=variants())
def test_no_command_crashes_on_a_variant_of_the_team_registry(
    variant, team_template, capsys, server_port
):
    template, commits = team_template
    with tempfile.TemporaryDirectory() as tmp:
        repo = Repo(Path(tmp) / "repo")
        shutil.copytree(template, repo.root, symlinks=True)
        apply_variant(repo, variant)

        def run(*argv: str) -> int:
            code = main(["-C", str(repo.root), *argv])
            err = capsys.readouterr().err
            assert "Traceback" not in err
            return code

        checked = run("check")
        event(f"check exits {checked}")
        for argv in (*READERS, ["view", "-o", str(Path(tmp) / "explorer")]):
            code = run(*argv)
            if checked == 2:
                assert code == 2, f"evalreg {' '.join(argv)} accepted what check refused"
            elif argv[0] == "select":
                assert code in (0, 2)  # its use case or candidate may be gone
            else:
                assert code in (0, 1), argv
        if checked != 2:
            assert run("diff", commits["results"], "--format", "json") == 0


def test_a_second_use_case_of_the_scaffolds_task_is_viewed(tmp_path: Path, cli):
    """``evalreg init``, a second use case copied from the first with another name, one
    candidate run: the explorer shows both use cases, each with that candidate's results."""
    target = tmp_path / "team"
    assert cli(None, "init", str(target), "--no-snippets").code == 0
    repo = Repo(target)
    first = repo.read("registry/selections/faq-routing.yaml")
    repo.write(
        "registry/selections/faq-escalation.yaml",
        first.replace("use_case: FAQ routing", "use_case: FAQ escalation"),
    )
    repo.commit("a second use case of the FAQ task")
    assert cli(repo, "run", "--candidate", "keyword-router").code == 0
    result = cli(repo, "view")
    assert result.code == 0, result.err
    for use_case in ("faq-routing", "faq-escalation"):
        page = (target / f"reports/explorer/{use_case}.html").read_text()
        assert '"state":"fresh"' in page.replace(" ", "")
