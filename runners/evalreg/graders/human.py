"""Human grades imported from a file, and agreement between raters and with the judge.

A grades file (CSV or JSONL) has one row per graded response: ``key`` (the response's
store key, so a grade never silently applies to a different output), optional ``item``,
and one column per rater holding pass/fail (``pass``/``fail``, ``1``/``0``,
``true``/``false``; blank for not graded). In JSONL each row is an object with the same
fields. Agreement uses Krippendorff's alpha (nominal), which handles any number of raters
and missing grades.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import decode_utf8

_TRUE = {"pass", "1", "true", "yes", "y", "correct"}
_FALSE = {"fail", "0", "false", "no", "n", "incorrect"}
_RESERVED = {"key", "item", "note", "notes", "comment"}


@dataclass
class HumanGrades:
    """Grades by response key: rater -> passed."""

    path: str
    grades: dict[str, dict[str, bool]] = field(default_factory=dict)

    @property
    def raters(self) -> list[str]:
        return sorted({r for row in self.grades.values() for r in row})

    def majority(self, key: str | None, min_raters: int) -> bool | None:
        """The majority grade of a response, None when fewer than ``min_raters`` graded it."""
        row = self.grades.get(key or "")
        if not row or len(row) < min_raters:
            return None
        yes = sum(row.values())
        return yes * 2 >= len(row)


def _grade(value: object, path: str, line: int) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RegistryError([Finding(path, line, 0, f"grade {value!r} is not pass/fail")])


def parse_grades(data: bytes, path: str) -> HumanGrades:
    text = decode_utf8(data, path)
    rows: list[tuple[int, dict[str, object]]] = []
    if path.endswith(".jsonl"):
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
                problem = exc if isinstance(exc, ValueError) else "nested too deep to read"
                raise RegistryError(
                    [Finding(path, lineno, 0, f"invalid JSON: {problem}")]
                ) from None
            if not isinstance(row, dict):
                raise RegistryError([Finding(path, lineno, 1, "expected a JSON object")])
            rows.append((lineno, row))
    else:
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None or "key" not in reader.fieldnames:
            raise RegistryError(
                [
                    Finding(
                        path,
                        1,
                        1,
                        "expected a header row with a 'key' column and one column per rater",
                    )
                ]
            )
        rows = [(i, dict(r)) for i, r in enumerate(reader, start=2)]
    grades = HumanGrades(path)
    for lineno, row in rows:
        key = row.get("key")
        if not isinstance(key, str) or not key:
            raise RegistryError([Finding(path, lineno, 0, "row has no response 'key'")])
        for rater, value in row.items():
            if rater in _RESERVED:
                continue
            grade = _grade(value, path, lineno)
            if grade is not None:
                grades.grades.setdefault(key, {})[rater] = grade
    return grades


def alpha(units: Sequence[Sequence[bool | None]]) -> float | None:
    """Krippendorff's alpha (nominal) over units, each a sequence of raters' grades (None:
    not graded). None when there is too little overlap to compute it."""
    import numpy as np
    from krippendorff import alpha as kalpha

    paired = [u for u in units if sum(g is not None for g in u) >= 2]
    if len(paired) < 2:
        return None
    width = max(len(u) for u in paired)
    matrix = np.full((width, len(paired)), np.nan)
    for j, unit in enumerate(paired):
        for i, grade in enumerate(unit):
            if grade is not None:
                matrix[i, j] = 1.0 if grade else 0.0
    values = matrix[~np.isnan(matrix)]
    if len(set(values.tolist())) < 2:
        return 1.0  # everyone always agreed on one value: perfect, though uninformative
    return float(kalpha(reliability_data=matrix, level_of_measurement="nominal"))


def rater_agreement(grades: HumanGrades) -> float | None:
    raters = grades.raters
    return alpha([[row.get(r) for r in raters] for row in grades.grades.values()])
