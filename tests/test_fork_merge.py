"""A fork's pull request whose responses were bought with ``--no-push`` and merged: main
names what no remote holds and who brought it in, and ``evalreg run`` buys it again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import Repo

MERGE = "Merge pull request #12 from fork/branch"


@pytest.fixture
def merged(live: Repo, cli, tmp_path: Path) -> Repo:
    """Main with its results on a team remote outside the repository, and a fork's pull
    request merged into it whose new responses and records were never pushed."""
    remote = tmp_path / "team-remote"
    shutil.copytree(live.root / "dvc-storage", remote)
    live.write(
        ".dvc/config", live.read(".dvc/config").replace("url = ../dvc-storage", f"url = {remote}")
    )
    assert cli(live, "run").code == 0
    assert cli(live, "report").code == 0
    live.commit("results")
    fork = Repo(tmp_path / "fork")
    live.git("clone", "-q", str(live.root), str(fork.root))
    fork.git("checkout", "-q", "-b", "branch")
    pin = "registry/models/mini.yaml"
    fork.write(pin, fork.read(pin).replace("temperature: 0", "temperature: 0.5"))
    assert cli(fork, "run", "--no-push").code == 0
    assert cli(fork, "report").code == 0
    fork.commit("mini at temperature 0.5")
    live.git("fetch", "-q", str(fork.root), "branch")
    live.git("merge", "--no-ff", "-q", "-m", MERGE, "FETCH_HEAD")
    return live


def _lost(repo: Repo) -> dict[str, str]:
    """The fork's pointers (path: md5) that the merge brought in."""
    out = {}
    for rel in repo.git("diff", "--name-only", "HEAD^1", "HEAD").split():
        if rel.endswith(".dvc") and rel.startswith("reports/"):
            text = repo.read(rel)
            out[rel] = next(ln.split(":")[1].strip() for ln in text.splitlines() if "md5" in ln)
    return out


def test_check_remote_names_each_missing_object_and_the_pull_request_that_merged_it(
    merged: Repo, cli
):
    lost = _lost(merged)
    merge = merged.git("rev-parse", "HEAD").strip()
    result = cli(merged, "check", "--remote", "--json")
    assert result.code == 1
    missing = json.loads(result.out)["remote"]["missing"]
    assert {m["path"]: m["md5"] for m in missing} == lost
    assert len(lost) == 2  # the fork's store segment and its per-item records
    for entry in missing:
        assert entry["introduced"] == {"commit": merge, "subject": MERGE, "pr": 12}
    plain = cli(merged, "check", "--remote")
    for path, md5 in lost.items():
        text = plain.out + plain.err
        line = next((ln for ln in text.splitlines() if path in ln), text)
        assert md5 in line and "pull request #12" in line and merge[:12] in line


def test_run_buys_again_the_responses_no_remote_holds_and_main_reproduces(
    merged: Repo, cli, server
):
    lost = _lost(merged)
    before = server.count()
    result = cli(merged, "run")
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert server.count() - before == 4  # the fork's four responses, and nothing else
    assert "labels/mini: results rest on DVC objects that are on no remote" in result.err
    for path, md5 in lost.items():
        assert f"{path} (md5 {md5})" in result.err
    [line] = merged.read("reports/rebought.jsonl").splitlines()
    assert json.loads(line) == {
        "cells": ["labels/mini"],
        "objects": [{"md5": md5, "path": path} for path, md5 in sorted(lost.items())],
        "reason": "on no DVC remote",
    }
    segment = next(p for p in lost if p.startswith("reports/store/"))
    assert not (merged.root / segment).exists()  # it named data nobody has
    merged.commit("buy again the responses of #12, on no remote")
    checked = json.loads(cli(merged, "check", "--remote", "--json").out)
    assert checked["remote"]["missing"] == [] and checked["remote"]["error"] is None
    assert cli(merged, "reproduce", "HEAD").code == 0
    again = cli(merged, "run")
    assert again.code == 0 and "on no remote" not in again.err
