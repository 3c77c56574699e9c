"""What git must never commit: raw run output, ignored by pattern in the root ``.gitignore``.

Store segments and per-item records are DVC's to track (their small ``.dvc`` pointers are
in git). DVC ignores each file it adds with an entry of its own, but only once it has
added it: a segment being written, a result file under its temporary name, or anything a
killed run left would show up in ``git add -A`` until then. Patterns cover them from the
first byte, and DVC writes no entry of its own for a path a pattern already ignores (so
no per-directory ``.gitignore`` grows on two branches and conflicts). ``dvc add`` still
tracks a pattern-ignored file: only its ``.dvc`` pointer must not be ignored.
"""

from __future__ import annotations

from pathlib import Path

PATTERNS = (
    "/reports/store/*.jsonl",
    "/reports/results/**/*.items.jsonl",
    "*.tmp",
)
HEADER = "# Raw run output: DVC tracks it (each file's .dvc pointer is in git), git never does."


def missing_patterns(root: Path) -> list[str]:
    """The patterns the root ``.gitignore`` lacks (compared line by line)."""
    try:
        lines = {line.strip() for line in (root / ".gitignore").read_text("utf-8").splitlines()}
    except FileNotFoundError:
        lines = set()
    return [p for p in PATTERNS if p not in lines]


def ensure_ignored(root: Path) -> list[str]:
    """Add the missing patterns to the root ``.gitignore``; return what was added.

    ``dvcrepo.init`` calls it (so ``evalreg init`` writes them once); ``check`` warns
    about a registry made before the patterns existed.
    """
    missing = missing_patterns(root)
    if not missing:
        return []
    path = root / ".gitignore"
    text = path.read_text("utf-8") if path.exists() else ""
    if text and not text.endswith("\n"):
        text += "\n"
    text += ("\n" if text else "") + "\n".join([HEADER, *missing]) + "\n"
    path.write_text(text, encoding="utf-8")
    return missing
