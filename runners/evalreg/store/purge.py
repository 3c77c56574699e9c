"""Purging an item's stored responses: the store rewritten without them, and the purge logged."""

from __future__ import annotations

import contextlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalreg._version import __version__
from evalreg.canonical import canonical_bytes
from evalreg.cells import RESULTS_DIR, cells
from evalreg.errors import DataMissingError, EvalregError, UsageError
from evalreg.registry.schema import ID_PATTERN, Item
from evalreg.registry.tree import GitTree, PathEscapes, Tree, WorkspaceTree, clean_relpath
from evalreg.store.purge_log import PURGE_LOG
from evalreg.store.rewrite import Replaced, Rewrite
from evalreg.store.segments import STORE_DIR, ResponseStore, SegmentKeys

if TYPE_CHECKING:
    from evalreg.registry.loader import Registry

# PURGE_LOG (from evalreg.results.freshness): one canonical JSON line a purge, in git:
# what was purged, why, and what is left to do.

_GC = "dvc gc --workspace --all-branches --all-tags --cloud"

KINDS = ("candidate", "judge")
"""The kinds of stored record a purge counts: the item's own requests, and verdicts on them."""

Version = tuple[Tree, set[tuple[str, int, str]]]
"""A tree and the item's recorded samples in it: (cell, sample, response key)."""


@dataclass(frozen=True)
class PurgeRecord:
    """What a purge did, as logged in :data:`PURGE_LOG` (all but ``push_error``)."""

    item: str
    evalset: str
    reason: str
    keys_removed: int
    """Distinct stored records removed, of every kind."""
    cells: list[str]
    """Cells that requested responses for the item (recorded or rendered now)."""
    results: dict[str, str]
    """md5 of each such cell's per-item records in the working tree at the purge: results
    that still carry it were graded on the purged responses."""
    segments_removed: list[str]
    segment_written: str | None
    """The segment holding what the removed segments kept, or None if nothing was left."""
    purged_objects: list[str]
    """md5s of the removed segments: the DVC objects that still hold the responses."""
    evalreg_version: str
    at: str | None
    next_steps: list[str]
    """Shell commands, in order, that finish the purge (commit, push, garbage-collect)."""
    notes: list[str]
    removed: dict[str, int] = field(default_factory=dict)
    """Stored records removed by kind: ``candidate`` (requests made for the item) and
    ``judge`` (verdicts on its outputs); they add up to ``keys_removed``. Absent from log
    lines written before judge verdicts were purged."""
    push_error: str | None = None

    def log_entry(self) -> dict[str, Any]:
        entry = asdict(self)
        del entry["push_error"]
        return entry


