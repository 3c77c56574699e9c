"""Grade a long run of one cell's samples in several processes, one contiguous chunk each.

Re-grading a large cell (``run --offline --force``, a grader change over stored responses)
is CPU-bound Python: one process grades some 10,000 samples a second. The samples are
split at item boundaries into one chunk per CPU; forked workers grade all chunks but the
first (they inherit the loaded registry, store and grader, so nothing is sent to them),
the calling process grades the first, and the chunks' lines and tallies are then added in
order. The files are byte for byte those one process writes: ``CellTally.merge`` is
exact, and each record depends only on its own sample.

Forking (``evalreg.forked``) is used only on Linux; elsewhere, and for short runs, the
caller grades alone.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, overload

from evalreg import forked
from evalreg.registry import schema
from evalreg.results.records import ItemRecord, item_line
from evalreg.results.tally import CellTally
from evalreg.store.keycolumn import KeyColumn

_SPOOL_BYTES = 1 << 20

Sample = tuple[schema.Item, int, str]
Stored = dict[str, Any] | None
Grade = Callable[[schema.Item, int, str, Stored], ItemRecord]
"""Grade a sample, given its stored record (None: none is stored)."""
Read = Callable[[Sequence[str]], list[Stored]]
"""The stored records of a batch of keys (``ResponseStore.get_many``)."""

_BATCH = 512
"""Samples whose stored records are read together."""


def graded(samples: Sequence[Sample], grade: Grade, read: Read) -> Iterator[ItemRecord]:
    """The record of each of ``samples``, in order, their stored records read a batch at
    a time (one search of the store's index for the batch)."""
    for start in range(0, len(samples), _BATCH):
        batch = samples[start : start + _BATCH]
        keys = batch.keys_of() if isinstance(batch, Samples) else [key for _, _, key in batch]
        for (item, sample, key), stored in zip(batch, read(keys), strict=True):
            yield grade(item, sample, key, stored)


class Samples(Sequence[Sample]):
    """Samples ``start`` to the end of a cell's plan, as (item, sample, key): sample ``i``
    is ``items[i // repeats]``, ``i % repeats``, ``keys[i]``. A view, so that a million
    samples to grade hold no tuple each; slices are views too."""

    def __init__(
        self,
        items: Sequence[schema.Item],
        keys: Sequence[str],
        repeats: int,
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        self.items, self.keys, self.repeats = items, keys, repeats
        self.start = start
        self.stop = len(keys) if stop is None else stop

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def keys_of(self) -> Sequence[str]:
        """The keys of these samples, in order: a column of digests when the plan's keys
        are one (the store searches digests as they are)."""
        if isinstance(self.keys, KeyColumn):
            return self.keys.part(self.start, self.stop)
        return self.keys[self.start : self.stop]

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> Samples: ...

    def __getitem__(self, index: int | slice) -> Sample | Samples:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a view of samples has no step")
            return Samples(
                self.items, self.keys, self.repeats, self.start + start, self.start + stop
            )
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        at = self.start + index
        return self.items[at // self.repeats], at % self.repeats, self.keys[at]

    def __iter__(self) -> Iterator[Sample]:
        keys, repeats = self.keys, self.repeats
        at, stop = self.start, self.stop
        if at >= stop:
            return
        # The items iterated, not indexed a sample at a time: an eval set read back from
        # its file reads a block of them at once (``FileItems``). So are the keys: a
        # column spells a block at once, not a key at a time.
        spelled: Sequence[str] = ()
        base = at
        for item in self.items[at // repeats : (stop - 1) // repeats + 1]:
            for sample in range(at % repeats, min(repeats, stop - at + at % repeats)):
                if at - base == len(spelled):
                    base, spelled = at, keys[at : min(stop, at + _BATCH)]
                yield item, sample, spelled[at - base]
                at += 1


def chunks(samples: Sequence[Sample], parts: int) -> list[Sequence[Sample]]:
    """``samples`` in at most ``parts`` contiguous chunks (slices) of similar size, each
    ending at an item boundary (an item's samples are never split)."""
    out: list[Sequence[Sample]] = []
    size = -(-len(samples) // max(1, parts))
    start = 0
    while start < len(samples):
        end = min(start + size, len(samples))
        while end < len(samples) and samples[end][0] is samples[end - 1][0]:
            end += 1
        out.append(samples[start:end])
        start = end
    return out


def grade_chunk(
    samples: Sequence[Sample], grade: Grade, read: Read, criteria: list[str], out: BinaryIO
) -> CellTally:
    """Grade ``samples`` here: their items-file lines go to ``out``; return their tally."""
    tally = CellTally(criteria)
    # One growing buffer, as in ``CellWriter``: a list of the lines held 4.6 KB a sample
    # in allocator slack (measured), several times their length.
    buffer = bytearray()
    for record in graded(samples, grade, read):
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
    read: Read,
    criteria: list[str],
    add: Callable[[ItemRecord], None],
    add_graded: Callable[[BinaryIO, CellTally], None],
) -> None:
    """Grade ``samples`` in order (``read``: their stored records, a batch of keys at a
    time): records graded here go to ``add`` one by one, chunks graded by workers to
    ``add_graded`` (a file of their lines, and their tally), each after all before it."""
    pieces = chunks(samples, forked.parts(len(samples)))
    if len(pieces) < 2:  # short, or all one item's samples
        for record in graded(samples, grade, read):
            add(record)
        return
    with contextlib.ExitStack() as files:
        # Each worker writes its lines to a nameless file it inherits, rather than sending
        # them back: this process never holds a chunk's lines (nor their pickle) at once.
        spools = [files.enter_context(tempfile.TemporaryFile()) for _ in pieces]
        work = functools.partial(_grade_piece, pieces, grade, read, criteria, spools)
        with forked.forked(work, len(pieces)) as done:
            for record in graded(pieces[0], grade, read):
                add(record)
            for i in range(1, len(pieces)):
                tally = done(i)
                spools[i].seek(0)
                add_graded(spools[i], tally)


def _grade_piece(
    pieces: list[Sequence[Sample]],
    grade: Grade,
    read: Read,
    criteria: list[str],
    spools: Sequence[BinaryIO],
    index: int,
) -> CellTally:
    return grade_chunk(pieces[index], grade, read, criteria, spools[index])
