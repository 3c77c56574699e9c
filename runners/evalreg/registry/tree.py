"""Where registry files are read from: the working tree (later, any git revision).

A ``Tree`` hides whether bytes come from the workspace or from a commit, so loading,
checking, reproducing and diffing share one code path.
"""

from __future__ import annotations

import posixpath
from pathlib import Path, PurePosixPath
from typing import Protocol

from evalreg.errors import DataMissingError


class PathEscapes(ValueError):
    """A path in a registry file points outside the repository."""


def clean_relpath(rel: str) -> str:
    """Normalise a repository-relative POSIX path; raise ``PathEscapes`` if it leaves the repo."""
    if not rel or "\0" in rel:
        raise PathEscapes("an empty path")
    if "\\" in rel:
        raise PathEscapes(f"{rel!r} uses backslashes: write repository paths with '/'")
    if rel.startswith("/") or PurePosixPath(rel).is_absolute() or (len(rel) > 1 and rel[1] == ":"):
        raise PathEscapes(f"{rel!r} is absolute: paths are relative to the repository root")
    norm = posixpath.normpath(rel)
    if norm == ".." or norm.startswith("../"):
        raise PathEscapes(f"{rel!r} leaves the repository")
    if norm == ".":
        raise PathEscapes(f"{rel!r} is the repository root, not a file")
    return norm


class Tree(Protocol):
    """Read-only access to the files of one version of a registry repository."""

    @property
    def label(self) -> str:
        """How messages name this version ("working tree", "rev 1a2b3c4")."""
        ...

    def is_file(self, rel: str) -> bool: ...

    def list_dir(self, rel: str) -> list[str]:
        """Names of the files (not directories) directly in ``rel``, sorted; [] if absent."""
        ...

    def read(self, rel: str) -> bytes: ...

    def read_data(self, rel: str) -> bytes:
        """Bytes of a data file that may be tracked by DVC (``rel`` plus ``rel.dvc``)."""
        ...


class WorkspaceTree:
    """The files as they are on disk under ``root``."""

    label = "working tree"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def _path(self, rel: str) -> Path:
        path = self.root / clean_relpath(rel)
        resolved = path.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise PathEscapes(f"{rel!r} resolves outside the repository (through a symlink)")
        return path

    def is_file(self, rel: str) -> bool:
        try:
            return self._path(rel).is_file()
        except PathEscapes:
            return False

    def list_dir(self, rel: str) -> list[str]:
        path = self._path(rel)
        if not path.is_dir():
            return []
        return sorted(p.name for p in path.iterdir() if p.is_file())

    def read(self, rel: str) -> bytes:
        return self._path(rel).read_bytes()

    def read_data(self, rel: str) -> bytes:
        if self._path(rel).is_file():
            return self.read(rel)
        if self.is_file(rel + ".dvc"):
            raise DataMissingError(
                f"{rel} is tracked by DVC but not in the working tree: run `dvc pull {rel}.dvc`"
            )
        raise FileNotFoundError(rel)
