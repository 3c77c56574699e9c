"""evalreg: a GitOps eval registry for choosing AI models on your own evidence.

The public Python API is this façade; everything else is internal and may change
between releases:

- ``load_registry(root=".")``: parse and validate a registry; raises ``RegistryError``
  with every finding (file, line, column) when it is invalid.
- ``run(root, options)``: run the stale and pending cells (``RunOptions`` in
  ``evalreg.runner.run``), buying only the responses the store lacks, and write their
  results.
- ``reproduce(root, rev)``: re-grade a revision's committed results from the stored
  responses and say whether they are byte-identical.
- ``diff(root, base_ref, head_ref=None)``: what changed between two revisions' results, as the data
  ``evalreg diff --format json`` prints.
- ``write_report(root, registry)``: write the governance report pages under ``reports/``.
- ``__version__``: this release.

The names are imported on first use, so importing ``evalreg`` (and starting the CLI)
loads none of the pipeline. ARCHITECTURE.md describes the package's layout.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evalreg._version import __version__

if TYPE_CHECKING:
    from evalreg.compare.diff import diff
    from evalreg.registry.loader import load_registry
    from evalreg.report.writer import write_report
    from evalreg.runner.reproduce import reproduce
    from evalreg.runner.run import run

__all__ = ["__version__", "diff", "load_registry", "reproduce", "run", "write_report"]

_HOMES = {
    "diff": "evalreg.compare.diff",
    "load_registry": "evalreg.registry.loader",
    "reproduce": "evalreg.runner.reproduce",
    "run": "evalreg.runner.run",
    "write_report": "evalreg.report.writer",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evalreg' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
