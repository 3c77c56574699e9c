"""Terminal rendering of command results: rich tables on stdout, findings on stderr.

Text evalreg does not control (a provider's error, item text, model output, what a
registry, results or log file says) reaches the terminal only through ``plain``, or
``shown`` inside rich markup.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from evalreg.redaction import redact
from evalreg.registry.diagnostics import Severity
from evalreg.store.purge_log import PURGE_LOG
from evalreg.text.escape import json_text, strip_controls
from evalreg.text.numbers import (
    count,
    coverage_text,
    milliseconds,
    number,
    percent,
    plural,
    points,
    usd_micro,
    whole_points,
)

if TYPE_CHECKING:
    from evalreg.check import CheckResult
    from evalreg.compare.diff_document import CellChange, DiffDocument, DiffSide
    from evalreg.dvcrepo import StagedObjects
    from evalreg.evalsets.sampling import SampleResult
    from evalreg.evalsets.slice_sizes import ItemsNeeded, SliceStats
    from evalreg.evalsets.tracking import AddedEvalSet
    from evalreg.gitops.merging import Resolution
    from evalreg.importers import ImportResult
    from evalreg.providers.fetch import FetchReport
    from evalreg.results.freshness import CellStatus
    from evalreg.results.item import CandidateView, ItemView, SampleView
    from evalreg.runner.planning import CellPlan
    from evalreg.runner.reproduce import RangeReproduction, Reproduction
    from evalreg.runner.run import RunResult
    from evalreg.runner.until_decided import SequentialRun
    from evalreg.scaffold import Scaffolded
    from evalreg.selection.edit import Selected
    from evalreg.store.batches import Batch
    from evalreg.store.compaction import Compaction
    from evalreg.store.purge import PurgeRecord


def plain(text: object) -> str:
    """``text`` fit for a terminal: escape sequences and control characters stripped (see
    ``strip_controls``: a terminal would act on them), then secrets redacted, so a key that
    controls split apart is found whole."""
    return redact(strip_controls(str(text)))


def shown(text: object) -> str:
    """``plain(text)`` for a rich markup string: its ``[...]`` is escaped, or rich would
    read ``[bold]`` or ``[link=...]`` in it as markup."""
    return escape(plain(text))


@cache
def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


@cache
def error_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_check(result: CheckResult, *, strict: bool = False) -> None:
    """Findings first (one ``path:line:col: message`` a line), then the summary tables."""
    err = error_console()
    for finding in result.findings:
        style = {"error": "red", "finding": "yellow", "warning": "yellow"}[finding.severity.value]
        err.print(Text(plain(finding.render()), style=style))
    out = console()
    out.print(
        Text(
            "Registry: "
            + ", ".join(plural(n, name.removesuffix("s")) for name, n in result.counts.items())
        ),
        soft_wrap=False,
    )
    if result.use_cases:
        # A task named like its use case (the usual case) is not repeated in its own column.
        tasks = any(row.task != row.selection for row in result.use_cases)
        headers = ["use case", *(["task"] if tasks else []), "eval set", "items"]
        rows: list[list[str | Text]] = [
            [
                plain(row.selection),
                *([plain(row.task)] if tasks else []),
                plain(row.evalset),
                str(row.items),
                str(row.candidates),
                plain(row.selected),
            ]
            for row in result.use_cases
        ]
        headers += ["candidates", "declared"]
        if _width(headers, rows) <= out.width:
            table = _table("Use cases")
            _fill(table, headers, rows, notes=False)
            out.print(table)
        else:  # ids too long for columns: a paragraph each
            out.print(Text("Use cases"), soft_wrap=False)
            for row in result.use_cases:
                out.print(Text(plain(row.selection), style="bold"), soft_wrap=False)
                candidates = plural(row.candidates, "candidate")
                _print_wrapped(
                    [
                        f"task {row.task},",
                        f"eval set {row.evalset} ({plural(row.items, 'item')}),",
                        f"{candidates},",
                        f"declared {row.selected}",
                    ],
                    indent="  ",
                )
        seen = set()
        for row in result.use_cases:
            if row.evalset in seen:
                continue
            seen.add(row.evalset)
            _print_slices(row.evalset, row.slices)
    by = {s: sum(f.severity is s for f in result.findings) for s in Severity}
    code = result.exit_code(strict=strict)
    verdict = {
        0: "[green]ok[/green]",
        1: "[yellow]findings[/yellow]",
        2: "[red]unusable input[/red]",
    }[code]
    out.print(
        f"check: {verdict} ({plural(by[Severity.ERROR], 'error')}, "
        f"{plural(by[Severity.FINDING], 'finding')}, {plural(by[Severity.WARNING], 'warning')})"
    )
    sys.stdout.flush()


def print_status(statuses: list[CellStatus], batches: Sequence[Batch] = ()) -> None:
    """The cells' states, then the batches submitted and not collected yet (if any)."""
    colors = {"fresh": "green", "stale": "yellow", "pending": "cyan"}
    task, cell_headers, cell_rows = _cell_columns([st.cell.id for st in statuses])
    table = _table("Cells" + (f" of {plain(task)}" if task else ""))
    rows: list[list[str | Text]] = [
        [*cell, Text(st.shown, style=colors[st.state]), plain("; ".join(st.reasons))]
        for cell, st in zip(cell_rows, statuses, strict=True)
    ]
    notes = _fill(table, [*cell_headers, "state", "why"], rows)
    console().print(table)
    _print_notes(notes)
    print_waiting_batches(batches)


