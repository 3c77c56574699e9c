"""The ``evalreg`` command line: parse arguments, call the library, render its data.

Each command group is a module holding its commands' parsers and handlers side by side
(``registry``, ``results``, ``run``, ``reports``, ``edit``, ``review``, ``store``,
``evalset``, ``imports``); ``common`` holds what they share. Heavy modules (pydantic,
rich, DVC, GitPython) are imported inside the handlers that use them so ``evalreg --help``
stays fast: building the parser imports every group, and they import only the standard
library at the top.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from evalreg._version import __version__
from evalreg.cli import (
    edit,
    evalset,
    imports,
    propose,
    registry,
    reports,
    results,
    review,
    run,
    store,
)
from evalreg.cli.common import Handler
from evalreg.errors import EvalregError, RegistryError

GROUPS = (registry, results, run, reports, edit, review, propose, store, evalset, imports)
"""In the order ``evalreg --help`` lists their commands."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalreg",
        description="Choose AI models on your own evidence: a versioned, reproducible eval "
        "registry.",
    )
    parser.add_argument("--version", action="version", version=f"evalreg {__version__}")
    parser.add_argument(
        "-C",
        dest="directory",
        metavar="DIR",
        help="run as if started in DIR (the repo root): relative paths given to any command "
        "are read from DIR too, as with git -C",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for group in GROUPS:
        group.add_parsers(sub)
    return parser


RARE_COLLECTIONS = (100_000, 20, 20)
"""The collector's thresholds while a command runs. A command builds many long-lived
objects (modules, pydantic schemas, the registry) and few cycles: collecting every 700
allocations re-walks them for nothing (a tenth of `evalreg check`). Its start-up alone
leaves 60,000 to 90,000 (a 5,000-item run at its first request, `evalreg check` on the
example registry at its end): the first collection comes after it, not in the middle of
it, walking all of them to free nothing (5 % of `evalreg check`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command as a library call: the collector's thresholds are restored after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(*RARE_COLLECTIONS)
    try:
        return _command(argv)
    finally:
        gc.set_threshold(*thresholds)


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    from evalreg.runner.interrupts import unwinding

    try:
        # SIGTERM and SIGHUP (a cancelled CI job, a stopped container, a closed terminal)
        # unwind like Ctrl-C: whatever a command holds is released on the way out.
        with unwinding():
            return handler(args)
    except EvalregError as exc:
        _print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        import signal

        from evalreg.runner.interrupts import received

        signum = received()
        sys.stderr.write(f"interrupted ({signal.Signals(signum).name})\n")
        return 128 + signum
    except OSError as exc:
        # The disk is full, a directory is read-only, a file size limit was hit.
        where = f" {exc.filename}:" if exc.filename else ""
        sys.stderr.write(
            f"evalreg: error:{where} {exc.strerror or exc}. What was written before this is "
            "kept: fix it and run the command again\n"
        )
        return 2


def entry() -> NoReturn:
    """The program: one command, then exit without a full collection of what it built,
    nor the teardown of every module (``_Ending``).

    Everything a command built lives until the process ends. Restoring the default
    thresholds, as ``main`` does for a library caller, would make the next allocation
    collect every generation (a tenth of a second after a 5,000-item run), and the
    collection Python runs while shutting down walks all of it again: both free nothing
    the exit would not. So the thresholds stay raised, and frozen objects are outside the
    collector's sight.

    NumPy's OpenBLAS starts a thread per core as it loads, and each spins about a tenth
    of a second of CPU before it sleeps: evalreg multiplies no matrices, so the program
    asks for one thread (unless the environment already chose), before anything imports
    NumPy. On two cores that spin took the core a run's DVC child or a loopback server
    needs, and a fifth of ``evalreg check``'s CPU.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.set_threshold(*RARE_COLLECTIONS)
    ending = _Ending()
    atexit.register(ending.run)  # first, so that it is called last
    code = _command(None)
    gc.freeze()
    if _may_end_at_once():
        ending.code = code
    sys.exit(code)


class _Ending:
    """The program's last exit handler: it ends the process before Python tears down its
    modules.

    Python's finalisation clears each module and frees what it held one object at a time:
    50 ms after a run, a fifth of ``evalreg check``, and it writes nothing. All the rest
    of the exit still happens, as ``sys.exit`` does it: Python waits for the threads still
    running, then calls the ``atexit`` handlers, the last registered first. This one is
    registered as the program starts, before anything a command does registers its own
    (temporary directories, multiprocessing's children, logging, a library's), so it is
    called after all of them. Then it flushes stdout and stderr, with the status Python
    gives when stdout cannot be flushed (a closed pipe: 120), and ends the process.
    """

    def __init__(self) -> None:
        self.code: int | None = None
        """The status to end with; None: the ordinary exit goes on."""

    def run(self) -> None:
        if self.code is None:
            return
        code = self.code
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                if stream is sys.stdout and code == 0:
                    code = 120
        os._exit(code)


def _may_end_at_once() -> bool:
    """Whether nothing needs the rest of the exit: a profiler, a tracer or a monitoring
    tool (``python -m cProfile``, coverage) writes what it found once the program returns,
    and a ``sitecustomize`` or ``usercustomize`` hook ran before the program could
    register its handler, so exit work it registered would be called after it."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return False
    monitoring = getattr(sys, "monitoring", None)  # from Python 3.12
    if monitoring is not None and any(monitoring.get_tool(t) is not None for t in range(6)):
        return False
    return not {"sitecustomize", "usercustomize"} & sys.modules.keys()


def _print_error(exc: EvalregError) -> None:
    from evalreg.report.terminal import plain

    # Findings quote item text; other errors may quote a provider or GitHub.
    if isinstance(exc, RegistryError):
        for finding in exc.findings:
            sys.stderr.write(plain(finding.render()) + "\n")
    else:
        sys.stderr.write(plain(f"evalreg: error: {exc}") + "\n")
