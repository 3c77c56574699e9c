"""Findings: one problem found in the registry, with its file, line and column."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How bad a finding is; it decides the exit status of ``evalreg check``."""

    ERROR = "error"  # the input is unusable: exit 2
    FINDING = "finding"  # the registry loads but is not in a state to merge: exit 1
    WARNING = "warning"  # worth knowing; exit 0 unless --strict


@dataclass(frozen=True, order=True)
class Finding:
    """A problem at ``path:line:col`` (1-based; 0 means the whole file or line)."""

    path: str
    line: int
    col: int
    message: str
    severity: Severity = Severity.ERROR

    def render(self) -> str:
        where = self.path
        if self.line:
            where += f":{self.line}"
            if self.col:
                where += f":{self.col}"
        prefix = "" if self.severity is Severity.ERROR else f"{self.severity.value}: "
        return f"{where}: {prefix}{self.message}"

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "message": self.message,
            "severity": self.severity.value,
        }


def position_of(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of a character offset in ``text``."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col