def print_waiting_batches(batches: Sequence[Batch]) -> None:
    """On stderr: the batches journalled and not collected yet, which a later ``run
    --batch`` collects (a cell stays pending or stale until then)."""
    if not batches:
        return
    err = error_console()
    held = sum(len(b.keys) for b in batches)
    err.print(
        f"waiting: {plural(held, 'response')} in {plural(len(batches), 'batch', 'batches')} "
        "not collected yet; `evalreg run --batch` collects them"
    )
    for batch in batches:
        where = batch.batch_id or f"not submitted yet ({batch.state})"
        expires = f", expires {batch.expires_utc}" if batch.expires_utc else ""
        err.print(
            Text(
                plain(
                    f"  {batch.pin_id}: {where}, {plural(len(batch.keys), 'request')}, "
                    f"since {batch.created_utc}{expires}"
                )
            )
        )


class RunProgress:
    """A live progress display: per cell, done, errors and requests bought (and, for a
    judged cell, its judge requests bought and failed)."""

    def __init__(self, plans: list[CellPlan]) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "bought {task.fields[bought]}  errors {task.fields[errors]}"
                "  graded {task.fields[graded]}{task.fields[judge]}"
            ),
            console=error_console(),
            transient=False,
        )
        self.tasks = {
            p.status.cell.id: self.progress.add_task(
                p.status.cell.id, total=p.in_shard, bought=0, errors=0, graded=0, judge=""
            )
            for p in plans
            if p.blocked is None
        }
        self.counts: dict[str, list[int]] = {cid: [0, 0, 0] for cid in self.tasks}
        self.judge_counts: dict[str, list[int]] = {cid: [0, 0] for cid in self.tasks}

    def advance(self, cell_id: str, outcome: str, jobs: int = 1) -> None:
        """Count ``jobs`` requests (cached, fetched, shared or error), or ``jobs`` samples
        graded (``outcome`` "graded": the bar does not move, the count does)."""
        task = self.tasks.get(cell_id)
        if task is None:
            return
        if outcome.startswith("judge "):
            judged = self.judge_counts[cell_id]
            judged[0] += jobs * (outcome == "judge fetched")
            judged[1] += jobs * (outcome == "judge error")
            text = f"  judge: bought {judged[0]}  errors {judged[1]}"
            self.progress.update(task, judge=text)
            return
        counts = self.counts[cell_id]
        if outcome == "graded":
            counts[2] += jobs
            self.progress.update(task, graded=counts[2])
            return
        if outcome == "fetched":
            counts[0] += jobs
        elif outcome == "error":
            counts[1] += jobs
        self.progress.update(task, advance=jobs, bought=counts[0], errors=counts[1])

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def print_run(result: RunResult, *, dry_run: bool = False) -> None:
    out = console()
    judged = result.judge_requests > 0
    task, cell_headers, cell_rows = _cell_columns([p.status.cell.id for p in result.plans])
    title = ("Dry run" if dry_run else "Run") + (f" of {plain(task)}" if task else "")
    table = _table(title + (": what would run" if dry_run else ""))
    headers = [*cell_headers, "state", "to buy"]
    if dry_run:
        # Before a run, what it would cost; after one, what it cost (the estimate is below).
        headers += ["est. cost", *(["judge req.", "judge est."] if judged else []), "why"]
    else:
        headers += ["errors", "cost", "result"]
    outcomes = {o.plan.status.cell.id: o for o in result.outcomes}
    rows: list[list[str | Text]] = []
    for cell, plan in zip(cell_rows, result.plans, strict=True):
        st = plan.status
        row: list[str | Text] = [*cell, st.state, str(plan.missing)]
        blocked = f"pending: {plan.blocked}" if plan.blocked else ""
        if dry_run:
            row.append(usd_micro(plan.estimated_micro_usd))
            if judged:
                row += [str(plan.judge_requests), usd_micro(plan.judge_estimated_micro_usd)]
            tokens = [f"estimate: {plan.output_tokens}"] if plan.output_tokens else []
            if plan.judge_output_tokens:
                tokens.append(f"judge estimate: {plan.judge_output_tokens}")
            reasons = [r for r in st.reasons if not plan.blocked or not plan.blocked.startswith(r)]
            row.append(plain("; ".join([*reasons, *([blocked] if blocked else []), *tokens])))
        else:
            o = outcomes.get(st.cell.id)
            if o is None:
                row += ["", "", ""]
            else:
                result_text = "written" if o.written else (blocked or o.note)
                cost = usd_micro(o.cost_micro_usd)
                if o.judge_cost_micro_usd:
                    cost += f" (judge {usd_micro(o.judge_cost_micro_usd)})"
                row += [str(o.errors), cost, plain(result_text)]
        rows.append(row)
    notes = _fill(table, headers, rows)
    out.print(table)
    _print_notes(notes)
    for o in result.outcomes:
        if o.coverage:
            out.print(
                Text(
                    plain(
                        f"Human grades of {o.plan.status.cell.id}: "
                        + ", ".join(
                            f"{cid} {coverage_text(*counts)} graded"
                            for cid, counts in sorted(o.coverage.items())
                        )
                    )
                )
            )
    if not result.plans:
        out.print(
            "Nothing to run: every cell is fresh."
            if not result.notes
            else "Nothing to run here: every other cell is fresh (see the notes)."
        )
    if judged:
        out.print(
            "Estimated cost of missing responses: "
            f"{usd_micro(result.estimated_micro_usd + result.judge_estimated_micro_usd)} "
            f"(candidates {usd_micro(result.estimated_micro_usd)}, {result.judge_requests} judge "
            f"requests {usd_micro(result.judge_estimated_micro_usd)}: one per judge criterion that "
            "applies, per candidate request to buy)"
        )
    else:
        out.print(f"Estimated cost of missing responses: {usd_micro(result.estimated_micro_usd)}")
    saving = result.batch_saving_micro_usd
    if saving is not None:
        live, batch = saving
        out.print(
            f"Bought in batches: {usd_micro(batch)} instead of {usd_micro(live)} live "
            f"(saving {usd_micro(live - batch)}, at the pins' batch prices)"
            if batch < live
            else "Bought in batches: no saving estimated: the pins give no batch prices "
            "(price.batch_input_per_mtok, price.batch_output_per_mtok)"
        )
    batches = result.batches
    if batches is not None:
        if batches.submitted:
            out.print(Text(plain(f"Batches submitted: {', '.join(batches.submitted)}")))
        if batches.waiting:
            out.print(
                f"{plural(len(batches.waiting), 'response')} waiting in submitted batches: "
                "`evalreg run --batch` collects them (their ids are journalled in this "
                "clone's state directory)"
            )
    for note in [*result.notes, *(batches.notes if batches is not None else [])]:
        error_console().print(Text(plain(f"note: {note}")))
    for failure in batches.failures if batches is not None else []:
        error_console().print(Text(plain(f"error: {failure}")))
    if result.fetch is not None:
        f, j = result.fetch, result.judge_fetch
        both = [f] if j is None else [f, j]
        kinds = _error_kinds(both)
        out.print(
            f"Requests: {sum(r.fetched for r in both)} bought, "
            f"{sum(r.cached for r in both)} from the store, "
            f"{sum(r.shared for r in both)} shared; errors: {kinds}"
        )
        if j is not None:
            for name, r in (("candidates", f), ("judges", j)):
                out.print(
                    f"  {name}: {r.fetched} bought, {r.cached} from the store, "
                    f"{r.shared} shared; errors: {_error_kinds([r])}"
                )
        # A pin whose endpoint is down, or that was refused for every request, fails its
        # remaining requests alike, unsent: one line a pin, candidates' and judges' together.
        stopped: dict[str, tuple[str, int]] = {}
        errors = []
        for error in [e for r in both for e in r.errors]:
            if error.kind in ("unreachable", "refused"):
                message, count = stopped.get(error.pin_id, (error.message, 0))
                stopped[error.pin_id] = message, count + 1
            else:
                errors.append(error)
        for message, count in stopped.values():
            why = message.removeprefix("not sent: ")
            error_console().print(Text(plain(f"error: {why}; {plural(count, 'request')} not sent")))
        for error in errors[:20]:
            tries = f" (after {error.attempts} attempts)" if error.attempts > 1 else ""
            line = f"{error.label}: {error.kind}: {error.message}{tries}"
            error_console().print(Text(plain(line)))
        if len(errors) > 20:
            error_console().print(f"... and {len(errors) - 20} more errors")
    if result.push_error:
        error_console().print(
            Text(
                plain(
                    f"warning: could not push to the DVC remote ({result.push_error}); the "
                    "data is safe in the local cache: run `dvc push` when the remote is reachable"
                )
            )
        )
    if not dry_run:
        print_to_commit("To commit with the run", result.to_commit, result.objects)


