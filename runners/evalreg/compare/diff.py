"""``evalreg diff``: what changed between two revisions' recorded results, and whether it is real.

Produces plain data (JSON-ready) so the trusted comment job can re-render it; Markdown is
rendered by ``evalreg.report.diff_markdown``. BASE is resolved to the merge-base with HEAD.

Whether HEAD's committed results were reproduced is not something the diff can know (it
compares summaries; ``evalreg reproduce`` re-grades). The job that ran both says so, and
the diff carries it at the top level, so the comment can show whose numbers these are::

    "reproduction": {"status": "reproduced" | "failed" | "not_attempted", "reason": str}

``reproduced``: ``evalreg reproduce HEAD`` recomputed every committed result, identical.
``failed``: it found differences, or could not run where it should have (a same-repository
pull request whose DVC remote could not be read) — the job fails. ``not_attempted``: it
was not run (a fork's pull request cannot read the remote, by design; or nobody said):
the numbers are the pull request's own claims. ``reason`` is one sentence for a reader.
Given with ``evalreg diff --reproduction STATUS --reproduction-reason TEXT``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from evalreg.cells import Cell, cells, use_cases_of
from evalreg.compare.config import config_changes
from evalreg.compare.diff_document import DIFF_SCHEMA, CheckEntry, problems
from evalreg.compare.selections import selections_diff
from evalreg.compare.statuses import REPRODUCTION_STATUSES, UNEXPLAINED
from evalreg.compare.summaries import (
    fingerprint_changes,
    remote_config_change,
    ruler_changes,
    summary_diff,
    unexplained,
)
from evalreg.dvcrepo import read_ahead, remembering_reads
from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets.privacy import redact_fields, redact_output
from evalreg.metrics import COVERAGE, Comparison, aligned, cell_metrics, compare, covered, passing
from evalreg.redaction import redact
from evalreg.registry.diagnostics import Severity
from evalreg.registry.loader import Registry, inspect_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.results.freshness import status
from evalreg.results.outcomes import Outcomes, from_records
from evalreg.results.records import CellSummary, items_md5, read_records, read_summary
from evalreg.selection.evidence import (
    OutcomeCache,
    SelectionEvidence,
    gather,
    read_outcomes,
)
from evalreg.store.segments import Prefetch, ResponseStore, SegmentKeys, lookup

NOT_STATED = "evalreg diff was not told whether these results were reproduced"
SNIPPET = 300
MAX_FLIPS = 20
OVERALL = (
    "pass_rate",
    "unacceptable_rate",
    "error_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "cost_per_item_usd",
    "failure_cost_per_1k_usd",
)


@dataclass
class Side:
    label: str
    rev: str | None
    registry: Registry
    store: ResponseStore | None = None
    scanned: dict[str, SegmentKeys] | None = None
    """Its store's segments, scanned in the background while the diff is computed."""
    commit: dict[str, Any] | None = None
    """The commit compared: sha, subject, and for the working tree whether it has
    uncommitted changes."""

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "rev": self.rev, **(self.commit or {})}

    def responses(self) -> ResponseStore:
        if self.store is None:
            self.store = ResponseStore.load(self.registry.tree)
        return self.store


Snippet = tuple[dict[str, Any], str, Side, str | None, Cell]
"""A flip's output to fill in: (entry, field, side, response key, cell)."""


def resolve(root: Path, base: str, head: str | None) -> tuple[tuple[Side, Side], Prefetch]:
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{root} is not a git repository") from None
    head_tree: Tree = GitTree(root, head) if head else WorkspaceTree(root)
    head_commit = head_tree.rev if isinstance(head_tree, GitTree) else "HEAD"
    try:
        bases = repo.merge_base(base, head_commit)
    except git.GitCommandError:
        raise UsageError(f"unknown revision {base!r}") from None
    if not bases:
        raise UsageError(f"{base} and {head or 'HEAD'} share no history")
    base_tree = GitTree(root, bases[0].hexsha)
    head_rev = head_tree.rev if isinstance(head_tree, GitTree) else None
    # The snippets' responses are looked up at the end; their segments (the bulk of what
    # a diff reads) are read and scanned on another core meanwhile.
    scans = Prefetch([base_tree, head_tree], root)
    head_sha = repo.commit(head_commit)
    try:
        sides = (
            Side(base, base_tree.rev, _load(base_tree), commit=_commit(bases[0], merge_base=True)),
            Side(
                head or "HEAD",
                head_rev,
                _load(head_tree),
                commit=_commit(
                    head_sha,
                    uncommitted=None if head else repo.is_dirty(untracked_files=True),
                ),
            ),
        )
    except BaseException:
        scans.cancel()
        raise
    return sides, scans


