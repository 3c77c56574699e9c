"""Purging an item's stored responses: the store rewritten without them, and the purge logged."""

from __future__ import annotations

import contextlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalreg._version import __version__
from evalreg.canonical import canonical_bytes
from evalreg.cells import RESULTS_DIR, cells
from evalreg.errors import DataMissingError, UsageError
from evalreg.registry.schema import ID_PATTERN, Item
from evalreg.registry.tree import GitTree, PathEscapes, Tree, WorkspaceTree, clean_relpath
from evalreg.results.freshness import PURGE_LOG
from evalreg.store.segments import STORE_DIR, ResponseStore, SegmentWriter

if TYPE_CHECKING:
    from evalreg.registry.loader import Registry

# PURGE_LOG (from evalreg.results.freshness): one canonical JSON line a purge, in git:
# what was purged, why, and what is left to do.

_GC = "dvc gc --workspace --all-branches --all-tags --cloud"


@dataclass(frozen=True)
class PurgeRecord:
    """What a purge did, as logged in :data:`PURGE_LOG` (all but ``push_error``)."""

    item: str
    evalset: str
    reason: str
    keys_removed: int
    """Distinct stored responses removed."""
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
    """Remove every stored response requested for item ``item_id`` and log the purge.

    The responses are found three ways, for the eval set that holds the item (``evalset``,
    needed only when the id is in more than one): the keys in every version of every
    per-item record committed on this branch and in the working tree; the keys of the
    requests the current registry renders for the item, in every cell and sample; and
    stored requests that carry the item's input (``python`` systems) or its conversation.
    A response bought under a prompt no longer in the registry and never graded is not
    found. A response shared with another item of identical content is the same request,
    and goes too.

    Store segments holding any of them are rewritten without them into one new segment
    (written and verified before anything is removed), the old segments' DVC pointers are
    removed and the new one is tracked (and pushed unless ``push`` is False), as
    :func:`evalreg.store.compaction.compact` does. Nothing else changes: results still name the
    responses, so ``evalreg run --offline --force`` reports each one as missing.

    This is not yet an erasure: the old segments stay in the DVC cache and on the remote,
    reachable from older commits, until ``dvc gc`` removes them; the record's
    ``next_steps`` give the exact commands and its ``notes`` what else holds the item.
    ``at`` (e.g. the date of the request) is recorded as given; the clock is never read.
    """
    from evalreg.registry.loader import load_registry

    root = root.resolve()
    reason = " ".join(reason.split())
    if not reason:
        raise UsageError("a purge needs a reason: it is logged for auditors")
    if not re.match(ID_PATTERN, item_id):
        raise UsageError(f"{item_id!r} is not an item id")
    registry = load_registry(root)
    held = {
        path: next(item for item in es.items if item.id == item_id)
        for path, es in registry.evalsets.items()
        if item_id in es.lines
    }
    recorded, unread = _recorded_keys(root, item_id)
    target = _target(item_id, evalset, set(held) | set(recorded))
    keys_by_cell = recorded.get(target, defaultdict(set))
    item = held.get(target)
    if item is not None:
        for cell_id, keys in _rendered_keys(root, registry, target, item).items():
            keys_by_cell[cell_id] |= keys
    keys = set().union(*keys_by_cell.values())
    store = ResponseStore.open(root)
    kept, removed = _without(store, keys, item)
    written: str | None = None
    objects: list[str] = []
    push_error: str | None = None
    if kept:
        data = b"".join(kept[name] for name in sorted(kept))
        written, objects, push_error = _replace_segments(
            root, sorted(kept), data, label="purge", push=push
        )
    notes = _notes(target, item_id, item is not None, objects, unread)
    record = PurgeRecord(
        item=item_id,
        evalset=target,
        reason=reason,
        keys_removed=len(removed),
        cells=sorted(keys_by_cell),
        results=_results(root, keys_by_cell),
        segments_removed=sorted(kept),
        segment_written=written,
        purged_objects=objects,
        evalreg_version=__version__,
        at=at,
        next_steps=_next_steps(item_id, written, objects, pushed=push and push_error is None),
        notes=notes,
        push_error=push_error,
    )
    log = root / PURGE_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as f:
        f.write(canonical_bytes(record.log_entry()) + b"\n")
    return record


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
) -> tuple[dict[str, defaultdict[str, set[str]]], list[str]]:
    """Response keys of ``item_id`` in per-item records, by eval set and cell, from the
    working tree and every commit on this branch that changed a cell summary; and the
    record files that could not be read."""
    found: dict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    unread: list[str] = []
    seen: set[str] = set()
    needle = b'"item":' + json.dumps(item_id).encode()
    for tree, summary_path in _summaries(root):
        try:
            summary = json.loads(tree.read(summary_path))
            items_path, items_md5 = summary["items_file"]["path"], summary["items_file"]["md5"]
            evalset = clean_relpath(summary["evalset"]["path"])
        except (ValueError, KeyError, TypeError, PathEscapes):
            continue  # not a cell summary
        if items_md5 in seen:
            continue
        try:
            data = tree.read_data(items_path)
        except (DataMissingError, FileNotFoundError) as exc:
            unread.append(f"{items_path} in the {tree.label} ({exc})")
            continue
        seen.add(items_md5)
        for line in data.splitlines():
            if needle in line:
                record = json.loads(line)
                if record.get("item") == item_id and record.get("key"):
                    found[evalset][_cell_name(summary_path)].add(record["key"])
    return found, unread


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