def _error_kinds(reports: list[FetchReport]) -> str:
    """ "server 17, timeout 2": the requests of ``reports`` that failed, by kind."""
    kinds: Counter[str] = Counter()
    for report in reports:
        kinds.update(report.error_kinds)
    return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"


def print_reproduction(rep: Reproduction) -> None:
    out = console()
    if any(v != rep.running_version for v in rep.recorded_versions):
        out.print(
            f"[yellow]Results at {shown(rep.rev[:12])} were recorded with evalreg "
            f"{shown(', '.join(rep.recorded_versions))}; this is evalreg "
            f"{rep.running_version}. Grader code is part of the evidence: install evalreg=="
            f"{shown(rep.recorded_versions[0])} to reproduce them exactly.[/yellow]"
        )
    for cell in rep.cells:
        if cell.identical:
            seen = f" (same evidence as at {cell.same_as[:12]})" if cell.same_as else ""
            out.print(f"{cell.cell}: identical{seen}")
        else:
            out.print(f"[red]{cell.cell}: {plural(len(cell.differences), 'difference')}[/red]")
            for d in cell.differences:
                out.print(Text(plain("  " + d)))
    for purge in rep.purges:
        when = f", requested {shown(purge.at)}" if purge.at else ""
        out.print(
            f"[yellow]Evidence purged: the stored records of item {shown(purge.item)} "
            f"({shown(purge.evalset)}) were removed{when} ({PURGE_LOG} line {purge.line}: "
            f"{shown(purge.reason)}).[/yellow]"
        )
    if rep.segments_missing:
        out.print(
            f"[yellow]Store segments of {shown(rep.rev[:12])} retired by a purge are gone from "
            f"this clone: {shown(', '.join(rep.segments_missing))}; read what the purge kept "
            "of them instead.[/yellow]"
        )
    for lost in rep.lost:
        out.print(f"[yellow]Evidence lost: {shown(lost.describe())}.[/yellow]")
    if rep.lost:
        at = sorted({lost.commit[:12] for lost in rep.lost if lost.commit})
        where = f"reproduce {shown(', '.join(at))} instead" if at else "commit them"
        out.print(
            f"Results at {shown(rep.rev[:12])} rest on DVC objects that never reached a remote, "
            f"so they cannot be reproduced; the results bought again can: {where}."
        )
    if rep.purges and rep.identical:
        out.print(
            "The purged records were read from segments the purge retired, still in this "
            "clone's DVC cache: once `dvc gc` (the purge's next steps) removes them, these "
            "results no longer reproduce in full."
        )
    elif rep.purges:
        out.print(
            "Results recorded before a purge cannot be reproduced in full: the purged "
            f"responses are gone by design. See {PURGE_LOG}; `evalreg run` re-grades the "
            "cells without them once the item is out of the eval set."
        )
    verdict = "identical" if rep.identical else "DIFFERENT"
    cells = plural(len(rep.cells), "cell")
    out.print(f"reproduce {shown(rep.rev[:12])}: {verdict} ({cells} with results)")


