"""Write an import's files all at once: only new files, and only when the registry would load them.

Everything is rendered in memory first and loaded together with the registry already on
disk, so a file that would not pass ``evalreg check`` is never written. Files are created
exclusively (an existing file is never replaced, even one that appears meanwhile) and a
failed write removes what this import created.
"""

from __future__ import annotations

import contextlib
import io
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalreg.importers.base import ImportProblem
from evalreg.registry.loader import REGISTRY_DIR, YAML_SUFFIXES, inspect_registry
from evalreg.registry.tree import WorkspaceTree, clean_relpath

MAX_SHOWN = 20
"""Most load problems an error message lists."""


@dataclass
class Draft:
    """The files one import writes, rendered but not yet on disk."""

    header: str
    """A comment line opening every YAML file: where it came from."""
    files: dict[str, bytes] = field(default_factory=dict)

    def add_yaml(self, kind: str, ident: str, data: dict[str, Any]) -> None:
        rel = f"{REGISTRY_DIR}/{kind}/{ident}.yaml"
        self.files[rel] = _utf8(rel, f"# {self.header}\n{dump_yaml(data)}")

    def add_jsonl(self, rel: str, rows: list[dict[str, Any]]) -> None:
        lines = (json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
        self.files[rel] = _utf8(rel, "".join(lines))


def _utf8(rel: str, text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate escape in the source
        raise ImportProblem(
            f"{rel} would hold {text[exc.start : exc.end]!r}, half of a UTF-16 surrogate pair "
            "that no file can hold: fix it in the source. Nothing was written."
        ) from None


def dump_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML in the registry's layout; multi-line text as literal blocks."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 100
    out = io.StringIO()
    yaml.dump(_literal_blocks(data), out)
    return out.getvalue()


def write_draft(out_root: Path, draft: Draft) -> tuple[str, ...]:
    """Write every file of ``draft`` under ``out_root``; return their paths.

    Raises:
        ImportProblem: ``out_root`` is not a directory, a file already exists (also as
            ``.yml`` or a DVC pointer), the files would not load, or writing failed. In
            every case nothing is left written.
    """
    if not out_root.is_dir():
        raise ImportProblem(f"{out_root} is not a directory: give the registry repository root")
    clashes = [rel for rel in draft.files if any(p.exists() for p in _rivals(out_root, rel))]
    if clashes:
        raise ImportProblem(
            f"{', '.join(clashes)} already exist{'s' if len(clashes) == 1 else ''} in {out_root}: "
            "an import never replaces files; choose another --name. Nothing was written."
        )
    _check_loads(out_root, draft)
    return _create_all(out_root, draft)


def _rivals(out_root: Path, rel: str) -> list[Path]:
    """Files whose existence forbids writing ``rel``: itself, its other YAML suffix, its pointer."""
    path = out_root / rel
    if path.suffix in YAML_SUFFIXES:
        return [path.with_suffix(s) for s in YAML_SUFFIXES]
    return [path, path.with_name(path.name + ".dvc")]


def _check_loads(out_root: Path, draft: Draft) -> None:
    ours = set(draft.files)
    _, findings = inspect_registry(_Overlay(WorkspaceTree(out_root), draft.files))
    problems = [f.render() for f in findings if f.path in ours]
    if problems:
        shown = "\n  ".join(problems[:MAX_SHOWN])
        more = f"\n  ... and {len(problems) - MAX_SHOWN} more" if len(problems) > MAX_SHOWN else ""
        raise ImportProblem(
            f"the imported files would not load, so nothing was written:\n  {shown}{more}"
        )


def _create_all(out_root: Path, draft: Draft) -> tuple[str, ...]:
    created: list[Path] = []
    new_dirs: list[Path] = []
    try:
        for rel, data in draft.files.items():
            path = out_root / rel
            missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            new_dirs.extend(missing)
            with path.open("xb") as handle:
                created.append(path)
                handle.write(data)
    except OSError as exc:
        for path in created:
            path.unlink(missing_ok=True)
        for directory in sorted(new_dirs, key=lambda d: len(d.parts), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise ImportProblem(
            f"could not write {exc.filename or out_root}: {exc.strerror or exc}. Nothing was "
            "written."
        ) from None
    return tuple(draft.files)


def _literal_blocks(value: Any) -> Any:
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, dict):
        return {k: _literal_blocks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal_blocks(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value)
    return value


class _Overlay:
    """The registry on disk with the draft's files laid over it, as the loader reads trees."""

    label = "working tree with the imported files"

    def __init__(self, base: WorkspaceTree, files: dict[str, bytes]) -> None:
        self.base = base
        self.files = files

    def is_file(self, rel: str) -> bool:
        return posixpath.normpath(rel) in self.files or self.base.is_file(rel)

    def list_dir(self, rel: str) -> list[str]:
        ours = {posixpath.basename(p) for p in self.files if posixpath.dirname(p) == rel}
        return sorted(ours | set(self.base.list_dir(rel)))

    def read(self, rel: str) -> bytes:
        key = clean_relpath(rel)
        return self.files[key] if key in self.files else self.base.read(rel)

    def read_data(self, rel: str) -> bytes:
        key = clean_relpath(rel)
        return self.files[key] if key in self.files else self.base.read_data(rel)

    def data_path(self, rel: str) -> Path | None:
        return None if clean_relpath(rel) in self.files else self.base.data_path(rel)
