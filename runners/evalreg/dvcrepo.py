"""In-process DVC: initialise, configure the remote, track and push data, all silently.

DVC is imported only here and only when a command needs it (it costs ~0.6 s to import).
Its console output and logging are silenced: evalreg reports in its own words. Every
call that takes DVC's lock goes through ``with_repo``, which waits for a live holder and
names one that does not let go.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg import dvclock
from evalreg.errors import DataMissingError, DvcLockedError, MissingPluginError, UsageError
from evalreg.ignores import ensure_ignored
from evalreg.redaction import url_without_credentials

IN_REPO_REMOTE = "dvc-storage"
REMOTE_NAME = "storage"


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence DVC's UI and logging for the duration of the block."""
    from dvc.ui import ui

    logger = logging.getLogger("dvc")
    level, enabled = logger.level, ui._enabled
    logger.setLevel(logging.CRITICAL + 1)
    ui._enabled = False
    try:
        yield
    finally:
        ui._enabled = enabled
        logger.setLevel(level)


def open_repo(root: str | Path) -> Any:
    from dvc.repo import Repo

    with quiet():
        return Repo(str(root))


def init(root: Path, remote: str | None) -> str:
    """``dvc init`` in the git repository ``root`` and set its default remote; return its URL.

    Also ignores raw run output by pattern (``ignores``), once, before any run writes.
    """
    from dvc.repo import Repo

    ensure_ignored(Path(root))
    with quiet():
        repo = Repo.init(str(root))
        # DVC reads a local path relative to the working directory and stores it
        # relative to .dvc/config, which keeps the in-repository remote portable.
        url = remote if remote else os.path.relpath(Path(root).resolve() / IN_REPO_REMOTE)
        with repo.config.edit() as conf:
            conf["remote"][REMOTE_NAME] = {"url": url}
            conf["core"]["remote"] = REMOTE_NAME
        with repo.config.edit() as conf:
            conf["core"]["autostage"] = True
        repo.close()
    return remote if remote else f"{IN_REPO_REMOTE}/ (inside the repository)"


def add(repo: Any, root: Path, paths: list[str]) -> None:
    """``dvc add`` each path (relative to ``root``) in the open ``repo``.

    DVC puts a file in its cache, then by default replaces the file with one made from the
    cache (a "relink"). With a cache that copies (DVC's default, ``reflink,copy``) that is
    a second copy of bytes already in place, a third of the add: only a cache that links
    (``hardlink``, ``symlink``) is relinked, so the file becomes that link as DVC makes it.
    """
    first = next(iter(repo.cache.local.cache_types), "copy")
    repo.add([str(root / p) for p in paths], relink=first in ("hardlink", "symlink"))


def track(root: Path, paths: list[str], *, push: bool = True) -> None:
    """``dvc add`` each path (relative to ``root``) and, by default, push it to the remote."""

    pushed = (lambda repo: repo.push([str(root / p) for p in paths]),) if push else ()
    with_repo(root, lambda repo: add(repo, root, paths), *pushed)


def with_repo(root: Path, *steps: Callable[[Any], object]) -> None:
    """Each of ``steps`` (``step(repo)``) on the DVC repository at ``root``, opened quietly,
    each holding DVC's lock (released in between: DVC reads its stages afresh).

    DVC's ``LockError`` (its lock, or its lock table's record of a path a step writes) is
    waited out while a live process holds it, up to ``dvclock.patience()`` seconds, then the
    step runs again from its start (what DVC does is idempotent). What a process that
    has ended left behind is cleared at once: its records in the lock table, and a hardlink
    lock an evalreg process took (``dvclock``). Callers hold evalreg's repository lock,
    so no other evalreg process clears the same. Still held: ``DvcLockedError``, naming
    the holder when it can be found. git's own index lock, which DVC takes to stage a
    pointer and a killed process leaves behind, is named, never removed: only the user
    can tell that no git command of theirs is running."""
    from dulwich.file import FileLocked
    from dvc.lock import HardlinkLock, LockError
    from dvc.repo import Repo

    pause, swept, unnamed, since = 0.05, 0, False, None
    todo = list(steps)
    while True:
        tried = time.monotonic()
        with quiet():
            repo = Repo(str(root))
            hardlink = isinstance(repo.lock, HardlinkLock)
            try:
                while todo:
                    with dvclock.holding_lock(repo):
                        todo[0](repo)
                    todo.pop(0)
                return
            except LockError as exc:
                error = str(exc)
            except FileLocked as exc:
                raise DvcLockedError(_git_index_locked(root, exc)) from None
            finally:
                repo.close()
        since = tried if since is None else since  # DVC itself tries for a few seconds
        waited = time.monotonic() - since
        holders, cleared = dvclock.lock_holders(root, hardlink=hardlink)
        if cleared and swept < 3:
            swept += 1
            continue
        if holders and waited < dvclock.patience() and not dvclock.unnamed_hardlink(holders):
            pass
        elif not holders and not unnamed:
            unnamed = True  # released meanwhile, or by a holder nothing names: once more
        else:
            raise DvcLockedError(dvclock.locked_message(holders, waited, error)) from None
        dvclock.pause(pause)
        pause = min(pause * 2, 2.0)


