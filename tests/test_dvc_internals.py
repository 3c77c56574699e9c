"""What evalreg reads of DVC beyond its documented API, checked against the installed DVC.

DVC documents ``dvc.api`` only; ``dvclock`` reads DVC's lock (``dvc.lock``,
``dvc.repo.lock_repo``, the files under ``.dvc/tmp``), ``dvcrepo.quiet`` turns DVC's
console off. A minor release may move or reshape any of them without a word: these tests
fail first, naming what is gone and the DVC version installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
from importlib.metadata import version
from pathlib import Path

import pytest

from evalreg import dvclock

DVC = version("dvc")


def test_the_lock_names_dvclock_uses_are_in_the_installed_dvc() -> None:
    for module, names in dvclock.DVC_NAMES.items():
        found = importlib.import_module(module)
        for name in names:
            assert hasattr(found, name), f"{module}.{name} is gone in DVC {DVC}"
    parameters = inspect.signature(importlib.import_module("dvc.lock").make_lock).parameters
    assert {"tmp_dir", "hardlink_lock"} <= set(parameters), f"make_lock changed in DVC {DVC}"


@pytest.fixture
def dvc_tmp(tmp_path: Path) -> Path:
    from dvc.repo import Repo

    Repo.init(str(tmp_path), no_scm=True).close()
    return tmp_path / ".dvc" / "tmp"


def test_dvc_lock_taken_through_dvclock_is_found_with_its_holder(dvc_tmp: Path) -> None:
    from dvc.repo import Repo

    root = dvc_tmp.parent.parent
    repo = Repo(str(root))
    try:
        with dvclock.holding_lock(repo):
            holders, _ = dvclock.lock_holders(root, hardlink=False)
            written = (dvc_tmp / "lock").read_text().strip()
    finally:
        repo.close()
    assert [h.pid for h in holders] == [os.getpid()], f"DVC {DVC}'s lock is not found"
    assert written == str(os.getpid()), f"DVC {DVC}'s lock file holds {written!r}, not a pid"


def test_dvc_lock_table_records_are_read_as_dvc_writes_them(dvc_tmp: Path) -> None:
    from dvc.fs import LocalFileSystem
    from dvc.rwlock import rwlock

    out = str(dvc_tmp.parent.parent / "data.jsonl")
    with rwlock(str(dvc_tmp), LocalFileSystem(), "dvc add data.jsonl", [], [out], False):
        table = json.loads((dvc_tmp / "rwlock").read_bytes())
        holders, cleared = dvclock.lock_holders(dvc_tmp.parent.parent, hardlink=False)
    assert [(h.pid, h.holds.split(" in ")[0]) for h in holders] == [(os.getpid(), out)], (
        f"DVC {DVC}'s lock table has a shape dvclock does not read: {table}"
    )
    assert not cleared


def test_dvc_console_is_switched_as_dvcrepo_quiet_switches_it() -> None:
    from dvc.ui import ui

    from evalreg import dvcrepo

    assert isinstance(getattr(ui, "_enabled", None), bool), f"DVC {DVC}'s console changed"
    before = ui._enabled
    with dvcrepo.quiet():
        assert ui._enabled is False
    assert ui._enabled is before
