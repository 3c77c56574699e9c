"""The modules ``dvc add`` imports as it goes, imported ahead by the run's DVC child.

The child (``_dvcworker``) opens the repository and collects its stages while the run
fetches; the add itself then still imports its stage locks, hashing and checkout, staging
in git with its attributes and filters, and its status line. Imported ahead, that is done
while the run fetches, not while it waits for the add: 0.14 to 0.21 s of CPU (median 0.18 s
of seven, on a loaded 2-core machine, timed in the child once the stages are collected).
Waited for in the add instead, that is some 9 % of the README's whole run at L = 0, C = 64,
N = 5,000 (about 2 s, the closing step included) and some 4 % at L = 50 ms.

These are DVC's, dulwich's, scmrepo's and rich's own modules, private ones among them, and
any release may move one: a module that is gone is skipped, and the add imports what it
needs as it always does. ``tests/test_dvc_internals.py`` fails, naming the module and the
installed DVC, when one no longer exists, so the list is brought up to date.
"""

from __future__ import annotations

import contextlib
import importlib

MODULES = (
    "dvc.repo.add",
    "dvc.output",
    "dvc.rwlock",
    "dvc_data.hashfile._progress",
    "dvc_data.hashfile.status",
    "dulwich.attrs",
    "dulwich.filters",
    "dulwich.index",
    "dulwich.line_ending",
    "fsspec.implementations.memory",
    "pygit2",
    "scmrepo.git.backend.dulwich",
    "scmrepo.git.backend.pygit2",
    "scmrepo.git.backend.pygit2.filter",
    "rich._emoji_codes",
    "rich.status",
)


def import_ahead() -> None:
    """Import ``MODULES`` and build DVC's error console (a rich console, built once); a
    module this installation lacks is skipped."""
    for name in MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(ImportError, AttributeError):
        from dvc.ui import ui

        ui.error_console  # noqa: B018
