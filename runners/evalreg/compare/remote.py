"""The default DVC remote at two revisions: whether a change moves it, what else the change
touches, and whether the new remote holds the objects the base's pointers name.

The remote is part of the record: results are only as good as the objects behind their
pointers, and a pull request that moves the remote *and* adds results could point main at a
copy that holds its own new responses and nothing else anyone has checked. So a move must
come alone (``evalreg check --base``), and the new remote must hold every object the base's
pointers name (with ``--remote``, which reads it).

Only ``.dvc/config`` counts: ``.dvc/config.local`` is never committed, so it is no part of
what a pull request changes or of the history the audit reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalreg.dvcrepo import missing_on_remote, pointer_md5
from evalreg.errors import DataMissingError, UsageError
from evalreg.redaction import url_without_credentials
from evalreg.registry.diagnostics import Finding, Severity

if TYPE_CHECKING:
    import git

DVC_CONFIG = ".dvc/config"

CREDENTIAL_OPTIONS = frozenset(
    {
        "access_key_id",
        "secret_access_key",
        "session_token",
        "account_key",
        "sas_token",
        "connection_string",
        "client_secret",
        "gdrive_client_secret",
        "password",
        "key_passphrase",
        "token",
        "oss_key_id",
        "oss_key_secret",
    }
)
"""Options of a DVC remote that hold a credential: their values are never read out."""

EVIDENCE: tuple[tuple[str, str], ...] = (
    ("results", "reports/"),
    ("selections", "registry/selections/"),
    ("rubrics", "registry/rubrics/"),
    ("tasks", "registry/tasks/"),
    ("pins", "registry/models/"),
    ("eval sets", "evalsets/"),
    ("registry files", "registry/"),
)
"""What a change of remote must not come with, by kind (the first prefix that matches)."""

MOVE_ALONE = "move the remote in a pull request of its own"
_SHOWN = 3  # changed paths named per kind; the rest are counted


class ConfigUnreadable(ValueError):
    """``.dvc/config`` is not a config file DVC could read."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class DefaultRemote:
    """The default remote as ``.dvc/config`` names it: never a credential, only where."""

    name: str
    url: str | None
    """With any credential in it replaced by ``[redacted]``."""
    endpoint: str | None = None
    """``endpointurl`` (an S3-compatible store), redacted likewise."""
    credentials: tuple[str, ...] = ()
    """Options holding a credential that were committed (their names, never the values)."""

    @property
    def location(self) -> tuple[str | None, str | None]:
        """Where the objects are: what a move changes."""
        return self.url, self.endpoint

    def describe(self) -> str:
        where = self.url or "no url"
        if self.endpoint:
            where += f" at endpoint {self.endpoint}"
        return f"'{self.name}' ({where})"


def default_remote(text: str | None) -> DefaultRemote | None:
    """The default remote ``.dvc/config`` (its text; None: no such file) names, or None
    when it names none. Raises ``ConfigUnreadable`` with the line of a syntax error."""
    if text is None:
        return None
    import configobj

    try:
        config = configobj.ConfigObj(text.splitlines(), interpolation=False)
    except configobj.ConfigObjError as exc:
        errors = getattr(exc, "errors", None) or [exc]
        first = errors[0]
        line = int(getattr(first, "line_number", 0) or 0)
        raise ConfigUnreadable(str(getattr(first, "msg", first)), line) from exc
    core = config.get("core")
    name = core.get("remote") if isinstance(core, dict) else None
    if not isinstance(name, str) or not name:
        return None
    section = config.get(f'remote "{name}"')
    options = section if isinstance(section, dict) else {}
    return DefaultRemote(
        name=name,
        url=_redacted(options.get("url")),
        endpoint=_redacted(options.get("endpointurl")),
        credentials=tuple(sorted(k for k in options if k in CREDENTIAL_OPTIONS)),
    )


def _redacted(value: object) -> str | None:
    return url_without_credentials(value) if isinstance(value, str) and value else None


def describe(remote: DefaultRemote | None) -> str:
    return remote.describe() if remote is not None else "no default remote"


@dataclass(frozen=True)
class RemoteMove:
    """A change, from the merge-base with BASE to the working tree, of the default remote."""

    base: str
    """BASE as the user named it."""
    merge_base: str
    before: DefaultRemote | None
    after: DefaultRemote | None
    evidence: dict[str, list[str]] = field(default_factory=dict)
    """By kind (``EVIDENCE``): the paths the same change touches besides the remote."""
    line: int = 0
    """The line of the new default remote's ``url`` in the working tree's config."""

    def describe(self) -> str:
        if self.after is None:
            return f"removes the default DVC remote {describe(self.before)}"
        return (
            f"moves the default DVC remote from {describe(self.before)} to {self.after.describe()}"
        )


