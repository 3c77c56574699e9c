"""``evalreg select``: change a use case's declared candidate, keeping the file's layout.

The YAML is edited through a ruamel round trip, so comments, key order and formatting
survive; only ``selected``, ``rationale`` and (when asked) ``waivers`` change.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from evalreg.errors import UsageError
from evalreg.registry.loader import load_registry
from evalreg.selection.evidence import gather


def select_candidate(
    root: Path, selection_id: str, candidate: str, *, reason: str, approver: str | None = None
) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import FoldedScalarString
    from ruamel.yaml.util import load_yaml_guess_indent

    registry = load_registry(root)
    if selection_id not in registry.selections:
        known = ", ".join(sorted(registry.selections)) or "none"
        raise UsageError(f"no use case {selection_id!r} (known: {known})")
    selection = registry.selections[selection_id]
    ids = [c.id for c in selection.candidates]
    if candidate not in ids:
        raise UsageError(f"{candidate!r} is not a candidate of {selection_id} ({', '.join(ids)})")
    if not reason.strip():
        raise UsageError("--reason must say why")
    recommended = gather(registry, selection_id).decision.recommended
    path = root / registry.file_of("selections", selection_id)
    text = path.read_text(encoding="utf-8")
    data, indent, block_seq_indent = load_yaml_guess_indent(text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 88
    # ruamel guesses the sequence indent and the dash offset; mappings indent by the rest.
    yaml.indent(mapping=indent - block_seq_indent or 2, sequence=indent, offset=block_seq_indent)
    data = yaml.load(text)
    data["selected"] = candidate
    folded = isinstance(data.get("rationale"), FoldedScalarString)
    data["rationale"] = FoldedScalarString(reason + "\n") if folded else reason
    note = f"{selection_id}: declared candidate is now {candidate}"
    if candidate != recommended:
        if approver is None:
            note += (
                f"; the policy recommends {recommended or 'no candidate'}, so `evalreg "
                "check` needs a waiver: repeat with --approver NAME"
            )
        else:
            waiver = CommentedMap()
            waiver["candidate"] = candidate
            waiver["reason"] = FoldedScalarString(reason + "\n") if len(reason) > 60 else reason
            waiver["approver"] = approver
            waiver["date"] = datetime.now(UTC).date().isoformat()
            data.setdefault("waivers", []).append(waiver)
            note += f"; waiver recorded, approved by {approver}"
    out = io.StringIO()
    yaml.dump(data, out)
    path.write_text(out.getvalue(), encoding="utf-8")
    return note