def _git_index_locked(root: Path, exc: Exception) -> str:
    lockfile = getattr(exc, "lockfilename", b"")
    name = os.fsdecode(lockfile) if lockfile else ".git/index.lock"
    with contextlib.suppress(ValueError):
        name = Path(name).relative_to(root.resolve()).as_posix()
    return (
        f"git's index is locked ({name}): a git command is running here, or one was killed "
        "and left its lock behind. If no git command is running, remove the file and run "
        "this command again; nothing evalreg wrote is lost"
    )


def untrack(root: Path, pointers: list[str]) -> None:
    """``dvc remove`` each pointer: the pointer and its .gitignore entry go; the cached
    and pushed data stay, so revisions that point at it still read it."""

    def work(repo: Any) -> None:
        for pointer in pointers:
            if (root / pointer).exists():  # (tried again after a wait for DVC's lock)
                repo.remove(str(root / pointer))

    with_repo(root, work)


def push(root: Path, paths: list[str]) -> str | None:
    """Push tracked paths to the default remote; return why it failed, or None.

    A failed push loses nothing (the data is in the local cache): ``dvc push`` later.
    """
    try:
        with_repo(root, lambda repo: repo.push([str(root / p) for p in paths]))
    except DvcLockedError as exc:
        return str(exc)
    except Exception as exc:
        plugin = _missing_plugin(exc, root)
        return str(plugin) if plugin else f"{type(exc).__name__}: {exc}"
    return None


def pointer_md5(data: bytes) -> str | None:
    """The md5 recorded in a single-output ``.dvc`` pointer file, or None if it has none.

    A pointer in the shape DVC writes is read by a pattern that accepts only text YAML
    reads the same way; anything else is parsed as YAML. (A command reads the pointer of
    every tracked file it uses, and the pure-Python YAML parser takes about a millisecond
    over a five-line pointer.)
    """
    written = _AS_DVC_WRITES.fullmatch(data)
    if written is not None:
        keys = _WRITTEN_KEY.findall(written[2])
        if len(set(keys)) == len(keys) and b"md5" not in keys:  # YAML refuses a key twice
            return written[1].decode()
    return _parsed_pointer_md5(data)


def pointer_path(data: bytes) -> str | None:
    """The ``path`` a single-output ``.dvc`` pointer names, or None when it names none (or
    is not one). What DVC writes holds a plain word there (the file beside the pointer);
    anything else is parsed as YAML."""
    written = _AS_DVC_WRITES.fullmatch(data)
    if written is not None:
        found = re.search(rb"^  path: (\S+)\n", written[2], re.M)
        return found[1].decode() if found else None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe", pure=True).load(data)
    except (YAMLError, RecursionError):
        return None
    outs = doc.get("outs") if isinstance(doc, dict) else None
    if not isinstance(outs, list) or len(outs) != 1 or not isinstance(outs[0], dict):
        return None
    path = outs[0].get("path")
    return None if path is None else str(path)