def _commit(
    commit: Any, *, merge_base: bool = False, uncommitted: bool | None = None
) -> dict[str, Any]:
    """What the header says of one side: the commit and its subject; the base is the
    merge-base, the head may be the working tree with changes not yet committed."""
    message = commit.message if isinstance(commit.message, str) else commit.message.decode()
    out: dict[str, Any] = {"commit": commit.hexsha, "subject": message.split("\n", 1)[0]}
    if merge_base:
        out["merge_base"] = True
    if uncommitted is not None:
        out["uncommitted"] = uncommitted
    return out


def _load(tree: Tree) -> Registry:
    """The registry at ``tree``; eval sets that cannot be read here are left out (and listed
    in ``missing_data``), any other problem is an error."""
    registry, findings = inspect_registry(tree, allow_missing_data=True)
    problems = [f for f in findings if f.severity is not Severity.WARNING]
    if problems:
        raise RegistryError(problems)
    return registry


def snippet(text: str | None) -> str | None:
    """Stored text cut for display, secrets redacted first: a cut through a quoted key
    would leave a part of it that no later redaction recognises."""
    if text is None:
        return None
    text = redact(text)
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def _item_texts(registry: Registry, cell: Cell, ids: list[str]) -> dict[str, str | None]:
    """The (redacted) input of each of the items ``ids``, for snippets."""
    try:
        evalset = registry.evalset_of(cell.task_id, cell.split)
    except (KeyError, ValueError):
        return {}
    wanted = set(ids)
    out: dict[str, str | None] = {}
    for item in evalset.items:
        if item.id not in wanted:
            continue
        data = redact_fields(item, cell.task.redact)
        if data.get("input") is not None:
            out[item.id] = json.dumps(data["input"], ensure_ascii=False, sort_keys=True)
        else:
            turns = data.get("messages") or []
            out[item.id] = str(turns[-1]["content"]) if turns else None
    return out


def _key(outcomes: Outcomes, row: int) -> str | None:
    try:
        return outcomes.key(row)
    except Exception:  # the per-item records may be unreadable here: snippets are optional
        return None


def _fill_outputs(snippets: list[Snippet]) -> None:
    """Put each flip's stored output in place, looking up each side's keys in one pass."""
    for side in {id(sn[2]): sn[2] for sn in snippets}.values():
        mine = [sn for sn in snippets if sn[2] is side]
        try:
            stored = lookup(side.registry.tree, [k for *_, k, _ in mine if k], side.scanned)
        except Exception:  # the store may be unreadable here (a fork PR): snippets are optional
            stored = {}
        for entry, name, _side, key, cell in mine:
            record = stored.get(key) if key else None
            text = record["response"]["text"] if record else None
            entry[name] = snippet(None if text is None else redact_output(text, cell.task.redact))


def _flips(
    base: Side,
    head: Side,
    cell: Cell,
    b: Outcomes,
    h: Outcomes,
    pass_level: str,
    snippets: list[Snippet] | None,
) -> dict[str, Any]:
    """The items that flipped between the sides; their outputs are added to ``snippets``
    for ``_fill_outputs`` (None: the registry shows no snippets, not even the input)."""
    index, same = aligned(h, b)  # base's index of each head item, and whether it pairs
    b_ids = set(b.ids)
    in_base = np.array([i in b_ids for i in h.ids], dtype=bool)
    changed = sorted(h.ids[i] for i in np.flatnonzero(in_base & ~same))
    if b is h:  # the same items file on both sides: nothing flipped
        regressed: list[str] = []
        improved: list[str] = []
    else:
        h_has, h_passes = passing(h, pass_level)
        b_has, b_passes = passing(b, pass_level)
        paired = same & h_has & b_has[index]
        flip = paired & (h_passes != b_passes[index])
        regressed = sorted(h.ids[i] for i in np.flatnonzero(flip & ~h_passes))
        improved = sorted(h.ids[i] for i in np.flatnonzero(flip & h_passes))
    b_first, h_first = b.first_rows(), h.first_rows()
    shown = regressed[:MAX_FLIPS] + improved[:MAX_FLIPS]
    entries = {}
    h_index = {item: i for i, item in enumerate(h.ids)} if shown else {}
    texts = _item_texts(head.registry, cell, shown) if shown and snippets is not None else {}
    for item in shown:
        at = h_index[item]
        b_row, h_row = int(b_first[index[at]]), int(h_first[at])
        entries[item] = {
            "item": item,
            "tags": list(h.tags[at]),
            "base_level": b.level_name(b_row),
            "head_level": h.level_name(h_row),
            "failed_criteria": h.failed(h_row),
            "input": snippet(texts.get(item)),
            "base_output": None,
            "head_output": None,
        }
        if snippets is not None:
            snippets.append((entries[item], "base_output", base, _key(b, b_row), cell))
            snippets.append((entries[item], "head_output", head, _key(h, h_row), cell))
    regressions = [entries[i] for i in regressed[:MAX_FLIPS]]
    improvements = [entries[i] for i in improved[:MAX_FLIPS]]
    return {
        "regressions_total": len(regressed),
        "improvements_total": len(improved),
        "regressions": regressions,
        "improvements": improvements,
        "changed_items": {"count": len(changed), "ids": changed[:MAX_FLIPS]},
        "added_items": len(h.ids) - int(np.count_nonzero(in_base)),
        "removed_items": len(b_ids - set(h.ids)),
    }