def _rendered_keys(root: Path, registry: Registry, evalset: str, item: Item) -> dict[str, set[str]]:
    """Keys of the requests each cell on ``evalset`` makes for ``item`` now, every sample."""
    from evalreg.prompting import render_messages
    from evalreg.providers import get_provider
    from evalreg.providers.fetch import make_job

    out: dict[str, set[str]] = defaultdict(set)
    for cell in cells(registry, "dev") + cells(registry, "holdout"):
        if registry.evalset_of(cell.task_id, cell.split).path != evalset:
            continue
        provider = get_provider(cell.pin.provider, root)
        messages = render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
        for sample in range(cell.task.repeats):
            job = make_job(
                cell.candidate.pin, cell.pin, provider, messages, item.input, sample, cell.id
            )
            out[_cell_name(cell.summary_path)].add(job.key)
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
    store: ResponseStore, keys: set[str], item: Item | None
) -> tuple[dict[str, bytes], set[str]]:
    """The complete lines each affected segment keeps, and the keys removed.

    A line goes when its key is in ``keys`` or its request was made for ``item`` (see
    :func:`_made_for`); a torn last line is dropped, as tracking would drop it.
    """
    needle = _needle(item)
    kept: dict[str, bytes] = {}
    removed: set[str] = set()
    for name, data in zip(store.names, store.segments, strict=True):
        if not name:
            continue
        index = ResponseStore()
        index.add_segment(name, data)
        spans = []
        for key, (_number, start, end) in index.index.items():
            line = data[start:end]
            if key in keys or (
                item is not None and (needle is None or needle in line) and _made_for(line, item)
            ):
                spans.append((start, end + 1))
                removed.add(key)
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


def _needle(item: Item | None) -> bytes | None:
    """Bytes every stored line made for ``item`` contains (its longest text, as JSON), if any."""
    if item is None:
        return None
    texts = [m.content for m in item.messages or []] + [
        value for value in (item.input or {}).values() if isinstance(value, str)
    ]
    longest = max(texts, key=len, default="")
    return json.dumps(longest, ensure_ascii=False)[1:-1].encode() if longest else None


def _made_for(line: bytes, item: Item) -> bool:
    """Whether a stored line's request carries ``item``'s input (as a ``python`` system's
    request does) or exactly its conversation (system turns aside)."""
    try:
        request = json.loads(line).get("request")
    except ValueError:
        return False
    if not isinstance(request, dict):
        return False
    if item.input is not None:
        return bool(request.get("input") == item.input)
    sent = request.get("messages")
    if not isinstance(sent, list):
        return False
    turns = [m for m in sent if not isinstance(m, dict) or m.get("role") != "system"]
    mine = [{"role": m.role, "content": m.content} for m in item.messages or []]
    return turns == [m for m in mine if m["role"] != "system"]


def _replace_segments(
    root: Path, old: Sequence[str], data: bytes, *, label: str, push: bool
) -> tuple[str | None, list[str], str | None]:
    """Write ``data`` (complete store lines) to one new segment and verify it, then retire
    the ``old`` segments: their DVC pointers and files go, while their cached and pushed
    objects stay. Return the new segment's name (None when ``data`` is empty), the md5s of
    the retired objects, and why the push failed, if it did."""
    from evalreg import dvcrepo

    directory = root / STORE_DIR
    writer = SegmentWriter(root, label=label)
    with writer:
        for line in data.splitlines(keepends=True):
            writer.put(line)
    if writer.written and writer.path.read_bytes() != data:
        writer.path.unlink()
        raise RuntimeError("the new segment did not verify; the store is unchanged")
    pointers = [f"{STORE_DIR}/{n}.dvc" for n in old if (directory / f"{n}.dvc").exists()]
    objects = sorted(
        md5 for p in pointers if (md5 := dvcrepo.pointer_md5((root / p).read_bytes())) is not None
    )
    if pointers:
        dvcrepo.untrack(root, pointers)
    for name in old:
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    if not writer.written:
        return None, objects, None
    new = f"{STORE_DIR}/{writer.name}"
    dvcrepo.track(root, [new], push=False)
    return writer.name, objects, dvcrepo.push(root, [new]) if push else None


def _next_steps(
    item_id: str, written: str | None, objects: list[str], *, pushed: bool
) -> list[str]:
    steps = [
        f"git add {PURGE_LOG} {STORE_DIR}",
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