def _parsed_pointer_md5(data: bytes) -> str | None:
    """``pointer_md5`` by parsing ``data`` as YAML, whatever its shape."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe", pure=True).load(data)
    except (YAMLError, RecursionError):  # RecursionError: nested too deep to read
        return None
    outs = doc.get("outs") if isinstance(doc, dict) else None
    if not isinstance(outs, list) or len(outs) != 1 or not isinstance(outs[0], dict):
        return None
    md5 = outs[0].get("md5")
    # Only an md5 names a file in the cache: anything else could name any path.
    return md5 if isinstance(md5, str) and _MD5.fullmatch(md5) else None


_MD5 = re.compile(r"[0-9a-f]{32}")
_AS_DVC_WRITES = re.compile(
    rb"""outs:\n
    -\ md5:\ ((?=[0-9a-f]*[a-df])[0-9a-f]{32})\n  # an md5 YAML cannot take for a number
    (  # then keys such as size, hash and path, each a small integer or a plain word:
        (?:\ \ [a-z_]+:\ (?:
            [0-9]{1,18}
            | [A-Za-z_][\w.-]*  # YAML reads it as a string, a boolean or null
            | [0-9][\w.-]*[g-np-su-wyG-NP-SU-WY][\w.-]*  # a letter no number or date has
        )\n)*
    )""",
    re.ASCII | re.VERBOSE,
)
"""What DVC writes for one file (``outs:`` with one entry, its md5 first), limited to text
that YAML reads without a doubt: no quotes, spaces, colons, comments or tags, and no value
YAML's resolver could take for a float, a date or a number it cannot build. (An md5 needs a
letter other than ``e``: ``1234e5678…`` would be a float.)"""
_WRITTEN_KEY = re.compile(rb"^  ([a-z_]+):", re.M)


def _in_layouts(directory: Path, md5: str) -> tuple[Path, Path]:
    """Where a DVC cache or remote ``directory`` keeps ``md5``: DVC 3's layout, the legacy one."""
    return directory / "files" / "md5" / md5[:2] / md5[2:], directory / md5[:2] / md5[2:]


def cached(root: Path, md5: str) -> bytes | None:
    """Bytes of ``md5`` from the repository's local DVC cache, verified, or None."""
    for path in _in_layouts(root / ".dvc" / "cache", md5):
        if path.is_file():
            data = path.read_bytes()
            if hashlib.md5(data, usedforsecurity=False).hexdigest() == md5:
                return data
    return None


def local_copy(root: Path, md5: str) -> Path | None:
    """A file on this machine that holds ``md5``'s content, verified, or None: the local
    DVC cache's copy, else that of a default remote that is a directory here.

    For readers that take what they need of a large file when they need it instead of
    holding all of it: the file is verified in blocks, never read whole into memory.
    """
    found = cached_file(root, md5)
    if found is None and (remote := _local_remote(root)) is not None:
        found = _verified_file(_in_layouts(remote, md5), md5)
    return found


def in_cache(root: Path, md5: str) -> bool:
    """Whether the local DVC cache has a file for ``md5`` (not verified: a question asked of
    every result a command might need, answered without reading them)."""
    return any(path.is_file() for path in _in_layouts(root / ".dvc" / "cache", md5))


def holds(path: Path, md5: str) -> bool:
    """Whether the file at ``path`` is there and its content is ``md5`` (hashed in blocks)."""
    return _verified_file([path], md5) is not None


def cached_file(root: Path, md5: str) -> Path | None:
    """The local DVC cache's file of ``md5``, verified in blocks (never read whole), or
    None."""
    return _verified_file(_in_layouts(root / ".dvc" / "cache", md5), md5)


def state_md5s(root: Path, rels: Iterable[str]) -> dict[str, str]:
    """The md5 of each of ``rels`` (files in the working tree at ``root``) as DVC hashes
    it, through its state database: a file ``dvc add``, ``dvc pull`` or ``dvc checkout``
    hashed, and has not changed since, is not read again. Files DVC cannot answer for
    (no DVC repository, a file gone, a legacy hash) are left out, for the caller to hash."""
    from dvc_data.hashfile.hash import hash_file

    out: dict[str, str] = {}
    try:
        with quiet():
            repo = open_repo(root)
            try:
                for rel in rels:
                    with contextlib.suppress(OSError):
                        _, info = hash_file(str(root / rel), repo.fs, "md5", state=repo.state)
                        if info.name == "md5" and isinstance(info.value, str):
                            out[rel] = info.value
            finally:
                repo.close()
    except Exception:  # DVC raises many unrelated types: the caller hashes what is left
        return out
    return out


def _verified_file(paths: Iterable[Path], md5: str) -> Path | None:
    """The first of ``paths`` that is a file whose content is ``md5`` (hashed in blocks)."""
    for path in paths:
        if path.is_file():
            with path.open("rb") as f:
                digest = hashlib.file_digest(f, lambda: hashlib.md5(usedforsecurity=False))
                if digest.hexdigest() == md5:
                    return path
    return None


