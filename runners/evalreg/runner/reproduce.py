"""``evalreg reproduce REV``: recompute a revision's results offline and compare them.

Everything is read as of REV (registry and code from git, eval sets, stored responses
and recorded results through DVC); nothing is checked out and nothing is bought. Responses
that ``evalreg store purge`` removed since are named with the purge that removed them, and
objects no DVC remote ever held (a fork's ``--no-push`` run, merged) with the run that
bought their evidence again (``reports/rebought.jsonl``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from evalreg import forked
from evalreg._version import __version__
from evalreg.canonical import digest
from evalreg.cells import METRICS_DIR, RESULTS_DIR, Cell, cells, fingerprint, fingerprint_parts
from evalreg.dvcrepo import pointer_md5
from evalreg.errors import DataMissingError, RegistryError, UsageError
from evalreg.evalsets.evalset import EvalSet
from evalreg.providers import all_providers
from evalreg.registry import schema
from evalreg.registry.diagnostics import Finding
from evalreg.registry.loader import load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree, committed_data
from evalreg.results.dvc_metrics import metrics_bytes, metrics_of
from evalreg.results.records import (
    CellSummary,
    ItemRecord,
    SequentialStop,
    as_schema,
    item_line,
    read_items,
    read_records,
    read_summary,
    summary_bytes,
)
from evalreg.results.tally import CellTally
from evalreg.runner._revisionstores import RevisionStore, Segment, SegmentCache
from evalreg.runner.grading import CellGrader, cell_grader
from evalreg.runner.planning import cell_jobs
from evalreg.runner.until_decided import replay
from evalreg.sequential import purchase_order
from evalreg.store.hashes import refuse_altered
from evalreg.store.purge_log import PURGE_LOG, LoggedPurge, read_log
from evalreg.store.rebought_log import LostAt, LostObject, Rebought, lost_objects, rebought_at
from evalreg.store.rebought_log import read_log as read_rebought
from evalreg.store.segments import STORE_DIR, load_json, segment_names

MAX_DIFFERENCES_PER_CELL = 50


@dataclass
class CellReproduction:
    cell: str
    identical: bool
    differences: list[str] = field(default_factory=list)
    same_as: str | None = None
    """Under ``--range``: the earlier revision whose reproduction of this cell stands for
    this one (the same evidence, byte for byte), or None when it was graded here."""


@dataclass
class Reproduction:
    rev: str
    recorded_versions: list[str]
    running_version: str
    cells: list[CellReproduction]
    purges: list[LoggedPurge] = field(default_factory=list)
    """Purges that removed evidence REV's results rest on: responses they name, or the
    store segments REV reads (then read from the segment the purge wrote, when it is here)."""
    segments_missing: list[str] = field(default_factory=list)
    """REV's store segments that purges retired and that are gone from this clone."""
    lost: list[LostAt] = field(default_factory=list)
    """Objects REV's results rest on that no copy holds and a later run bought again."""

    @property
    def identical(self) -> bool:
        return all(c.identical for c in self.cells) and not self.segments_missing and not self.lost


