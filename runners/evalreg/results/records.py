"""Cell results: the per-item record and the cell summary (the two data contracts every
stage after grading reads), and their canonical files.

Canonical means: sorted keys, items in id order, no wall-clock time, no absolute paths,
integers where possible (micro-dollars, milliseconds), floats rounded to 6 places, no NaN.
Grading the same responses twice gives byte-identical files. The summary is computed in
one place, ``results.tally``.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NotRequired, TypedDict, cast

import orjson

from evalreg.canonical import canonical_bytes, loads_finite
from evalreg.cells import Cell
from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import Tree
from evalreg.store.segments import collection_paused, load_json


class Tokens(TypedDict):
    """Tokens a response used (or a slice's responses, summed)."""

    input: int
    output: int
    reasoning: int


class CriterionVerdict(TypedDict):
    """One criterion's verdict on one sample."""

    passed: bool
    score: float
    detail: str


class ItemRecord(TypedDict):
    """One sample's line in a cell's items file (``runner.grading.CellGrader.record``)."""

    item: str
    content: str
    """The item's content hash (``evalsets.evalset.item_content``)."""
    sample: int
    tags: list[str]
    """Sorted."""
    cluster: str | None
    key: str | None
    """The response's key in the store; None when the sample has no request."""
    error: str | None
    """Why the sample has no verdicts (a provider, store or judge error), or None."""
    criteria: dict[str, CriterionVerdict]
    """The verdicts of the criteria that graded the sample, by criterion id; empty for an
    error."""
    level: str | None
    score: float
    latency_ms: int
    """How long the response took; 0 and not counted in any latency figure when it was
    bought through a batch API (``batch``)."""
    batch: NotRequired[bool]
    """Present (true) only when the response was bought through a batch API, which
    measures no latency."""
    tokens: Tokens
    cost_micro_usd: int
    """The candidate's response at its pin's price (0 when there is none)."""
    ungraded: NotRequired[list[str]]
    """The criteria that apply but did not grade the sample (a human criterion with too few
    grades for the response), sorted: present only when some did not."""
    judge_cost_micro_usd: NotRequired[int]
    """What the judges' responses for the sample cost: present only when a judge graded it
    (or failed to)."""
    tool_calls: NotRequired[list[str]]
    """The names of the tools the response called, in its order: present only when it
    called some (the calls themselves, arguments included, are in the stored response)."""


class CriterionCounts(TypedDict):
    """A criterion's entry in a slice's aggregate."""

    applicable: int
    """The samples it gave a verdict on."""
    passed: int
    ungraded: NotRequired[int]
    """The samples it applies to without a verdict: written only when non-zero, so rubrics
    graded in full keep their bytes."""


class Latency(TypedDict):
    """Nearest-rank percentiles of the graded samples' latencies, in milliseconds."""

    p50: int
    p95: int


class SliceAggregate(TypedDict):
    """The totals of one slice of a cell (or of all its samples)."""

    samples: int
    items: int
    graded: int
    errors: int
    levels: dict[str, int]
    """Graded samples per level of ``LEVELS`` (every level present)."""
    criteria: dict[str, CriterionCounts]
    score_sum: float
    latency_ms: Latency
    """Over graded samples with a measured latency (not those bought in a batch)."""
    batched: NotRequired[int]
    """Graded samples bought through a batch API (no latency measured): present only when
    some were."""
    tokens: Tokens
    """Over graded samples."""
    cost_micro_usd: int
    """The candidate's cost over graded samples: what production pays, where there is no
    judge."""
    judge_cost_micro_usd: NotRequired[int]
    """The judge's responses for the slice: present only for a slice a judge graded."""
    spend_micro_usd: NotRequired[int]
    """What the eval spent on the slice, present with ``judge_cost_micro_usd``: the
    candidate's response to every sample (one whose judge failed included) and every judge
    response, each at its own pin's price."""


class CellRef(TypedDict):
    task: str
    candidate: str
    pin: str


class FileRef(TypedDict):
    path: str
    md5: str


class SampleColumns(TypedDict):
    """Every sample's level and criterion verdicts, one character each, in items-file
    order (item id, then sample): what metrics and paired comparisons need, without the
    records."""

    levels: str
    criteria: dict[str, str]


class CellSummary(TypedDict):
    """A cell's committed summary (``reports/results/<task>/<candidate>.json``)."""

    schema_version: int
    cell: CellRef
    fingerprint: str
    fingerprint_parts: dict[str, Any]
    """``cells.fingerprint_parts``: each part of the fingerprint, hashed apart."""
    evalreg_version: str
    evalset: FileRef
    items_file: FileRef
    totals: SliceAggregate
    slices: dict[str, SliceAggregate]
    """By tag, in tag order; the totals are the ``all`` slice."""
    samples: NotRequired[SampleColumns]
    """Absent from schema 1."""
    sequential: NotRequired[SequentialStop]
    """Present when a sequential run stopped before every item (``run --until-decided``):
    the records hold the first ``items`` of the eval set in its purchase order."""


class UseCaseStop(TypedDict):
    """A use case reading a cell a sequential run stopped early: its parameters, and the
    items its last round reached."""

    alpha: float
    min_items: int
    round: int
    reached: int


class SequentialStop(TypedDict):
    """Where a sequential run stopped buying a cell's items."""

    items: int
    of: int
    method: str
    order: str
    """How the purchase order is made (``sequential.purchase_order``)."""
    use_cases: dict[str, UseCaseStop]


SUMMARY_SCHEMA = 2
"""2 added ``samples``: every sample's level and verdicts, one character each."""
ALL = "all"
LEVELS = ("correct", "acceptable", "unacceptable")
LEVEL_CHARS = {"correct": "c", "acceptable": "a", "unacceptable": "u"}
ERROR_CHAR = "e"
"""The level character of a sample without verdicts (a provider or judge error)."""
OTHER_CHAR = "?"
"""The level character of a graded sample with no known level."""
VERDICT_CHARS = {True: "1", False: "0"}
ABSENT_CHAR = "."
"""The verdict character of a criterion that did not grade a sample."""
UNGRADED_CHAR = "-"
"""The verdict character of a criterion that applies to a sample but did not grade it (a
human criterion with too few grades for the response)."""
UNGRADED_FIELD: Final = "ungraded"
"""The record field listing the criteria that apply but did not grade the sample (present
only when some did not)."""


def rounded(x: float) -> float:
    # Most scores are a binary verdict's: answered without rounding.
    if x == 1.0:
        return 1.0
    if x == 0.0:
        return 0.0  # also for -0.0
    if not math.isfinite(x):
        raise ValueError("results never hold NaN or infinity")
    return round(x, 6) + 0.0  # + 0.0 turns -0.0 into 0.0


def percentile(values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile of integers (an observed value, so always an integer)."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def coverage_counts(totals: SliceAggregate, criteria: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per criterion of ``criteria`` in a slice's aggregate: (graded, applicable) samples."""
    out = {}
    for cid in criteria:
        counts = totals["criteria"].get(cid)
        graded = int(counts.get("applicable", 0)) if counts else 0
        ungraded = int(counts.get("ungraded", 0)) if counts else 0
        out[cid] = graded, graded + ungraded
    return out


def spend_micro_usd(totals: SliceAggregate) -> int:
    """What a cell (or slice) cost to run: its candidate and judge responses."""
    return int(totals.get("spend_micro_usd", totals["cost_micro_usd"]))


def items_md5(summary: CellSummary | None) -> str | None:
    """The md5 of the items file ``summary`` describes (None without one)."""
    items = summary.get("items_file") if summary is not None else None
    md5 = items.get("md5") if isinstance(items, dict) else None
    return md5 if isinstance(md5, str) else None


_ITEM_LINE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def item_line(record: ItemRecord) -> bytes:
    """``record``'s line in an items file (sorted keys, no spaces, UTF-8), no newline."""
    if _plain_record(record):
        try:
            return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate: as below
            pass
    try:
        # The same bytes as the json encoder's for every value canonical JSON can hold.
        return canonical_bytes(record)
    except ValueError:  # NaN or infinity, which the json encoder writes (or a lone surrogate)
        return _ITEM_LINE(record).encode()


def _plain_record(r: ItemRecord) -> bool:
    """Whether ``r`` is a record of the shape ``CellGrader.record`` builds without its
    optional fields, each field of the exact type it is built with and each float (the
    score, and each verdict's) 0 or in [1e-4, 1e16) in magnitude: then orjson writes
    ``json``'s bytes, as ``canonical.canonical_bytes`` says, which checks any record in
    full. Checked field by field, this takes half the time of that check; False (another
    shape) leaves the record to it."""
    try:
        if not (
            len(r) == _RECORD_FIELDS
            and type(r["item"]) is str
            and type(r["content"]) is str
            and type(r["sample"]) is int
            and type(r["latency_ms"]) is int
            and type(r["cost_micro_usd"]) is int
            and (r["cluster"] is None or type(r["cluster"]) is str)
            and (r["key"] is None or type(r["key"]) is str)
            and (r["error"] is None or type(r["error"]) is str)
            and (r["level"] is None or type(r["level"]) is str)
            and type(r["tags"]) is list
            and type(r["tokens"]) is dict
            and type(r["criteria"]) is dict
        ):
            return False
        score = r["score"]
        if type(score) is not float or not (score == 0.0 or 1e-4 <= abs(score) < 1e16):
            return False
        for tag in r["tags"]:
            if type(tag) is not str:
                return False
        for count in r["tokens"].values():
            if type(count) is not int:
                return False
        for verdict in r["criteria"].values():
            if type(verdict) is not dict or len(verdict) != 3:
                return False
            score = verdict["score"]
            if type(score) is not float or not (score == 0.0 or 1e-4 <= abs(score) < 1e16):
                return False
            if type(verdict["passed"]) is not bool or type(verdict["detail"]) is not str:
                return False
    except KeyError:  # another shape
        return False
    return True


_RECORD_FIELDS = 13
"""The fields of ``ItemRecord`` every record has."""


def items_bytes(records: Sequence[ItemRecord]) -> bytes:
    """Per-item records, one canonical JSON object a line, in (item, sample) order."""
    ordered = sorted(records, key=item_order)
    return b"".join(item_line(r) + b"\n" for r in ordered)


def item_order(record: ItemRecord) -> tuple[str, int]:
    """A record's place in its items file."""
    return record["item"], record["sample"]


def read_items(data: bytes) -> list[ItemRecord]:
    """The records of an items file (``items_bytes``'s output), in file order."""
    with collection_paused():
        return [cast(ItemRecord, load_json(line)) for line in data.splitlines() if line.strip()]


def level_char(record: ItemRecord) -> str:
    """A sample's level as one character: ``c``/``a``/``u``, ``e`` for an error, ``?`` for
    no known level."""
    if record["error"] is not None:
        return ERROR_CHAR
    level = record["level"]
    return OTHER_CHAR if level is None else LEVEL_CHARS.get(level, OTHER_CHAR)


def add_verdict_chars(out: bytearray, record: ItemRecord, criteria: Iterable[str]) -> None:
    """Append each of ``criteria``'s verdict on a sample to ``out`` as one ASCII character,
    in their order: ``1`` passed, ``0`` failed, ``.`` does not apply (or an error), ``-``
    applies but not graded. Appended in place: the tally reads every criterion of every
    sample, and a list or bytes object a sample cost twice the time."""
    verdicts = record["criteria"]
    for c in criteria:
        verdict = verdicts.get(c)
        if verdict is not None:
            out.append(_PASSED if verdict["passed"] else _FAILED)
        else:
            out.append(_UNGRADED if c in record.get(UNGRADED_FIELD, ()) else _ABSENT)


_PASSED, _FAILED = ord(VERDICT_CHARS[True]), ord(VERDICT_CHARS[False])
_UNGRADED, _ABSENT = ord(UNGRADED_CHAR), ord(ABSENT_CHAR)


def as_schema(summary: CellSummary, version: object) -> CellSummary:
    """``summary`` as schema ``version`` recorded it, to compare with a summary written by
    an older evalreg: version 1 had no ``samples``. Other versions: ``summary`` itself."""
    if version == 1:
        older = summary.copy()
        older.pop("samples", None)
        older["schema_version"] = 1
        return older
    return summary


def summary_bytes(summary: CellSummary) -> bytes:
    return (
        json.dumps(summary, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    ).encode()


def read_records(tree: Tree, cell: Cell) -> list[ItemRecord]:
    """``cell``'s per-item records in ``tree`` (its items file, on disk or DVC-tracked),
    or none when it has no items file."""
    path = cell.items_path
    if not (tree.is_file(path) or tree.is_file(path + ".dvc")):
        return []
    return read_items(tree.read_data(path))


RecordsSource = Path | bytes
"""Where a cell's records are read from: a file on this machine, or the file's bytes."""


def records_source(tree: Tree, cell: Cell) -> RecordsSource | None:
    """Where ``cell``'s per-item records are in ``tree``, for a reader that takes a few at a
    time (``stream_records``): the file holding them on this machine, else their bytes
    (a git blob, or a copy DVC fetches now); None when it has no items file."""
    path = cell.items_path
    if not (tree.is_file(path) or tree.is_file(path + ".dvc")):
        return None
    return tree.data_path(path) or tree.read_data(path)


def stream_records(source: RecordsSource) -> Iterator[ItemRecord]:
    """The records of an items file, in file order, read a line at a time from a file (a
    hundred thousand of them are never held at once)."""
    with io.BytesIO(source) if isinstance(source, bytes) else source.open("rb") as f:
        for line in f:
            if line.strip():
                yield cast(ItemRecord, load_json(line))


def read_summary(tree: Tree, cell: Cell) -> CellSummary | None:
    """``cell``'s committed summary, or None if it has none; a file that is not a summary
    (damaged, truncated, edited by hand) raises ``RegistryError`` naming it."""
    path = cell.summary_path
    if not tree.is_file(path):
        return None
    return summary_from_bytes(tree.read(path), path)


def summary_from_bytes(raw: bytes, path: str) -> CellSummary:
    """The summary in ``raw`` (the file at ``path``); ``RegistryError`` if it is not one."""
    try:
        data = loads_finite(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise _not_a_summary(path, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, NaN, nested too deep
        raise _not_a_summary(path, str(exc) or type(exc).__name__) from None
    if not isinstance(data, dict):
        raise _not_a_summary(path, "expected a JSON object")
    for key, kind in _SUMMARY_FIELDS.items():
        if key in data and not isinstance(data[key], kind):
            raise _not_a_summary(path, f"{key!r} is not a {kind.__name__}")
    return cast(CellSummary, data)


_SUMMARY_FIELDS = {
    "fingerprint": str,
    "fingerprint_parts": dict,
    "evalreg_version": str,
    "cell": dict,
    "evalset": dict,
    "items_file": dict,
    "totals": dict,
    "slices": dict,
    "samples": dict,
    "sequential": dict,
}
"""The type of each field a summary may hold, for the readers that rely on it."""


def _not_a_summary(path: str, problem: str, line: int = 0, col: int = 0) -> RegistryError:
    return RegistryError(
        [
            Finding(
                path,
                line,
                col,
                f"not a results summary ({problem}): restore it (`git checkout -- {path}`), "
                "or delete it and run the cell again (`evalreg run`)",
            )
        ]
    )
