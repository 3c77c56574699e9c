"""Merging branches whose runs rewrote the same generated files.

Two pull requests that re-run one cell both rewrite its summary, its items pointer, the
metrics index and the report pages, so a plain ``git merge`` conflicts in all of them
although every one is a function of the merged sources and the stored responses. Each
run's responses are in a segment of its own with its own pointer, so after the merge
both branches' responses are there: the generated files can be computed again, offline,
buying nothing.

- ``resolve`` does that in the working tree after a ``git merge`` stopped on them (or
  went through with stale results): the conflicted generated files are set aside, stale
  cells re-graded offline from the merged registry, the report, the metrics files and
  ``dvc.yaml`` rewritten, and everything generated staged with ``git add``.

No merge driver does this: git runs a driver per file before it has written the merged
tree, and a summary, its pointer and the report pages depend on all of it (the merged
registry and both sides' responses). DVC's per-file ``.gitignore`` entries are the one
exception, a set of lines: ``.gitattributes`` merges them with git's own ``union`` driver
(registries made since ``ignores`` exist have none).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from evalreg.errors import UsageError

GENERATED = (
    "reports/results/*/*.json",
    "reports/results/*/*.items.jsonl.dvc",
    "reports/results/*/.gitignore",
    "reports/metrics/*/*.json",
    "reports/store/.gitignore",
    "reports/*.md",
    "reports/*.svg",
    "dvc.yaml",
)
"""Files ``run`` and ``report`` write (repository-relative, ``fnmatch`` patterns whose
``*`` stays inside one directory); ``resolve`` may rewrite them."""

_MARKERS = (b"<<<<<<< ", b">>>>>>> ")
RESOLVE_HINT = (
    "run `evalreg resolve`: it re-grades the merged cells offline from both branches' "
    "stored responses, rewrites the report and stages it"
)


def is_generated(rel: str) -> bool:
    return any(fnmatchcase(rel, p) and rel.count("/") == p.count("/") for p in GENERATED)


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True)
    if check and done.returncode:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise UsageError(f"git {' '.join(args)}: {message}")
    return done


def unmerged(root: Path) -> list[str]:
    """Paths with unmerged index entries (a merge stopped on them)."""
    done = _git(root, "ls-files", "-u", "-z", check=False)
    if done.returncode:
        return []
    paths = {entry.split(b"\t", 1)[1].decode() for entry in done.stdout.split(b"\0") if entry}
    return sorted(paths)


def with_markers(root: Path) -> list[str]:
    """Generated files in the working tree that hold conflict markers (perhaps already
    ``git add``-ed as they were)."""
    out = []
    for pattern in GENERATED:
        for path in sorted(root.glob(pattern)):
            if not path.is_file() or path.stat().st_size > 16 << 20:
                continue
            data = path.read_bytes()
            if any(data.startswith(m) or b"\n" + m in data for m in _MARKERS):
                out.append(path.relative_to(root).as_posix())
    return out


def conflicts(root: Path) -> list[str]:
    """Generated files a merge left conflicted: unmerged, or holding conflict markers."""
    return sorted({*(p for p in unmerged(root) if is_generated(p)), *with_markers(root)})


def _stage(root: Path, stage: int, rel: str) -> bytes | None:
    done = _git(root, "show", f":{stage}:{rel}", check=False)
    return done.stdout if done.returncode == 0 else None


def union_lines(ours: bytes, theirs: bytes) -> bytes:
    """Our lines, then theirs that we lack: the merge of two lists of ignore entries."""
    lines = ours.splitlines()
    seen = set(lines)
    lines += [line for line in theirs.splitlines() if line not in seen]
    return b"".join(line + b"\n" for line in lines)


@dataclass
class Resolution:
    set_aside: list[str] = field(default_factory=list)
    """Conflicted generated files replaced by one side's version before re-grading."""
    regraded: list[str] = field(default_factory=list)
    """Cells graded again, offline, from the merged registry."""
    still_stale: list[str] = field(default_factory=list)
    """Cells whose merged requests were never bought: they need a live ``evalreg run``."""
    staged: list[str] = field(default_factory=list)
    merging: bool = False
    """A merge is in progress: ``git commit`` concludes it."""

    @property
    def exit_code(self) -> int:
        """1 while a cell is still stale: the merge cannot be committed as it is."""
        return 1 if self.still_stale else 0


def _take_a_side(root: Path, rel: str) -> None:
    """Replace a conflicted generated file with a version that parses: both sides'
    lines for an ignore file, else ours (theirs where we have none). Re-grading and the
    report then recompute what depends on the merge."""
    ours, theirs = _stage(root, 2, rel), _stage(root, 3, rel)
    if ours is None and theirs is None:  # not unmerged: markers that were staged
        ours = _git(root, "show", f"HEAD:{rel}", check=False).stdout or None
    path = root / rel
    if rel.endswith(".gitignore") and ours is not None and theirs is not None:
        data: bytes | None = union_lines(ours, theirs)
    else:
        data = ours if ours is not None else theirs
    if data is None:
        path.unlink(missing_ok=True)
        _git(root, "rm", "-q", "--cached", "--ignore-unmatch", "--", rel)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    _git(root, "add", "--", rel)


def resolve(root: Path, *, push: bool) -> Resolution:
    """Make the merged working tree's generated files right again (see the module).

    The caller holds the repository lock. Sources that still conflict are the user's to
    resolve first: the generated files are computed from them.
    """
    from evalreg.registry.loader import load_registry
    from evalreg.report.writer import write_report
    from evalreg.results.freshness import status
    from evalreg.runner.planning import RunOptions
    from evalreg.runner.run import metrics_index, metrics_updates, run
    from evalreg.store.journal import write_durably

    sources = [p for p in unmerged(root) if not is_generated(p)]
    if sources:
        raise UsageError(
            "these files still conflict: "
            + ", ".join(sources)
            + ". Resolve them (they are sources, not generated), `git add` them, then run "
            "`evalreg resolve` again"
        )
    out = Resolution(
        merging=(
            _git(root, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode == 0
        )
    )
    for rel in conflicts(root):
        _take_a_side(root, rel)
        out.set_aside.append(rel)
    registry = load_registry(root)
    stale = [s.cell.id for s in status(registry) if s.state == "stale"]
    if stale:
        result = run(root, RunOptions(offline=True, push=push))
        out.regraded = sorted(o.plan.status.cell.id for o in result.outcomes if o.written)
        registry = load_registry(root)
        out.still_stale = sorted(s.cell.id for s in status(registry) if s.state == "stale")
    for rel, data in metrics_updates(root, registry, {}):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_durably(root / rel, data)
    write_durably(root / "dvc.yaml", metrics_index(root, registry, set()).encode())
    write_report(root, registry)
    _git(root, "add", "-A", "--", "reports", "dvc.yaml")
    done = _git(root, "diff", "--cached", "--name-only", "-z", "--", "reports", "dvc.yaml")
    out.staged = sorted(p.decode() for p in done.stdout.split(b"\0") if p)
    return out