def reproduce(root: Path, rev: str, shared: Shared | None = None) -> Reproduction:
    """Recompute ``rev``'s results offline and compare them with what it recorded.

    ``shared`` is what reproducing several revisions in a row reuses (``reproduce_range``).
    """
    shared = shared if shared is not None else Shared()
    tree = GitTree(root, rev)
    registry = load_registry(tree)
    purges = read_log(WorkspaceTree(root))
    rebought = lost_objects(read_rebought(WorkspaceTree(root)))
    lost: list[tuple[LostObject, Rebought]] = []
    store, used, missing = _store(
        tree, WorkspaceTree(root), purges, shared.segments, rebought, lost
    )
    versions: set[str] = set()
    outcomes = []
    stops: dict[str, SequentialStop] = {}
    all_cells = cells(registry) + cells(registry, "holdout")
    with _materialized(tree, _code_paths(all_cells)) as code_root:
        providers = all_providers(code_root)
        for cell in all_cells:
            recorded = read_summary(tree, cell)
            if recorded is None:
                continue  # pending at REV: nothing was recorded, nothing to reproduce
            versions.add(str(recorded.get("evalreg_version")))
            parts = fingerprint_parts(registry, cell)
            evidence = _evidence(tree, cell, parts)
            seen = shared.verdicts.get(evidence)
            if seen is not None and store.locate(seen.keys) == seen.locations:
                used |= seen.purges
                outcomes.append(replace(seen.outcome, same_as=seen.rev))
                continue
            before = set(used)
            renders = _renders(registry, cell, parts)
            stop = recorded.get("sequential")
            if stop is not None:
                stops[cell.id] = stop
                renders = ""  # its keys are of part of the items: none to share
            try:
                outcome, keys = _reproduce_cell(
                    tree,
                    registry,
                    store,
                    cell,
                    parts,
                    recorded,
                    providers[cell.pin.provider],
                    shared.keys.get(renders) if renders else None,
                    code_root,
                    purges,
                    used,
                    bool(lost),
                )
            except _Lost as gone:
                if (entry := rebought.get(gone.object.md5)) is None:
                    raise gone.error from None
                lost.append((gone.object, entry))
                outcomes.append(
                    CellReproduction(
                        cell.id,
                        False,
                        [f"per-item records {cell.items_path}: {gone.object.md5} is on no remote"],
                    )
                )
                continue
            outcomes.append(outcome)
            if renders:
                shared.keys[renders] = keys
            shared.verdicts[evidence] = _Verdict(
                tree.rev, keys, store.locate(keys), frozenset(used - before), outcome
            )
    if stops:
        _check_stops(tree, registry, stops, outcomes)
    return Reproduction(
        tree.rev,
        sorted(versions),
        __version__,
        outcomes,
        [p for p in purges if p.line in used],
        missing,
        rebought_at(root, lost) if lost else [],
    )


def reproduce_range(root: Path, spec: str) -> RangeReproduction:
    """Reproduce every first-parent commit of ``BASE..HEAD`` that changed recorded results
    or the response store, oldest first, sharing what they have in common: store segments
    are read and indexed once, a cell's requests are rendered and keyed once for the same
    pin, prompt and eval set, and a cell whose evidence is the same as at a revision already
    reproduced (its fingerprint, recorded files and the stored responses its requests
    resolve to, byte for byte) has that revision's verdict, named, rather than being graded
    again."""
    base, head = range_bounds(spec)
    revs = _revisions_with_results(root, base, head)
    shared = Shared()
    return RangeReproduction(spec, [reproduce(root, rev, shared) for rev in revs])


def range_bounds(spec: str) -> tuple[str, str]:
    """(BASE, HEAD) of a ``BASE..HEAD`` range."""
    base, dots, head = spec.partition("..")
    if dots != ".." or head.startswith(".") or not base or not head:
        raise UsageError(f"--range {spec!r}: expected BASE..HEAD (two revisions, two dots)")
    return base, head


def _revisions_with_results(root: Path, base: str, head: str) -> list[str]:
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{root} is not a git repository") from None
    try:
        for rev in (base, head):
            repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")
        listed = repo.git.rev_list(
            "--first-parent",
            "--reverse",
            f"{base}..{head}",
            "--",
            RESULTS_DIR,
            METRICS_DIR,
            STORE_DIR,
        )
    except git.GitCommandError as exc:
        raise UsageError(
            f"--range {base}..{head}: not two revisions of this repository "
            f"({exc.stderr.strip() or exc.stdout.strip() or 'git rev-list failed'})"
        ) from None
    return str(listed).split()


def _evidence(tree: Tree, cell: Cell, parts: dict[str, Any]) -> str:
    """What a cell's reproduction depends on at a revision, but for the stored responses:
    the fingerprint of its sources (``parts``), and its recorded summary, metrics and items
    files (the items file by its pointer: same pointer, same bytes)."""

    def read(rel: str) -> str | None:
        return tree.read(rel).decode("utf-8", "replace") if tree.is_file(rel) else None

    items = read(cell.items_path + ".dvc")
    return digest(
        {
            "cell": cell.id,
            "fingerprint": fingerprint(parts),
            "summary": read(cell.summary_path),
            "metrics": read(cell.metrics_path),
            "items": items if items is not None else read(cell.items_path),
        }
    )


