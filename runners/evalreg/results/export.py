"""The outputs table of a use case, the one definition of its columns: a row a sample of
each candidate with results, its response's text beside its recorded level and verdicts.

Read from one version of the repository (the working tree, or a revision through git and
DVC) a cell at a time and a batch of records at a time, so a table of 100,000s of rows is
never held: ``evalreg export`` writes the rows as they come (``report.export_file``).
Nothing is bought and nothing is re-graded. Output and error text is redacted as everything
written is (the task's ``redact`` fields of the output, and secrets): a model's output is
untrusted text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from evalreg.evalsets.privacy import redact_output
from evalreg.redaction import current
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.results.freshness import CellStatus, require_use_case, status, use_case_status
from evalreg.results.records import ItemRecord, RecordsSource, records_source, stream_records
from evalreg.store.segments import ResponseStore

LEADING = ("use_case", "item", "tags", "candidate", "sample", "output", "level")
TRAILING = ("latency_ms", "input_tokens", "output_tokens", "cost_usd", "error")
CRITERION = "criterion:"
"""A criterion's column is its id after this prefix (``criterion:valid_json``)."""
NUMBERS = frozenset({"sample", "latency_ms", "input_tokens", "output_tokens", "cost_usd"})
"""The columns that hold numbers: every other one holds text (or nothing)."""
PASS, FAIL = "pass", "fail"
"""A criterion's verdict in a table's cell; an empty cell: it does not apply to the item's
slices, or did not grade the sample (an error, too few human grades)."""
_BATCH = 2048
"""Records whose responses are read from the store together."""


def columns(criteria: Sequence[str]) -> tuple[str, ...]:
    """The table's columns, in order, for a rubric's criteria (ids, in the rubric's order)."""
    return (*LEADING, *(CRITERION + c for c in criteria), *TRAILING)


def usd(micro: int) -> str:
    """Micro-dollars as exact decimal dollars, without trailing zeros (``0.000012``, ``0``)."""
    sign = "-" if micro < 0 else ""
    whole, fraction = divmod(abs(micro), 1_000_000)
    return f"{sign}{whole}.{fraction:06d}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class OutputRow:
    """One sample of one candidate, as the table holds it."""

    use_case: str
    item: str
    tags: tuple[str, ...]
    """Sorted."""
    candidate: str
    sample: int
    output: str | None
    """The response's text, redacted; None when the sample has none (an error, or a
    response no longer stored)."""
    level: str | None
    verdicts: tuple[bool | None, ...]
    """Per criterion of the table, in its order: passed, failed, or None (no verdict)."""
    latency_ms: int | None
    """None when the response was bought through a batch API, which measures none."""
    input_tokens: int
    output_tokens: int
    cost_micro_usd: int
    error: str | None
    """Why the sample has no verdicts (a provider, store or judge error), redacted."""

    def cells(self) -> tuple[str, ...]:
        """The row as text, a cell a column of ``columns`` ("" for nothing): what a CSV
        file holds."""
        return (
            self.use_case,
            self.item,
            " ".join(self.tags),
            self.candidate,
            str(self.sample),
            self.output or "",
            self.level or "",
            *("" if v is None else PASS if v else FAIL for v in self.verdicts),
            "" if self.latency_ms is None else str(self.latency_ms),
            str(self.input_tokens),
            str(self.output_tokens),
            usd(self.cost_micro_usd),
            self.error or "",
        )

    def fields(self, criteria: Sequence[str]) -> dict[str, Any]:
        """The row as a JSON object, its keys in the columns' order: the tags a list, the
        verdicts one object (``{criterion: true | false | null}``) and numbers as numbers."""
        return {
            "use_case": self.use_case,
            "item": self.item,
            "tags": list(self.tags),
            "candidate": self.candidate,
            "sample": self.sample,
            "output": self.output,
            "level": self.level,
            "criteria": dict(zip(criteria, self.verdicts, strict=True)),
            "latency_ms": self.latency_ms,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_micro_usd / 1_000_000,
            "error": self.error,
        }


