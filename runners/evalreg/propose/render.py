"""``evalreg propose``'s findings as a reader sees them: text for the terminal, or JSON.
Model ids come from the providers: untrusted text, shown through ``emit``."""

from __future__ import annotations

from typing import Any

from evalreg.propose.survey import PinReport


def render_text(reports: list[PinReport]) -> str:
    """One paragraph a pin, in pin order."""
    if not reports:
        return "No pins in the registry.\n"
    out: list[str] = []
    for r in reports:
        head = f"{r.pin} ({r.model})" if r.model else r.pin
        if r.skipped is not None:
            out.append(f"{head}: not asked: {r.skipped}")
            continue
        if r.error is not None:
            out.append(f"{head}: the model list could not be read: {r.error}")
            continue
        found = r.finding
        assert found is not None
        lines = []
        if found.retired:
            lines.append(f"{head}: RETIRED: the provider no longer lists {found.pinned}")
        if found.newer is not None:
            lines.append(f"{head}: newer snapshot {found.newer}")
            if r.not_proposed:
                lines.append(f"  not proposed: {r.not_proposed}")
            if found.also_newer:
                lines.append(f"  also newer, and superseded by it: {', '.join(found.also_newer)}")
        if not lines:
            lines.append(f"{head}: up to date")
        elif r.deploy_first:
            lines.append(f"  {r.deploy_first}")
        if found.unclear:
            lines.append(f"  listed, not proposed: {found.why}")
        elif found.why and found.newer is None:
            lines.append(f"  {found.why}")
        out.append("\n".join(lines))
    return "\n".join(out) + "\n"


def render_json(reports: list[PinReport]) -> dict[str, Any]:
    """The findings as data: one object a pin."""
    pins = []
    for r in reports:
        entry: dict[str, Any] = {"pin": r.pin, "model": r.model}
        if r.skipped is not None:
            entry["skipped"] = r.skipped
        elif r.error is not None:
            entry["error"] = r.error
        elif r.finding is not None:
            f = r.finding
            entry.update(
                retired=f.retired,
                newer=f.newer,
                also_newer=list(f.also_newer),
                unclear=list(f.unclear),
                why=f.why,
            )
            if r.deploy_first:
                entry["deploy_first"] = r.deploy_first
            if r.not_proposed:
                entry["not_proposed"] = r.not_proposed
        pins.append(entry)
    return {"pins": pins}
