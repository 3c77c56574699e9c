"""The test suite against the dependencies a user may have: as CI installs them, at the
lowest versions ``pyproject.toml`` allows, and at the newest.

    nox -s tests     # the README's test command, in a fresh environment
    nox -s slow      # the tests marked slow, which that command leaves out (CI runs both)
    nox -s lowest    # every direct dependency at its lower bound (uv's lowest-direct)
    nox -s latest    # every dependency at the newest version its range allows
    nox -s docs      # build the documentation site strictly, then run its examples

Environments are made with uv when it is installed (``pip install nox uv``), else with
virtualenv; ``lowest`` needs uv, whose resolver is the one that can pick lower bounds.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]

PYTEST = ("python", "-m", "pytest", "-q", "-n", "auto")
"""The README's test command (after its install step)."""


def _pip(session: nox.Session) -> None:
    """pip in the session's environment: uv makes them without it, and the workflow tests
    build a wheel with it, as a runner's setup does."""
    session.install("pip>=24")


@nox.session
def tests(session: nox.Session) -> None:
    """The README's test command: install with the test extra, run the suite."""
    _pip(session)
    session.install("-e", ".[test]")
    session.run(*PYTEST, *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """The tests marked ``slow`` (large simulations, tools outside Python, the kill
    matrices beyond their cross-sections): the README's command deselects them to stay
    fast; CI runs this session after it."""
    _pip(session)
    session.install("-e", ".[test]")
    session.run(*PYTEST, "-m", "slow", *session.posargs)


@nox.session(venv_backend="uv")
def lowest(session: nox.Session) -> None:
    """Each direct dependency (extras included) at the lowest version its range allows."""
    _pip(session)
    session.install("--resolution", "lowest-direct", "-e", ".[test,azure,gs]")
    session.run("uv", "pip", "list", silent=False, external=True)  # what was resolved
    session.run(*PYTEST, *session.posargs)


@nox.session
def latest(session: nox.Session) -> None:
    """Every dependency at the newest version its range allows."""
    _pip(session)
    session.install("--upgrade", "-e", ".[test,azure,gs]")
    session.run(*PYTEST, *session.posargs)


SITE = "docs/_build/html"


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site, built as it is published (every warning an error: a broken
    link, a page missing from the contents), then every shell example of its tutorial,
    concepts and guides run against the loopback stand-ins (``tests/test_docs_examples.py``)."""
    _pip(session)
    session.install("-e", ".[docs,test]")
    session.run(
        "sphinx-build", "-W", "--keep-going", "-n", "-q", "-b", "html", "docs", SITE
    )
    session.run(*PYTEST, "-m", "docs", "tests/test_docs_examples.py", *session.posargs)
