"""Eval-set operations that change the repository: validating and tracking with DVC."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets import parse_evalset
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import PathEscapes, clean_relpath


@dataclass(frozen=True)
class AddedEvalSet:
    path: str
    items: int
    md5: str
    remote: str


def add_evalset(root: Path, file: Path, *, push: bool = True) -> AddedEvalSet:
    """Validate ``file`` as an eval set, then ``dvc add`` (and push) it.

    Nothing is written unless every line is a valid item.
    """
    from evalreg import dvcrepo

    root = root.resolve()
    path = (Path.cwd() / file).resolve() if not file.is_absolute() else file.resolve()
    try:
        rel = clean_relpath(path.relative_to(root).as_posix())
    except (ValueError, PathEscapes):
        raise UsageError(f"{file} is not inside the repository {root}") from None
    if not path.is_file():
        raise UsageError(f"{file}: no such file")
    if not (root / ".dvc").is_dir():
        raise UsageError(f"{root} has no DVC repository: run `dvc init` (or `evalreg init`)")
    evalset, findings = parse_evalset(path.read_bytes(), rel)
    if evalset is None:
        raise RegistryError(findings or [Finding(rel, 0, 0, "not a valid eval set")])
    md5 = dvcrepo.add_and_push(root, rel, push=push)
    return AddedEvalSet(rel, len(evalset.items), md5, dvcrepo.remote_description(root))
