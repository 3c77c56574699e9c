"""Snapshot files: generated Markdown pinned byte for byte in ``tests/snapshots/``.

``assert_snapshot(name, text)`` compares ``text`` with ``tests/snapshots/<name>``; a mismatch
fails with a unified diff of what a reader would now see. To accept a change on purpose, rerun
with ``EVALREG_UPDATE_SNAPSHOTS=1`` (which rewrites the files) and review the diff in git::

    EVALREG_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshots.py

Only what cannot be the same on every machine is normalised, by ``normalise``: the loopback
server's port (the system picks it) becomes ``<port>``; commit SHAs (their trees hold that
port) become the names the fixture gave its commits; and the running evalreg version becomes
``<version>``, so a release does not rewrite the files.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from evalreg._version import __version__

SNAPSHOT_DIR = Path(__file__).resolve().parent.parent / "snapshots"
UPDATE_ENV = "EVALREG_UPDATE_SNAPSHOTS"
UPDATE_COMMAND = f"{UPDATE_ENV}=1 pytest tests/test_snapshots.py"

_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
# As written, and as escaped for Markdown (``0\\.1\\.0``).
_VERSION = re.compile(
    r"\bevalreg(==| )" + r"\\?\.".join(re.escape(p) for p in __version__.split(".")) + r"\b"
)


def normalise(text: str, commits: Mapping[str, str], port: int) -> str:
    """``text`` with each commit of ``commits`` (name → full SHA), in full or abbreviated,
    written ``<sha:NAME>`` (``<sha40:NAME>`` in full), the loopback address's ``port``
    written ``<port>``, and evalreg's version ``<version>``.

    Hex strings that are not one of these commits (md5s, other hashes) are left as they are:
    they must be the same on every machine."""
    by_sha = {sha: name for name, sha in commits.items()}

    def commit(match: re.Match[str]) -> str:
        hex_ = match.group(0)
        names = {name for sha, name in by_sha.items() if sha.startswith(hex_)}
        if len(names) != 1:
            return hex_
        [name] = names
        return f"<sha40:{name}>" if len(hex_) == 40 else f"<sha:{name}>"

    text = _HEX.sub(commit, text)
    # The address as written and as escaped for Markdown (``127\\.0\\.0\\.1``).
    text = re.sub(r"(127\\?\.0\\?\.0\\?\.1:)" + str(port) + r"\b", r"\1<port>", text)
    return _VERSION.sub(lambda m: f"evalreg{m.group(1)}<version>", text)


def assert_snapshot(name: str, actual: str) -> None:
    """``actual`` must equal ``tests/snapshots/<name>`` byte for byte (or, with
    ``EVALREG_UPDATE_SNAPSHOTS=1``, is written there)."""
    path = SNAPSHOT_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
        return
    if not path.is_file():
        pytest.fail(
            f"no snapshot {path.relative_to(SNAPSHOT_DIR.parent.parent)}: create it with "
            f"`{UPDATE_COMMAND}` and review it",
            pytrace=False,
        )
    expected = path.read_bytes().decode("utf-8")
    if actual == expected:
        return
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"tests/snapshots/{name} (pinned)",
            tofile=f"tests/snapshots/{name} (generated now)",
        )
    )
    if not diff:  # the same lines: only line endings or a final newline differ
        diff = f"pinned {expected[-20:]!r}\nnow    {actual[-20:]!r}\n"
    pytest.fail(
        f"the generated {name} differs from its snapshot:\n{diff}\n"
        f"If the change is intended, rewrite the snapshots with `{UPDATE_COMMAND}` and "
        "review the diff in git.",
        pytrace=False,
    )