_RECENT: dict[str, bytes] | None = None
"""Content read by ``read_tracked`` inside ``remembering_reads``, by md5."""


@contextlib.contextmanager
def remembering_reads() -> Iterator[None]:
    """Within the block, each tracked file's content is read (and verified) once: content
    is addressed by its md5, so a diff reading one file at two revisions reads it once."""
    global _RECENT
    outer = _RECENT
    _RECENT = {} if outer is None else outer
    try:
        yield
    finally:
        _RECENT = outer


def read_ahead(root: Path, md5s: list[str]) -> Callable[[], None]:
    """Inside ``remembering_reads``: read and verify these files from the local cache on a
    thread, so that ``read_tracked`` finds them read when it gets to them. Returns a
    function that waits for the thread. (Files not in the cache are left alone.)"""
    import threading

    recent = _RECENT
    if recent is None or not md5s:
        return lambda: None

    def read() -> None:
        for md5 in md5s:
            if md5 not in recent:
                data = cached(root, md5)
                if data is not None:
                    recent.setdefault(md5, data)

    worker = threading.Thread(target=read, name="evalreg-read-ahead", daemon=True)
    worker.start()
    return worker.join


def read_tracked(root: Path, rel: str, md5: str, rev: str | None) -> bytes:
    """Bytes of the DVC-tracked ``rel`` (content ``md5``) as of ``rev``.

    The local cache answers first; otherwise ``dvc.api`` reads it (from the remote if
    need be). When no copy can be found the error says how to fetch one.
    """
    if _RECENT is None:
        return _read_tracked(root, rel, md5, rev)
    data = _RECENT.get(md5)
    if data is None:
        data = _RECENT[md5] = _read_tracked(root, rel, md5, rev)
    return data


def _read_tracked(root: Path, rel: str, md5: str, rev: str | None) -> bytes:
    data = cached(root, md5)
    if data is not None:
        return data
    data = _from_local_remote(root, md5)
    if data is not None:
        return data
    # Another revision's file often has the same content as the working tree's copy.
    here = (root / rel).resolve()
    if rev is not None and here.is_relative_to(root.resolve()) and here.is_file():
        data = here.read_bytes()
        if hashlib.md5(data, usedforsecurity=False).hexdigest() == md5:
            return data
    import dvc.api

    try:
        with quiet():
            data = dvc.api.read(rel, repo=str(root), rev=rev, mode="rb")
    except Exception as exc:  # DVC raises many unrelated types for "not available"
        raise _missing_plugin(exc, root) or DataMissingError(
            _missing_message(root, rel, md5, exc)
        ) from None
    if not isinstance(data, bytes):
        raise DataMissingError(f"{rel}: DVC returned no data")
    return data


_CONFIGS = (".dvc/config.local", ".dvc/config")
"""DVC's config files, the local one first (it wins, key by key)."""


def _local_remote(root: Path) -> Path | None:
    """The default DVC remote's directory when it is one on this machine (a path, relative
    to ``.dvc/``), as ``.dvc/config.local`` and ``.dvc/config`` set it; else None.

    Asked once for every tracked file a command reads (each of an eval set's attachments),
    so the answer is kept for as long as neither file changes (their ``stat``)."""
    stamps: list[tuple[int, int, int, int] | None] = []
    for rel in _CONFIGS:
        try:
            st = (root / rel).stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return _remote_of(root, tuple(stamps))


@functools.lru_cache(maxsize=16)
def _remote_of(root: Path, stamps: tuple[tuple[int, int, int, int] | None, ...]) -> Path | None:
    """``_local_remote`` for config files in the state ``stamps`` records (None: absent)."""
    url = default_remote_url(root, [r for r, stamp in zip(_CONFIGS, stamps, strict=True) if stamp])
    if url is None or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        return None  # s3://, gs://, https://, ssh://…: DVC's own clients read those
    return (root / ".dvc" / url).resolve()


def default_remote_url(root: Path, configs: Iterable[str] = _CONFIGS) -> str | None:
    """The default DVC remote's URL as ``.dvc/config.local`` and ``.dvc/config`` set it
    (read as text, without starting DVC), or None."""
    import configobj

    read = []
    for rel in configs:
        if (root / rel).is_file():
            try:
                read.append(configobj.ConfigObj(str(root / rel), encoding="utf-8"))
            except (configobj.ConfigObjError, OSError, UnicodeDecodeError):
                return None
    # The local file wins, key by key, as in DVC.
    name = next((n for c in read if (n := (c.get("core") or {}).get("remote"))), None)
    url = next((u for c in read if (u := (c.get(f'remote "{name}"') or {}).get("url"))), None)
    return url if isinstance(url, str) and url else None


