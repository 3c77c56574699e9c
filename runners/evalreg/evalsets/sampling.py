"""Sampling production logs into eval items: stratified, deduplicated, scrubbed, with provenance."""

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
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalreg._version import __version__
from evalreg.canonical import canonical_bytes, loads_finite
from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets.evalset import MAX_LINE_FINDINGS, parse_evalset
from evalreg.evalsets.near_duplicates import near_duplicates, normalised
from evalreg.evalsets.privacy import BUILTIN_PII, scrub_pii
from evalreg.providers.base import ProviderError
from evalreg.providers.python import load_callable
from evalreg.registry.diagnostics import Finding
from evalreg.registry.schema import ID_PATTERN, ItemLine
from evalreg.registry.tree import PathEscapes, clean_relpath, decode_utf8
from evalreg.registry.validation import describe_errors

__all__ = ["SampleResult", "Stratum", "sample_logs"]

UNKNOWN_STRATUM = "unknown"
"""The stratum of a row whose stratify field is absent, null or empty."""
TIMESTAMP_FIELDS = ("timestamp", "created_at", "time", "date")
"""Top-level fields read (first present wins) for the date of a source's newest row."""
PROVENANCE_SUFFIX = ".provenance.json"
PROVENANCE_SCHEMA = 1

_CALLABLE = re.compile(r"^[^:\s]+\.py:[A-Za-z_][A-Za-z0-9_]*$")
_ID = re.compile(ID_PATTERN)
_MISSING = object()

Scrubber = Callable[[dict[str, Any]], Any]


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
        ItemLine.model_validate(payload)
    except ValidationError as exc:
        return describe_errors(ItemLine, payload, exc)
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
        text=normalised(body),
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