def print_range_reproduction(done: RangeReproduction) -> None:
    out = console()
    if not done.revisions:
        out.print(f"reproduce {shown(done.spec)}: no first-parent commit recorded results")
        return
    for rep in done.revisions:
        out.rule(f"{rep.rev[:12]}", style="dim")
        print_reproduction(rep)
    different = [r.rev[:12] for r in done.revisions if not r.identical]
    checked = sum(1 for r in done.revisions for c in r.cells if c.same_as is None)
    shared = sum(1 for r in done.revisions for c in r.cells if c.same_as is not None)
    revisions = plural(len(done.revisions), "revision")
    how = f"{plural(checked, 'cell')} graded, {shared} with evidence already reproduced"
    if different:
        out.print(
            f"reproduce {shown(done.spec)}: DIFFERENT at {shown(', '.join(different))} "
            f"({revisions}; {how})"
        )
    else:
        out.print(f"reproduce {shown(done.spec)}: identical ({revisions}; {how})")


def print_evalset_stats(
    stats: dict[str, list[SliceStats]],
    needed: ItemsNeeded,
    *,
    detect: float,
    baseline: float,
    discordance: float,
) -> None:
    verdict = f"{whole_points(detect)}-pt change"
    # The verdict is about the paired MDE: a narrow terminal leaves the single-rate one out.
    rate = console().width >= _WIDE
    for path, rows in stats.items():
        # A column of zeros says nothing: conversations only where the eval set has some.
        turns = any(r.conversations for r in rows)
        table = _table(f"Slices of {plain(path)}")
        headers = ["slice", "items", *(["conv."] if turns else []), "units"]
        cells: list[list[str | Text]] = [
            [
                plain(r.slice),
                str(r.items),
                *([str(r.conversations)] if turns else []),
                str(r.units),
                *([points(r.mde_rate, signed=False)] if rate else []),
                points(r.mde_paired, signed=False),
                Text("detectable", "green") if r.detectable else Text("too small", "yellow"),
            ]
            for r in rows
        ]
        headers += ["rate MDE"] if rate else []
        _fill(table, [*headers, "paired MDE", verdict], cells, notes=False)
        console().print(table)
    if not rate:
        console().print(
            f"The single-rate MDE of each slice: in a terminal {_WIDE} columns wide, or `--json`.",
            soft_wrap=False,
        )
    console().print(
        f"MDEs (α = 0.05, power 0.8) on independent units (a cluster counts once). "
        f"A slice needs {needed.paired} units to detect a {whole_points(detect)}-point "
        f"difference between two candidates that disagree on {percent(discordance, 0)} of "
        f"items, and {needed.rate} to detect a {whole_points(detect)}-point change of one rate "
        f"from {percent(baseline, 0)}.",
        soft_wrap=False,
    )


def print_init(created: Scaffolded, path: str, *, snippets: bool) -> None:
    """What ``evalreg init`` made in ``path`` (as the user typed it), and the next steps."""
    out = console()
    out.print(f"Initialised an evalreg registry in [bold]{shown(created.root)}[/bold]")
    out.print(f"  DVC remote: {shown(created.remote)}")
    out.print(f"  CI installs: {shown(created.evalreg_spec)}")
    if not snippets:
        out.print("  Snippets: off in pull-request comments (registry/evalreg.yaml)")
    else:
        out.print(
            "  Snippets: pull-request comments quote item text and model output. For a public "
            "repository with private eval data, turn them off: `privacy: {snippets: false}` "
            "in registry/evalreg.yaml (or `evalreg init --no-snippets`)",
            markup=False,
        )
    for warning in created.warnings:
        error_console().print(f"warning: {shown(warning)}")
    if created.push_failed is not None:
        error_console().print(
            f"warning: the example eval set was not pushed to {shown(created.remote)}: "
            f"{shown(created.push_failed)}\n"
            "  CI cannot read it until you run `dvc push` in the new repository."
        )
    out.print("Next steps:")
    out.print(f"  cd {shown(path)}")
    if created.push_failed is not None:
        out.print("  dvc push")
    out.print("  evalreg check")
    out.print("  git add -A && git commit -m 'Start an eval registry'")


def print_evalset_added(added: AddedEvalSet, *, pushed: bool) -> None:
    out = console()
    out.print(
        f"Tracked [bold]{shown(added.path)}[/bold] with DVC: {plural(added.items, 'item')}, md5 "
        f"{added.md5}" + (f", pushed to the {shown(added.remote)}" if pushed else "")
    )
    if added.changes is not None:
        for line in added.changes.lines() or ["no item changed (only the file's bytes)"]:
            out.print(f"  {plain(line)}", markup=False)
    if added.attachments:
        out.print(
            f"Tracked {plural(len(added.attachments), 'attached file')} with DVC too: their "
            ".dvc pointers are listed below."
        )
    print_to_commit("To record this version, commit", list(added.to_commit), added.objects)


def print_to_commit(lead: str, files: list[str], objects: StagedObjects) -> None:
    """The files a command leaves to commit, one a line (`git add` them, then commit), and
    what became of the objects it pushed to a remote inside the repository."""
    out = console()
    if files:
        out.print(Text(f"{lead}:"))
        for rel in files:
            out.print(Text(f"  {plain(rel)}"), soft_wrap=True)
    if objects.staged:
        out.print(
            Text(
                f"({plural(len(objects.staged), 'object')} of the in-repository DVC remote "
                "staged with them: a clone's `dvc pull` reads them from git)"
            )
        )
    err = error_console()
    for ignored in objects.ignored:
        err.print(
            Text(
                plain(
                    f"warning: git ignores {ignored.path} ({ignored.ignored_by}), the object "
                    "a pointer names in the in-repository remote: a clone's `dvc pull` cannot "
                    f"find it. Remove that rule, then `git add {ignored.path}`"
                )
            ),
            soft_wrap=True,
        )
    if objects.error is not None:
        err.print(
            Text(
                plain(
                    "warning: the objects pushed to the in-repository remote are not staged "
                    f"({objects.error}): `evalreg check` names each with its `git add`"
                )
            ),
            soft_wrap=True,
        )


