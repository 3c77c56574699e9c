"""Where registry files are read from: the working tree (later, any git revision).

A ``Tree`` hides whether bytes come from the workspace or from a commit, so loading,
checking, reproducing and diffing share one code path.
"""

from __future__ import annotations

import posixpath
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from evalreg import dvcrepo
from evalreg.errors import DataMissingError, RegistryError, UsageError
from evalreg.registry.diagnostics import Finding, position_of


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

    def data_path(self, rel: str) -> Path | None:
        """A file on this machine holding what ``read_data(rel)`` reads, for readers that
        take a little of a large file at a time; None when the bytes can only be read
        (a git blob, or a copy DVC would fetch). A DVC cache copy is verified first."""
        ...


class WorkspaceTree:
    """The files as they are on disk under ``root``."""

    label = "working tree"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def _path(self, rel: str) -> Path:
        path = self.root / clean_relpath(rel)
        try:
            resolved = path.resolve()
        except (RuntimeError, OSError):  # a loop of symlinks (RuntimeError before 3.13)
            raise PathEscapes(f"{rel!r} is a loop of symbolic links") from None
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
        return _read_pointed(self, self.root, rel, rev=None)

    def data_path(self, rel: str) -> Path | None:
        path = self._path(rel)
        return path if path.is_file() else _pointed_copy(self, self.root, rel)


class GitTree:
    """The files of one commit, read through GitPython without touching the working tree."""

    def __init__(self, root: str | Path, rev: str) -> None:
        import git

        self.root = Path(root).resolve()
        try:
            self._repo = git.Repo(self.root)
            self.commit = self._repo.commit(rev)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UsageError(f"{self.root} is not a git repository") from None
        except (git.BadName, ValueError):
            raise UsageError(f"unknown revision {rev!r}") from None
        self.rev = self.commit.hexsha
        self.label = f"revision {self.rev[:12]}"
        self._trees: dict[str, Any] = {"": self.commit.tree}

    def _object(self, rel: str) -> Any:
        path = clean_relpath(rel)
        parent, _, name = path.rpartition("/")
        tree = self._tree(parent)
        if tree is None:
            return None
        try:
            return tree / name
        except KeyError:
            return None

    def _tree(self, path: str) -> Any:
        """The tree object at directory ``path`` (looked up once: a directory's listing is
        parsed once however many of its files are read)."""
        if path not in self._trees:
            parent, _, name = path.rpartition("/")
            above = self._tree(parent)
            try:
                found = above / name if above is not None else None
            except KeyError:
                found = None
            self._trees[path] = found if found is not None and found.type == "tree" else None
        return self._trees[path]

    def is_file(self, rel: str) -> bool:
        try:
            obj = self._object(rel)
        except PathEscapes:
            return False
        return obj is not None and obj.type == "blob"

    def is_dir(self, rel: str) -> bool:
        """Whether the commit holds a directory at ``rel`` (one with files: git keeps no
        empty ones)."""
        try:
            return self._tree(clean_relpath(rel)) is not None
        except PathEscapes:
            return False

    def list_dir(self, rel: str) -> list[str]:
        obj = self._object(rel)
        if obj is None or obj.type != "tree":
            return []
        return sorted(blob.name for blob in obj.blobs)

    def read(self, rel: str) -> bytes:
        obj = self._object(rel)
        if obj is None or obj.type != "blob":
            raise FileNotFoundError(rel)
        if obj.mode == _SYMLINK_MODE:
            raise PathEscapes(f"{rel!r} is a symlink: evalreg reads regular files only")
        data: bytes = obj.data_stream.read()
        return data

    def read_data(self, rel: str) -> bytes:
        if self.is_file(rel):
            return self.read(rel)
        return _read_pointed(self, self.root, rel, rev=self.rev)

    def data_path(self, rel: str) -> Path | None:
        return None if self.is_file(rel) else _pointed_copy(self, self.root, rel)


_SYMLINK_MODE = 0o120000


def pointer_md5_of(tree: Tree, rel: str) -> str | None:
    """The md5 ``rel.dvc`` names in ``tree``, once its ``path`` is known to be ``rel``'s
    own name: a pointer whose path leads anywhere else (``/etc/passwd``, ``../x``) would
    have ``dvc pull`` write there, so it is refused where it says so (``RegistryError``)."""
    pointer = rel + ".dvc"
    data = tree.read(pointer)
    path = dvcrepo.pointer_path(data)
    name = rel.rpartition("/")[2]
    if path is not None and path != name:
        text = data.decode("utf-8", "replace")
        line = next(
            (n for n, ln in enumerate(text.splitlines(), 1) if "path:" in ln and path in ln), 0
        )
        column = text.splitlines()[line - 1].index("path:") + 1 if line else 0
        raise RegistryError(
            [
                Finding(
                    pointer,
                    line,
                    column,
                    f"the pointer names {path!r}, not {name!r}, the file beside it: a DVC "
                    "pointer here must name its own file, or `dvc pull` would write elsewhere",
                )
            ]
        )
    return dvcrepo.pointer_md5(data)


def committed_data(tree: Tree, rel: str) -> bytes:
    """``tree.read_data(rel)``, refused (``RegistryError`` at ``rel.dvc``) unless it is
    the content the pointer names: for evidence graded as the committed version, since
    DVC reads its cache and remote without hashing what it reads there."""
    import hashlib

    data = tree.read_data(rel)
    if tree.is_file(rel) or not tree.is_file(rel + ".dvc"):
        return data  # git's own object, or a working tree's file (``store.hashes`` checks it)
    md5 = pointer_md5_of(tree, rel)
    got = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if md5 is not None and got != md5:
        raise RegistryError(
            [
                Finding(
                    rel + ".dvc",
                    0,
                    0,
                    f"names md5 {md5}, but the copy of {rel} DVC read (from its cache or the "
                    f"remote) holds {got}: a copy was altered after DVC stored it, and none "
                    "here holds the committed content. Restore the DVC cache's copy "
                    f"(.dvc/cache/files/md5/{md5[:2]}/{md5[2:]}) or the remote's from an intact "
                    "clone",
                )
            ]
        )
    return data


def _read_pointed(tree: Tree, root: Path, rel: str, rev: str | None) -> bytes:
    """Read a DVC-tracked file through its ``.dvc`` pointer in ``tree``."""
    pointer = rel + ".dvc"
    if not tree.is_file(pointer):
        raise FileNotFoundError(rel)
    md5 = pointer_md5_of(tree, rel)
    if md5 is None:
        raise DataMissingError(f"{pointer} is not a single-file DVC pointer with an md5")
    return dvcrepo.read_tracked(root, rel, md5, rev)


def _pointed_copy(tree: Tree, root: Path, rel: str) -> Path | None:
    """The local copy (DVC cache, or a remote that is a directory here) of the file that
    ``rel.dvc`` points at in ``tree``, verified; None if there is no such pointer or copy."""
    pointer = rel + ".dvc"
    md5 = pointer_md5_of(tree, rel) if tree.is_file(pointer) else None
    return None if md5 is None else dvcrepo.local_copy(root, md5)


def decode_utf8(data: bytes, path: str) -> str:
    """Decode ``data`` as UTF-8 (a BOM is allowed) or raise with the offending position."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8-sig", errors="replace")
        line, col = position_of(good, len(good))
        raise RegistryError(
            [
                Finding(
                    path,
                    line,
                    col,
                    f"invalid UTF-8 byte 0x{data[exc.start]:02x}: expected a UTF-8 text file",
                )
            ]
        ) from None
