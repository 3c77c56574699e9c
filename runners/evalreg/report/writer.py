"""Write the governance report into ``reports/`` and tell whether the committed one is current.

Staleness is decided by a digest of the report's inputs (parsed registry files, eval-set
hashes, committed result summaries) recorded in the index, not by regenerating it.
"""

from __future__ import annotations

import re
from pathlib import Path

from evalreg._version import __version__
from evalreg.canonical import digest
from evalreg.cells import cells
from evalreg.redaction import current
from evalreg.registry.loader import Registry, load_registry
from evalreg.results.freshness import status
from evalreg.results.records import read_summary
from evalreg.selection.evidence import SelectionEvidence, gather

REPORT_DIR = "reports"
INDEX = f"{REPORT_DIR}/README.md"
FORMAT = 1
_DIGEST = re.compile(rb"^<!-- evalreg-report-inputs: (sha256:[0-9a-f]{64}) -->")


def input_digest(registry: Registry) -> str:
    """sha256 over everything the report is a function of."""
    parts = {
        "format": FORMAT,
        "registry": {
            kind: {
                ident: model.model_dump(mode="json", by_alias=True, exclude_defaults=True)
                for ident, model in sorted(getattr(registry, attr).items())
            }
            for kind, attr in (
                ("models", "pins"),
                ("tasks", "tasks"),
                ("rubrics", "rubrics"),
                ("selections", "selections"),
            )
        },
        # Only when present, so a registry without settings keeps its digest.
        **(
            {"settings": registry.settings.model_dump(mode="json", exclude_defaults=True)}
            if registry.settings.install is not None
            else {}
        ),
        "evalsets": {path: e.md5 for path, e in sorted(registry.evalsets.items())},
        "results": {c.id: read_summary(registry.tree, c) for c in cells(registry)},
        # What the drift section shows; git's dates of the criteria are left out on purpose:
        # the commit that records a report cannot be named in it, so they are as of writing.
        **_drift_inputs(registry),
    }
    return "sha256:" + digest(parts)


def _drift_inputs(registry: Registry) -> dict[str, object]:
    """What the drift section shows, when there is any (absent: the digest is unchanged):
    the drift log, and the drift workflow's path and schedule (not the rest of that file,
    whose other edits change nothing on the page)."""
    from evalreg.compare.drift_log import DRIFT_LOG, drift_workflow

    found: dict[str, object] = {}
    if registry.tree.is_file(DRIFT_LOG):
        found["drift_log"] = registry.tree.read(DRIFT_LOG).decode("utf-8", "replace")
    workflow = drift_workflow(registry.tree)
    if workflow is not None:
        found["drift_workflow"] = [workflow.path, *workflow.schedules]
    return found


def install_spec(registry: Registry) -> str:
    """The pip requirement that installs the evalreg this registry's results need."""
    return registry.settings.install or f"evalreg=={__version__}"


def render(registry: Registry) -> dict[str, bytes]:
    """Every report file, path → bytes."""
    from evalreg.audit.criteria import criteria_dates
    from evalreg.compare.drift_log import drift_workflow, last_checks
    from evalreg.report.governance import (
        Provenance,
        chart,
        chart_name,
        index,
        page,
        slices_chart,
        slices_chart_name,
    )

    statuses = status(registry)
    evidences: list[SelectionEvidence] = [
        gather(registry, sid, statuses) for sid in sorted(registry.selections)
    ]
    install = install_spec(registry)
    dates = criteria_dates(registry)
    checks, workflow = last_checks(registry.tree), drift_workflow(registry.tree)
    files: dict[str, bytes] = {}
    for ev in evidences:
        known = Provenance(dates.get(ev.selection_id), checks, workflow)
        text = page(ev, evalreg_version=__version__, install=install, provenance=known)
        files[f"{REPORT_DIR}/{ev.selection_id}.md"] = text.encode()
        files[f"{REPORT_DIR}/{chart_name(ev)}"] = chart(ev).encode()
        slices = slices_chart(ev)
        if slices is not None:
            files[f"{REPORT_DIR}/{slices_chart_name(ev)}"] = slices.encode()
    files[INDEX] = index(evidences, input_digest(registry)).encode()
    return files


def write_report(root: Path, registry: Registry) -> list[str]:
    files = render(registry)
    redactor = current()
    for rel, data in files.items():
        data = redactor.data(data)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
    return sorted(files)


def recorded_digest(registry: Registry) -> str | None:
    if not registry.tree.is_file(INDEX):
        return None
    match = _DIGEST.match(registry.tree.read(INDEX))
    return match.group(1).decode() if match else None


def decisions_at(root: Path, rev: str) -> list[SelectionEvidence]:
    """Every use case's evidence and decision as committed at ``rev`` (what the audit
    record of ``rev`` shows beside its history). Raises ``EvalregError`` when the registry
    or its data cannot be read there."""
    from evalreg.registry.tree import GitTree

    registry = load_registry(GitTree(root, rev))
    statuses = status(registry)
    return [gather(registry, sid, statuses) for sid in sorted(registry.selections)]
