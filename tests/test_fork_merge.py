"""A fork's pull request whose responses were bought with ``--no-push`` and merged: main
names what no remote holds and who brought it in, and ``evalreg run`` buys it again."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalreg.text.escape import cell

from conftest import Repo
from support import runs
from support.matrix import every_nth
from support.s3 import AWS, s3_client, s3_server

MERGE = "Merge pull request #12 from fork/branch"


BUCKET = "team-evals"


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with s3_server(BUCKET) as url:
        yield url


@pytest.fixture(params=["folder"])
def merged(request, live: Repo, cli, tmp_path: Path, monkeypatch) -> Repo:
    """Main with its results on a team remote outside the repository (a folder, or with
    ``"s3"`` a bucket behind a real S3 API), and a fork's pull request merged into it whose
    new responses and records were never pushed."""
    if request.param == "s3":
        url = request.getfixturevalue("s3")
        for name, value in AWS.items():
            monkeypatch.setenv(name, value)
        prefix = f"evalreg/{tmp_path.name}"
        _upload(live.root / "dvc-storage", url, prefix)
        remote = f"s3://{BUCKET}/{prefix}\n    endpointurl = {url}"
    else:
        remote = str(tmp_path / "team-remote")
        shutil.copytree(live.root / "dvc-storage", remote)
    config = live.read(".dvc/config")
    assert "url = ../dvc-storage" in config
    live.write(".dvc/config", config.replace("url = ../dvc-storage", f"url = {remote}"))
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


def _upload(folder: Path, url: str, prefix: str) -> None:
    """The objects of a DVC remote folder, into the bucket under ``prefix``."""
    client = s3_client(url)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        client.put_object(
            Bucket=BUCKET,
            Key=f"{prefix}/{path.relative_to(folder).as_posix()}",
            Body=path.read_bytes(),
        )


def _lost(repo: Repo) -> dict[str, str]:
    """The fork's pointers (path: md5) that the merge brought in."""
    out = {}
    for rel in repo.git("diff", "--name-only", "HEAD^1", "HEAD").split():
        if rel.endswith(".dvc") and rel.startswith("reports/"):
            text = repo.read(rel)
            out[rel] = next(ln.split(":")[1].strip() for ln in text.splitlines() if "md5" in ln)
    return out


BOTH_REMOTES = pytest.mark.parametrize("merged", ["folder", "s3"], indirect=True)


@BOTH_REMOTES
def test_check_remote_names_each_missing_object_and_the_pull_request_that_merged_it(
    merged: Repo, cli
):
    lost = _lost(merged)
    merge = merged.git("rev-parse", "HEAD").strip()
    for pointer in lost:  # as main's job checks out: its `dvc pull` cannot fetch them
        (merged.root / pointer.removesuffix(".dvc")).unlink(missing_ok=True)
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


@BOTH_REMOTES
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


