"""The checks a comment job makes before it posts what an untrusted pull request made.

The diff a pull request's workflow uploads was written next to that pull request's code:
the job holding the write token reads it as data. It must be a JSON object of bounded
size and an evalreg diff by its schema, every field validated; it is posted only for the
commit the triggering event names (a full SHA), while that commit is still the pull
request's head.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from evalreg.compare.diff_document import DIFF_SCHEMA, DiffDocument, InvalidDiff, diff_document
from evalreg.errors import UntrustedInputError

MAX_JSON_BYTES = 50_000_000
"""The largest JSON file a command reads from outside (50 MB)."""

_FULL_SHA = re.compile(r"[0-9a-f]{40}")


def read_json_object(
    path: Path, *, flag: str, name: str, what: str, max_bytes: int = MAX_JSON_BYTES
) -> dict[str, Any]:
    """The JSON object in the file ``path`` (given as ``name`` to ``flag``), which should
    hold ``what``; ``UntrustedInputError`` otherwise (a file above ``max_bytes`` is not
    read; malformed JSON is placed by line and column)."""
    return _object(_read(path, flag, name, what, max_bytes), flag, name, what)


def _read(path: Path, flag: str, name: str, what: str, max_bytes: int) -> str:
    try:
        if path.stat().st_size > max_bytes:
            raise UntrustedInputError(
                "size", f"{flag} {name}: larger than {_megabytes(max_bytes)}, not {what}"
            )
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise UntrustedInputError(
            "json", f"{flag} {name}: not {what}, unreadable as JSON ({type(exc).__name__})"
        ) from None


def _object(text: str, flag: str, name: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UntrustedInputError(
            "json",
            f"{flag} {name}:{exc.lineno}:{exc.colno}: not {what}, unreadable as JSON ({exc.msg})",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise UntrustedInputError(
            "json", f"{flag} {name}: not {what}, unreadable as JSON ({type(exc).__name__})"
        ) from None
    if not isinstance(data, dict):
        raise UntrustedInputError("json", f"{flag} {name}: not {what} (not a JSON object)")
    return data


def read_diff(path: Path, name: str, *, max_bytes: int = MAX_JSON_BYTES) -> DiffDocument:
    """The evalreg diff (``evalreg diff --format json``) in the file given to ``--diff``,
    validated against the document's models before anything renders it: a field of the
    wrong type, or a required one missing, is refused and named (fields this evalreg does
    not know are ignored; see ``compare.diff_document``)."""
    what = "an evalreg diff"
    text = _read(path, "--diff", name, what, max_bytes)
    version = _object(text, "--diff", name, what).get("schema_version")
    if type(version) is not int or version != DIFF_SCHEMA:
        raise UntrustedInputError(
            "schema", f"--diff {name}: not an evalreg diff (schema_version {DIFF_SCHEMA})"
        )
    try:
        return diff_document(text)
    except InvalidDiff as exc:
        raise UntrustedInputError("schema", f"--diff {name}: not an evalreg diff: {exc}") from None


def check_head_sha(sha: str | None) -> str | None:
    """``--head-sha`` as given, when it is a full lowercase commit SHA (as events give it):
    an abbreviation could name another commit, anything else is not a commit."""
    if sha is not None and not _FULL_SHA.fullmatch(sha):
        raise UntrustedInputError("sha", "--head-sha must be a full 40-character commit SHA")
    return sha


class PullRequests(Protocol):
    """What the head check asks GitHub (``github.GitHubClient`` answers)."""

    def pull_for_sha(self, sha: str) -> int | None: ...

    def pull_head_sha(self, pr_number: int) -> str: ...


@dataclass(frozen=True)
class CommentTarget:
    """Where a diff may be posted: ``post`` is true for pull request ``number`` only."""

    verdict: Literal["post", "no_pull", "moved"]
    number: int | None
    """The pull request (None when no open one has the head SHA)."""
    head_sha: str | None

    @property
    def post(self) -> bool:
        return self.verdict == "post"

    def describe(self) -> str:
        """Why nothing is posted, in a sentence ("" when the diff is posted)."""
        sha = (self.head_sha or "")[:12]
        if self.verdict == "no_pull":
            return f"No open pull request has head {sha}: nothing to post."
        if self.verdict == "moved":
            return (
                f"Pull request #{self.number} has moved past {sha}: this diff is out of "
                "date and is not posted (the run for the new head will post its own)."
            )
        return ""


def comment_target(github: PullRequests, number: int, head_sha: str | None) -> CommentTarget:
    """Whether the diff made for ``head_sha`` may be posted on pull request ``number``
    (0: the open pull request whose head is ``head_sha``), asking GitHub now.

    Without ``head_sha`` nothing is checked against the pull request's head.
    """
    if number == 0:
        if head_sha is None:
            raise ValueError("number 0 needs a head SHA to find the pull request by")
        found = github.pull_for_sha(head_sha)
        if found is None:
            return CommentTarget("no_pull", None, head_sha)
        number = found
    if head_sha is not None and github.pull_head_sha(number) != head_sha:
        return CommentTarget("moved", number, head_sha)
    return CommentTarget("post", number, head_sha)


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:g} MB" if size >= 1_000_000 else f"{size:,} bytes"
