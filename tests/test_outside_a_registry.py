"""Every command that reads or writes a registry refuses a directory that holds none (exit 2,
the `evalreg init` hint, nothing written); the commands that read no registry work there."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Repo, assert_refused
from support.commands import reading_a_registry

HINT = ("not an evalreg registry", "`evalreg init DIR` creates one")

READS_A_REGISTRY: dict[tuple[str, ...], list[tuple[str, ...]]] = {
    ("check",): [()],
    ("status",): [(), ("--json",)],
    ("show",): [("m-001",), ("m-001", "--rev", "HEAD")],
    ("run",): [(), ("--offline",), ("--dry-run",), ("--allow-pending",)],
    ("reproduce",): [("HEAD",), ("--range", "HEAD..HEAD")],
    ("report",): [()],
    ("view",): [(), ("--rev", "HEAD")],
    ("export",): [("labels",), ("labels", "--rev", "HEAD")],
    ("schema",): [()],
    ("resolve",): [()],
    ("select",): [("labels", "rules", "--reason", "why")],
    ("drift",): [()],
    ("propose",): [(), ("--dry-run",), ("--open-pr",)],
    ("diff",): [("HEAD",), ("HEAD", "HEAD")],
    ("audit",): [(), ("HEAD",)],
    ("store", "compact"): [()],
    ("store", "purge"): [("m-001", "--reason", "asked")],
    ("evalset", "add"): [("evalsets/new.jsonl",)],
    ("evalset", "stats"): [()],
    ("import", "promptfoo"): [("promptfooconfig.yaml", "--name", "x")],
    ("import", "openai-evals"): [("samples.jsonl", "--name", "x", "--pin", "mini")],
}
"""Each command, with the arguments it is tried with (every way it finds its registry)."""


def test_every_command_is_known_to_read_a_registry_or_not():
    assert set(READS_A_REGISTRY) == reading_a_registry()


def _empty_git_repository(root: Path) -> Repo:
    repo = Repo(root)
    root.mkdir()
    repo.git("init", "-q", "-b", "main")
    repo.git("commit", "-q", "--allow-empty", "-m", "empty")
    return repo


CASES = [
    pytest.param(command + tail, id=" ".join(command + tail))
    for command, tails in READS_A_REGISTRY.items()
    for tail in tails
]


@pytest.mark.parametrize("where", ["plain directory", "empty git repository"])
@pytest.mark.parametrize("how", ["-C", "cwd"])
@pytest.mark.parametrize("args", CASES)
def test_a_command_that_reads_a_registry_refuses_a_directory_without_one(
    tmp_path: Path, cli, monkeypatch, where: str, how: str, args: tuple[str, ...]
):
    root = tmp_path / "here"
    if where == "plain directory":
        root.mkdir()
        repo = Repo(root)
    else:
        repo = _empty_git_repository(root)
    if how == "cwd":
        monkeypatch.chdir(root)

        def run(_repo: Repo, *argv: str):
            return cli(None, *argv)

    else:
        run = cli
    assert_refused(repo, run, *args, expect=HINT)


@pytest.mark.parametrize(
    "args",
    [
        ("reproduce", "HEAD~1"),
        ("audit", "HEAD~1"),
        ("show", "m-001", "--rev", "HEAD~1"),
        ("view", "--rev", "HEAD~1"),
        ("diff", "HEAD~1", "HEAD~1"),
        ("reproduce", "--range", "HEAD..HEAD~1"),
    ],
    ids=" ".join,
)
def test_a_revision_read_as_the_registry_must_hold_one(repo: Repo, cli, args: tuple[str, ...]):
    _before_the_registry(repo)
    err = assert_refused(repo, cli, *args, expect=HINT)
    assert f"{repo.root}: not an evalreg registry at HEAD~1 (no registry/ directory)" in err


def _before_the_registry(repo: Repo) -> None:
    """Make ``repo``'s history start with a commit that holds no registry."""
    repo.git("checkout", "-q", "--orphan", "rewritten")
    repo.git("rm", "-rq", "--cached", ".")
    repo.git("commit", "-q", "--allow-empty", "-m", "before the registry")
    repo.commit("the registry")


def test_a_base_revision_may_predate_the_registry(repo: Repo, cli):
    _before_the_registry(repo)
    diffed = cli(repo, "diff", "HEAD~1", "HEAD", "--format", "json")
    assert diffed.code == 0, diffed.err
    reproduced = cli(repo, "reproduce", "--range", "HEAD~1..HEAD")
    assert reproduced.code == 0, reproduced.err


def test_commands_that_read_no_registry_work_outside_one(tmp_path: Path, repo: Repo, cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "log.jsonl").write_text(
        '{"input": {"text": "a"}, "kind": "x"}\n{"input": {"text": "b"}, "kind": "y"}\n'
    )
    sampled = cli(
        plain, "evalset", "sample", "log.jsonl", "-o", "items.jsonl", "--stratify-by", "kind",
        "--id-prefix", "t",
    )  # fmt: skip
    assert sampled.code == 0, sampled.err
    stats = cli(plain, "evalset", "stats", "items.jsonl", "--json")
    assert stats.code == 0, stats.err
    assert '"items.jsonl"' in stats.out
    assert cli(repo, "diff", "HEAD", "--format", "json", "-o", str(plain / "diff.json")).code == 0
    commented = cli(plain, "comment", "--diff", "diff.json", "--dry-run")
    assert commented.code == 0, commented.err
    assert commented.out.startswith("<!-- evalreg:diff -->")