@dataclass(frozen=True)
class OutputsTable:
    """One use case's outputs: its columns, and its rows read on demand (``rows``), cell
    after cell in the order of its candidates, each cell's in its items file's order (item
    id, then sample)."""

    use_case: str
    criteria: tuple[str, ...]
    """The rubric's criterion ids, in its order."""
    pending: list[CellStatus]
    """Cells without results (never run): no rows."""
    stale: list[CellStatus]
    """Cells whose results were recorded before a change to what they rest on: their rows
    are those results."""
    sources: list[tuple[CellStatus, RecordsSource]]
    """The cells with results, in the order of the candidates, and where their records are."""
    store: ResponseStore

    @property
    def columns(self) -> tuple[str, ...]:
        return columns(self.criteria)

    def rows(self) -> Iterator[OutputRow]:
        for st, source in self.sources:
            records = stream_records(source)
            while batch := list(islice(records, _BATCH)):
                yield from self._rows(st, batch)

    def _rows(self, st: CellStatus, batch: list[ItemRecord]) -> Iterator[OutputRow]:
        keys = [k for r in batch if (k := r["key"])]
        found = dict(zip(keys, self.store.get_many(keys), strict=True))
        fields = st.cell.task.redact
        redactor = current()
        candidate = st.cell.candidate.id
        for record in batch:
            key = record["key"]
            output = _text(found.get(key)) if key else None
            if output is not None:
                output = redactor.text(redact_output(output, fields))
            error = record["error"]
            verdicts = record["criteria"]
            tokens = record["tokens"]
            yield OutputRow(
                use_case=self.use_case,
                item=record["item"],
                tags=tuple(sorted(record["tags"])),
                candidate=candidate,
                sample=record["sample"],
                output=output,
                level=record["level"],
                verdicts=tuple(
                    v["passed"] if (v := verdicts.get(c)) is not None else None
                    for c in self.criteria
                ),
                latency_ms=None if record.get("batch") else record["latency_ms"],
                input_tokens=tokens["input"],
                output_tokens=tokens["output"],
                cost_micro_usd=record["cost_micro_usd"],
                error=None if error is None else redactor.text(error),
            )


def _text(stored: dict[str, Any] | None) -> str | None:
    """A stored record's response text, or None."""
    response = stored.get("response") if stored is not None else None
    text = response.get("text") if isinstance(response, dict) else None
    return text if isinstance(text, str) else None


def outputs_table(registry: Registry, use_case: str, store: ResponseStore) -> OutputsTable:
    """``use_case``'s outputs table in ``registry``'s tree, its responses read from
    ``store``. Where each cell's records are is settled here (a copy DVC must fetch is
    fetched now), so that a missing one stops the export before a row is written."""
    task = registry.tasks[registry.selections[use_case].task]
    statuses = use_case_status(registry, status(registry), use_case)
    sources = []
    pending = []
    for st in statuses:
        source = None if st.state == "pending" else records_source(registry.tree, st.cell)
        if source is None:
            pending.append(st)
        else:
            sources.append((st, source))
    return OutputsTable(
        use_case=use_case,
        criteria=tuple(c.id for c in registry.rubrics[task.rubric].criteria),
        pending=pending,
        stale=[st for st, _ in sources if st.state == "stale"],
        sources=sources,
        store=store,
    )


def outputs_at(root: Path, use_case: str, *, rev: str | None = None) -> OutputsTable:
    """``outputs_table`` of ``use_case``, read from the working tree or revision ``rev``
    (``UsageError`` for an unknown use case or revision)."""
    tree: Tree = GitTree(root, rev) if rev else WorkspaceTree(root)
    registry = load_registry(tree)
    require_use_case(registry, use_case)
    return outputs_table(registry, use_case, ResponseStore.load(tree))