def purge_item(
    root: Path,
    item_id: str,
    *,
    reason: str,
    evalset: str | None = None,
    at: str | None = None,
    push: bool = True,
) -> PurgeRecord:
    """Remove every stored record whose request was rendered from item ``item_id``, and
    log the purge.

    Candidate responses and judge verdicts are found for the eval set that holds the item
    (``evalset``, needed only when the id is in more than one), by key and by content:

    * keys: those in every version of every per-item record committed on this branch and
      in the working tree, and those of the requests the current registry renders for the
      item (every cell and sample); then, for each of these outputs still stored, the
      keys of the judge requests that grade it under the registry of the same version
      (the judge prompt, pin and criteria of each commit, and the working tree's);
    * content, for requests no registry version names (an earlier prompt never
      committed): a request that carries the item's input (``python`` systems), or
      exactly its conversation, or whose only turn is exactly one of the item's texts (an
      input string or a message, compared as whole decoded strings); and any request a
      turn of which quotes the item's whole input or conversation as a judge prompt
      renders it (``tojson``, or ``{{ input }}``'s text). Whole values only: an item whose
      input is "a" matches a turn that is exactly "a" or contains ``{"text": "a"}``, never
      one that merely contains the letter. ``expected`` alone identifies nothing (labels
      are shared, and a correct output quotes them); verdicts that quote it are found by
      key, or by the input they quote beside it.

    A response shared with another item of identical content is the same request, and
    goes too. Drift checks store nothing of their own: they re-send the candidate's stored
    requests (same keys) and keep the live answers and their verdicts in memory, so there
    are no drift records to remove; their reports (CI job summaries, artifacts) may quote
    the item's outputs.

    Store segments holding any of them are rewritten without them into one new segment
    (written and verified before anything is removed), the old segments' DVC pointers are
    removed and the new one is tracked (and pushed unless ``push`` is False), as
    :func:`evalreg.store.compaction.compact` does. Nothing else changes: results still name the
    responses, so ``evalreg run --offline --force`` reports each one as missing and
    ``evalreg reproduce`` names the purge.

    The purge is journalled (:mod:`evalreg.store.rewrite`): stopped anywhere, SIGKILL
    included, it is finished by the next command (:func:`finish_purge`), never rolled
    back, and ends as it would have uninterrupted.

    This is not yet an erasure: the old segments stay in the DVC cache and on the remote,
    reachable from older commits, until ``dvc gc`` removes them; the record's
    ``next_steps`` give the exact commands and its ``notes`` what else holds the item.
    ``at`` (e.g. the date of the request) is recorded as given; the clock is never read.
    """
    root = root.resolve()
    reason = " ".join(reason.split())
    if not reason:
        raise UsageError("a purge needs a reason: it is logged for auditors")
    if not re.match(ID_PATTERN, item_id):
        raise UsageError(f"{item_id!r} is not an item id")
    request = {"item": item_id, "reason": reason, "evalset": evalset, "at": at}
    return _purge(Rewrite.begin(root, "purge", push=push, request=request))


def finish_purge(rewrite: Rewrite) -> PurgeRecord:
    """Finish a purge that was interrupted (its journal is ``rewrite``): done again from
    the start if it had not begun replacing segments, else rolled forward."""
    if rewrite.phase == "plan":
        rewrite.discard_segment()
        return _plan_and_replace(rewrite)  # whatever stops it, the journal stays
    entry = rewrite.entry or {}
    done = rewrite.finish(_log_line)
    return _record(entry, done)


def _purge(rewrite: Rewrite) -> PurgeRecord:
    """The purge ``rewrite`` journals: planned, then segments replaced. A request that
    names nothing to purge changes nothing (the journal goes); anything else that stops
    it leaves the journal for the next command to finish the purge."""
    try:
        return _plan_and_replace(rewrite)
    except EvalregError:
        rewrite.discard()
        raise


def _plan_and_replace(rewrite: Rewrite) -> PurgeRecord:
    from evalreg.registry.loader import load_registry
    from evalreg.runner.interrupts import deferred

    root = rewrite.root
    item_id, reason = str(rewrite.request["item"]), str(rewrite.request["reason"])
    evalset, at = rewrite.request.get("evalset"), rewrite.request.get("at")
    registry = load_registry(root)
    held = {
        path: next(item for item in es.items if item.id == item_id)
        for path, es in registry.evalsets.items()
        if item_id in es.lines
    }
    recorded, outputs, unread = _recorded_keys(root, item_id)
    target = _target(item_id, evalset, set(held) | set(recorded))
    keys_by_cell = recorded.get(target, defaultdict(set))
    samples = outputs.get(target, {})
    item = held.get(target)
    if item is not None:
        _tree, workspace = samples.setdefault(WorkspaceTree.label, (WorkspaceTree(root), set()))
        for cell_id, rendered in _rendered_keys(root, registry, target, item).items():
            keys_by_cell[cell_id] |= {key for _sample, key in rendered}
            workspace |= {(cell_id, sample, key) for sample, key in rendered}
    keys = set().union(*keys_by_cell.values())
    store = ResponseStore.open(root)
    judge_keys = _judge_keys(root, registry, store, target, item_id, samples) - keys
    kept, removed = _without(store, keys, judge_keys, item)
    old = sorted(kept)
    written = _write_segment(rewrite, b"".join(kept[name] for name in old)) if kept else None
    objects = _objects(root, old)
    entry = {
        "item": item_id,
        "evalset": target,
        "reason": reason,
        "keys_removed": len(removed),
        "cells": sorted(keys_by_cell),
        "results": _results(root, keys_by_cell),
        "segments_removed": old,
        "segment_written": written,
        "purged_objects": objects,
        "evalreg_version": __version__,
        "at": at,
        "notes": _notes(target, item_id, item is not None, objects, unread),
        "removed": {kind: sum(1 for k in removed.values() if k == kind) for kind in KINDS},
    }
    with deferred():
        done = rewrite.replace(
            old, written=written is not None, log=PURGE_LOG, entry=entry, line=_log_line
        )
    return _record(entry, done)