def _from_local_remote(root: Path, md5: str) -> bytes | None:
    """Bytes of ``md5`` from a default remote that is a directory here, verified, or None
    (what ``dvc.api.read`` would return, without starting DVC: seconds on every command
    of a fresh clone whose remote sits beside it)."""
    remote = _local_remote(root)
    if remote is None:
        return None
    for path in _in_layouts(remote, md5):
        if path.is_file():
            data = path.read_bytes()
            if hashlib.md5(data, usedforsecurity=False).hexdigest() == md5:
                return data
    return None


def remote_description(root: Path) -> str:
    """Name and URL of the default DVC remote, for messages (a credential in the URL
    replaced by ``[redacted]``)."""
    try:
        repo = open_repo(root)
        try:
            name = repo.config["core"].get("remote")
            url = repo.config["remote"].get(name, {}).get("url") if name else None
        finally:
            repo.close()
    except Exception:
        return "no DVC remote"
    if not name:
        return "no default DVC remote configured"
    return f"remote '{name}' ({url_without_credentials(url) if isinstance(url, str) else url})"


def missing_on_remote(root: Path, md5s: list[str]) -> list[str]:
    """The md5s of ``md5s`` that the default DVC remote holds under neither DVC 3's layout
    nor the legacy one, sorted. Raises ``DataMissingError`` when the remote cannot be read
    (none configured, unreachable, no credentials): then nothing is known."""
    if not md5s:
        return []
    try:
        with quiet():
            repo = open_repo(root)
            try:
                remote = repo.cloud.get_remote(command="check --remote")
                wanted = set(md5s)
                found = set(remote.odb.oids_exist(sorted(wanted)))
                if wanted - found:
                    found |= set(remote.legacy_odb.oids_exist(sorted(wanted - found)))
            finally:
                repo.close()
    except Exception as exc:  # DVC raises many unrelated types for "cannot read the remote"
        raise _missing_plugin(exc, root) or DataMissingError(
            f"the {remote_description(root)} could not be read ({type(exc).__name__}: {exc})"
        ) from None
    return sorted(wanted - found)


def _missing_message(root: Path, rel: str, md5: str, exc: Exception) -> str:
    remote = remote_description(root)
    here = (root / rel).resolve()
    if here.is_relative_to(root.resolve()) and here.is_file():
        # Not this version, or it would have been read: say which one is there instead.
        found = hashlib.md5(here.read_bytes(), usedforsecurity=False).hexdigest()
        where = (
            f"is in neither the DVC cache nor the {remote}, and the working tree holds another "
            f"version of it (md5 {found})"
        )
    else:
        where = f"is in neither the working tree, the DVC cache nor the {remote}"
    return (
        f"{rel} (md5 {md5}) {where}. Fetch it with `dvc pull {rel}.dvc`; if the remote lacks "
        "it, run `dvc push` where it was produced, or, when that was a merged pull request "
        "whose run never pushed (`evalreg check --remote` names it), `evalreg run` buys its "
        f"evidence again. ({type(exc).__name__})"
    )


def track_files(root: Path, rels: list[str], *, push: bool) -> None:
    """Track files (an eval set's attachments) with DVC, each by its own pointer, and push
    them; ``UsageError`` when git tracks one or DVC cannot."""
    import git

    in_git = git.Repo(root).git.ls_files("--", *rels)
    if in_git:
        first = in_git.splitlines()[0]
        raise UsageError(
            f"{first} is tracked by git; DVC must track it instead. Run "
            f"`git rm --cached {first}` and try again"
        )
    try:
        track(root, rels, push=push)
    except UsageError:
        raise
    except Exception as exc:
        raise _missing_plugin(exc, root) or UsageError(
            f"DVC could not track {', '.join(rels)}: {exc}"
        ) from None