def _store(
    tree: Tree,
    here: WorkspaceTree,
    purges: list[LoggedPurge],
    cache: SegmentCache,
    rebought: dict[str, Rebought],
    lost: list[tuple[LostObject, Rebought]],
) -> tuple[RevisionStore, set[int], list[str]]:
    """REV's response store; the purges (log lines) that retired one of its segments; and
    the retired segments that are gone. A segment no copy holds whose evidence a later run
    bought again (by md5, in ``rebought``) is left out and appended to ``lost``.

    A segment a purge retired reads from this clone's cache while ``dvc gc`` has not
    removed it; once it is gone, the segment the purge wrote in its place (which holds
    everything it kept, and may itself have been retired by a later purge) stands in.
    """
    segments: list[Segment] = []
    used: set[int] = set()
    missing: list[str] = []
    for name in segment_names(tree):
        retired = [p for p in purges if name in p.segments_removed]
        used |= {p.line for p in retired}
        try:
            segments.append(cache.segment(tree, name))
            continue
        except DataMissingError:
            if not retired:
                pointer = f"{STORE_DIR}/{name}.dvc"
                md5 = pointer_md5(tree.read(pointer)) if tree.is_file(pointer) else None
                if md5 is None or md5 not in rebought:
                    raise
                lost.append((LostObject(pointer, md5), rebought[md5]))
                continue
        missing.append(name)
        successor = retired[0].segment_written
        while successor is not None and not here.is_file(f"{STORE_DIR}/{successor}.dvc"):
            later = [p for p in purges if successor in p.segments_removed]
            used |= {p.line for p in later}
            successor = later[0].segment_written if later else None
        if successor is not None and successor not in {s.name for s in segments}:
            # Read from the working tree: only as the version its pointer names.
            refuse_altered(here.root, [f"{STORE_DIR}/{successor}"])
            segments.append(cache.segment(here, successor))
    return RevisionStore(segments), used, missing


def _reproduce_cell(
    tree: Tree,
    registry: Any,
    store: RevisionStore,
    cell: Cell,
    parts: dict[str, Any],
    recorded: CellSummary,
    provider: Any,
    known_keys: tuple[str, ...] | None,
    code_root: Path,
    purges: list[LoggedPurge],
    used: set[int],
    segments_lost: bool,
) -> tuple[CellReproduction, tuple[str, ...]]:
    """The cell's reproduction, and the store keys of its requests (``known_keys``, when an
    earlier revision rendered the same requests; else rendered here by ``provider``).
    Raises ``_Lost`` when its recorded per-item records are in a DVC object no copy holds."""
    out = CellReproduction(cell.id, True)
    evalset = registry.evalset_of(cell.task_id, cell.split)
    pointer = cell.items_path + ".dvc"
    has_items = tree.is_file(pointer) or tree.is_file(cell.items_path)
    try:
        recorded_data = committed_data(tree, cell.items_path) if has_items else b""
    except DataMissingError as exc:
        md5 = pointer_md5(tree.read(pointer)) if tree.is_file(pointer) else None
        if md5 is None:
            raise
        raise _Lost(LostObject(pointer, md5), exc) from None
    # The errors the run recorded are all the grading needs of the recorded records; the
    # rest are read only to list differences, when the items file is not the one graded.
    recorded_failed = _records(recorded_data, cell.items_path, failed_only=True)
    failed = {r["key"]: r["error"] for r in recorded_failed.values() if r.get("error")}
    grading = _Grading(
        cell,
        cell_grader(cell, registry, store, code_root),
        store,
        _recorded_items(evalset, recorded),
        provider,
        known_keys,
        failed,
        {p.item: p for p in purges if p.evalset == evalset.path},
        segments_lost,
    )
    graded = grading.all() if grading.ordered else []
    keys = tuple(k for g in graded for k in _split_keys(g.keys))
    items = b"".join(g.lines for g in graded)
    tally = graded[0].tally
    for g in graded[1:]:
        tally.merge(g.tally)
    for g in graded:
        out.differences += g.differences
        used |= g.purges
    items_md5 = hashlib.md5(items, usedforsecurity=False).hexdigest()
    summary = tally.summary(cell, fingerprint(parts), parts, evalset.path, evalset.md5, items_md5)
    if "sequential" in recorded:
        # Where it stopped is checked by replaying the rounds (``_check_stops``).
        summary["sequential"] = recorded["sequential"]
    # Results recorded under an older summary schema reproduce as that schema recorded them.
    summary = as_schema(summary, recorded.get("schema_version"))
    if summary_bytes(summary) != tree.read(cell.summary_path):
        out.differences += [f"summary {d}" for d in diff_values(recorded, summary)]
    if tree.is_file(cell.metrics_path):  # revisions since evalreg wrote DVC metrics files
        raw = tree.read(cell.metrics_path)
        if metrics_bytes(summary) != raw:
            try:
                recorded_metrics: Any = json.loads(raw)
            except ValueError:
                recorded_metrics = None
            out.differences += [
                f"metrics {d}" for d in diff_values(recorded_metrics, metrics_of(summary))
            ] or [f"metrics {cell.metrics_path}: not written as evalreg writes it"]
    if items != recorded_data:  # the same bytes hold the same records: nothing to list
        recorded_items = _records(recorded_data, cell.items_path)
        mine = {(r["item"], r["sample"]): r for r in read_items(items)}
        for at in sorted(set(mine) | set(recorded_items)):
            for d in diff_values(recorded_items.get(at), mine.get(at)):
                out.differences.append(f"item {at[0]}#{at[1]} {d}")
    out.identical = not out.differences
    del out.differences[MAX_DIFFERENCES_PER_CELL:]
    return out, keys