def remote_move(root: Path, base: str) -> RemoteMove | None:
    """The move of the default remote between the merge-base of ``base`` and HEAD and the
    working tree at ``root``, or None when it did not move (or ``base`` had none to move:
    a pull request that brings the registry itself). Raises ``UsageError`` when ``base`` is
    no commit, ``ConfigUnreadable`` when the working tree's config cannot be read."""
    import git

    runner = git.Git(str(root))
    sha = _commit(runner, base)
    try:
        merge_base = runner.merge_base(sha, "HEAD").strip() or sha
    except git.GitCommandError:
        merge_base = sha  # unrelated histories: compare with BASE itself
    try:
        before = default_remote(_show(runner, merge_base, DVC_CONFIG))
    except ConfigUnreadable:
        return None  # nothing to compare with; `evalreg check` on BASE names the error
    config = root / DVC_CONFIG
    text = config.read_text(encoding="utf-8", errors="replace") if config.is_file() else None
    after = default_remote(text)
    if before is None or (after is not None and after.location == before.location):
        return None
    # NUL-separated: git would quote a path with unusual characters otherwise.
    changed = runner.diff("-z", "--name-only", "--relative", merge_base).split("\0")
    changed += runner.ls_files("-z", "--others", "--exclude-standard").split("\0")
    return RemoteMove(
        base=base,
        merge_base=merge_base,
        before=before,
        after=after,
        evidence=_by_kind(changed),
        line=_url_line(text or "", after.name) if after is not None else 0,
    )


def _commit(runner: git.Git, rev: str) -> str:
    import git

    try:
        return str(runner.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")).strip()
    except git.GitCommandError:
        raise UsageError(f"--base {rev}: no such commit in this repository") from None


def _show(runner: git.Git, rev: str, rel: str) -> str | None:
    """``rel`` (relative to the runner's directory) as committed at ``rev``, or None."""
    import git

    try:
        return str(runner.show(f"{rev}:./{rel}", strip_newline_in_stdout=False))
    except git.GitCommandError:
        return None


def _by_kind(paths: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(set(paths)):
        kind = next((k for k, prefix in EVIDENCE if path.startswith(prefix)), None)
        if kind is not None:
            out.setdefault(kind, []).append(path)
    return {k: out[k] for k, _ in EVIDENCE if k in out}


def _url_line(text: str, name: str) -> int:
    """The 1-based line of ``url`` in remote ``name``'s section of ``text`` (0: not found)."""
    section = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            section = (
                re.fullmatch(rf"""\[\s*['"]?remote\s+"{re.escape(name)}"['"]?\s*\]""", stripped)
                is not None
            )
        elif section and re.match(r"url\s*=", stripped):
            return number
    return 0


def pointers_at(root: Path, rev: str, dirs: tuple[str, ...]) -> dict[str, str]:
    """The md5 each DVC pointer under ``dirs`` (relative to ``root``) names at ``rev``."""
    import git

    with git.Repo(root, search_parent_directories=True) as repo:
        top = Path(str(repo.working_tree_dir)).resolve()
        inside = Path(root).resolve().relative_to(top).as_posix()
        prefix = "" if inside == "." else f"{inside}/"
        tree = repo.commit(rev).tree
        out: dict[str, str] = {}
        for name in dirs:
            try:
                sub = tree / f"{prefix}{name}"
            except KeyError:
                continue
            for item in sub.traverse() if isinstance(sub, git.Tree) else ():
                if not isinstance(item, git.Blob) or not str(item.path).endswith(".dvc"):
                    continue
                md5 = pointer_md5(item.data_stream.read())
                if md5 is not None:
                    out[str(item.path).removeprefix(prefix)] = md5
        return out


def move_findings(
    root: Path, move: RemoteMove, *, dirs: tuple[str, ...], lookup: bool
) -> list[Finding]:
    """What ``evalreg check --base`` says of a move: it comes with evidence (a finding);
    the new remote lacks an object BASE's pointers name (a finding per pointer, with
    ``lookup``), or was not asked (a warning, without it)."""
    if move.evidence:
        kinds = "; ".join(_listed(kind, paths) for kind, paths in move.evidence.items())
        return [
            Finding(
                DVC_CONFIG,
                move.line,
                0,
                f"{move.describe()} and also changes {kinds}: {MOVE_ALONE}, so the new "
                f"remote is checked against {move.base}'s evidence before any is added",
                Severity.FINDING,
            )
        ]
    if not lookup:
        return [
            Finding(
                DVC_CONFIG,
                move.line,
                0,
                f"{move.describe()}; whether it holds every object {move.base}'s pointers "
                f"name was not checked (`evalreg check --base {move.base} --remote` reads it)",
                Severity.WARNING,
            )
        ]
    if move.after is None:
        return [
            Finding(
                DVC_CONFIG,
                0,
                0,
                f"{move.describe()}: {move.base}'s evidence would be on no remote",
                Severity.FINDING,
            )
        ]
    pointers = pointers_at(root, move.base, dirs)
    try:
        missing = set(missing_on_remote(root, sorted(set(pointers.values()))))
    except DataMissingError as exc:
        return [
            Finding(
                DVC_CONFIG,
                move.line,
                0,
                f"{move.describe()}, which could not be read, so nothing shows that it holds "
                f"{move.base}'s evidence: {exc}",
                Severity.FINDING,
            )
        ]
    return [
        Finding(
            path,
            0,
            0,
            f"its DVC object (md5 {md5}) at {move.base} is not on {move.after.describe()}, "
            f"the default remote this change moves to from {describe(move.before)}: "
            f"`dvc push -r {move.after.name}` from a checkout of {move.base} copies it there",
            Severity.FINDING,
        )
        for path, md5 in sorted(pointers.items())
        if md5 in missing
    ]


def _listed(kind: str, paths: list[str]) -> str:
    shown = ", ".join(paths[:_SHOWN])
    more = len(paths) - _SHOWN
    return f"{kind} ({shown}{f', and {more} more' if more > 0 else ''})"
