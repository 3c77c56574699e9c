"""Terminal rendering of command results: rich tables on stdout, findings on stderr.

Text evalreg does not control (a provider's error, item text, model output, what a
registry, results or log file says) reaches the terminal only through ``plain``, or
``shown`` inside rich markup.
"""

from __future__ import annotations

import sys
from collections import Counter
from functools import cache
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from evalreg.redaction import redact
from evalreg.registry.diagnostics import Severity
from evalreg.report.escape import strip_controls
from evalreg.report.numbers import (
    coverage_text,
    percent,
    plural,
    points,
    usd_micro,
    whole_points,
)
from evalreg.store.purge_log import PURGE_LOG

if TYPE_CHECKING:
    from evalreg.check import CheckResult
    from evalreg.evalsets.sampling import SampleResult
    from evalreg.evalsets.slice_sizes import ItemsNeeded, SliceStats
    from evalreg.evalsets.tracking import AddedEvalSet
    from evalreg.gitops.merging import Resolution
    from evalreg.importers import ImportResult
    from evalreg.providers.fetch import FetchReport
    from evalreg.results.freshness import CellStatus
    from evalreg.runner.reproduce import Reproduction
    from evalreg.runner.run import CellPlan, RunResult
    from evalreg.scaffold import Scaffolded
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
    counts = Table(title="Registry", show_header=False, title_justify="left")
    for name, value in result.counts.items():
        counts.add_row(name, str(value))
    out.print(counts)
    if result.use_cases:
        table = Table(title="Use cases", title_justify="left")
        for column in ("selection", "task", "eval set", "items", "candidates", "declared"):
            table.add_column(column, overflow="fold")
        for row in result.use_cases:
            table.add_row(
                row.selection,
                row.task,
                shown(row.evalset),
                str(row.items),
                str(row.candidates),
                row.selected,
            )
        out.print(table)
        slices = Table(title="Slices", title_justify="left")
        for column in ("eval set", "slice", "items"):
            slices.add_column(column, overflow="fold")
        seen = set()
        for row in result.use_cases:
            if row.evalset in seen:
                continue
            seen.add(row.evalset)
            for name, n in row.slices.items():
                slices.add_row(shown(row.evalset), shown(name), str(n))
        out.print(slices)
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


def print_status(statuses: list[CellStatus]) -> None:
    table = Table(title="Cells", title_justify="left")
    for column in ("cell", "state", "why"):
        table.add_column(column, overflow="fold")
    colors = {"fresh": "green", "stale": "yellow", "pending": "cyan"}
    for st in statuses:
        table.add_row(
            st.cell.id, Text(st.state, style=colors[st.state]), shown("; ".join(st.reasons))
        )
    console().print(table)


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
    table = Table(title="Dry run: what would run" if dry_run else "Run", title_justify="left")
    judged = result.judge_requests > 0
    columns = ["cell", "state", "to buy", "est. cost"]
    columns += ["judge req.", "judge est."] if judged else []
    columns += ["why"] if dry_run else ["errors", "cost", "result"]
    for column in columns:
        table.add_column(column, overflow="fold")
    outcomes = {o.plan.status.cell.id: o for o in result.outcomes}
    for plan in result.plans:
        st = plan.status
        row = [st.cell.id, st.state, str(plan.missing), usd_micro(plan.estimated_micro_usd)]
        if judged:
            row += [str(plan.judge_requests), usd_micro(plan.judge_estimated_micro_usd)]
        blocked = f"pending: {plan.blocked}" if plan.blocked else ""
        if dry_run:
            tokens = [f"estimate: {plan.output_tokens}"] if plan.output_tokens else []
            if plan.judge_output_tokens:
                tokens.append(f"judge estimate: {plan.judge_output_tokens}")
            row.append(shown("; ".join([*st.reasons, *([blocked] if blocked else []), *tokens])))
        else:
            o = outcomes.get(st.cell.id)
            if o is not None:
                result_text = "written" if o.written else (blocked or o.note)
                cost = usd_micro(o.cost_micro_usd)
                if o.judge_cost_micro_usd:
                    cost += f" (judge {usd_micro(o.judge_cost_micro_usd)})"
                row += [str(o.errors), cost, shown(result_text)]
        table.add_row(*row)
    out.print(table)
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
        out.print("Nothing to run: every cell is fresh.")
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
        # A pin whose endpoint is down, or that refused its first request, fails every
        # remaining request alike: one line each.
        unreachable: dict[str, tuple[str, int]] = {}
        errors = []
        for error in [e for r in both for e in r.errors]:
            if error.kind in ("unreachable", "refused"):
                message, count = unreachable.get(error.pin_id, (error.message, 0))
                unreachable[error.pin_id] = message, count + 1
            else:
                errors.append(error)
        for message, count in unreachable.values():
            error_console().print(
                Text(plain(f"error: {message}; {plural(count, 'request')} not sent"))
            )
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
            out.print(f"{cell.cell}: identical")
        else:
            out.print(f"[red]{cell.cell}: {len(cell.differences)} differences[/red]")
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


def print_evalset_stats(
    stats: dict[str, list[SliceStats]],
    needed: ItemsNeeded,
    *,
    detect: float,
    baseline: float,
    discordance: float,
) -> None:
    table = Table(title="Eval-set slices", title_justify="left")
    for column in (
        "eval set",
        "slice",
        "items",
        "conversations",
        "units",
        "MDE rate",
        "MDE paired",
        "verdict",
    ):
        table.add_column(column, overflow="fold")
    for path, rows in stats.items():
        for s in rows:
            table.add_row(
                shown(path),
                Text(plain(s.slice)),
                str(s.items),
                str(s.conversations),
                str(s.units),
                points(s.mde_rate, signed=False),
                points(s.mde_paired, signed=False),
                s.verdict,
            )
    console().print(table)
    console().print(
        f"MDEs (α = 0.05, power 0.8) on independent units (a cluster counts once). "
        f"A slice needs {needed.paired} units to detect a {whole_points(detect)}-point "
        f"difference between two candidates that disagree on {percent(discordance, 0)} of "
        f"items, and {needed.rate} to detect a {whole_points(detect)}-point change of one rate "
        f"from {percent(baseline, 0)}."
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
    out.print(f"Commit {shown(added.path)}.dvc (and .gitignore) to record this version.")


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
            f", {done.dropped} duplicate or torn lines dropped. Commit reports/store/."
        )


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