def _recorded_items(evalset: EvalSet, recorded: CellSummary) -> Sequence[schema.Item]:
    """The items the recorded results hold, in id order: every one, or the first of the
    purchase order where a sequential run stopped."""
    stop = recorded.get("sequential")
    if stop is None:
        return evalset.by_id
    wanted = frozenset(purchase_order(evalset.md5, [i.id for i in evalset.items])[: stop["items"]])
    return [item for item in evalset.by_id if item.id in wanted]


def _check_stops(
    tree: Tree, registry: Any, stops: dict[str, SequentialStop], outcomes: list[CellReproduction]
) -> None:
    """Replay the rounds of the sequential run that stopped the cells of ``stops`` early, on
    the recorded records (each cell's graded again above): a stopping point the rule does
    not reach again is a difference of the cell's."""
    by_id = {c.id: c for c in cells(registry)}
    differences = replay(registry, stops, lambda cell: read_records(tree, by_id[cell]))
    for outcome in outcomes:
        found = differences.get(outcome.cell)
        if found:
            outcome.differences += found
            outcome.identical = False


class _Lost(Exception):
    """A cell's recorded per-item records are in ``object``, which no copy holds."""

    def __init__(self, lost: LostObject, error: DataMissingError) -> None:
        self.object = lost
        self.error = error


_MIN_PART = 5_000
"""Samples a forked worker must get to grade a share of a cell: forking this process,
which holds every revision's store so far, costs some tens of milliseconds."""


@dataclass
class _Graded:
    """A run of a cell's items, graded: their requests' keys (64 hex digits each, joined),
    their items-file lines and tally, and their samples without a stored response (as
    differences, and the purges that removed them)."""

    keys: str
    lines: bytes
    tally: CellTally
    differences: list[str]
    purges: set[int]


