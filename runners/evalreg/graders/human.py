"""Human grades imported from a file, and agreement between raters and with the judge.

A grades file (CSV or JSONL) has one row per graded response: ``key`` (the response's
store key, so a grade never silently applies to a different output), optional ``item``,
and one column per rater holding pass/fail (``pass``/``fail``, ``1``/``0``,
``true``/``false``; blank for not graded). In JSONL each row is an object with the same
fields. Agreement uses Krippendorff's alpha (nominal), which handles any number of raters
and missing grades, and, between two raters, Cohen's kappa beside it.
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


ONE_GRADE = "one grade throughout"
"""Why agreement is undefined when every grade was the same: alpha's expected disagreement
and kappa's ``1 - p_e`` are 0, so both are 0/0. Agreement on a single value shows nothing
about agreement on the other, so it is neither perfect nor printed as a number."""


def one_grade(units: Sequence[Sequence[bool | None]]) -> bool:
    """Whether every grade of the units that have at least two (the ones agreement is
    computed on) is one and the same value."""
    seen = {g for u in units if sum(g is not None for g in u) >= 2 for g in u if g is not None}
    return len(seen) == 1


def alpha(units: Sequence[Sequence[bool | None]]) -> float | None:
    """Krippendorff's alpha (nominal) over units, each a sequence of raters' grades (None:
    not graded). None when it is undefined: too little overlap to compute it (fewer than
    two units graded twice), or one grade throughout (:func:`one_grade`)."""
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
    if one_grade(paired):
        return None
    return float(kalpha(reliability_data=matrix, level_of_measurement="nominal"))


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa between two raters' pass/fail grades of the same units.

    ``(p_o - p_e) / (1 - p_e)``: observed agreement ``p_o`` against the agreement ``p_e``
    the raters' own pass rates give by chance. None when it is undefined: no pairs, or
    both raters gave every unit one and the same grade (``p_e = 1``: they agree, but the
    grades tell nothing; shown as n/a).
    """
    n = len(pairs)
    if not n:
        return None
    agree = sum(a == b for a, b in pairs)
    first = sum(a for a, _ in pairs) / n
    second = sum(b for _, b in pairs) / n
    chance = first * second + (1 - first) * (1 - second)
    if chance >= 1.0:
        return None
    return (agree / n - chance) / (1 - chance)


def rater_agreement(grades: HumanGrades) -> float | str:
    """Krippendorff's alpha among every rater of ``grades``, or why it is undefined:
    :data:`ONE_GRADE`, or "too few shared grades"."""
    raters = grades.raters
    units = [[row.get(r) for r in raters] for row in grades.grades.values()]
    value = alpha(units)
    if value is not None:
        return value
    return ONE_GRADE if one_grade(units) else "too few shared grades"


def rater_kappa(grades: HumanGrades) -> tuple[float | None, int] | None:
    """Cohen's kappa between the two raters of ``grades`` on the responses both graded,
    with how many those are; None unless there are exactly two raters."""
    raters = grades.raters
    if len(raters) != 2:
        return None
    first, second = raters
    both = [
        (row[first], row[second])
        for row in grades.grades.values()
        if first in row and second in row
    ]
    return cohen_kappa(both), len(both)