def _write_segment(rewrite: Rewrite, data: bytes) -> str | None:
    """Write ``data`` (complete store lines) to the rewrite's new segment and verify it;
    return its name, or None when there was nothing to keep."""
    writer = rewrite.writer("purge")
    with writer:
        for line in data.splitlines(keepends=True):
            writer.put(line)
    if writer.written and writer.path.read_bytes() != data:
        raise RuntimeError("the new segment did not verify; the store is unchanged")
    return writer.name if writer.written else None


def _objects(root: Path, old: Sequence[str]) -> list[str]:
    """md5s of the DVC objects that the segments ``old`` are (the purged responses stay
    in them until ``dvc gc``)."""
    from evalreg import dvcrepo

    directory = root / STORE_DIR
    return sorted(
        md5
        for name in old
        if (pointer := directory / f"{name}.dvc").is_file()
        and (md5 := dvcrepo.pointer_md5(pointer.read_bytes())) is not None
    )


def _next_steps_of(entry: dict[str, Any], done: Replaced) -> list[str]:
    return _next_steps(
        str(entry["item"]),
        entry["segment_written"],
        list(entry["purged_objects"]),
        done.stage.staged,
        pushed=done.pushed,
    )


def _log_line(entry: dict[str, Any], done: Replaced) -> str:
    """The purge's line in :data:`PURGE_LOG` (canonical JSON)."""
    return canonical_bytes({**entry, "next_steps": _next_steps_of(entry, done)}).decode()


def _record(entry: dict[str, Any], done: Replaced) -> PurgeRecord:
    return PurgeRecord(
        **{**entry, "next_steps": _next_steps_of(entry, done)}, push_error=done.push_error
    )


def _target(item_id: str, evalset: str | None, found: set[str]) -> str:
    """The eval set whose item is purged."""
    if evalset is not None:
        try:
            rel = clean_relpath(evalset)
        except PathEscapes as exc:
            raise UsageError(f"--evalset {evalset}: {exc}") from None
        if rel not in found:
            raise UsageError(f"no item {item_id!r} in {rel}, nor in results recorded for it")
        return rel
    if not found:
        raise UsageError(f"no item {item_id!r} in any eval set, nor in any recorded result")
    if len(found) > 1:
        raise UsageError(
            f"item {item_id!r} is in {', '.join(sorted(found))}: name the eval set to purge"
        )
    return found.pop()