def _overall(ev: SelectionEvidence | None, cid: str) -> dict[str, float] | None:
    if ev is None or cid not in ev.metrics:
        return None
    m = ev.metrics[cid]["all"]
    return {k: m[k].value for k in OVERALL if k in m}


def _coverage(ev: SelectionEvidence | None, cid: str) -> dict[str, list[int]]:
    """Per human criterion: [graded, applicable] samples of the cell (slice ``all``)."""
    if ev is None or cid not in ev.metrics:
        return {}
    m = ev.metrics[cid]["all"]
    return {
        k.removeprefix(COVERAGE): list(covered(v))
        for k, v in sorted(m.items())
        if k.startswith(COVERAGE)
    }


def _counterfactual(
    base: Side,
    head: Side,
    base_cell: Cell,
    head_cell: Cell,
    head_outcomes: Outcomes,
    pass_level: str,
    root: Path,
) -> dict[str, Any] | None:
    """Re-grade BASE's stored responses under HEAD's rubric: the ruler's share of a change.

    ``ruler`` is the re-graded base against the base as recorded (same responses, two
    rulers); ``model`` is the head against the re-graded base (one ruler), with its own
    paired tests per slice, so only the model's share is ever called better or worse.
    None when the base's records or responses cannot be read here: then no part of the
    change can be attributed.
    """
    from evalreg.runner.grading import cell_grader

    try:
        store = base.responses()
        # The head's judges' verdicts on these responses were bought by the head's run,
        # so they are in the head's store (which holds the base's segments too).
        judged = head.responses()
        base_records = read_records(base.registry.tree, base_cell)
        items = {
            i.id: i for i in base.registry.evalset_of(base_cell.task_id, base_cell.split).items
        }
    except Exception:  # a fork or a partial checkout: the data is not readable here
        return None
    if not base_records:
        return None
    grader = cell_grader(head_cell, head.registry, judged, root)
    regraded = []
    for r in base_records:
        item = items.get(r["item"])
        key = r.get("key")
        stored = store.get(key) if key else None
        if item is None or (key and stored is None):
            return None  # a re-grade without the response would grade nothing
        record = grader.record(item, r["sample"], key, stored, r.get("error"))
        if record["error"] is not None and r.get("error") is None:
            return None  # e.g. no stored verdict of a new judge: the re-grade is partial
        regraded.append(record)
    criteria = [c.id for c in head_cell.rubric.criteria]
    recorded = from_records(base_records, [c.id for c in base_cell.rubric.criteria])
    counterfactual = from_records(regraded, criteria)
    before = _pass_rate(recorded, head_cell, pass_level)
    regrade = _pass_rate(counterfactual, head_cell, pass_level)
    after = _pass_rate(head_outcomes, head_cell, pass_level)
    return {
        "base": before,
        "base_regraded": regrade,
        "head": after,
        "ruler": regrade - before,
        "model": after - regrade,
        "model_slices": _slice_rows(compare(counterfactual, head_outcomes, pass_level)),
    }


def _slice_rows(comparisons: list[Comparison]) -> list[dict[str, Any]]:
    """Paired comparisons per slice, as the diff's JSON holds them."""
    return [
        {
            "slice": c.slice,
            "n": c.diff.n,
            "diff": c.diff.mean,
            "lo": c.diff.lo,
            "hi": c.diff.hi,
            "only_base": c.diff.b,
            "only_head": c.diff.c,
            "p_adjusted": c.p_adjusted,
            "verdict": c.verdict,
            "mde": c.mde,
            "mde_note": c.mde_note,
            "family": c.family,
            "level": c.level,
            **({"clusters": c.diff.clusters} if c.diff.clusters else {}),
        }
        for c in comparisons
    ]