def add_and_push(root: Path, rel: str, *, push: bool) -> str:
    """Track ``rel`` with DVC (``dvc add``) and push it; return its md5."""
    import git

    repo_git = git.Repo(root)
    if repo_git.git.ls_files("--", rel):
        raise UsageError(
            f"{rel} is tracked by git; DVC must track it instead. Run "
            f"`git rm --cached {rel}` and try again"
        )
    try:
        track(root, [rel], push=push)
    except UsageError:
        raise
    except Exception as exc:
        raise _missing_plugin(exc, root) or UsageError(
            f"DVC could not track {rel}: {exc}"
        ) from None
    md5 = pointer_md5((root / f"{rel}.dvc").read_bytes())
    if md5 is None:
        raise UsageError(f"DVC wrote no md5 for {rel}")
    return md5


REMOTE_EXTRAS = ("s3", "gs", "azure")
"""Object stores whose DVC plugin an evalreg extra of the same name brings (DVC names its
own extras so): ``pip install 'evalreg[s3]'``."""


def remote_extra(url: str) -> str | None:
    """The evalreg extra a DVC remote at ``url`` needs (``s3://…`` → ``s3``), or None."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep and scheme.lower() in REMOTE_EXTRAS else None


def require_remote_plugin(root: Path) -> None:
    """Raise ``MissingPluginError`` when the default remote is in an object store whose DVC
    plugin is not installed, before a command does work that ends in a push (a run would
    otherwise buy responses it cannot share). Asked without starting DVC; anything else
    about the remote (none configured, unreachable) is left to the step that uses it."""
    import importlib.util

    url = default_remote_url(root)
    extra = remote_extra(url) if url else None
    if url and extra and importlib.util.find_spec(f"dvc_{extra}") is None:
        raise MissingPluginError(_plugin_message(url, extra))


def _plugin_message(url: str, protocol: str) -> str:
    if protocol not in REMOTE_EXTRAS:
        return (
            f"the DVC remote {url} needs DVC's {protocol} plugin, which is not installed "
            f"here. Install it with `pip install 'dvc[{protocol}]'`."
        )
    return (
        f"the DVC remote {url} needs DVC's {protocol} plugin (dvc-{protocol}), which is not "
        f"installed here. Install it with `pip install 'evalreg[{protocol}]'`; CI installs "
        f"it when registry/evalreg.yaml's install and the workflows' EVALREG_SPEC name the "
        f"extra (evalreg[{protocol}]==X.Y.Z)."
    )


def _missing_plugin(exc: BaseException, root: Path) -> MissingPluginError | None:
    """``exc`` (or what it wraps) as DVC's "this remote needs a plugin" in evalreg's words.

    DVC says so two ways: ``RemoteMissingDepsError``, and, for a filesystem it only knows
    by name, an ``ImportError`` in its own words ("gs is supported, but requires 'dvc-gs' to
    be installed")."""
    from dvc.fs import RemoteMissingDepsError

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, RemoteMissingDepsError):
            return MissingPluginError(_plugin_message(str(cause.url), str(cause.protocol)))
        named = _NEEDS_PLUGIN.match(str(cause)) if isinstance(cause, ImportError) else None
        if named is not None:
            url = default_remote_url(root) or f"{named[1]}://…"
            return MissingPluginError(_plugin_message(url, named[1]))
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


_NEEDS_PLUGIN = re.compile(r"^([a-z0-9]+) is supported, but requires 'dvc-\1' to be installed")


# ------------------------------------------------ a remote inside the repository
# A remote that is a folder of the git work tree (the scaffold's ``dvc-storage/``) reaches
# a clone only through git: its objects are committed like the pointers that name them.


def in_repo_remote(root: Path) -> Path | None:
    """The default remote's directory when it lies inside ``root``'s git work tree (and
    outside ``.git``), else None: a remote elsewhere, or one a URL names."""
    remote = _local_remote(root)
    if remote is None:
        return None
    top = _work_tree(root)
    if top is None or remote == top or not remote.is_relative_to(top):
        return None
    return None if ".git" in remote.relative_to(top).parts else remote


def _work_tree(root: Path) -> Path | None:
    import subprocess

    done = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True
    )
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def remote_object(root: Path, md5: str) -> str | None:
    """Where an in-repository remote holds ``md5``'s object, relative to ``root`` (DVC 3's
    layout, or the legacy one where only that exists); None without such a remote."""
    remote = in_repo_remote(root)
    if remote is None:
        return None
    new, legacy = _in_layouts(remote, md5)
    path = legacy if legacy.is_file() and not new.is_file() else new
    return Path(os.path.relpath(path, root.resolve())).as_posix()