def _recorded_keys(
    root: Path, item_id: str
) -> tuple[dict[str, defaultdict[str, set[str]]], dict[str, dict[str, Version]], list[str]]:
    """Response keys of ``item_id`` in per-item records, by eval set and cell, from the
    working tree and every commit on this branch that changed a cell summary; the same
    samples by eval set and by the version (tree label) that recorded them; and the record
    files that could not be read."""
    found: dict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    outputs: dict[str, dict[str, Version]] = defaultdict(dict)
    unread: list[str] = []
    seen: set[tuple[str, str]] = set()
    needle = b'"item":' + json.dumps(item_id).encode()
    for tree, summary_path in _summaries(root):
        try:
            summary = json.loads(tree.read(summary_path))
            items_path, items_md5 = summary["items_file"]["path"], summary["items_file"]["md5"]
            evalset = clean_relpath(summary["evalset"]["path"])
        except (ValueError, KeyError, TypeError, PathEscapes):
            continue  # not a cell summary
        # The same records under another version's registry may have other judge requests.
        if (items_md5, tree.label) in seen:
            continue
        try:
            data = tree.read_data(items_path)
        except (DataMissingError, FileNotFoundError) as exc:
            unread.append(f"{items_path} in the {tree.label} ({exc})")
            continue
        seen.add((items_md5, tree.label))
        cell = _cell_name(summary_path)
        _tree, samples = outputs[evalset].setdefault(tree.label, (tree, set()))
        for line in data.splitlines():
            if needle in line:
                record = json.loads(line)
                if record.get("item") == item_id and record.get("key"):
                    found[evalset][cell].add(record["key"])
                    samples.add((cell, int(record.get("sample", 0)), record["key"]))
    return found, outputs, unread


def _summaries(root: Path) -> list[tuple[Tree, str]]:
    """Every cell summary in the working tree, then every version committed on this branch."""
    import git

    workspace = WorkspaceTree(root)
    out: list[tuple[Tree, str]] = [
        (workspace, path.relative_to(root).as_posix())
        for path in sorted((root / RESULTS_DIR).glob("*/*.json"))
    ]
    try:
        repo = git.Repo(root)
    except git.InvalidGitRepositoryError:
        return out
    if not repo.head.is_valid():
        return out
    log = repo.git.log(
        "--format=%H", "--name-only", "--diff-filter=AM", "--", f"{RESULTS_DIR}/*/*.json"
    )
    trees: dict[str, GitTree] = {}
    commit = ""
    for line in log.splitlines():
        if re.fullmatch(r"[0-9a-f]{40}", line):
            commit = line
        elif line:
            tree = trees.setdefault(commit, GitTree(root, commit))
            out.append((tree, line))
    return out


def _rendered_keys(
    root: Path, registry: Registry, evalset: str, item: Item
) -> dict[str, set[tuple[int, str]]]:
    """Sample and key of each request each cell on ``evalset`` makes for ``item`` now."""
    from evalreg.prompting import render_messages
    from evalreg.providers import get_provider
    from evalreg.providers.fetch import make_job
    from evalreg.providers.tools import toolset

    out: dict[str, set[tuple[int, str]]] = defaultdict(set)
    for cell in cells(registry, "dev") + cells(registry, "holdout"):
        if registry.evalset_of(cell.task_id, cell.split).path != evalset:
            continue
        provider = get_provider(cell.pin.provider, root)
        messages = render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
        for sample in range(cell.task.repeats):
            job = make_job(
                cell.candidate.pin,
                cell.pin,
                provider,
                messages,
                item.input,
                sample,
                cell.id,
                toolset(cell.task),
            )
            out[_cell_name(cell.summary_path)].add((sample, job.key))
    return out


