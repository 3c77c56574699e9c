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
