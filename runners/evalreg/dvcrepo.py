"""In-process DVC: initialise, configure the remote, track and push data, all silently.

DVC is imported only here and only when a command needs it (it costs ~0.6 s to import).
Its console output and logging are silenced: evalreg reports in its own words.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    """``dvc init`` in the git repository ``root`` and set its default remote; return its URL."""
    from dvc.repo import Repo

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


def track(root: Path, paths: list[str], *, push: bool = True) -> None:
    """``dvc add`` each path (relative to ``root``) and, by default, push it to the remote."""
    from dvc.repo import Repo

    with quiet():
        repo = Repo(str(root))
        try:
            repo.add([str(root / p) for p in paths])
            if push:
                repo.push([str(root / p) for p in paths])
        finally:
            repo.close()