def _judge_keys(
    root: Path,
    registry: Registry,
    store: ResponseStore,
    evalset: str,
    item_id: str,
    versions: dict[str, Version],
) -> set[str]:
    """Keys of the judge requests that grade the item's stored outputs, each under the
    registry of the version that holds the output (``registry`` for the working tree).

    A version whose registry no longer loads, or that has no such cell or item, adds
    none: the purge's content rule still finds verdicts quoting the item's input.
    """
    from evalreg.registry.loader import load_registry
    from evalreg.runner.grading import cell_grader

    out: set[str] = set()
    for _label, (tree, samples) in sorted(versions.items()):
        stored = {(c, n, k): r for c, n, k in samples if (r := store.get(k)) is not None}
        if not stored:
            continue
        try:
            loaded = registry if isinstance(tree, WorkspaceTree) else load_registry(tree)
            es = loaded.evalsets.get(evalset)
            item = next((i for i in es.items if i.id == item_id), None) if es else None
            by_name = {
                _cell_name(c.summary_path): c for c in cells(loaded) + cells(loaded, "holdout")
            }
            if item is None:
                continue
            names = {name for name, _n, _k in stored}
            graders = {
                n: cell_grader(c, loaded, None, root) for n, c in by_name.items() if n in names
            }
            for (name, sample, _key), response in sorted(stored.items()):
                if name in graders:
                    out |= {job.key for job in graders[name].judge_jobs(item, sample, response)}
        except EvalregError:
            continue  # an older registry that no longer loads here
    return out


def _results(root: Path, cell_names: Iterable[str]) -> dict[str, str]:
    """The per-item records' md5 that each cell's summary in the working tree names."""
    out = {}
    for name in sorted(cell_names):
        path = root / RESULTS_DIR / f"{name}.json"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            out[name] = str(json.loads(path.read_bytes())["items_file"]["md5"])
    return out


def _cell_name(summary_path: str) -> str:
    """A cell as its results files name it: ``task/candidate`` (``.holdout`` for hold-out)."""
    return summary_path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")