def print_compaction(done: Compaction) -> None:
    if not done.compacted:
        console().print(
            f"Nothing to compact: {plural(done.before, 'segment')}, "
            f"{plural(done.records, 'response')}."
        )
    else:
        console().print(
            f"Compacted {plural(done.before, 'segment')} into {done.segment}: "
            f"{plural(done.records, 'response')}"
            f", {done.dropped} duplicate or torn lines dropped."
        )
        print_to_commit("To commit", list(done.to_commit), done.objects)


def print_resolution(done: Resolution) -> None:
    out = console()
    if done.set_aside:
        out.print(f"Conflicted generated files set aside: {len(done.set_aside)}")
    if done.regraded:
        out.print("Re-graded offline: " + ", ".join(shown(c) for c in done.regraded))
    out.print(f"Report rewritten; {len(done.staged)} generated files staged.")
    if done.still_stale:
        out.print(
            "Still stale (their merged requests were never bought): "
            + ", ".join(shown(c) for c in done.still_stale)
            + ". Run `evalreg run` where the keys are, then commit."
        )
    elif done.merging:
        out.print("Conclude the merge: `git commit`")


def print_selected(done: Selected) -> None:
    """What ``select`` changed; on stderr, the text of the rationale and waiver it replaced
    (quoted whole, escaped: it is what the file said)."""
    console().print(shown(done.note))
    err = error_console()
    if done.rationale is not None:
        err.print(
            Text(plain(f"note: replaced the rationale, which read: {_quoted(done.rationale)}"))
        )
    waiver = done.waiver
    if waiver is not None:
        login = f" ({_quoted(waiver.approver_login)})" if waiver.approver_login else ""
        err.print(
            Text(
                plain(
                    f"note: replaced the waiver for {waiver.candidate}, which read: reason "
                    f"{_quoted(waiver.reason)}, approved by {_quoted(waiver.approver)}{login} "
                    f"on {waiver.date}"
                )
            )
        )


def _quoted(text: str) -> str:
    """File text as one quoted line: line breaks and controls escaped, nothing cut."""
    return json_text(text.rstrip("\n"))


def print_import(result: ImportResult) -> None:
    out = console()
    out.print(f"Wrote {len(result.written)} files:", markup=False)
    for rel in result.written:
        out.print(f"  {plain(rel)}", markup=False)
    # The notes quote the imported config, which is someone else's file.
    for title, lines in (("Not mapped", result.not_mapped), ("To review", result.notes)):
        if lines:
            out.print(f"{title}:", markup=False)
            for line in lines:
                out.print(f"  - {plain(line)}", markup=False)
    out.print("Next steps:", markup=False)
    out.print(f"  evalreg evalset add {plain(result.evalset)}", markup=False)
    out.print("  evalreg check", markup=False)


def print_sample(result: SampleResult) -> None:
    out = console()
    scrubbed = f"scrubbed with {shown(result.scrubber)}" if result.scrubber else "not scrubbed"
    out.print(
        f"Wrote [bold]{shown(result.path)}[/bold]: {plural(result.items, 'item')} from "
        f"{plural(result.rows, 'row')} "
        f"({result.exact_duplicates} exact and {result.near_duplicates} near duplicates removed; "
        f"{scrubbed})"
    )
    for name, stratum in result.strata.items():
        out.print(f"  {shown(name)}: {stratum.sampled} of {stratum.unique} ({stratum.rows} rows)")
    out.print(
        f"Provenance in {shown(result.provenance)}. Review the items, then "
        f"`evalreg evalset add {shown(result.path)}` and commit the pointer and the provenance."
    )


def print_purge(record: PurgeRecord) -> None:
    out = console()
    out.print(
        f"Purged {record.keys_removed} stored records of item {shown(record.item)} "
        f"({shown(record.evalset)}): {record.removed.get('candidate', 0)} candidate "
        f"responses, {record.removed.get('judge', 0)} judge verdicts, no drift records "
        f"(drift checks store none); logged in {PURGE_LOG}."
    )
    if record.segments_removed:
        out.print(
            f"Rewrote {len(record.segments_removed)} store segments into "
            f"{record.segment_written or 'none (they held nothing else)'}."
        )
    if record.push_error:
        out.print(f"[yellow]Push failed[/yellow] ({shown(record.push_error)}): push it later.")
    for note in record.notes:
        out.print(shown(note))
    out.print("Next steps:")
    for step in record.next_steps:
        out.print(f"  {shown(step)}")


def print_item(views: list[ItemView]) -> None:
    """``evalreg show``: per use case, the item, then each candidate's request, output and
    verdicts. Every text from the item, a response or a judge is shown as ``Text`` through
    ``plain``: never read as markup, no escape sequence reaches the terminal."""
    out = console()
    for n, view in enumerate(views):
        if n:
            out.print()
        out.print(_item_heading(view), soft_wrap=False)
        _indented(_item_body(view.item))
        requests: dict[str, str] = {}
        for cand in view.candidates:
            out.print()
            out.rule(_candidate_heading(cand), align="left", style="dim")
            if cand.state == "stale" and cand.samples:
                out.print(
                    Text(
                        plain(
                            f"stale ({'; '.join(cand.reasons)}): the outputs below answered "
                            "the request recorded then (`--json` has it); the request shown "
                            "is what the cell sends now"
                        ),
                        style="yellow",
                    ),
                    soft_wrap=False,
                )
            _print_request(cand, requests)
            if not cand.samples:
                why = "; ".join(cand.reasons) if cand.state == "pending" else "no record"
                out.print(
                    Text(plain(f"No recorded samples ({cand.state}: {why})."), style="dim"),
                    soft_wrap=False,
                )
            for sample in cand.samples:
                _print_sample(sample, len(cand.samples) > 1)


