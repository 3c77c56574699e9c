"""Curating eval sets: sample production logs into items, size slices, redact item text."""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import json
import random
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from evalreg import stats
from evalreg._version import __version__
from evalreg.canonical import canonical_bytes, loads_finite
from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets.evalset import MAX_LINE_FINDINGS, EvalSet, parse_evalset
from evalreg.redaction import REDACTED
from evalreg.registry.diagnostics import Finding
from evalreg.registry.schema import ID_PATTERN, Item
from evalreg.registry.tree import PathEscapes, clean_relpath, decode_utf8
from evalreg.registry.validation import describe_errors

__all__ = [
    "BUILTIN_PII",
    "DEFAULT_DISCORDANCE",
    "REDACTED",
    "ItemsNeeded",
    "SampleResult",
    "SliceStats",
    "Stratum",
    "evalset_stats",
    "items_needed",
    "near_duplicates",
    "redact",
    "sample_logs",
    "scrub_pii",
]

BUILTIN_PII = "builtin:pii"
"""The ``scrub`` name of :func:`scrub_pii`."""
UNKNOWN_STRATUM = "unknown"
"""The stratum of a row whose stratify field is absent, null or empty."""
TIMESTAMP_FIELDS = ("timestamp", "created_at", "time", "date")
"""Top-level fields read (first present wins) for the date of a source's newest row."""
PROVENANCE_SUFFIX = ".provenance.json"
PROVENANCE_SCHEMA = 1
NEAR_WINDOW = 16
"""How many neighbours, in each sort order, a text is compared with for near duplicates."""
NEAR_CHARS = 2000
"""Characters of each text that near-duplicate similarity looks at."""

_CALLABLE = re.compile(r"^[^:\s]+\.py:[A-Za-z_][A-Za-z0-9_]*$")
_ID = re.compile(ID_PATTERN)
_MISSING = object()

Scrubber = Callable[[dict[str, Any]], Any]