def _without(
    store: ResponseStore, keys: set[str], judge_keys: set[str], item: Item | None
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The complete lines each affected segment keeps, and the kind of each key removed.

    A line goes (every copy of it) when its key is in ``keys`` (a candidate's) or
    ``judge_keys``, or its request was made for ``item`` (see :func:`_made_for`); a torn
    last line is dropped, as tracking would drop it.
    """
    quotes = _Quotes.of(item) if item is not None else None
    kept: dict[str, bytes] = {}
    removed: dict[str, str] = {}
    for name, data in store.segments():
        spans = []
        for key, start, end in SegmentKeys(data).keyed_lines():
            line = data[start:end]
            kind = "candidate" if key in keys else "judge" if key in judge_keys else None
            if kind is None and quotes is not None and quotes.prefilter(line):
                kind = _made_for(line, quotes)
            if kind is not None:
                spans.append((start, end + 1))
                removed[key] = kind
        if spans:
            kept[name] = _cut(data[: data.rfind(b"\n") + 1], sorted(spans))
    return kept, removed


def _cut(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    parts = []
    position = 0
    for start, end in spans:
        parts.append(data[position:start])
        position = end
    parts.append(data[position:])
    return b"".join(parts)


@dataclass(frozen=True)
class _Quotes:
    """What a request rendered from one item carries, as whole values."""

    item: Item
    texts: frozenset[str]
    """The item's input strings and message contents: a request whose only turn is one."""
    quoted: tuple[str, ...]
    """The item's whole input or conversation as a judge prompt renders it."""
    needles: tuple[bytes, ...]
    """Bytes one of which every such stored line holds (the values, JSON-encoded)."""

    @classmethod
    def of(cls, item: Item) -> _Quotes:
        from evalreg.templating import RenderError, render

        conversation = [m.model_dump() for m in item.messages or []]
        subject: Any = item.input if item.input is not None else conversation
        texts = frozenset(
            t
            for t in [m.content for m in item.messages or []]
            + [v for v in (item.input or {}).values() if isinstance(v, str)]
            if t
        )
        # As Judges.job renders the subject: ``{{ input | tojson }}`` and ``{{ input }}``.
        rendered = set()
        for source in _QUOTE_TEMPLATES:
            with contextlib.suppress(RenderError):  # too large for any prompt to quote
                rendered.add(render(source, {"input": subject}))
        quoted = tuple(sorted(rendered - {""}))
        needles = [json.dumps(t, ensure_ascii=False).encode() for t in sorted(texts)]
        needles += [json.dumps(q, ensure_ascii=False)[1:-1].encode() for q in quoted]
        if item.input is not None:  # as a python system's request carries it
            needles.append(canonical_bytes(item.input))
        return cls(item, texts, quoted, tuple(needles))

    def prefilter(self, line: bytes) -> bool:
        return any(needle in line for needle in self.needles)


_QUOTE_TEMPLATES = ("{{ input | tojson }}", "{{ input }}")


def _made_for(line: bytes, quotes: _Quotes) -> str | None:
    """The kind of request a stored line holds, if it was rendered from ``quotes.item``.

    A candidate's: it carries the item's input (as a ``python`` system's request does),
    or exactly its conversation (system turns aside), or its only turn is exactly one of
    the item's texts. A judge's (or any other): a turn's text contains the item's whole
    input or conversation as a judge prompt quotes it.
    """
    try:
        request = json.loads(line).get("request")
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    item = quotes.item
    sent = request.get("messages")
    turns = (
        [m for m in sent if not isinstance(m, dict) or m.get("role") != "system"]
        if isinstance(sent, list)
        else []
    )
    if item.input is not None and request.get("input") == item.input:
        return "candidate"
    mine = [
        {"role": m.role, "content": m.content} for m in item.messages or [] if m.role != "system"
    ]
    only = turns[0] if len(turns) == 1 and isinstance(turns[0], dict) else {}
    prompt = only.get("content") if only.get("role") == "user" else None
    if (turns and turns == mine) or (isinstance(prompt, str) and prompt in quotes.texts):
        return "candidate"
    said = [text for turn in turns for text in _texts(turn)]
    if any(q in text for q in quotes.quoted for text in said):
        return "judge" if _is_judge(request) else "candidate"
    return None


def _texts(turn: Any) -> list[str]:
    """The text of a turn: its content, or its text blocks (Anthropic's form)."""
    content = turn.get("content") if isinstance(turn, dict) else None
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
    return []


def _is_judge(request: dict[str, Any]) -> bool:
    """Whether a request carries the judge's instructions (as a system turn or field)."""
    from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS

    sent = request.get("messages")
    system = [
        m.get("content")
        for m in (sent if isinstance(sent, list) else [])
        if isinstance(m, dict) and m.get("role") == "system"
    ]
    return JUDGE_INSTRUCTIONS in [*system, request.get("system")]


def _next_steps(
    item_id: str, written: str | None, objects: list[str], staged: tuple[str, ...], *, pushed: bool
) -> list[str]:
    steps = [
        " ".join(["git add", PURGE_LOG, STORE_DIR, *staged]),
        f"git commit -m 'Purge the stored responses of item {item_id}'",
    ]
    if written is not None and not pushed:
        steps.append(f"dvc push {STORE_DIR}/{written}.dvc")
    steps.append("git push")
    if objects:
        steps += [f"{_GC} --dry", f"{_GC} --force"]
    return steps


def _notes(
    evalset: str, item_id: str, still_held: bool, objects: list[str], unread: list[str]
) -> list[str]:
    notes = []
    if objects:
        notes.append(
            f"The purged responses stay in DVC objects {', '.join(objects)}, in this clone's "
            "cache and on the remote, reachable from older commits, until `dvc gc` removes "
            "them. Run it once every branch and tag you keep has this purge: it deletes every "
            "object no branch tip or tag uses, so older revisions stop reproducing. Other "
            "clones and CI caches keep their copies until they run `dvc gc` too."
        )
    if still_held:
        notes.append(
            f"{evalset} still holds item {item_id}: remove it and run `evalreg evalset add "
            f"{evalset}`, or the next run that is not --offline buys its responses again; "
            "older versions of the eval set stay in DVC until the same `dvc gc`."
        )
    notes += [
        f"Could not read per-item records {what}: responses recorded only there were not "
        "looked for."
        for what in unread
    ]
    return notes