@dataclass
class _Grading:
    """A cell's samples, graded in contiguous runs of items: the first here, the others
    in forked workers (each record depends only on its own sample, and tallies of
    consecutive runs add up exactly)."""

    cell: Cell
    grader: CellGrader
    store: RevisionStore
    ordered: Sequence[schema.Item]
    provider: Any
    known_keys: tuple[str, ...] | None
    failed: dict[str | None, str | None]
    purged: dict[str, LoggedPurge]
    segments_lost: bool = False
    """Some of the revision's store segments are on no DVC remote (``Reproduction.lost``)."""
    spans: list[range] = field(default_factory=list)

    def all(self) -> list[_Graded]:
        repeats = self.cell.task.repeats
        count = forked.parts(len(self.ordered) * repeats, _MIN_PART)
        size = max(1, -(-len(self.ordered) // count))
        self.spans = [
            range(start, min(start + size, len(self.ordered)))
            for start in range(0, len(self.ordered), size)
        ] or [range(0)]
        if len(self.spans) == 1:
            return [self.part(0)]
        with forked.forked(self.part, len(self.spans)) as done:
            first = self.part(0)
            return [first, *(done(i) for i in range(1, len(self.spans)))]

    def part(self, index: int) -> _Graded:
        span, repeats = self.spans[index], self.cell.task.repeats
        items = self.ordered[span.start : span.stop]
        if self.known_keys is None:
            keys = [job.key for _, _, job in cell_jobs(self.cell, self.provider, items)]
        else:
            keys = list(self.known_keys[span.start * repeats : span.stop * repeats])
        samples = ((item, s) for item in items for s in range(repeats))
        tally = CellTally([c.id for c in self.cell.rubric.criteria])
        lines = bytearray()
        differences: list[str] = []
        purges: set[int] = set()
        for (item, sample), key in zip(samples, keys, strict=True):
            stored = self.store.get(key)
            error = self.failed.get(key)
            if stored is None and error is None:
                error = "missing"
                if (purge := self.purged.get(item.id)) is not None:
                    purges.add(purge.line)
                    differences.append(
                        f"{item.id}#{sample}: no stored response: purged ({PURGE_LOG} line "
                        f"{purge.line})"
                    )
                elif self.segments_lost:
                    differences.append(
                        f"{item.id}#{sample}: no stored response (its store segment is on no "
                        "DVC remote)"
                    )
                else:
                    differences.append(f"{item.id}#{sample}: no stored response (offline miss)")
            record = self.grader.record(item, sample, key, stored, error)
            tally.add(record)
            lines += item_line(record)
            lines += b"\n"
        return _Graded("".join(keys), bytes(lines), tally, differences, purges)


def _split_keys(joined: str) -> list[str]:
    return [joined[start : start + 64] for start in range(0, len(joined), 64)]


def _records(
    data: bytes, path: str, *, failed_only: bool = False
) -> dict[tuple[str, int], ItemRecord]:
    """The recorded per-item records by (item, sample); a line that is not one raises
    ``RegistryError`` at its line number. With ``failed_only``, only the lines that can
    record an error are read: those with a key "error" (in JSON text, ``"error":`` is
    always a key) that is not null."""
    out = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        if failed_only and line.count(b'"error":') == line.count(b'"error":null'):
            continue
        try:
            r = cast(ItemRecord, load_json(line))
            out[(r["item"], r["sample"])] = r
        except (ValueError, RecursionError, TypeError, KeyError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            raise RegistryError(
                [
                    Finding(
                        path,
                        lineno,
                        0,
                        f"not a per-item record ({problem}): the recorded results are "
                        "damaged, so there is nothing to compare with",
                    )
                ]
            ) from None
    return out


def diff_values(old: Any, new: Any, path: str = "") -> list[str]:
    """Leaf-level differences between two JSON values, as ``path: recorded X, now Y``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out += diff_values(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    if old == new and type(old) is type(new):
        return []
    return [f"{path or '(value)'}: recorded {_short(old)}, reproduced {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class RangeReproduction:
    spec: str
    revisions: list[Reproduction]

    @property
    def identical(self) -> bool:
        return all(r.identical for r in self.revisions)


@dataclass(frozen=True)
class _Verdict:
    rev: str
    keys: tuple[str, ...]
    locations: tuple[object, ...]
    purges: frozenset[int]
    outcome: CellReproduction


_GRADING_PARTS = ("rubric", "judges", "graders")
"""The parts of a cell's fingerprint that its requests do not depend on."""


@dataclass
class Shared:
    """What reproducing several revisions reuses: store segments by name and content, each
    cell's verdict by its evidence, and its requests' keys by what renders them."""

    segments: SegmentCache = field(default_factory=SegmentCache)
    verdicts: dict[str, _Verdict] = field(default_factory=dict)
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _renders(registry: Any, cell: Cell, parts: dict[str, Any]) -> str:
    """What renders a cell's requests (and so their keys): the cell, its eval set, and
    its fingerprint's parts but the grading ones."""
    return digest(
        {
            "cell": cell.id,
            "evalset_path": registry.evalset_of(cell.task_id, cell.split).path,
            **{k: v for k, v in parts.items() if k not in _GRADING_PARTS},
        }
    )


def _code_paths(all_cells: list[Cell]) -> set[str]:
    paths: set[str] = set()
    for cell in all_cells:
        if cell.pin.callable:
            paths |= {cell.pin.callable.rpartition(":")[0], *cell.pin.files}
        for c in cell.rubric.criteria:
            if isinstance(c.grader, schema.PythonGrader):
                paths |= {c.grader.callable.rpartition(":")[0], *c.grader.files}
    return paths


@contextlib.contextmanager
def _materialized(tree: Tree, paths: set[str]) -> Iterator[Path]:
    """A temporary directory holding REV's versions of the given repository files."""
    with tempfile.TemporaryDirectory(prefix="evalreg-reproduce-") as tmp:
        root = Path(tmp)
        for rel in sorted(paths):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tree.read_data(rel))
        yield root
