"""A change of the default DVC remote: a pull request that moves it must do nothing else, the
new remote must hold every object main's pointers name, and the audit lists each move (who,
when, which pull request, old and new URL) with credentials redacted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalreg.redaction import url_without_credentials
from evalreg.report.audit import MAX_CELL_CHARS
from evalreg.text.escape import cell as escaped

from conftest import Repo, assert_refused

MOVE_ALONE = "move the remote in a pull request of its own"
PIN = "registry/models/mini.yaml"


@pytest.fixture
def main(live: Repo, cli, tmp_path: Path) -> tuple[Repo, str]:
    """The registry's main branch, its results on a team remote outside the repository,
    and a pull request's branch checked out from it; returns the repository and main."""
    remote = tmp_path / "team-remote"
    shutil.copytree(live.root / "dvc-storage", remote)
    _point_at(live, remote)
    assert cli(live, "run").code == 0
    assert cli(live, "select", "labels", "mini", "--reason", "passes every gate").code == 0
    assert cli(live, "report").code == 0
    live.commit("results on the team remote")
    live.git("branch", "-M", "main")
    live.git("checkout", "-q", "-b", "pull-request")
    return live, "main"


def _point_at(repo: Repo, url: Path | str) -> None:
    config = repo.read(".dvc/config")
    line = next(ln for ln in config.splitlines() if ln.strip().startswith("url = "))
    repo.write(".dvc/config", config.replace(line, f"    url = {url}"))


def _copy_of_team_remote(repo: Repo, tmp_path: Path) -> Path:
    copy = tmp_path / "copy-remote"
    shutil.copytree(tmp_path / "team-remote", copy)
    return copy


def _objects(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "files" / "md5").rglob("*") if p.is_file())


def test_moving_the_remote_together_with_new_results_fails_the_check(
    main: tuple[Repo, str], cli, tmp_path: Path
):
    repo, base = main
    _point_at(repo, _copy_of_team_remote(repo, tmp_path))
    repo.write(PIN, repo.read(PIN).replace("temperature: 0", "temperature: 0.5"))
    assert cli(repo, "run").code == 0  # the new responses go to the copy only
    assert cli(repo, "report").code == 0
    repo.commit("mini at temperature 0.5, on our copy of the remote")

    for flags in (("--remote",), ()):  # a same-repository pull request, and a fork's
        result = cli(repo, "check", "--base", base, *flags)
        assert result.code == 1, result.out + result.err
        text = result.out + result.err
        line = next(ln for ln in text.splitlines() if MOVE_ALONE in ln)
        assert line.startswith(".dvc/config:5:")  # the line of the new url
        assert "moves the default DVC remote from 'storage' (" in line
        assert f"to 'storage' ({tmp_path / 'copy-remote'})" in line
        assert f"pins ({PIN})" in line
        assert "results (reports/" in line
    # Without --base, nothing compares the remote with main's: the check passes.
    assert cli(repo, "check", "--remote").code == 0


def test_moving_only_the_remote_to_a_copy_holding_every_object_passes(
    main: tuple[Repo, str], cli, tmp_path: Path
):
    repo, base = main
    _point_at(repo, _copy_of_team_remote(repo, tmp_path))
    repo.commit("move the DVC remote")
    result = cli(repo, "check", "--base", base, "--remote")
    assert result.code == 0, result.out + result.err
    assert MOVE_ALONE not in result.out + result.err


def test_moving_only_the_remote_to_one_missing_an_object_fails_naming_it(
    main: tuple[Repo, str], cli, tmp_path: Path
):
    repo, base = main
    copy = _copy_of_team_remote(repo, tmp_path)
    lost = _objects(copy)[0]
    md5 = lost.parent.name + lost.name
    lost.unlink()
    _point_at(repo, copy)
    repo.commit("move the DVC remote")
    pointer = next(
        p.relative_to(repo.root).as_posix()
        for p in sorted(repo.root.glob("*/**/*.dvc"))
        if f"md5: {md5}" in p.read_text()
    )

    result = cli(repo, "check", "--base", base, "--remote")
    assert result.code == 1, result.out + result.err
    text = result.out + result.err
    [line] = [ln for ln in text.splitlines() if md5 in ln]
    assert line.startswith(f"{pointer}: ")
    assert f"is not on 'storage' ({copy})" in line
    assert "the default remote this change moves to" in line
    assert f"`dvc push -r storage` from a checkout of {base}" in line
    # A fork's job cannot read the remote: it is told the move went unchecked, not failed.
    unchecked = cli(repo, "check", "--base", base)
    assert unchecked.code == 0
    assert "was not checked (`evalreg check --base main --remote` reads it)" in (
        unchecked.out + unchecked.err
    )


