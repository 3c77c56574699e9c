"""Importers: turn another tool's eval into registry files that pass ``evalreg check`` at once.

Each importer reads its source completely, writes new files only (never replacing one)
and only when the registry would load them, and says what did not map and why.
"""

from __future__ import annotations

from evalreg.importers.base import ImportProblem, ImportResult
from evalreg.importers.openai_evals import import_openai_evals
from evalreg.importers.promptfoo import import_promptfoo

__all__ = ["ImportProblem", "ImportResult", "import_openai_evals", "import_promptfoo"]