def test_the_merge_names_its_lost_evidence_and_the_commit_that_bought_it_again(merged: Repo, cli):
    lost = _lost(merged)
    merge = merged.git("rev-parse", "HEAD").strip()
    assert cli(merged, "run").code == 0
    pending = cli(merged, "reproduce", merge)
    assert pending.code == 1 and "by a run not committed yet" in pending.out
    merged.git("add", "-A")
    merged.git("commit", "-q", "--author=Maintainer Mo <mo@example.com>", "-m", "buy again #12")
    rebuy = merged.git("rev-parse", "HEAD").strip()

    # Records the re-buy wrote again byte for byte (a run within the same second as the
    # fork's, timings alike) are the same DVC object, pushed now: no longer lost. The
    # store segment, named uniquely by each run, always is.
    still_lost = {
        p: m for p, m in lost.items() if not (merged.root / p).exists() or m not in merged.read(p)
    }
    assert any(p.startswith("reports/store/") for p in still_lost)

    result = cli(merged, "reproduce", merge)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    for path, md5 in lost.items():
        if path not in still_lost:
            assert f"{path} (md5 {md5})" not in result.out
            continue
        line = next(ln for ln in result.out.splitlines() if f"{path} (md5 {md5})" in ln)
        assert f"at commit {rebuy[:12]} by Maintainer Mo on " in line
        assert "reports/rebought.jsonl line 1" in line
    assert f"reproduce {rebuy[:12]} instead" in result.out
    assert "DIFFERENT" in result.out
    assert cli(merged, "reproduce", rebuy).code == 0

    record = cli(merged, "audit", "--no-verify")
    assert record.code == 0, record.err
    section = record.out.split("## Evidence bought again", 1)[1].split("\n## ", 1)[0]
    [row] = [ln for ln in section.splitlines() if ln.startswith("| ") and rebuy[:12] in ln]
    assert "Maintainer Mo" in row and "labels/mini" in row
    for path, md5 in lost.items():
        assert f"{cell(path)} (md5 {md5})" in row
    assert f"#12, `{merge[:12]}`, 20" in row
    flags = record.out.split("## Flags", 1)[1].split("\n## ", 1)[0]
    assert cell("labels/mini, merged by pull request #12") in flags
    assert cell(f"bought again in {rebuy[:12]} by Maintainer Mo") in flags

    # The audit of the merge itself: its evidence did not reproduce, and says why.
    at_merge = cli(merged, "audit", merge)
    assert at_merge.code == 1
    assert "None: reports/rebought.jsonl records no run" in at_merge.out


def test_an_audit_without_a_rebuy_says_so(live: Repo, cli):
    record = cli(live, "audit", "--no-verify")
    assert record.code == 0
    assert "## Evidence bought again\n\nNone: reports/rebought.jsonl records no run" in record.out


def test_a_run_stopped_before_it_removed_a_lost_pointer_leaves_it_to_the_next(
    merged: Repo, cli, server
):
    """The state a run leaves when stopped between putting its results in place and
    removing the pointer of the lost store segment: the next run removes it, buys nothing,
    and lists the removal to commit."""
    segment = next(p for p in _lost(merged) if p.startswith("reports/store/"))
    assert cli(merged, "run").code == 0
    merged.git("checkout", "HEAD", "--", segment)  # the pointer, as the stopped run left it
    before = server.count()
    again = cli(merged, "run")
    assert again.code == 0, again.err
    assert server.count() == before
    assert not (merged.root / segment).exists()
    assert segment in again.out + again.err
    merged.commit("buy again the responses of #12")
    assert merged.git("status", "--porcelain") == ""
    assert cli(merged, "reproduce", "HEAD").code == 0


RE_BUY_MOMENTS = [
    m
    for m in runs.MOMENTS
    if m.name in ("closing step begins", "first pointer written", "journal closed (pushing)")
]


@pytest.mark.parametrize("moment", every_nth(RE_BUY_MOMENTS, 2, ids=lambda m: m.name))
def test_a_re_buy_killed_at_any_moment_of_its_closing_resumes_to_one_record(
    merged: Repo, server, moment: runs.Moment
):
    """SIGKILL to the whole process group of the run that buys the fork's evidence again,
    at each moment of its closing step; the next run ends the work: the fork's four
    responses bought once in all, one line in the re-bought log, the lost segment's pointer
    gone, and the results reproduce."""
    lost = _lost(merged)
    merge = merged.git("rev-parse", "HEAD").strip()
    before = server.count()
    err, code = runs.signal_at(merged, server, moment, signal.SIGKILL)
    assert code == -signal.SIGKILL, f"the run ended before {moment.name}: {err}"
    resumed = runs.evalreg(merged, "run")
    assert resumed.returncode == 0, resumed.stderr
    assert server.count() - before == 4
    [line] = merged.read("reports/rebought.jsonl").splitlines()
    assert {o["path"] for o in json.loads(line)["objects"]} == set(lost)
    assert not any((merged.root / p).exists() for p in lost if p.startswith("reports/store/"))
    assert runs.untracked_data(merged) == []
    merged.commit("buy again the evidence of #12")
    assert runs.in_process(merged, "reproduce", "HEAD").returncode == 0
    assert runs.in_process(merged, "reproduce", merge).returncode == 1