def test_a_move_is_checked_against_main_as_it_is_now(main: tuple[Repo, str], cli, tmp_path: Path):
    """Main gained an object after the pull request branched: the copy made before lacks
    it, so main would name an object its new remote does not hold."""
    repo, base = main
    copy = _copy_of_team_remote(repo, tmp_path)
    _point_at(repo, copy)
    repo.commit("move the DVC remote")
    repo.git("checkout", "-q", base)
    repo.write(PIN, repo.read(PIN).replace("temperature: 0", "temperature: 0.5"))
    assert cli(repo, "run").code == 0
    assert cli(repo, "report").code == 0
    repo.commit("mini at temperature 0.5")
    repo.git("checkout", "-q", "pull-request")
    # The pull request's own run output, as its job checks it out (`dvc pull`).
    subprocess.run(
        [sys.executable, "-m", "dvc", "checkout", "-q", "--force"],
        cwd=repo.root,
        check=True,
        capture_output=True,
    )

    result = cli(repo, "check", "--base", base, "--remote")
    assert result.code == 1, result.out + result.err
    assert f"at {base} is not on 'storage' ({copy})" in result.out + result.err


def test_check_refuses_a_base_that_is_no_commit(main: tuple[Repo, str], cli):
    repo, _ = main
    assert_refused(
        repo, cli, "check", "--base", "no-such-branch", expect=("--base no-such-branch",)
    )


def cell(text: str) -> str:
    """``text`` as the audit record writes it in a table cell."""
    return escaped(text, limit=MAX_CELL_CHARS)


SECRET = "s3cr3t-pass-9f27c1"
KEY = "AKIAQUITESECRETKEY77"


def test_the_audit_lists_a_merged_remote_move_with_its_credentials_redacted(
    main: tuple[Repo, str], cli, tmp_path: Path
):
    repo, base = main
    before = str(tmp_path / "team-remote")
    url = f"https://alice:{SECRET}@storage.example.com/dvc?sig={KEY}x"
    _point_at(repo, url)
    config = repo.read(".dvc/config")
    repo.write(".dvc/config", config + f"    secret_access_key = {KEY}\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "--author=Rae Mover <rae@example.com>", "-m", "move the remote")
    repo.git("checkout", "-q", base)
    repo.git(
        "merge", "--no-ff", "-q", "-m", "Merge pull request #21 from acme/move", "pull-request"
    )
    merge = repo.git("rev-parse", "HEAD").strip()

    result = cli(repo, "audit", "--no-verify", "--html", str(tmp_path / "site"))
    assert result.code == 0, result.err
    page = (tmp_path / "site" / "index.html").read_text()
    for secret in (SECRET, KEY):
        assert secret not in result.out and secret not in page
    section = result.out.split("## DVC remote\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "`" in ln]
    # Set when the registry went on DVC, moved to the team remote, then moved by #21.
    assert len(rows) == 3
    first, _, moved = rows
    assert "| none |" in first and cell("'storage' (../dvc-storage)") in first
    assert f"`{merge[:12]}`" in moved and "| #21 |" in moved
    assert cell("Rae Mover <rae@example.com>") in moved and "(merged by " in moved
    assert cell(f"'storage' ({before})") in moved
    redacted = url_without_credentials(url)
    assert redacted == ("https://alice:[redacted]@storage.example.com/dvc?sig=[redacted]")
    assert cell(f"'storage' ({redacted})") in moved
    assert cell("secret_access_key") in moved
    assert "#21" in page and "DVC remote</h2>" in page


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("../dvc-storage", "../dvc-storage"),
        ("https://u:pw-123456@host/p", "https://u:[redacted]@host/p"),
        ("https://ghp_token1234@host/p", "https://[redacted]@host/p"),
        ("ssh://git@host/srv/dvc", "ssh://git@host/srv/dvc"),
        ("azure://c/p?sv=2024&sig=abc%2Fdef", "azure://c/p?sv=[redacted]&sig=[redacted]"),
    ],
)
def test_a_remote_url_is_written_without_its_credentials(url: str, shown: str):
    assert url_without_credentials(url) == shown


def test_check_refuses_a_dvc_config_it_cannot_read_naming_its_line(main: tuple[Repo, str], cli):
    repo, base = main
    repo.write(".dvc/config", repo.read(".dvc/config") + "[core\n")
    err = assert_refused(repo, cli, "check", "--base", base)
    assert ".dvc/config:6: cannot be read" in err