def _pass_rate(outcomes: Outcomes, cell: Cell, pass_level: str) -> float:
    return cell_metrics(outcomes, cell.task, cell.rubric, pass_level)["all"]["pass_rate"].value


def diff(
    root: Path,
    base_ref: str,
    head_ref: str | None = None,
    *,
    check: dict[str, Any] | None = None,
    reproduction: tuple[str, str] = ("not_attempted", ""),
) -> dict[str, Any]:
    """The diff of recorded results between the merge-base of BASE and HEAD, and HEAD.

    ``check`` is ``evalreg check --json``'s output for HEAD and ``reproduction`` what
    ``evalreg reproduce`` made of HEAD (status, reason): both go into the diff as they are,
    so the comment states the whole decision.
    """
    status_, reason = reproduction
    if status_ not in REPRODUCTION_STATUSES:
        raise UsageError(f"reproduction status must be one of {', '.join(REPRODUCTION_STATUSES)}")
    checked = _check_entry(check) if check is not None else None
    with remembering_reads():
        (base, head), scans = resolve(root, base_ref, head_ref)
        try:
            data = _diff(root, base, head, scans)
        finally:
            scans.cancel()
    # Only "not attempted" without a reason means nobody said: a bare status speaks for itself.
    said = reason.strip() or (NOT_STATED if status_ == "not_attempted" else "")
    data["reproduction"] = {"status": status_, "reason": redact(said)}
    data["check"] = checked
    data["remote_objects"] = checked.get("remote") if checked else None
    data["dvc_remote"] = remote_config_change(base.registry.tree, head.registry.tree)
    return data


