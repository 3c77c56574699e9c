"""Grade a long run of one cell's samples in several processes, one contiguous chunk each.

Re-grading a large cell (``run --offline --force``, a grader change over stored responses)
is CPU-bound Python: one process grades some 10,000 samples a second. The samples are
split at item boundaries into one chunk per CPU; forked workers grade all chunks but the
first (they inherit the loaded registry, store and grader, so nothing is sent to them),
the calling process grades the first, and the chunks' lines and tallies are then added in
order. The files are byte for byte those one process writes: ``CellTally.merge`` is
exact, and each record depends only on its own sample.

Forking (``evalreg.runner._forked``) is used only on Linux; elsewhere, and for short runs, the
caller grades alone.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Callable, Sequence
from typing import BinaryIO

from evalreg.registry import schema
from evalreg.results.records import ItemRecord, item_line
from evalreg.results.tally import CellTally
from evalreg.runner import _forked as forked

_SPOOL_BYTES = 1 << 20

Sample = tuple[schema.Item, int, str]
Grade = Callable[[schema.Item, int, str], ItemRecord]


def chunks(samples: Sequence[Sample], parts: int) -> list[list[Sample]]:
    """``samples`` in at most ``parts`` contiguous chunks of similar size, each ending at
    an item boundary (an item's samples are never split)."""
    out: list[list[Sample]] = []
    size = -(-len(samples) // max(1, parts))
    start = 0
    while start < len(samples):
        end = min(start + size, len(samples))
        while end < len(samples) and samples[end][0] is samples[end - 1][0]:
            end += 1
        out.append(list(samples[start:end]))
        start = end
    return out


def grade_chunk(
    samples: Sequence[Sample], grade: Grade, criteria: list[str], out: BinaryIO
) -> CellTally:
    """Grade ``samples`` here: their items-file lines go to ``out``; return their tally."""
    tally = CellTally(criteria)
    # One growing buffer, as in ``CellWriter``: a list of the lines held 4.6 KB a sample
    # in allocator slack (measured), several times their length.
    buffer = bytearray()
    for item, sample, key in samples:
        record = grade(item, sample, key)
        tally.add(record)
        buffer += item_line(record)
        buffer += b"\n"
        if len(buffer) >= _SPOOL_BYTES:
            out.write(buffer)
            buffer.clear()
    out.write(buffer)
    out.flush()
    return tally


def grade_all(
    samples: Sequence[Sample],
    grade: Grade,
    criteria: list[str],
    add: Callable[[ItemRecord], None],
    add_graded: Callable[[BinaryIO, CellTally], None],
) -> None:
    """Grade ``samples`` in order: records graded here go to ``add`` one by one, chunks
    graded by workers to ``add_graded`` (a file of their lines, and their tally), each
    after all before it."""
    pieces = chunks(samples, forked.parts(len(samples)))
    if len(pieces) < 2:  # short, or all one item's samples
        for item, sample, key in samples:
            add(grade(item, sample, key))
        return
    with contextlib.ExitStack() as files:
        # Each worker writes its lines to a nameless file it inherits, rather than sending
        # them back: this process never holds a chunk's lines (nor their pickle) at once.
        spools = [files.enter_context(tempfile.TemporaryFile()) for _ in pieces]
        work = functools.partial(_grade_piece, pieces, grade, criteria, spools)
        with forked.forked(work, len(pieces)) as done:
            for item, sample, key in pieces[0]:
                add(grade(item, sample, key))
            for i in range(1, len(pieces)):
                tally = done(i)
                spools[i].seek(0)
                add_graded(spools[i], tally)


def _grade_piece(
    pieces: list[list[Sample]],
    grade: Grade,
    criteria: list[str],
    spools: Sequence[BinaryIO],
    index: int,
) -> CellTally:
    return grade_chunk(pieces[index], grade, criteria, spools[index])