@dataclass(frozen=True)
class UntrackedObject:
    """An object of the in-repository remote that git does not track."""

    path: str
    """Relative to the repository's root."""
    md5: str
    ignored_by: str | None = None
    """The ignore rule that keeps it out of ``git add`` (``FILE:LINE:PATTERN``), if one does."""


def untracked_objects(root: Path, md5s: Iterable[str]) -> list[UntrackedObject]:
    """The objects of ``md5s`` that an in-repository remote holds and git does not track
    (neither committed nor staged), by path; [] without such a remote, or when git cannot
    tell."""
    try:
        return _untracked(root, md5s)
    except _GitFailed:
        return []


def _untracked(root: Path, md5s: Iterable[str]) -> list[UntrackedObject]:
    paths = {p: md5 for md5 in set(md5s) if (p := remote_object(root, md5)) is not None}
    present = {p: md5 for p, md5 in paths.items() if (root / p).is_file()}
    if not present:
        return []
    tracked = set(_git(root, "ls-files", "-z", "--", *sorted(present)).split("\0"))
    untracked = sorted(set(present) - tracked)
    ignored = _ignore_rules(root, untracked)
    return [UntrackedObject(p, present[p], ignored.get(p)) for p in untracked]


@dataclass(frozen=True)
class StagedObjects:
    """What ``stage_objects`` did: the objects it staged, and those it could not."""

    staged: tuple[str, ...] = ()
    ignored: tuple[UntrackedObject, ...] = ()
    """Objects a ``.gitignore`` rule keeps out: not forced past it (say so instead)."""
    error: str | None = None
    """Why ``git add`` failed, if it did (``evalreg check`` lists what is left)."""


def stage_objects(root: Path, rels: Iterable[str]) -> StagedObjects:
    """After a push: ``git add`` the in-repository remote's objects that the pointers of
    the tracked paths ``rels`` name and git does not track yet.

    Only those objects, not every untracked file of the remote: the objects of another
    branch's pointers stay out of this branch, as its segments do. An object git ignores
    is left unstaged and reported (adding it with ``-f`` would hide the rule from the
    team). Nothing is staged without an in-repository remote.
    """
    if in_repo_remote(root) is None:
        return StagedObjects()
    md5s = []
    for rel in rels:
        pointer = root / f"{rel}.dvc"
        md5 = pointer_md5(pointer.read_bytes()) if pointer.is_file() else None
        if md5 is not None:
            md5s.append(md5)
    try:
        untracked = _untracked(root, md5s)
        staged = tuple(o.path for o in untracked if o.ignored_by is None)
        if staged:
            _git(root, "add", "--", *staged)
    except _GitFailed as exc:
        return StagedObjects(error=str(exc))
    return StagedObjects(staged, tuple(o for o in untracked if o.ignored_by is not None))


def to_commit(root: Path, tracked: Iterable[str], others: Iterable[str] = ()) -> list[str]:
    """What to commit after tracking ``tracked`` (and writing ``others``): each pointer, the
    ``.gitignore`` beside it, then ``others``, as far as git sees them new or changed."""
    wanted: dict[str, None] = {}
    for rel in tracked:
        wanted[f"{rel}.dvc"] = None
        wanted[Path(rel).with_name(".gitignore").as_posix()] = None
    wanted.update(dict.fromkeys(others))
    try:
        out = _git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--", *wanted)
    except _GitFailed:
        return list(wanted)
    # Each entry is "XY path"; a rename adds its old path as the next field.
    changed = {entry[3:] for entry in out.split("\0") if len(entry) > 3}
    return [rel for rel in wanted if rel in changed]


class _GitFailed(Exception):
    pass


def _git(root: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, input=stdin)
    if done.returncode not in ok:
        raise _GitFailed(f"git {args[0]}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def _ignore_rules(root: Path, paths: list[str]) -> dict[str, str]:
    """The ignore rule (``FILE:LINE:PATTERN``) that ignores each of ``paths`` git ignores."""
    if not paths:
        return {}
    # -z: fields NUL-separated, four a path (source, line, pattern, path); exit 1: none.
    listed = "".join(f"{p}\0" for p in paths)
    fields = _git(root, "check-ignore", "-v", "-z", "--stdin", ok=(0, 1), stdin=listed).split("\0")
    rules = [fields[i : i + 4] for i in range(0, len(fields) - 3, 4)]
    # A negated pattern (``!…``) that matched last is shown too: it un-ignores the path.
    return {path: f"{src}:{line}:{pat}" for src, line, pat, path in rules if pat[:1] != "!"}