def _check_entry(data: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``evalreg check --json`` output the comment states."""
    findings = data.get("findings")
    code = data.get("exit_code")
    if not isinstance(findings, list) or not isinstance(code, int) or isinstance(code, bool):
        raise UsageError("--check: not the output of `evalreg check --json`")
    out: dict[str, Any] = {
        "ok": code == 0,
        "exit_code": code,
        "findings": [
            {k: f.get(k) for k in ("path", "line", "col", "message", "severity")}
            for f in findings
            if isinstance(f, dict)
        ],
    }
    remote = data.get("remote")
    out["remote"] = remote if isinstance(remote, dict) else None
    try:  # what the comment job would refuse is refused here, where the file is named
        CheckEntry.model_validate(out)
    except ValidationError as exc:
        raise UsageError(
            f"--check: not the output of `evalreg check --json` ({problems(exc)})"
        ) from None
    return out


def snippets_shown(base: Registry, head: Registry) -> bool:
    """Item and output snippets go into the diff unless either side's settings turn them
    off: a pull request cannot turn them back on for itself."""
    return base.settings.privacy.snippets and head.settings.privacy.snippets


def _diff(root: Path, base: Side, head: Side, scans: Prefetch) -> dict[str, Any]:
    missing = base.registry.missing_data + head.registry.missing_data
    if missing:
        data = summary_diff(base.registry, head.registry, base.label, head.label, missing)
        return {
            "schema_version": DIFF_SCHEMA,
            **data,
            "snippets": snippets_shown(base.registry, head.registry),
            "base": base.as_dict(),
            "head": head.as_dict(),
        }
    base_status = {s.cell.id: s for s in status(base.registry)}
    head_status = {s.cell.id: s for s in status(head.registry)}
    base_cells = {c.id: c for c in cells(base.registry)}
    head_cells = {c.id: c for c in cells(head.registry)}
    # The flips' response keys are in the per-item records of the cells whose results
    # changed: those are read (and verified) on another core while metrics are computed.
    wait = read_ahead(root, _changed_records(base, head, base_cells, head_cells))
    cache: OutcomeCache = {}
    base_ev = {
        s: gather(base.registry, s, list(base_status.values()), comparisons=False, cache=cache)
        for s in base.registry.selections
    }
    head_ev = {
        s: gather(head.registry, s, list(head_status.values()), comparisons=False, cache=cache)
        for s in head.registry.selections
    }
    warnings: list[str] = []
    out_cells = []
    ruled: set[str] = set()
    snippets: list[Snippet] = []
    show = snippets_shown(base.registry, head.registry)
    for cid in sorted(set(base_cells) | set(head_cells)):
        b, h = base_cells.get(cid), head_cells.get(cid)
        entry: dict[str, Any] = {"id": cid}
        b_out = _outcomes(base, b, base_status, cache)
        h_out = _outcomes(head, h, head_status, cache)
        summaries = _summaries(base, head, b, h)
        moved = unexplained(*summaries) if summaries is not None else []
        if h is None:
            entry["status"] = "removed"
        elif b is None:
            entry["status"] = "added" if h_out is not None else "added, pending"
        elif h_out is None:
            entry["status"] = "pending"
        elif b_out is None:
            entry["status"] = "new results"
        elif moved:
            entry["status"] = UNEXPLAINED
        elif b_out is h_out:  # the same items file on both sides
            entry["status"] = "unchanged"
        else:
            entry["status"] = "compared"
        if b is not None and h is not None:
            entry["fingerprint_changes"] = fingerprint_changes(
                cid, base_status[cid].parts, head_status[cid].parts, warnings
            )
            entry["unexplained"] = moved
            bought = _items_bought(summaries, head, h)
            if bought is not None:  # only then, so other diffs keep their bytes
                entry["items_bought"] = bought
            config = config_changes(b, h)
            if config:  # only when some, so diffs of unchanged configurations keep their bytes
                entry["config_changes"] = config
            entry["ruler_changed"] = bool(ruler_changes(entry["fingerprint_changes"]))
            if entry["ruler_changed"]:
                ruled.update(use_cases_of(head.registry, h))
        sel = head.registry.selections.get(h.selection) if h else None
        pass_level = sel.policy.pass_level if sel else "correct"
        sel_id = h.selection if h else (b.selection if b else "")
        entry["overall"] = {
            "base": _overall(base_ev.get(b.selection) if b else None, cid.split("/", 1)[1]),
            "head": _overall(head_ev.get(sel_id), cid.split("/", 1)[1]) if h else None,
        }
        coverage = {
            "base": _coverage(base_ev.get(b.selection) if b else None, cid.split("/", 1)[1]),
            "head": _coverage(head_ev.get(sel_id), cid.split("/", 1)[1]) if h else {},
        }
        if coverage["base"] or coverage["head"]:
            entry["coverage"] = coverage
        if b_out is not None and h_out is not None and b is not None and h is not None:
            entry["slices"] = _slice_rows(compare(b_out, h_out, pass_level))
            entry["flips"] = _flips(
                base, head, h, b_out, h_out, pass_level, snippets if show else None
            )
            if entry["ruler_changed"]:
                entry["counterfactual"] = _counterfactual(base, head, b, h, h_out, pass_level, root)
        out_cells.append(entry)
    wait()
    if snippets:
        base.scanned, head.scanned = scans.result()
    _fill_outputs(snippets)
    return {
        "schema_version": DIFF_SCHEMA,
        "snippets": show,
        "base": base.as_dict(),
        "head": head.as_dict(),
        "warnings": sorted(set(warnings)),
        "selections": selections_diff(base_ev, head_ev, ruled),
        "cells": out_cells,
    }


def _changed_records(
    base: Side, head: Side, base_cells: dict[str, Cell], head_cells: dict[str, Cell]
) -> list[str]:
    """The md5s of both sides' items files, for each cell whose items file changed."""
    out: list[str] = []
    for cid in sorted(set(base_cells) & set(head_cells)):
        b, h = (
            items_md5(read_summary(side.registry.tree, cell))
            for side, cell in ((base, base_cells[cid]), (head, head_cells[cid]))
        )
        if b is not None and h is not None and b != h:
            out += [b, h]
    return out


def _items_bought(
    summaries: tuple[CellSummary, CellSummary] | None, head: Side, h: Cell
) -> dict[str, int] | None:
    """The items each side's results hold, when a sequential run stopped the cell early on
    either side and the two differ; None otherwise."""
    if summaries is None:
        return None
    before, after = summaries
    stops = (before.get("sequential"), after.get("sequential"))
    if stops[0] == stops[1]:
        return None
    size = len(head.registry.evalset_of(h.task_id, h.split).items)

    def held(stop: object) -> int:
        return int(stop["items"]) if isinstance(stop, dict) else size

    return {"base": held(stops[0]), "head": held(stops[1]), "of": size}


def _summaries(
    base: Side, head: Side, b: Cell | None, h: Cell | None
) -> tuple[CellSummary, CellSummary] | None:
    """A cell's summaries on both sides, when both have one."""
    if b is None or h is None:
        return None
    before, after = read_summary(base.registry.tree, b), read_summary(head.registry.tree, h)
    return (before, after) if before is not None and after is not None else None


def _outcomes(
    side: Side, cell: Cell | None, statuses: dict[str, Any], cache: OutcomeCache
) -> Outcomes | None:
    if cell is None or statuses[cell.id].state == "pending":
        return None
    summary = read_summary(side.registry.tree, cell)
    return read_outcomes(side.registry, cell, summary, cache) if summary is not None else None