# ---------------------------------------------------------------- PII scrubbing
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)
_IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_CARD = re.compile(r"(?<![\w+])(?:\d[ -]?){12,18}\d(?!\w)")
_PHONE = re.compile(r"(?<![\w+])(\+?)(\(?\d[\d(). -]{6,22}\d)(?!\w)")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "<CARD>" if _luhn(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    plus, body = match.groups()
    digits = sum(c.isdigit() for c in body)
    separated = any(c in " .-()" for c in body)
    return "<PHONE>" if 9 <= digits <= 15 and (plus or separated) else match.group()


def _scrub_text(text: str) -> str:
    text = _EMAIL.sub("<EMAIL>", text)
    text = _IBAN.sub("<IBAN>", text)
    text = _CARD.sub(_card, text)
    return _PHONE.sub(_phone, text)


def scrub_pii(value: Any) -> Any:
    """``value`` with e-mail addresses, IBANs, card and phone numbers in its strings masked.

    Every string inside ``value`` (dicts and lists are walked; keys are kept) is rewritten:
    e-mail addresses become ``<EMAIL>``; IBANs (two letters, two check digits, groups of
    four) ``<IBAN>``; 13 to 19 digits, optionally grouped by spaces or dashes, that pass the
    Luhn check ``<CARD>``; and 9 to 15 digits that start with ``+`` or are grouped by spaces,
    dots, dashes or parentheses ``<PHONE>``. Plain digit runs (order numbers, ids) and
    dates are left alone, so a bare ``5551234567`` is not masked. This is a baseline: a
    team with stricter rules names its own scrubber (``path/to/file.py:function``).
    """
    if isinstance(value, str):
        return _scrub_text(value)
    if isinstance(value, dict):
        return {key: scrub_pii(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [scrub_pii(inner) for inner in value]
    return value


# ---------------------------------------------------------------- near duplicates
def _normalised(value: Any) -> str:
    """The text of every string and number in ``value`` (dict keys in sorted order), case-
    folded, NFKC-normalised, with punctuation and runs of whitespace made single spaces."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in sorted(node):
                walk(node[key])
        elif isinstance(node, list):
            for inner in node:
                walk(inner)
        elif isinstance(node, str | int | float) and not isinstance(node, bool):
            parts.append(str(node))

    walk(value)
    text = unicodedata.normalize("NFKC", " ".join(parts)).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def near_duplicates(texts: Sequence[str], threshold: float) -> set[int]:
    """Indexes of the texts that nearly duplicate an earlier text that is kept.

    Similarity is the normalised Indel similarity (``rapidfuzz.fuzz.ratio`` / 100) of the
    texts' first :data:`NEAR_CHARS` characters; a text is a near duplicate when it is at
    least ``threshold`` similar to an earlier text that is not itself a near duplicate.
    Equal texts are found by hashing. The others are compared by sorted-neighbourhood
    blocking (Hernández & Stolfo 1995, "The merge/purge problem for large databases",
    SIGMOD): sorted once from the start and once from the end, each text is compared with
    the :data:`NEAR_WINDOW` texts before it. The cost is linear in the number of texts; a
    pair is found when it sorts that close in either order, as near duplicates that share
    their opening or their closing words do.
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Indel

    first: dict[str, int] = {}
    earlier: dict[int, set[int]] = defaultdict(set)
    for index, text in enumerate(texts):
        if text:
            earlier[index].add(first.setdefault(text, index))
    short = {index: texts[index][:NEAR_CHARS] for index in sorted(first.values())}
    cutoff = threshold - 1e-9
    for order in (
        sorted(short, key=short.__getitem__),
        sorted(short, key=lambda i: short[i][::-1]),
    ):
        strings = [short[index] for index in order]
        for position in range(1, len(order)):
            start = max(0, position - NEAR_WINDOW)
            found = process.extract(
                strings[position],
                strings[start:position],
                scorer=Indel.normalized_similarity,
                score_cutoff=cutoff,
                limit=None,
            )
            index = order[position]
            for _choice, _score, offset in found:
                other = order[start + offset]
                earlier[max(index, other)].add(min(index, other))
    removed: set[int] = set()
    for index in sorted(earlier):
        if any(other < index and other not in removed for other in earlier[index]):
            removed.add(index)
    return removed


# ---------------------------------------------------------------- sampling logs
@dataclass(frozen=True)
class Stratum:
    rows: int
    """Rows of the source with this stratify value."""
    unique: int
    """Rows left after removing exact and near duplicates."""
    sampled: int


@dataclass(frozen=True)
class SampleResult:
    path: str
    provenance: str
    items: int
    rows: int
    strata: dict[str, Stratum]
    exact_duplicates: int
    near_duplicates: int
    scrubber: str | None


@dataclass(frozen=True)
class _Fields:
    stratify_by: str
    input_fields: list[str] | None
    expected_field: str | None


@dataclass(frozen=True)
class _Candidate:
    line: int
    stratum: str
    item: dict[str, Any]
    """The item without its id: input or messages, expected, tags and meta."""
    digest: str
    """sha256 of the canonical input (or conversation): the exact-duplicate key."""
    text: str
    """Normalised text of the input, for near duplicates."""


def sample_logs(
    source: Path,
    out: Path,
    *,
    per_slice: int | None,
    total: int | None,
    stratify_by: str,
    seed: int,
    id_prefix: str,
    input_fields: list[str] | None,
    expected_field: str | None,
    dedupe: bool = True,
    near_threshold: float = 0.9,
    scrub: str | None = None,
    root: Path | None = None,
) -> SampleResult:
    """Draw a seeded, stratified sample of production log rows into an eval set.

    ``source`` is JSONL (``.jsonl``, ``.ndjson``) or CSV with a header row (``.csv``),
    optionally gzipped (``.gz``). Each row becomes an item:

    - input: the ``input_fields`` (top-level names or dotted paths; the item key is the
      last part), or, when None, the row's own ``input`` object or ``messages`` list (a
      conversation). A CSV source needs ``input_fields``.
    - expected: the ``expected_field``'s value (none when the field is None).
    - tags: one, the slug of the row's ``stratify_by`` value (lower case, other characters
      as ``-``); absent, null or empty values form the stratum ``unknown``.
    - meta: ``source`` (the file name) and ``log_line`` (the row's first line in it).

    With ``scrub`` (``builtin:pii`` for :func:`scrub_pii`, or ``path/to/file.py:function``
    in the repository ``root``, default the working directory), every row's input dict — a
    conversation is passed as ``{"messages": [...]}`` — is replaced by what the scrubber
    returns, before duplicates are looked for. With ``dedupe``, rows whose input is equal
    (canonical JSON) to an earlier row's are dropped, then rows whose text nearly
    duplicates an earlier kept row's (:func:`near_duplicates` at ``near_threshold``).

    Each stratum's rows are sorted by the sha256 of their input and drawn with
    ``random.Random(f"{seed}:{stratum}")``: ``per_slice`` caps a stratum, ``total`` the
    whole sample (shared out in proportion to what each stratum offers, at least one row
    each); neither means every row. Items are written in (stratum, line) order with ids
    ``{id_prefix}-0001``…, as canonical JSON lines, and ``<out>.provenance.json`` beside
    them records the source's sha256, rows and newest row date, the parameters, the
    duplicates removed and the scrubber. The same inputs give the same bytes.

    Every bad row is reported as ``path:line`` in one ``RegistryError``; a bad parameter
    is a ``UsageError``. Nothing is written unless the whole source is usable, and an
    existing ``out`` is never overwritten (an eval set is frozen: a new sample is a new
    file).
    """
    root = (root or Path.cwd()).resolve()
    label = str(source)
    kind = _source_kind(source)
    fields = _Fields(stratify_by, input_fields, expected_field)
    provenance = out.with_name(out.name + PROVENANCE_SUFFIX)
    _check_parameters(out, provenance, per_slice, total, id_prefix, near_threshold)
    if kind == "csv" and input_fields is None:
        raise UsageError(f"{label}: a CSV log needs input fields: name the columns to use")
    scrubber, scrubber_info = _load_scrubber(scrub, root)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise UsageError(f"{label}: cannot read ({exc.strerror or exc})") from None
    data = _decompressed(raw, label) if source.name.lower().endswith(".gz") else raw
    rows, findings = _read_rows(data, label, kind)
    if len(findings) >= MAX_LINE_FINDINGS:
        raise RegistryError(findings)
    _check_stratify_field(rows, stratify_by, label)
    candidates: list[_Candidate] = []
    newest: date | None = None
    for line, row in rows:
        if len(findings) >= MAX_LINE_FINDINGS:
            findings.append(Finding(label, line, 0, "too many bad rows; stopped here"))
            break
        made = _candidate(line, row, fields, scrubber, source.name)
        if isinstance(made, _Candidate):
            candidates.append(made)
        else:
            findings += [Finding(label, line, 0, message) for message in made]
        newest = _newer(newest, row)
    if findings:
        raise RegistryError(sorted(findings))
    if not candidates:
        raise UsageError(f"{label}: no rows to sample")

    unique, exact, near = _deduplicated(candidates, dedupe, near_threshold)
    chosen, strata = _draw(candidates, unique, per_slice, total, seed)
    width = max(4, len(str(len(chosen))))
    items = [{"id": f"{id_prefix}-{n:0{width}d}", **c.item} for n, c in enumerate(chosen, start=1)]
    items_data = b"".join(canonical_bytes(item) + b"\n" for item in items)
    _check_loads(items_data, items, label)
    record = {
        "schema_version": PROVENANCE_SCHEMA,
        "evalreg_version": __version__,
        "source": {
            "path": source.as_posix(),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "rows": len(rows),
            "newest_row_date": newest.isoformat() if newest else None,
        },
        "parameters": {
            "per_slice": per_slice,
            "total": total,
            "stratify_by": stratify_by,
            "seed": seed,
            "id_prefix": id_prefix,
            "input_fields": input_fields,
            "expected_field": expected_field,
            "dedupe": dedupe,
            "near_threshold": near_threshold,
            "scrub": scrub,
        },
        "duplicates": {"exact": exact, "near": near},
        "scrubber": scrubber_info,
        "strata": {name: asdict(s) for name, s in strata.items()},
        "items": {
            "path": out.name,
            "count": len(items),
            "md5": hashlib.md5(items_data, usedforsecurity=False).hexdigest(),
        },
    }
    record_data = (
        json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    ).encode("utf-8")
    _write_atomically({out: items_data, provenance: record_data})
    return SampleResult(
        path=str(out),
        provenance=str(provenance),
        items=len(items),
        rows=len(rows),
        strata=strata,
        exact_duplicates=exact,
        near_duplicates=near,
        scrubber=scrub,
    )


def _check_loads(items_data: bytes, items: list[dict[str, Any]], label: str) -> None:
    """Refuse to write an eval set that would not load (an item nested too deep, say),
    naming the log lines its items came from."""
    _, problems = parse_evalset(items_data, label)
    if problems:
        raise RegistryError(
            [
                Finding(label, items[f.line - 1]["meta"]["log_line"] if f.line else 0, 0, f.message)
                for f in problems
            ]
        )


def _source_kind(source: Path) -> str:
    name = source.name.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    raise UsageError(f"{source}: expected a .jsonl, .ndjson or .csv log (optionally .gz)")


def _check_parameters(
    out: Path,
    provenance: Path,
    per_slice: int | None,
    total: int | None,
    id_prefix: str,
    near_threshold: float,
) -> None:
    if not out.name.endswith(".jsonl"):
        raise UsageError(f"{out}: an eval set is a .jsonl file")
    for path in (out, provenance):
        if path.exists():
            raise UsageError(
                f"{path} exists: eval sets are frozen, so write a new sample to a new file "
                "(or remove the old one first)"
            )
    for name, value in (("per_slice", per_slice), ("total", total)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    if not _ID.match(f"{id_prefix}-0001") or len(id_prefix) > 100:
        raise UsageError(
            f"id prefix {id_prefix!r} does not make valid item ids: use letters, digits, "
            "'.', '_' and '-', starting with a letter or digit (at most 100 characters)"
        )
    if not 0.0 < near_threshold <= 1.0:
        raise UsageError(f"near_threshold must be in (0, 1], got {near_threshold}")


def _load_scrubber(spec: str | None, root: Path) -> tuple[Scrubber | None, dict[str, Any] | None]:
    """The scrubber named by ``spec`` and how provenance records it (name, source sha256)."""
    if spec is None:
        return None, None
    if spec == BUILTIN_PII:
        return scrub_pii, {"name": spec, "sha256": None}
    if not _CALLABLE.match(spec):
        raise UsageError(f"scrubber {spec!r}: expected {BUILTIN_PII} or path/to/file.py:function")
    from evalreg.providers.base import ProviderError
    from evalreg.providers.python import load_callable

    rel = spec.rpartition(":")[0]
    try:
        source = (root / clean_relpath(rel)).read_bytes()
        function = load_callable(root, spec)
    except PathEscapes as exc:
        raise UsageError(f"scrubber {spec}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"scrubber {spec}: cannot read {rel} ({exc.strerror or exc})") from None
    except ProviderError as exc:
        raise UsageError(f"scrubber {spec}: {exc}") from None
    return function, {"name": spec, "sha256": hashlib.sha256(source).hexdigest()}


def _decompressed(raw: bytes, label: str) -> bytes:
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise UsageError(f"{label}: not a readable gzip file ({exc})") from None


def _read_rows(
    data: bytes, label: str, kind: str
) -> tuple[list[tuple[int, dict[str, Any]]], list[Finding]]:
    """(line, row) for every row, and a finding for every line that is not a row."""
    text = decode_utf8(data, label)
    return _csv_rows(text, label) if kind == "csv" else _jsonl_rows(text, label)


def _jsonl_rows(text: str, label: str) -> tuple[list[tuple[int, dict[str, Any]]], list[Finding]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    findings: list[Finding] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(findings) >= MAX_LINE_FINDINGS:
            findings.append(Finding(label, lineno, 0, "too many bad rows; stopped here"))
            break
        try:
            row = loads_finite(line)
        except json.JSONDecodeError as exc:
            findings.append(Finding(label, lineno, exc.colno, f"invalid JSON: {exc.msg}"))
            continue
        except ValueError as exc:  # a number no item can hold
            findings.append(Finding(label, lineno, 0, str(exc)))
            continue
        except RecursionError:
            findings.append(Finding(label, lineno, 0, "nested too deep to read"))
            continue
        if not isinstance(row, dict):
            findings.append(Finding(label, lineno, 1, "expected a JSON object (one row a line)"))
            continue
        rows.append((lineno, row))
    return rows, findings


def _csv_rows(text: str, label: str) -> tuple[list[tuple[int, dict[str, Any]]], list[Finding]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, Any]]] = []
    findings: list[Finding] = []
    try:
        header = next(reader, None)
        if not header:
            return [], [Finding(label, 1, 0, "expected a header row naming the columns")]
        repeated = sorted(name for name, n in Counter(header).items() if n > 1)
        if repeated:
            names = ", ".join(repeated)
            return [], [Finding(label, 1, 0, f"the header repeats column {names}")]
        start = reader.line_num + 1
        for values in reader:
            if len(findings) >= MAX_LINE_FINDINGS:
                findings.append(Finding(label, start, 0, "too many bad rows; stopped here"))
                break
            if values and len(values) != len(header):
                findings.append(
                    Finding(label, start, 0, f"expected {len(header)} columns, found {len(values)}")
                )
            elif values:
                rows.append((start, dict(zip(header, values, strict=True))))
            start = reader.line_num + 1
    except csv.Error as exc:
        findings.append(Finding(label, reader.line_num, 0, f"invalid CSV: {exc}"))
    return rows, findings


def _check_stratify_field(rows: list[tuple[int, dict[str, Any]]], name: str, label: str) -> None:
    """A stratify field no row has is a typo, not a log with one big ``unknown`` stratum."""
    if rows and all(_lookup(row, name) is _MISSING for _line, row in rows):
        seen = sorted({key for _line, row in rows[:100] for key in row})
        raise UsageError(
            f"{label}: no row has the field {name!r} to stratify by; fields: {', '.join(seen)}"
        )


def _lookup(row: Mapping[str, Any], path: str) -> Any:
    """``row[path]``, else the value at the dotted ``path``, else ``_MISSING``."""
    if path in row:
        return row[path]
    node: Any = row
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _stratum(value: Any) -> str | None:
    """The tag for a stratify value, or None when it cannot be one (a list or an object)."""
    if value is _MISSING or value is None or value == "":
        return UNKNOWN_STRATUM
    if isinstance(value, dict | list):
        return None
    return _slug(str(value).lower() if isinstance(value, bool) else str(value))


@functools.cache
def _slug(text: str) -> str:
    """``text`` as a tag: ASCII, lower case, other characters as ``-`` (a hash if none is left)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9._-]+", "-", ascii_text.lower()).strip("-._")[:100]
    # surrogatepass: a lone surrogate still hashes (the row is refused later, with its line).
    return slug or "value-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _candidate(
    line: int,
    row: dict[str, Any],
    fields: _Fields,
    scrubber: Scrubber | None,
    source_name: str,
) -> _Candidate | list[str]:
    """The row as an item (without its id), or what is wrong with it."""
    problems: list[str] = []
    stratum = _stratum(_lookup(row, fields.stratify_by))
    if stratum is None:
        problems.append(f"{fields.stratify_by!r} is a list or an object: cannot stratify by it")
    body, conversation = _body(row, fields.input_fields, problems)
    expected = None
    if fields.expected_field is not None:
        expected = _lookup(row, fields.expected_field)
        if expected is _MISSING:
            problems.append(f"no field {fields.expected_field!r} (the expected answer)")
    if body is not None and scrubber is not None:
        body = _scrubbed(body, conversation, scrubber, problems)
    if problems or body is None or stratum is None:
        return problems
    item: dict[str, Any] = {
        "tags": [stratum],
        "meta": {"source": source_name, "log_line": line},
    }
    item["messages" if conversation else "input"] = body["messages"] if conversation else body
    if fields.expected_field is not None:
        item["expected"] = expected
    payload = {"id": "x", **item}
    try:
        Item.model_validate(payload)
    except ValidationError as exc:
        return describe_errors(Item, payload, exc)
    # Both are written into the item's line: each must be canonical JSON.
    for what, value in (("the input", body), ("the expected answer", expected)):
        try:
            encoded = canonical_bytes(value)
        except (TypeError, ValueError) as exc:  # ValueError: a lone surrogate, say
            return [f"{what} is not JSON data: {exc}"]
        except RecursionError:
            return [f"{what} is nested too deep to be part of an item"]
        if value is body:
            content = encoded
    return _Candidate(
        line=line,
        stratum=stratum,
        item=item,
        digest=hashlib.sha256(content).hexdigest(),
        text=_normalised(body),
    )


def _body(
    row: dict[str, Any], input_fields: list[str] | None, problems: list[str]
) -> tuple[dict[str, Any] | None, bool]:
    """What the scrubber sees — the input dict, or ``{"messages": [...]}`` for a
    conversation — and whether it is a conversation."""
    if input_fields is None:
        if isinstance(row.get("messages"), list):
            return {"messages": row["messages"]}, True
        if isinstance(row.get("input"), dict):
            return dict(row["input"]), False
        problems.append("no 'input' object or 'messages' list: name the input fields")
        return None, False
    out: dict[str, Any] = {}
    for path in input_fields:
        value = _lookup(row, path)
        if value is _MISSING:
            problems.append(f"no field {path!r} (an input field)")
        out[path.rpartition(".")[2]] = value
    return out, False


def _scrubbed(
    body: dict[str, Any], conversation: bool, scrubber: Scrubber, problems: list[str]
) -> dict[str, Any] | None:
    try:
        cleaned = scrubber(body)
    except (Exception, SystemExit) as exc:  # the team's code: report it against the row
        problems.append(f"the scrubber raised {type(exc).__name__}: {exc}")
        return None
    if not isinstance(cleaned, dict) or (conversation and "messages" not in cleaned):
        problems.append(
            f"the scrubber returned {type(cleaned).__name__}, not the object it was given"
        )
        return None
    return cleaned


def _newer(newest: date | None, row: dict[str, Any]) -> date | None:
    """The later of ``newest`` and the row's ISO 8601 timestamp (as a UTC date)."""
    for name in TIMESTAMP_FIELDS:
        value = row.get(name)
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.strip())
            except ValueError:
                continue
            if moment.tzinfo is not None:
                moment = moment.astimezone(UTC)
            day = moment.date()
            return day if newest is None or day > newest else newest
    return newest


def _deduplicated(
    candidates: list[_Candidate], dedupe: bool, threshold: float
) -> tuple[list[_Candidate], int, int]:
    """The candidates left after removing duplicates, with the exact and near counts."""
    if not dedupe:
        return candidates, 0, 0
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        if candidate.digest not in seen:
            seen.add(candidate.digest)
            unique.append(candidate)
    near = near_duplicates([c.text for c in unique], threshold)
    kept = [c for index, c in enumerate(unique) if index not in near]
    return kept, len(candidates) - len(unique), len(near)


def _draw(
    candidates: list[_Candidate],
    unique: list[_Candidate],
    per_slice: int | None,
    total: int | None,
    seed: int,
) -> tuple[list[_Candidate], dict[str, Stratum]]:
    """The sample in (stratum, line) order, and the counts of every stratum."""
    rows = Counter(c.stratum for c in candidates)
    pools: dict[str, list[_Candidate]] = {name: [] for name in rows}
    for candidate in unique:
        pools[candidate.stratum].append(candidate)
    quotas = _quotas({name: len(pool) for name, pool in pools.items()}, per_slice, total)
    chosen: list[_Candidate] = []
    for name in sorted(pools):
        pool = sorted(pools[name], key=lambda c: (c.digest, c.line))
        chosen += random.Random(f"{seed}:{name}").sample(pool, quotas[name])
    chosen.sort(key=lambda c: (c.stratum, c.line))
    strata = {
        name: Stratum(rows=rows[name], unique=len(pools[name]), sampled=quotas[name])
        for name in sorted(pools)
    }
    return chosen, strata


def _quotas(sizes: dict[str, int], per_slice: int | None, total: int | None) -> dict[str, int]:
    """Rows to draw from each stratum.

    ``per_slice`` caps every stratum. When ``total`` is smaller than what is left, every
    non-empty stratum gets one row and the rest is shared out in proportion to what each
    stratum has beyond that, by largest remainder (ties to the stratum named first).
    """
    caps = {name: min(n, per_slice) if per_slice is not None else n for name, n in sizes.items()}
    if total is None or total >= sum(caps.values()):
        return caps
    filled = sorted(name for name, cap in caps.items() if cap)
    if total < len(filled):
        raise UsageError(
            f"total {total} is smaller than the number of strata ({len(filled)}): every "
            "stratum gets at least one item; raise the total or stratify more coarsely"
        )
    spare = {name: caps[name] - 1 for name in filled}
    pool, rest = sum(spare.values()), total - len(filled)
    quotas = dict.fromkeys(caps, 0)
    remainders = []
    for name in filled:
        share, remainder = divmod(rest * spare[name], pool)
        quotas[name] = 1 + share
        remainders.append((-remainder, name))
    for _remainder, name in sorted(remainders)[: total - sum(quotas.values())]:
        quotas[name] += 1
    return quotas


def _write_atomically(files: dict[Path, bytes]) -> None:
    """Write each file beside its target first, then rename them all into place."""
    staged = []
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        staged.append((tmp, path))
    for tmp, path in staged:
        tmp.replace(path)


# ---------------------------------------------------------------- slice sizes
DEFAULT_DISCORDANCE = stats.DISCORDANCE_FLOOR
"""The share of items on which two candidates disagree, assumed when sizing slices."""


@dataclass(frozen=True)
class ItemsNeeded:
    """Items a slice needs to detect a change: against a fixed rate, and between candidates."""

    rate: int
    paired: int


@dataclass(frozen=True)
class SliceStats:
    """What one slice of an eval set can show.

    ``units`` are the independent units the MDEs are computed on: distinct clusters, each
    unclustered item counting as its own (items of one cluster may fail together, so this
    is the conservative count). ``mde_rate`` is the smallest detectable change of one
    candidate's rate from ``baseline``; ``mde_paired`` the smallest detectable difference
    between two candidates on the same items, assuming they disagree on a ``discordance``
    share of them. The verdict is about ``mde_paired``: choosing between candidates is what
    the slice is for.
    """

    slice: str
    items: int
    conversations: int
    units: int
    mde_rate: float
    mde_paired: float
    discordance: float
    detect: float
    detectable: bool
    verdict: str


def evalset_stats(
    evalset: EvalSet,
    *,
    detect: float = 0.05,
    baseline: float = 0.5,
    discordance: float = DEFAULT_DISCORDANCE,
    alpha: float = 0.05,
    power: float = 0.8,
) -> list[SliceStats]:
    """Per slice (``all`` first, then tags in order): its size and the changes it can detect.

    MDEs use :func:`stats.mde_rate` at ``baseline`` and :func:`stats.mde_paired` with the
    stated ``discordance`` (no floor: it is a planning assumption), both at ``alpha`` and
    ``power``. The verdict reads "can detect a 5-point change (MDE 4.4 points)" or "too
    small to detect a 5-point change (MDE 14 points)".
    """
    _check_plan(detect, baseline, discordance)
    groups: dict[str, list[Item]] = {"all": list(evalset.items)}
    for tag in sorted(evalset.slices):
        groups[tag] = [item for item in evalset.items if tag in item.tags]
    out = []
    for name, items in groups.items():
        units = len({item.cluster for item in items if item.cluster is not None}) + sum(
            item.cluster is None for item in items
        )
        mde_rate = stats.mde_rate(units, baseline, alpha, power)
        mde_paired = stats.mde_paired(units, discordance, alpha, power, discordance_floor=0.0)
        detectable = mde_paired <= detect
        change = f"a {_points(detect)}-point change (MDE {_points(mde_paired)} points)"
        out.append(
            SliceStats(
                slice=name,
                items=len(items),
                conversations=sum(item.messages is not None for item in items),
                units=units,
                mde_rate=mde_rate,
                mde_paired=mde_paired,
                discordance=discordance,
                detect=detect,
                detectable=detectable,
                verdict=("can detect " if detectable else "too small to detect ") + change,
            )
        )
    return out


def items_needed(
    detect: float,
    baseline: float,
    *,
    discordance: float = DEFAULT_DISCORDANCE,
    alpha: float = 0.05,
    power: float = 0.8,
) -> ItemsNeeded:
    """The fewest independent items whose MDE is at most ``detect``: for one candidate's rate
    at ``baseline`` and for a paired comparison at ``discordance`` (the same formulas as
    :func:`evalset_stats`, so a slice of that size is exactly the first to "can detect")."""
    _check_plan(detect, baseline, discordance)
    return ItemsNeeded(
        rate=_fewest(lambda n: stats.mde_rate(n, baseline, alpha, power), detect),
        paired=_fewest(
            lambda n: stats.mde_paired(n, discordance, alpha, power, discordance_floor=0.0),
            detect,
        ),
    )


def _fewest(mde: Callable[[int], float], detect: float) -> int:
    """The smallest ``n`` with ``mde(n) <= detect`` (``mde`` falls as ``n`` grows)."""
    high = 1
    while mde(high) > detect:
        high *= 2
    low = high // 2  # mde(low) > detect, or low == 0
    while high - low > 1:
        middle = (low + high) // 2
        if mde(middle) <= detect:
            high = middle
        else:
            low = middle
    return high


def _check_plan(detect: float, baseline: float, discordance: float) -> None:
    if not 0.0 < detect < 1.0:
        raise UsageError(f"the change to detect must be between 0 and 1, got {detect}")
    if not 0.0 <= baseline <= 1.0:
        raise UsageError(f"the baseline rate must be between 0 and 1, got {baseline}")
    if not 0.0 < discordance <= 1.0:
        raise UsageError(f"the discordance must be in (0, 1], got {discordance}")


def _points(share: float) -> str:
    """A share as percentage points: whole points from 10 up, one decimal below."""
    points = share * 100
    return f"{points:.0f}" if round(points, 1) >= 10 else f"{points:.1f}".removesuffix(".0")


# ---------------------------------------------------------------- redaction
def redact(value: Any, fields: Sequence[str]) -> Any:
    """A copy of ``value`` with the values at each dotted path in ``fields`` as ``[redacted]``.

    ``value`` is an item (a pydantic model is dumped to JSON data first) or any JSON data.
    A path walks dict keys; on a list, a number picks one element and any other part
    applies to every element, so ``messages.content`` redacts every turn and
    ``messages.0.content`` the first. Paths that lead nowhere change nothing. ``value``
    itself is never modified.

    A task or a selection declares its paths as ``redact: [input.body, messages.content]``;
    whatever prints item text (diffs, comments, reports) passes the union of the two.
    """
    out = (
        value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else value
    )
    for path in fields:
        out = _redact_at(out, path.split("."))
    return out


def _redact_at(node: Any, parts: list[str]) -> Any:
    if not parts:
        return REDACTED
    head, rest = parts[0], parts[1:]
    if isinstance(node, dict):
        return {**node, head: _redact_at(node[head], rest)} if head in node else node
    if isinstance(node, list):
        if head.isdigit():
            index = int(head)
            if index >= len(node):
                return node
            return [*node[:index], _redact_at(node[index], rest), *node[index + 1 :]]
        return [_redact_at(inner, parts) for inner in node]
    return node
