"""``-C DIR``: relative paths given to a command are read from DIR, as with ``git -C``."""

from __future__ import annotations

from conftest import Repo, items_jsonl

EVALSET = "evalsets/messages.jsonl"


def test_evalset_add_resolves_its_file_against_dir(live: Repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    live.write(EVALSET, items_jsonl(6))
    result = cli(live, "evalset", "add", EVALSET, "--no-push")
    assert result.code == 0, result.err
    assert "6 items" in result.out


def test_diff_output_is_written_inside_dir(live: Repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(live, "diff", "HEAD", "-o", "diff.md").code == 0
    assert (live.root / "diff.md").is_file()
    assert not (tmp_path / "diff.md").exists()


def test_audit_writes_its_record_and_site_inside_dir(live: Repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    result = cli(live, "audit", "--no-verify", "-o", "audit/record.md", "--html", "site")
    assert result.code == 0, result.err
    assert (live.root / "audit" / "record.md").is_file()
    assert (live.root / "site").is_dir()
    assert not (tmp_path / "audit").exists() and not (tmp_path / "site").exists()


def test_diff_reads_its_check_file_from_dir(live: Repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checked = cli(live, "check", "--json")
    live.write("check.json", checked.out)
    result = cli(live, "diff", "HEAD", "--format", "json", "--check", "check.json")
    assert result.code == 0, result.err
    assert '"check"' in result.out


def test_evalset_stats_reads_its_file_from_dir(live: Repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli(live, "evalset", "stats", EVALSET, "--json")
    assert result.code == 0, result.err
    assert EVALSET in result.out