def _item_heading(view: ItemView) -> Text:
    split = " (hold-out)" if view.split == "holdout" else ""
    line = f"line {view.line}" if view.line else "line ?"
    text = Text()
    text.append(plain(view.item.get("id", "")), style="bold")
    text.append(plain(f"  {view.title} ({view.use_case}){split}"))
    text.append(plain(f"\n{view.evalset} {line}, md5 {view.evalset_md5[:12]}, {view.revision}"))
    return text


def _item_body(item: dict[str, Any]) -> Text:

    text = Text()
    tags = ", ".join(item.get("tags", [])) or "none"
    cluster = f"   cluster: {item['cluster']}" if item.get("cluster") else ""
    text.append(plain(f"tags: {tags}{cluster}\n"))
    if "messages" in item:
        text.append("messages:\n", style="bold")
        text.append(plain(_turns(item["messages"])) + "\n")
    else:
        text.append("input: ", style="bold")
        text.append(plain(json.dumps(item.get("input"), indent=2, ensure_ascii=False)) + "\n")
    text.append("expected: ", style="bold")
    text.append(plain(json.dumps(item.get("expected"), indent=2, ensure_ascii=False)))
    if item.get("meta"):
        text.append("\nmeta: ", style="bold")
        text.append(plain(json.dumps(item["meta"], sort_keys=True, ensure_ascii=False)))
    return text


def _turns(messages: list[dict[str, str]]) -> str:
    return "\n".join(f"[{m['role']}] {m['content']}" for m in messages).rstrip()


def _indented(renderable: Any) -> None:
    """Print ``renderable`` indented by two columns, wrapped to the terminal's width, with
    no trailing spaces."""
    from rich.segment import Segment, Segments

    out = console()
    options = out.options.update_width(max(20, out.width - 2))
    for line in out.render_lines(renderable, options, pad=False):
        while line and not line[-1].text.strip():
            line.pop()
        if line:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
            line.insert(0, Segment("  "))
        out.print(Segments([*line, Segment.line()]), end="")


def _candidate_heading(cand: CandidateView) -> Text:
    text = Text(plain(cand.id), style="bold")
    pin = "" if cand.pin == cand.id else f", pin {cand.pin}"
    declared = ", declared" if cand.declared else ""
    text.append(plain(f" ({cand.state}{declared}{pin})"))
    return text


def _print_request(cand: CandidateView, seen: dict[str, str]) -> None:
    """The messages the candidate's prompt renders, once per distinct request; then, for an
    ``http`` pin, the body its service was sent."""
    out = console()
    if cand.messages is None:
        out.print(Text(plain(f"request: {cand.prompt_error}"), style="red"), soft_wrap=False)
        return
    turns = _turns(cand.messages)
    if turns in seen:
        out.print(
            Text(plain(f"request: the same messages as {seen[turns]}"), style="dim"),
            soft_wrap=False,
        )
    else:
        seen[turns] = cand.id
        out.print(Text("request:", style="bold"), soft_wrap=False)
        _indented(Text(plain(turns)))
    if cand.body is not None:
        out.print(Text("body sent to the service:", style="bold"), soft_wrap=False)
        _indented(Text(plain(json.dumps(cand.body, indent=2, ensure_ascii=False))))


