"""A proposal as a branch: a newer snapshot's pin, and a candidate for it in every
selection that lists the pin it follows, committed on ``evalreg/propose/<pin>-<snapshot>``
without touching the working tree or the checked-out branch.

The files are edited line by line, as ``evalreg select`` edits a selection: the new pin is
the old pin's file with its ``model`` line replaced (and, when it has prices, a
``price.review`` saying they were copied, which ``check`` warns about until a person
removes it); each selection gets one candidate item after the old pin's. Every other byte
is kept. Nothing is bought: CI's pull-request job, or the author, runs the new cells.

The commit is made with git's plumbing in a temporary index (``read-tree``,
``hash-object``, ``update-index``, ``write-tree``, ``commit-tree``, ``update-ref``), on top
of the commit the registry was read at. Proposing again what a branch already holds changes
nothing; a branch that holds something else (an older base, an edited file) is moved to
the new commit.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.propose.snapshots import read
from evalreg.registry.loader import Registry

PREFIX = "evalreg/propose/"

TRAILER = "Proposed-by: evalreg propose"
"""The last line of every commit ``propose`` makes, followed by `` (tree <sha>)``, the tree
it committed: a commit whose message ends otherwise, or whose tree is not the one named
(a person amended it, keeping the message), is a person's, and its branch is never moved
or overwritten."""


def _trailer(tree: str) -> str:
    return f"{TRAILER} (tree {tree})"


def made_by_propose(root: Path, commit: str) -> bool:
    """Whether ``commit`` (in the repository at ``root``) is one ``propose`` made, as it
    made it."""
    done = subprocess.run(
        ["git", "log", "-1", "--format=%T%n%B", commit, "--"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    tree, _, message = done.stdout.partition("\n")
    return done.returncode == 0 and message.rstrip("\n").endswith("\n" + _trailer(tree))


@dataclass(frozen=True)
class Proposal:
    """What was proposed for one pin, and where."""

    pin: str
    model: str
    new_pin: str
    new_model: str
    branch: str
    commit: str
    files: tuple[str, ...]
    selections: tuple[str, ...]
    outcome: str
    """``created``, ``updated`` (the branch held another commit of ``propose``'s),
    ``unchanged``, or ``kept`` (left as it is: see ``kept``)."""
    kind: str = "snapshot"
    """``snapshot`` (a newer one proposed) or ``retired`` (the pin marked retired)."""
    kept: str | None = None
    """Why the branch was left as it is: a person's commit is on it, or it is checked out."""


MAX_TAIL = 200
"""Longest branch name after the prefix (a ref is a file name: 255 bytes at most)."""

MAX_NOTE = 500
"""Longest ``price.review`` or ``retired`` text the schema accepts."""


def branch_name(pin: str, snapshot: str | None, taken: set[str] | None = None) -> str:
    """``evalreg/propose/<pin>-<snapshot>`` (``retired-<pin>`` without a snapshot), with
    what a ref cannot hold replaced by ``-``,
    cut to :data:`MAX_TAIL` characters (ending in a hash of what was cut). A pin id a ref
    cannot hold as it is (``old-router.``) is followed by a hash of itself, so it never
    shares a name with another pin's (``old-router``), whichever pins a run proposes;
    ``taken`` (the branches made so far this run, which it joins) adds ``-2``... to a name
    two proposals would still share."""
    if _ref_part(pin) != pin:  # "old-router." beside "old-router": never the same name
        pin = f"{pin}-{hashlib.sha256(pin.encode()).hexdigest()[:6]}"
    raw = f"retired-{pin}" if snapshot is None else f"{pin}-{snapshot}"
    tail = _ref_part(raw)
    if len(tail) > MAX_TAIL:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
        tail = tail[: MAX_TAIL - 11].rstrip(".-") + "-" + digest
    name, n = PREFIX + tail, 2
    while taken is not None and name in taken:
        name, n = f"{PREFIX}{tail}-{n}", n + 1
    if taken is not None:
        taken.add(name)
    return name


def _ref_part(text: str) -> str:
    """``text`` with what a ref cannot hold replaced by ``-`` (or dropped, at its ends)."""
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", text)
    tail = re.sub(r"\.{2,}", ".", tail).strip(".-")
    return tail.removesuffix(".lock")


def _fit(text: str, limit: int = MAX_NOTE) -> str:
    """``text``, cut to ``limit`` characters (ending in an ellipsis) if longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def new_pin_id(pin: str, model: str, new_model: str, taken: set[str]) -> str:
    """The new pin's id: ``pin`` with the old snapshot's version replaced by the new one's
    where it ends with it, else the new version appended; never one already taken."""
    old, new = read(model), read(new_model)
    old_tail = model[len(old.stem) :].lstrip("-")
    new_tail = re.sub(r"[^A-Za-z0-9._-]+", "-", new_model[len(new.stem) :].lstrip("-"))
    base = (
        pin[: -len(old_tail)] + new_tail
        if old_tail and pin.endswith(old_tail)
        else f"{pin}-{new_tail}"
    )
    base = base[:120]
    ident, n = base, 2
    while ident in taken:
        ident, n = f"{base}-{n}", n + 1
    return ident


def _scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain where it reads back as the same string."""
    if (
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:-]*", value)
        and ": " not in value
        and not value.endswith(":")
    ):
        from ruamel.yaml import YAML

        if YAML(typ="safe", pure=True).load(value) == value:
            return value
    return json.dumps(value, ensure_ascii=False)


