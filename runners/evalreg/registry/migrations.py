"""In-memory upgrades of older registry files, so old revisions stay readable and reproducible.

Each entry upgrades one kind of file from version N to N+1 on the parsed data; files on
disk are never rewritten by loading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalreg.registry.diagnostics import Finding
from evalreg.registry.schema import SCHEMA_VERSION
from evalreg.registry.yamlio import Document

Migration = Callable[[dict[str, Any]], dict[str, Any]]

# kind -> {from_version: upgrade to from_version + 1}
MIGRATIONS: dict[str, dict[int, Migration]] = {
    "models": {},
    "tasks": {},
    "rubrics": {},
    "selections": {},
    "settings": {},
}


def upgrade(kind: str, doc: Document) -> tuple[dict[str, Any] | None, list[Finding]]:
    """Return ``doc``'s data at the current schema version, or findings saying why not."""
    data: dict[str, Any] = doc.data
    version = data.get("schema_version")
    if "schema_version" not in data:
        return None, [
            doc.finding((), f"missing 'schema_version' (this release writes {SCHEMA_VERSION})")
        ]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return None, [doc.finding(("schema_version",), "schema_version must be a positive integer")]
    if version > SCHEMA_VERSION:
        return None, [
            doc.finding(
                ("schema_version",),
                f"schema_version {version} was written by a newer evalreg (this one reads up "
                f"to {SCHEMA_VERSION}): upgrade evalreg",
            )
        ]
    steps = MIGRATIONS.get(kind, {})
    while version < SCHEMA_VERSION:
        data = steps[version](dict(data))
        version += 1
        data["schema_version"] = version
    return data, []