def _print_sample(sample: SampleView, several: bool) -> None:
    out = console()
    head = Text()
    if several:
        head.append(f"sample {sample.sample}: ", style="bold")
    if sample.error is not None:
        head.append(plain(f"error: {sample.error}"), style="red")
    else:
        level = sample.level or "no level"
        head.append(plain(level), style=_LEVEL_STYLES.get(level, ""))
        head.append(plain(f", score {number(sample.score)}"))
    tokens = sample.tokens
    usage = f"{tokens['input']} in / {tokens['output']} out"
    if tokens.get("reasoning"):
        usage += f" / {tokens['reasoning']} reasoning"
    cost = usd_micro(sample.cost_micro_usd)
    if sample.judge_cost_micro_usd is not None:
        cost += f" (judge {usd_micro(sample.judge_cost_micro_usd)})"
    head.append(plain(f"; {milliseconds(sample.latency_ms)}, {usage} tokens, {cost}"))
    if sample.model:
        head.append(plain(f"; model {sample.model}"))
    if sample.finish_reason and sample.finish_reason not in ("stop", "end_turn"):
        head.append(plain(f"; finished: {sample.finish_reason}"))
    out.print(head, soft_wrap=False)
    if sample.outdated:
        out.print(
            Text("recorded for an earlier version of this item (its content changed)", "yellow"),
            soft_wrap=False,
        )
    out.print(Text("output:", style="bold"), soft_wrap=False)
    if sample.output is None:
        missing = "no stored response" if sample.key else "no request was made"
        _indented(Text(missing, style="dim"))
    else:
        _indented(Text(plain(sample.output)))
    if sample.tool_calls:
        from evalreg.providers.tools import call_text

        out.print(Text("tool calls:", style="bold"), soft_wrap=False)
        for call in sample.tool_calls:
            _indented(Text(plain(call_text(call))))
    if sample.error is not None:
        return
    critical = any(c.critical for c in sample.criteria)
    table = Table(
        box=None,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        caption="* critical" if critical else None,
        caption_justify="left",
        caption_style="dim",
    )
    table.add_column("criterion", overflow="ellipsis", max_width=26, no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("detail", overflow="fold", ratio=1)
    for c in sample.criteria:
        detail = c.detail
        if c.judge is not None:
            reason = c.judge_reason if c.judge_reason is not None else c.detail
            detail = f"judge {c.judge}: {reason}" if reason else f"judge {c.judge}"
        if c.human:
            grades = ", ".join(f"{r} {'pass' if g else 'fail'}" for r, g in c.human.items())
            detail = f"{detail} ({grades})" if detail else grades
        name = c.id + ("*" if c.critical else "")
        table.add_row(
            Text(plain(name)),
            Text(c.verdict, style=_VERDICT_STYLES.get(c.verdict, "dim")),
            Text(plain(detail)),
        )
    _indented(table)


_LEVEL_STYLES = {"correct": "green", "acceptable": "yellow", "unacceptable": "red"}
_VERDICT_STYLES = {"passed": "green", "failed": "red"}


MAX_LISTED = 24
"""Items a list in the terminal shows before the rest are counted ("… and 12 more")."""
_WIDE = 100
"""From this many columns a terminal is wide enough for every column of a table."""


def _table(title: str) -> Table:
    """A summary table that reads at 80 columns: no vertical rules, two spaces between
    columns, a rule under the header."""
    from rich import box

    return Table(
        title=Text(title),  # ids and paths in it are text, not markup
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        show_edge=False,
    )


def _cell_columns(ids: Sequence[str]) -> tuple[str | None, list[str], list[list[str]]]:
    """Cell ids (``task/candidate``) as table columns: the task when every cell shares it
    (for the title; the rows then show the candidate alone), the column headers, and each
    row's values. With several tasks a task is named on the first row of its cells."""
    split = [cid.partition("/")[::2] for cid in ids]
    tasks = {task for task, _ in split}
    if len(tasks) == 1:
        return next(iter(tasks)), ["candidate"], [[plain(c)] for _, c in split]
    rows = []
    for n, (task, cand) in enumerate(split):
        rows.append([plain(task) if n == 0 or split[n - 1][0] != task else "", plain(cand)])
    return None, ["task", "candidate"], rows


def _widths(headers: list[str], rows: list[list[str | Text]]) -> list[int]:
    """Each column's widest value (or header), in terminal cells."""
    return [
        max([len(header), *(_cell_len(r[k]) for r in rows)]) for k, header in enumerate(headers)
    ]


def _cell_len(value: str | Text) -> int:
    return (Text(value) if isinstance(value, str) else value).cell_len


def _width(headers: list[str], rows: list[list[str | Text]]) -> int:
    """The width of a ``_table`` holding ``rows`` on one line each."""
    return sum(_widths(headers, rows)) + 2 * (len(headers) - 1) + 1


def _fill(
    table: Table, headers: list[str], rows: list[list[str | Text]], *, notes: bool = True
) -> dict[str, int]:
    """Add ``headers`` and ``rows`` to ``table`` so that each row fits on one line of the
    terminal: with ``notes``, a last-column text longer than the room left becomes ``note
    N``, and the notes (text → N) are returned for ``_print_notes``. Every value is plain
    text already; none is read as markup."""
    used = _width(headers[:-1], [r[:-1] for r in rows]) + 2
    room = max(len(headers[-1]), console().width - used)
    noted: dict[str, int] = {}
    for header in headers[:-1]:
        table.add_column(header, overflow="fold")
    table.add_column(headers[-1], overflow="fold", ratio=1)
    for row in rows:
        last = row[-1]
        if notes and isinstance(last, str) and len(last) > room:
            last = f"note {noted.setdefault(last, len(noted) + 1)}"
        table.add_row(*(Text(v) if isinstance(v, str) else v for v in [*row[:-1], last]))
    return noted


def print_round(number: int, items: dict[str, int]) -> None:
    """On stderr, after each round of a sequential run: the items each cell has now."""
    bought = ", ".join(f"{cell} {n:,}" for cell, n in sorted(items.items()))
    sys.stderr.write(plain(f"round {number}: items bought: {bought}") + "\n")


def print_sequential(done: SequentialRun) -> None:
    """What a sequential run did: its last round's table, each use case's state, and for
    each cell it stopped early, where and what it did not buy."""
    out = console()
    if done.final is not None:
        print_run(done.final)
    stop = done.stop
    if stop is None:
        return
    for case in done.cases:
        state = stop.states.get(case.selection_id)
        if state is None:
            continue
        reached = stop.reached[case.selection_id]
        if state.blocked is not None:
            line = f"use case {case.selection_id}: not decided: {state.blocked}"
        elif reached == case.size:
            # Nothing was settled early: the policy decides on every item, as for any run.
            line = (
                f"use case {case.selection_id}: not settled before the last item; every item "
                "bought, and the policy decides as for any run"
            )
        elif not state.decided:
            line = f"use case {case.selection_id}: not decided after {reached:,} items"
        else:
            verdict = (
                f"recommends {state.recommended}"
                if state.recommended is not None
                else "no candidate passes every gate"
            )
            line = (
                f"use case {case.selection_id}: decided on {reached:,} of {case.size:,} items: "
                f"{verdict} (alpha {number(case.params.alpha)})"
            )
        out.print(Text(plain(line)))
    written = {o.plan.status.cell.id: o for o in (done.final.outcomes if done.final else [])}
    for cell, record in sorted(done.stops.items()):
        left = record["of"] - record["items"]
        alphas = sorted({number(u["alpha"]) for u in record["use_cases"].values()})
        line = (
            f"{cell}: decided after {record['items']:,} of {record['of']:,} items "
            f"(alpha {', '.join(alphas)}, betting confidence sequences)"
        )
        outcome = written.get(cell)
        if outcome is not None and outcome.written and record["items"]:
            per_item = outcome.cost_micro_usd / record["items"]
            saved = usd_micro(round(per_item * left))
            responses = left * outcome.plan.status.cell.task.repeats
            line += (
                f"; {plural(responses, 'response')} not bought (about {saved} at this run's "
                "cost, judges included)"
            )
        out.print(Text(plain(line)))
    if done.stops:
        out.print(Text(plain(f"Method: {next(iter(done.stops.values()))['method']}.")))


def _print_notes(notes: dict[str, int]) -> None:
    for text, n in notes.items():
        console().print(Text(f"note {n}: {text}"), soft_wrap=False)


def _print_slices(evalset: str, slices: dict[str, int]) -> None:
    """One eval set's slices with their sizes, largest first, on as few lines as fit."""
    ordered = sorted(slices.items(), key=lambda kv: (-kv[1], kv[0]))
    words = [f"{plural(len(ordered), 'slice')} of {evalset} (items in each):"]
    words += [f"{name} {n}," for name, n in ordered[:MAX_LISTED]]
    more = len(ordered) - MAX_LISTED
    if more > 0:
        words.append(f"… and {more} more (`evalreg evalset stats` lists every slice)")
    else:
        words[-1] = words[-1].rstrip(",")
    _print_wrapped(words)


def _print_wrapped(words: list[str], *, indent: str = "") -> None:
    """``words`` as lines that fit the terminal, broken only between words (a word here
    may hold spaces: a slice and its size, ``common 60``, stay on one line)."""
    import textwrap

    glued = [plain(w).replace(" ", "\u00a0") for w in words]  # textwrap breaks at spaces only
    for line in textwrap.wrap(
        " ".join(glued),
        width=max(20, console().width - 1),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ):
        console().print(Text(line.replace("\u00a0", " ")))


def print_diff(data: DiffDocument) -> None:
    """``evalreg diff`` in a terminal: what must be read first, the decisions, a row per
    cell and its flipped items, from the same document as the Markdown (its texts are the
    pull request's: every one through ``plain``). The Markdown (``--format md``) adds
    slices, configuration changes and the items' text."""
    out = console()
    dirty = " plus uncommitted changes" if data.head.uncommitted is True else ""
    out.print(
        Text(plain(f"Compared: base {_side(data.base)} → head {_side(data.head)}{dirty}")),
        soft_wrap=False,
    )
    reproduced = data.reproduction.status == "reproduced"
    if not reproduced:
        why = data.reproduction.reason or "not stated"
        out.print(
            Text(plain(f"Not reproduced: these numbers are the pull request's own claims ({why})")),
            style="yellow",
            soft_wrap=False,
        )
    if data.mode == "summaries":
        out.print(
            Text("Compared from the committed summaries only: no item is paired or tested"),
            soft_wrap=False,
        )
    if data.check is not None and not data.check.ok:
        out.print(Text("evalreg check failed: `--format md` lists its findings", "red"))
    missing = data.remote_objects.missing if data.remote_objects is not None else []
    for problem, says in (
        (missing, "DVC objects missing from the remote"),
        (data.dvc_remote.changed, "the DVC remote changed"),
        (data.data_unavailable, "DVC data that could not be read here"),
    ):
        if problem:
            out.print(Text(f"Warning: {says} (`--format md` says which)", "red"), soft_wrap=False)
    for warning in data.warnings:
        out.print(Text(plain(f"Evidence changed: {warning}"), style="yellow"), soft_wrap=False)
    if data.selections:
        table = _table("Decisions")
        rows: list[list[str | Text]] = []
        for s in data.selections:
            declared, recommended = s.declared, s.recommended
            rows.append(
                [
                    plain(s.use_case),
                    plain(f"{declared[0]} → {declared[1]}"),
                    plain(f"{recommended[0] or 'none'} → {recommended[1] or 'none'}"),
                    "yes" if s.waiver[1] else "no",
                ]
            )
        _fill(table, ["use case", "declared", "policy recommends", "waiver"], rows, notes=False)
        out.print(table)
    _print_diff_cells(data.cells, reproduced)
    out.print(
        Text(
            "Slices, configuration changes and the flipped items' text: "
            "`evalreg diff --format md` (the pull-request comment's Markdown)."
        ),
        style="dim",
        soft_wrap=False,
    )


def _print_diff_cells(cells: list[CellChange], reproduced: bool) -> None:
    """The diff's row per cell, then each cell's flipped items, listed."""
    from evalreg.report.diff_markdown import cell_verdict

    task, cell_headers, cell_rows = _cell_columns([c.id for c in cells])
    table = _table("Cells" + (f" of {plain(task)}" if task else ""))
    rows: list[list[str | Text]] = []
    for cell, entry in zip(cell_rows, cells, strict=True):
        b, h = entry.overall.base, entry.overall.head
        flips = entry.flips
        moved = (
            f"{count(flips.regressions_total)}/{count(flips.improvements_total)}"
            if flips is not None
            else "–"
        )
        rows.append(
            [
                *cell,
                plain(entry.status),
                f"{percent(b.pass_rate if b else None)} → {percent(h.pass_rate if h else None)}",
                moved,
                plain(cell_verdict(entry, reproduced, esc=_terminal_text)),
            ]
        )
    headers = [*cell_headers, "status", "pass rate", "reg./imp.", "verdict"]
    notes = _fill(table, headers, rows)
    console().print(table)
    _print_notes(notes)
    for entry in cells:
        if entry.flips is None:
            continue
        for listed, total, title in (
            (entry.flips.regressions, entry.flips.regressions_total, "Regressions"),
            (entry.flips.improvements, entry.flips.improvements_total, "Improvements"),
        ):
            if not listed:
                continue
            words = [f"{title} of {entry.id} ({count(total)}):"]
            words += [f"{f.item} {f.base_level} → {f.head_level}," for f in listed[:MAX_LISTED]]
            more = total - len(words) + 1
            if more > 0:
                words.append(f"… and {more} more")
            else:
                words[-1] = words[-1].rstrip(",")
            _print_wrapped(words)


def _side(side: DiffSide) -> str:
    sha = side.commit
    text = sha[:12] if sha is not None else side.label
    subject = side.subject
    if subject is not None and subject.strip():
        short = subject if len(subject) <= 60 else subject[:59] + "…"
        text += f" “{short}”"
    return text


def _terminal_text(value: object) -> str:
    return plain(value) if value is not None else "–"
