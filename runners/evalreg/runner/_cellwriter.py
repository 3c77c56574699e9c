"""Write one cell's result files while it is graded, holding no per-item records.

Each record's line goes to a temporary items file as soon as it is graded (its md5
updated on the way) and into a ``CellTally``; at the end the summary is written to a
temporary file beside it, and the run's closing step (``journal.Journal.commit``) moves
both into place. The bytes are those of ``records.items_bytes``
and ``tally.summary_for`` for the same records, which must arrive in (item, sample)
order.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from evalreg.cells import Cell
from evalreg.evalsets.evalset import EvalSet
from evalreg.results.freshness import CellStatus
from evalreg.results.records import (
    CellSummary,
    ItemRecord,
    SequentialStop,
    item_line,
    summary_bytes,
)
from evalreg.results.tally import CellTally
from evalreg.store.journal import Staged

_FLUSH_BYTES = 1 << 20


class CellWriter:
    """Streams a cell's items file and tallies its summary; ``finish`` writes both under
    temporary names (``tmp_name`` of the repository-relative path) for the closing step.

    Used as a context manager: leaving the block without ``finish`` (an error while
    grading) removes the temporary files and leaves the cell's previous results untouched.
    """

    def __init__(self, root: Path, cell: Cell, tmp_name: Callable[[str], str]) -> None:
        self.cell = cell
        self.root = root
        self.tmp_name = tmp_name
        self.path = root / cell.items_path
        self.made = [d for d in (self.path.parent, *self.path.parent.parents) if not d.exists()]
        """Directories this writer creates: removed again (if empty) when it is abandoned."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = root / tmp_name(cell.items_path)
        self.summary_tmp = root / tmp_name(cell.summary_path)
        self.staged: tuple[Staged, Staged] | None = None
        self.file = self.tmp.open("wb")
        self.md5 = hashlib.md5(usedforsecurity=False)
        self.tally = CellTally([c.id for c in cell.rubric.criteria])
        # One buffer rather than a list of lines: each encoded line, kept as its own bytes
        # object, holds several times its length in allocator slack.
        self.pending = bytearray()

    def add(self, record: ItemRecord) -> None:
        self.tally.add(record)
        line = item_line(record)
        self.pending += line
        self.pending += b"\n"
        if len(self.pending) >= _FLUSH_BYTES:
            self._flush()

    def add_graded(self, lines: BinaryIO, tally: CellTally) -> None:
        """Add records graded elsewhere: a file of their lines (each ending in a newline),
        read to its end, and their tally. They follow every record added so far."""
        self._flush()
        self.tally.merge(tally)
        while chunk := lines.read(_FLUSH_BYTES):
            self.md5.update(chunk)
            self.file.write(chunk)

    def _flush(self) -> None:
        if self.pending:
            self.md5.update(self.pending)
            self.file.write(self.pending)
            self.pending.clear()

    def finish(
        self, status: CellStatus, evalset: EvalSet, stop: SequentialStop | None = None
    ) -> CellSummary:
        """Write the items file and the summary under their temporary names (``staged``
        says where they go); return the summary. ``stop``: where a sequential run stopped
        buying the cell's items, when it did before the last."""
        self._flush()
        self.file.close()
        summary = self.tally.summary(
            self.cell,
            status.fingerprint,
            status.parts,
            evalset.path,
            evalset.md5,
            self.md5.hexdigest(),
        )
        if stop is not None:
            summary["sequential"] = stop
        self.summary_tmp.write_bytes(summary_bytes(summary))
        cell = self.cell
        self.staged = (
            Staged(self.tmp_name(cell.items_path), cell.items_path),
            Staged(self.tmp_name(cell.summary_path), cell.summary_path),
        )
        return summary

    def __enter__(self) -> CellWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.file.closed:
            self.file.close()
        if kind is None and self.staged is not None:
            return  # the closing step moves them into place, or the journal removes them
        self.tmp.unlink(missing_ok=True)
        self.summary_tmp.unlink(missing_ok=True)
        if not self.path.exists():
            for directory in self.made:
                with contextlib.suppress(OSError):
                    directory.rmdir()
