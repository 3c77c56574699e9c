"""Terminal rendering of command results: rich tables on stdout, findings on stderr."""

from __future__ import annotations

import sys
from functools import cache

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalreg.check import CheckResult
from evalreg.registry.diagnostics import Severity


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
        err.print(Text(finding.render(), style=style))
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
                row.evalset,
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
                slices.add_row(row.evalset, name, str(n))
        out.print(slices)
    by = {s: sum(f.severity is s for f in result.findings) for s in Severity}
    code = result.exit_code(strict=strict)
    verdict = {
        0: "[green]ok[/green]",
        1: "[yellow]findings[/yellow]",
        2: "[red]unusable input[/red]",
    }[code]
    out.print(
        f"check: {verdict} ({by[Severity.ERROR]} errors, {by[Severity.FINDING]} findings, "
        f"{by[Severity.WARNING]} warnings)"
    )
    sys.stdout.flush()