def _rt(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="rt").load(io.StringIO(text))


def pin_text(text: str, new_model: str, review: str | None) -> str:
    """The old pin file ``text`` with ``model: new_model``, and ``price.review`` first in
    its price mapping when ``review`` is given and the pin has prices."""
    data = _rt(text)
    lines = text.splitlines(keepends=True)
    line, col = data.lc.value("model")
    old = lines[line]
    if old[col : col + 1] in ("'", '"'):
        end = old.index(old[col], col + 1) + 1  # a quoted id holds no quote of its kind
    else:
        end = col + len(str(data["model"]))
    lines[line] = old[:col] + _scalar(new_model) + old[end:]
    if "retired" in data:  # the old snapshot is retired, not the new one
        start, stop = _extent(lines, data.lc.key("retired")[0], data.lc.key("retired")[1])
        del lines[start:stop]
        data = _rt("".join(lines))
    price: Any = data.get("price")
    if review is not None and isinstance(price, dict) and price:
        positions: Any = getattr(price, "lc")  # noqa: B009 (ruamel's line/column record)
        pline, pcol = positions.key(next(iter(price)))
        if pline == data.lc.key("price")[0]:
            raise UsageError(
                "its price is a flow mapping ({...}): write it as a block mapping, one key a "
                "line, for propose to edit it"
            )
        written = " " * pcol + f"review: {json.dumps(review, ensure_ascii=False)}\n"
        if "review" in price:  # a pin proposed earlier, its prices never confirmed
            start, stop = _extent(lines, positions.key("review")[0], pcol)
            lines[start:stop] = [written]
        else:
            lines.insert(pline, written)
    return "".join(lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _extent(lines: list[str], start: int, col: int) -> tuple[int, int]:
    """The lines of the mapping entry whose key is on line ``start`` at column ``col``: to
    the next line as little indented (blank lines before it left out)."""
    stop = start + 1
    while stop < len(lines) and (not lines[stop].strip() or _indent(lines[stop]) > col):
        stop += 1
    while stop > start + 1 and not lines[stop - 1].strip():
        stop -= 1
    return start, stop


def selection_text(text: str, old_pin: str, new_pin: str, description: str) -> str | None:
    """The selection file ``text`` with a candidate for ``new_pin`` after each candidate of
    ``old_pin`` (None: it lists no such candidate, or already one for ``new_pin``)."""
    data = _rt(text)
    candidates: Any = data.get("candidates")
    if not isinstance(candidates, list):
        return None
    if any(isinstance(c, dict) and c.get("pin") == new_pin for c in candidates):
        return None
    ids = {c.get("id") for c in candidates if isinstance(c, dict)}
    positions: Any = getattr(candidates, "lc")  # noqa: B009 (ruamel's line/column record)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    inserts: list[tuple[int, list[str]]] = []
    top_lines = sorted(data.lc.key(k)[0] for k in data)
    for i, c in enumerate(candidates):
        if not (isinstance(c, dict) and c.get("pin") == old_pin):
            continue
        line, col = positions.item(i)
        dash = lines[line].rfind("-", 0, col)
        if dash < 0 and line > 0 and lines[line - 1].strip() == "-":
            dash = lines[line - 1].index("-")  # "-" alone, the candidate's keys below it
        elif dash < 0 or lines[line][:dash].strip():
            raise UsageError(
                "its candidates are not a block list (a flow list [...] or one item a "
                "line): write them one key a line, for propose to edit them"
            )
        if i + 1 < len(candidates):
            after = positions.item(i + 1)[0]
            if lines[after - 1].strip() == "-":
                after -= 1
        else:
            after = next((t for t in top_lines if t > line), len(lines))
        # Blank lines and comments before what follows stay with it (a line indented
        # deeper than the dash is the candidate's own: a block scalar's, say).
        while after > line + 1 and (
            not lines[after - 1].strip()
            or (lines[after - 1].lstrip().startswith("#") and _indent(lines[after - 1]) <= dash)
        ):
            after -= 1
        ident, n = new_pin, 2
        while ident in ids:
            ident, n = f"{new_pin}-{n}", n + 1
        ids.add(ident)
        pad = " " * dash
        inserts.append(
            (
                after,
                [
                    f"{pad}- id: {_scalar(ident)}\n",
                    f"{pad}  pin: {_scalar(new_pin)}\n",
                    f"{pad}  description: {json.dumps(description, ensure_ascii=False)}\n",
                    *_other_fields(c, lines, dash, after),
                ],
            )
        )
    if not inserts:
        return None
    for at, new in sorted(inserts, reverse=True):
        lines[at:at] = new
    return "".join(lines)


def _other_fields(candidate: Any, lines: list[str], dash: int, end: int) -> list[str]:
    """The lines of ``candidate``'s fields but its id, pin and description (its prompt
    variant), as written: the new candidate is tried the way the old one is."""
    positions: Any = getattr(candidate, "lc")  # noqa: B009
    starts = sorted((positions.key(k)[0], str(k)) for k in candidate)
    kept: list[str] = []
    for n, (start, key) in enumerate(starts):
        stop = starts[n + 1][0] if n + 1 < len(starts) else end
        if key in ("id", "pin", "description"):
            continue
        block = lines[start:stop]
        if block and block[0][dash : dash + 1] == "-" and not block[0][:dash].strip():
            block[0] = block[0][:dash] + " " + block[0][dash + 1 :]  # its first key
        while block and not block[-1].strip():
            block.pop()
        kept += [b if b.endswith("\n") else b + "\n" for b in block]
    return kept


def _git(
    root: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        input=stdin,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode().strip()


def _show(root: Path, rev: str, rel: str) -> str:
    """``rel`` as committed at ``rev``, byte for byte."""
    done = subprocess.run(
        ["git", "show", f"{rev}:{rel}"], cwd=root, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise UsageError(f"{rel} is not committed at {rev[:12]}: commit the registry first")
    return done.stdout.decode("utf-8")


def checked_out(root: Path) -> set[str]:
    """The branches checked out in the repository's worktrees (``refs/heads/…``)."""
    listed = _git(root, "worktree", "list", "--porcelain")
    return {line[len("branch ") :] for line in listed.splitlines() if line.startswith("branch ")}


def commit_files(
    root: Path, base: str, branch: str, files: dict[str, bytes], message: str
) -> tuple[str, str, str | None]:
    """Commit ``files`` over ``base``'s tree on ``branch``; return the commit, whether the
    branch was ``created``, ``updated``, left ``unchanged`` or ``kept``, and why it was
    kept. A branch is kept, never moved, when its tip is a person's commit (a reviewer's
    fix on the proposal) or a worktree has it checked out."""
    with tempfile.TemporaryDirectory(prefix="evalreg-propose-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(root, "read-tree", base, env=env)
        for rel, data in sorted(files.items()):
            blob = _git(root, "hash-object", "-w", "--stdin", stdin=data)
            _git(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
        tree = _git(root, "write-tree", env=env)
    ref = f"refs/heads/{branch}"

    # The ref moves only from the value it was decided on (none: only if it is still absent),
    # so a branch another propose, or a person, made or moved meanwhile is decided again.
    def tip() -> str:
        return subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", ref],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()

    existing = tip()
    for _ in range(2):
        if existing:
            same_tree = _git(root, "rev-parse", f"{existing}^{{tree}}") == tree
            parent = _git(root, "rev-list", "--parents", "-n", "1", existing).split()[1:]
            if same_tree and parent == [base]:
                return existing, "unchanged", None
            if not made_by_propose(root, existing):
                return existing, "kept", "its last commit is not evalreg propose's"
            if ref in checked_out(root):
                return existing, "kept", "it is checked out"
        trailed = message.rstrip("\n") + "\n\n" + _trailer(tree) + "\n"
        commit = _git(root, "commit-tree", tree, "-p", base, stdin=trailed.encode())
        moved = subprocess.run(
            ["git", "update-ref", ref, commit, existing],
            cwd=root,
            capture_output=True,
            check=False,
        )
        if moved.returncode == 0:
            return commit, "updated" if existing else "created", None
        now = tip()
        if now == existing:  # refused for another reason than a move: git says which
            said = moved.stderr.decode(errors="replace").strip()
            raise UsageError(f"git update-ref failed: {said}")
        existing = now
    raise UsageError(
        f"branch {branch} kept moving while propose ran (another evalreg propose, or a "
        "person, is writing it): run propose again once it is done"
    )


def propose(
    root: Path,
    registry: Registry,
    base: str,
    pin: str,
    new_model: str,
    listed_by: str,
    taken: set[str] | None = None,
) -> Proposal:
    """The branch proposing ``new_model`` as a new pin beside ``pin``, on top of ``base``
    (the commit ``registry`` was read at); ``taken``: the branches made so far this run.
    A file propose cannot edit is a ``UsageError`` naming it, before anything is made."""
    old = registry.pins[pin]
    assert old.model is not None
    new_pin = new_pin_id(pin, old.model, new_model, set(registry.pins))
    pin_path = registry.file_of("models", pin)
    new_path = str(Path(pin_path).with_name(new_pin + Path(pin_path).suffix).as_posix())
    review = _fit(
        f"copied from {pin} ({old.model}) by evalreg propose: {listed_by} lists {new_model} "
        "without prices"
    )
    try:
        files = {new_path: pin_text(_show(root, base, pin_path), new_model, review).encode()}
    except UsageError as exc:
        raise UsageError(f"{pin_path}: {exc}") from None
    description = f"{new_model}, a newer snapshot of {old.model} (proposed by evalreg propose)"
    touched = []
    for sid in sorted(registry.selections):
        rel = registry.file_of("selections", sid)
        try:
            changed = selection_text(_show(root, base, rel), pin, new_pin, description)
        except UsageError as exc:
            raise UsageError(f"{rel}: {exc}") from None
        if changed is not None:
            files[rel] = changed.encode()
            touched.append(sid)
    branch = branch_name(pin, new_model, taken)
    message = (
        f"Propose {new_model} for {pin}\n\n"
        f"{listed_by} lists {new_model}, a newer snapshot of {old.model} (pin {pin}).\n"
        f"This adds the pin {new_pin} and a candidate for it in: "
        f"{', '.join(touched) or 'no selection'}.\n"
        "Its prices are copied from the old pin, to be confirmed (price.review).\n"
        "Nothing was bought: run `evalreg run` for the new cells.\n"
    )
    commit, outcome, kept = commit_files(root, base, branch, files, message)
    return Proposal(
        pin,
        old.model,
        new_pin,
        new_model,
        branch,
        commit,
        tuple(sorted(files)),
        tuple(touched),
        outcome,
        kept=kept,
    )


def retired_text(text: str, note: str) -> str:
    """The pin file ``text`` with ``retired: note`` after its ``model`` line."""
    data = _rt(text)
    line, col = data.lc.key("model")
    lines = text.splitlines(keepends=True)
    if not lines[line].endswith("\n"):
        lines[line] += "\n"
    lines.insert(line + 1, " " * col + f"retired: {json.dumps(note, ensure_ascii=False)}\n")
    return "".join(lines)


def retire(
    root: Path,
    registry: Registry,
    base: str,
    pin: str,
    listed_by: str,
    taken: set[str] | None = None,
) -> Proposal:
    """The branch marking ``pin`` retired: its provider's list (``listed_by``) no longer
    names its model. The note holds no date: proposing again leaves the branch as it is."""
    old = registry.pins[pin]
    assert old.model is not None
    path = registry.file_of("models", pin)
    note = _fit(f"{listed_by} no longer lists {old.model} (found by evalreg propose)")
    files = {path: retired_text(_show(root, base, path), note).encode()}
    users = sorted(
        sid for sid, s in registry.selections.items() if any(c.pin == pin for c in s.candidates)
    )
    branch = branch_name(pin, None, taken)
    message = (
        f"Mark {pin} retired: {old.model} is no longer listed\n\n"
        f"{listed_by} no longer lists {old.model}, which the pin {pin} names: its cells can "
        "no longer be bought.\n"
        f"Selections with it as a candidate: {', '.join(users) or 'none'}.\n"
    )
    commit, outcome, kept = commit_files(root, base, branch, files, message)
    return Proposal(
        pin,
        old.model,
        pin,
        old.model,
        branch,
        commit,
        (path,),
        tuple(users),
        outcome,
        "retired",
        kept,
    )
