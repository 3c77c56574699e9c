"""The scaffold's DVC remote, a folder inside the repository: what a command pushes there is
staged and listed with the files to commit, so a teammate's clone pulls it from git."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.store.journal import mark_unpushed

NEW_EVALSET = "evalsets/new.jsonl"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True
    )


def _listed(out: str, lead: str) -> list[str]:
    """The files a command lists under ``LEAD:``, one a line, indented."""
    lines = out.splitlines()
    start = lines.index(f"{lead}:") + 1
    files = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        files.append(line.strip())
    return files


def _commit_listed(root: Path, files: list[str], message: str) -> None:
    """What the printed instructions say, verbatim: `git add` the listed files, commit."""
    _git(root, "add", "--", *files)
    _git(root, "commit", "-q", "-m", message)


def _untracked(root: Path) -> list[str]:
    return _git(root, "ls-files", "--others", "--exclude-standard").split()


@pytest.fixture
def scaffold(tmp_path: Path, cli) -> Path:
    """A registry as `evalreg init` leaves it, committed as its next steps say."""
    root = tmp_path / "registry"
    assert cli(None, "init", str(root), "--no-snippets").code == 0
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Start an eval registry")
    return root


def _new_evalset(root: Path) -> None:
    lines = (root / "evalsets/faq-routing.jsonl").read_text().splitlines()[:3]
    (root / NEW_EVALSET).write_text("".join(f"{x.replace('q-00', 'n-00')}\n" for x in lines))


def _clone(root: Path, tmp_path: Path) -> Path:
    clone = tmp_path / "teammate"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    return clone


def test_init_stages_the_example_object_with_its_pointer(tmp_path: Path, cli):
    root = tmp_path / "registry"
    assert cli(None, "init", str(root), "--no-snippets").code == 0
    staged = _git(root, "diff", "--cached", "--name-only").split()
    assert "evalsets/faq-routing.jsonl.dvc" in staged
    assert any(p.startswith(f"{dvcrepo.IN_REPO_REMOTE}/files/md5/") for p in staged)


def test_a_clone_pulls_an_eval_set_committed_as_evalset_add_says(scaffold, tmp_path, cli):
    _new_evalset(scaffold)
    added = cli(scaffold, "evalset", "add", str(scaffold / NEW_EVALSET))
    assert added.code == 0, added.err
    files = _listed(added.out, "To record this version, commit")
    assert f"{NEW_EVALSET}.dvc" in files
    assert any(f.startswith(f"{dvcrepo.IN_REPO_REMOTE}/files/md5/") for f in files)
    _commit_listed(scaffold, files, "Add an eval set")
    assert not [p for p in _untracked(scaffold) if p.startswith(dvcrepo.IN_REPO_REMOTE)]

    clone = _clone(scaffold, tmp_path)
    pulled = _dvc(clone, "pull")
    assert pulled.returncode == 0, pulled.stderr
    assert (clone / NEW_EVALSET).read_bytes() == (scaffold / NEW_EVALSET).read_bytes()
    checked = cli(clone, "check", "--remote")
    assert "not in the remote" not in checked.err


def test_a_clone_reproduces_a_run_committed_as_run_and_report_say(scaffold, tmp_path, cli):
    ran = cli(scaffold, "run", "--candidate", "keyword-router")
    assert ran.code == 0, ran.err
    files = _listed(ran.out, "To commit with the run")
    assert "reports/results/faq-routing/keyword-router.json" in files
    assert sum(f.startswith(f"{dvcrepo.IN_REPO_REMOTE}/") for f in files) == 2  # segment, items
    _commit_listed(scaffold, files, "Run the baseline")
    reported = cli(scaffold, "report")
    assert reported.code == 0, reported.err
    written = reported.out.strip().removeprefix("Wrote ").split(", ")
    _commit_listed(scaffold, written, "Report")
    assert not [p for p in _untracked(scaffold) if p.startswith(dvcrepo.IN_REPO_REMOTE)]

    clone = _clone(scaffold, tmp_path)
    pulled = _dvc(clone, "pull")
    assert pulled.returncode == 0, pulled.stderr
    reproduced = cli(clone, "reproduce", "HEAD")
    assert reproduced.code == 0, reproduced.out + reproduced.err
    checked = cli(clone, "check", "--remote")
    assert "not in the remote" not in checked.err
    assert "findings" not in checked.err.splitlines()[-1], checked.err


def test_check_names_an_object_git_does_not_track_with_its_git_add(scaffold, cli):
    _new_evalset(scaffold)
    assert cli(scaffold, "evalset", "add", str(scaffold / NEW_EVALSET)).code == 0
    _git(scaffold, "reset", "-q", "--", dvcrepo.IN_REPO_REMOTE)  # the pointer only
    _git(scaffold, "commit", "-q", "-m", "Add an eval set")
    md5 = dvcrepo.pointer_md5((scaffold / f"{NEW_EVALSET}.dvc").read_bytes())
    assert md5 is not None
    obj = f"{dvcrepo.IN_REPO_REMOTE}/files/md5/{md5[:2]}/{md5[2:]}"

    checked = cli(scaffold, "check")
    assert checked.code == 1
    assert f"{NEW_EVALSET}.dvc: finding: its DVC object {obj}" in checked.err
    assert f"`git add {obj}` and commit it" in checked.err
    _git(scaffold, "add", obj)
    _git(scaffold, "commit", "-q", "-m", "Commit its object")
    assert cli(scaffold, "check").code == 0


def test_check_remote_in_a_clone_says_the_object_was_never_committed(scaffold, tmp_path, cli):
    _new_evalset(scaffold)
    assert cli(scaffold, "evalset", "add", str(scaffold / NEW_EVALSET)).code == 0
    _git(scaffold, "reset", "-q", "--", dvcrepo.IN_REPO_REMOTE)
    _git(scaffold, "commit", "-q", "-m", "Add an eval set, without its object")

    clone = _clone(scaffold, tmp_path)
    assert _dvc(clone, "pull").returncode != 0
    checked = cli(clone, "check", "--remote")
    assert checked.code == 1
    assert "was never committed" in checked.err
    assert "`git add dvc-storage/files/md5/" in checked.err
    assert "evalreg run" not in checked.err.split(f"{NEW_EVALSET}.dvc: finding:")[1].split("\n")[0]


def test_an_object_git_ignores_is_not_forced_and_its_rule_is_named(scaffold, cli):
    with (scaffold / ".gitignore").open("a") as f:
        f.write("/dvc-storage/\n")
    _git(scaffold, "commit", "-q", "-am", "Ignore the remote")
    _new_evalset(scaffold)
    added = cli(scaffold, "evalset", "add", str(scaffold / NEW_EVALSET))
    assert added.code == 0, added.err
    assert "warning: git ignores dvc-storage/files/md5/" in added.err
    assert ".gitignore:" in added.err and ":/dvc-storage/" in added.err
    assert dvcrepo.IN_REPO_REMOTE not in _git(scaffold, "diff", "--cached", "--name-only")
    checked = cli(scaffold, "check")
    assert "git ignores it (.gitignore:" in checked.err


def test_a_remote_outside_the_repository_stages_nothing(tmp_path: Path, cli):
    root = tmp_path / "registry"
    remote = tmp_path / "elsewhere"
    assert cli(None, "init", str(root), "--remote", str(remote), "--no-snippets").code == 0
    assert dvcrepo.in_repo_remote(root) is None
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Start an eval registry")
    _new_evalset(root)
    added = cli(root, "evalset", "add", str(root / NEW_EVALSET))
    assert added.code == 0, added.err
    assert _listed(added.out, "To record this version, commit") == [
        f"{NEW_EVALSET}.dvc",
        "evalsets/.gitignore",
    ]
    assert "in-repository" not in added.out
    assert any(remote.rglob("*")), "nothing pushed to the remote outside"


def test_the_next_run_stages_the_objects_of_a_push_it_owed(scaffold, cli):
    """A run stopped after its push and before it staged the objects: the push stays owed,
    and the next run's push (which sends nothing new) stages them."""
    assert cli(scaffold, "run", "--candidate", "keyword-router").code == 0
    pointers = _git(scaffold, "diff", "--cached", "--name-only", "--", "reports").split()
    _git(scaffold, "reset", "-q", "--", dvcrepo.IN_REPO_REMOTE)
    mark_unpushed(scaffold, [p.removesuffix(".dvc") for p in pointers])

    again = cli(scaffold, "run", "--candidate", "keyword-router")
    assert again.code == 0, again.err
    staged = _git(scaffold, "diff", "--cached", "--name-only", "--", dvcrepo.IN_REPO_REMOTE)
    assert len(staged.split()) == 2
    assert (
        sum(
            f.startswith(dvcrepo.IN_REPO_REMOTE)
            for f in _listed(again.out, "To commit with the run")
        )
        == 2
    )
