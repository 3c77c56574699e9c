"""What a command loads: most of a command's start-up is imports, so a package it does not
use stays unloaded. Each test runs the command in a fresh interpreter and reads
``sys.modules`` afterwards; none measures time (``tests/benchmarks/startup.py`` does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Repo

SOURCE = Path(__file__).resolve().parent.parent / "runners" / "evalreg"

PROBE = """\
import runpy, sys
sys.argv = ["evalreg", *sys.argv[1:]]
try:
    runpy.run_module("evalreg", run_name="__main__")
finally:
    print("LOADED", *sorted(sys.modules))
"""

NOT_FOR_CHECK = {"httpx", "click", "pygments", "dvc", "git", "scipy", "botocore"}
"""Packages ``evalreg check`` has no use for: HTTP, DVC itself (a local remote is read
directly), GitPython, statistics tests, AWS signing."""
METRIC_LIBRARIES = {"nltk", "rouge_score", "sacrebleu"}
"""What the ``rouge`` and ``bleu`` graders compute with (rouge-score loads NLTK, a second's
import): loaded when a rubric builds such a grader, by no other command or rubric."""


def loaded(*args: str) -> tuple[int, set[str]]:
    """The exit status of ``evalreg ARGS`` and every module it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert lines, done.stderr
    _, *modules = lines[-1].split()
    return done.returncode, set(modules)


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_loads_the_standard_library_only():
    code, modules = loaded("--help")
    assert code == 0
    bare = subprocess.run(  # what the interpreter and site load without evalreg
        [sys.executable, "-c", "import sys; print(*sys.modules)"], capture_output=True, text=True
    ).stdout.split()
    third_party = packages(modules) - set(sys.stdlib_module_names) - {"evalreg"}
    assert third_party <= packages(set(bare))
    # Neither is needed to print help, and both cost a fifth of it (dataclasses imports
    # inspect): the exception hierarchy names its findings' type for type checkers only.
    assert not {"dataclasses", "inspect"} & modules


def test_check_loads_no_http_client_dvc_or_git(repo: Repo):
    code, modules = loaded("-C", str(repo.root), "check")
    assert code == 0
    assert {"pydantic", "evalreg.check"} <= modules  # it did check the registry
    assert not (NOT_FOR_CHECK | METRIC_LIBRARIES) & packages(modules)


def test_run_loads_httpx_only_when_it_buys(live: Repo, server):
    code, modules = loaded("-C", str(live.root), "run", "--no-push")
    assert code == 0
    assert server.count() == 4  # every item was bought over HTTP
    assert "httpx" in modules
    # Graded again from the store: nothing to send, so neither the HTTP layer nor httpx.
    code, modules = loaded("-C", str(live.root), "run", "--offline", "--force", "--no-push")
    assert code == 0
    assert server.count() == 4
    assert "evalreg.runner.run" in modules
    assert not ({"httpx", "httpcore"} | METRIC_LIBRARIES) & packages(modules)
    assert "evalreg.providers.http" not in modules


THREADS_PROBE = """\
import os, runpy, sys
sys.argv = ["evalreg", *sys.argv[1:]]
try:
    runpy.run_module("evalreg", run_name="__main__")
finally:
    print(
        "LOADED", "numpy" in sys.modules, len(os.listdir("/proc/self/task")),
        os.environ.get("OPENBLAS_NUM_THREADS"),
    )
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_numpy_starts_no_blas_threads_unless_asked():
    """OpenBLAS starts a thread per core as NumPy loads, each spinning a tenth of a second:
    ``evalreg`` multiplies no matrices, so it asks for none, unless the user chose."""
    example = SOURCE.parent.parent
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    runs = {}
    for chosen in (None, "2"):
        env = base if chosen is None else {**base, "OPENBLAS_NUM_THREADS": chosen}
        done = subprocess.run(
            [sys.executable, "-c", THREADS_PROBE, "-C", str(example), "check"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
        assert lines and done.returncode == 0, done.stderr
        runs[chosen] = lines[-1].split()[1:]
    numpy_loaded, threads, asked = runs[None]
    assert numpy_loaded == "True"  # the example's results are read
    assert (threads, asked) == ("1", "1")
    assert runs["2"][2] == "2"
