"""The exception hierarchy: every error evalreg raises on purpose, and what it means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalreg.registry.diagnostics import Finding


class EvalregError(Exception):
    """Base class of errors that end a command with a message instead of a traceback."""

    exit_code = 2


class UsageError(EvalregError):
    """The command line or the environment cannot be used as given (exit 2)."""


class RegistryError(EvalregError):
    """The registry's files cannot be used: each problem is a ``Finding`` with a position."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        first = self.findings[0].render() if self.findings else "invalid registry"
        more = len(self.findings) - 1
        super().__init__(first + (f" (and {more} more)" if more else ""))


class DataMissingError(EvalregError):
    """DVC-tracked data is neither in the workspace nor in the local cache."""


class MissingPluginError(UsageError):
    """The DVC remote is in object storage whose DVC plugin is not installed here (exit 2):
    the message names the evalreg extra that brings it."""


class DvcLockedError(UsageError):
    """DVC's lock on the repository is held by another process for longer than evalreg
    waits (exit 2): the message names the holder when it can be found, and what to do."""


class PromptError(EvalregError):
    """An item's prompt cannot be rendered: the run stops before anything is sent."""

    def __init__(
        self, cell: str, item: str, part: str, what: str, problem: str, over_budget: bool = False
    ) -> None:
        super().__init__(cell, item, part, what, problem, over_budget)  # for pickling
        self.cell, self.item, self.problem = cell, item, problem
        self.over_budget = over_budget
        """The template exceeded a bound on what rendering may cost (``templating``)."""
        self.part = part
        """Which part of the prompt: "system" or "template"."""
        self.what = what
        """How messages name that part."""

    def __str__(self) -> str:
        return (
            f"cell {self.cell}, item {self.item!r}: the {self.what} cannot be rendered: "
            f"{self.problem} (`evalreg check` shows the template and the item)"
        )


class BodyError(UsageError):
    """An ``http`` pin's body cannot be rendered for an item: ``at`` is the path of the
    template that failed (``body.question``); ``run`` reports it as a ``PromptError``."""

    def __init__(self, at: str, problem: str) -> None:
        super().__init__(at, problem)  # for pickling
        self.at, self.problem = at, problem

    def __str__(self) -> str:
        return f"{self.at}: {self.problem}"


class UntrustedInputError(UsageError):
    """A file or value a command takes from outside (a CI artifact, a workflow's event)
    fails one of the checks made before anything is trusted to it (exit 2)."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(message)
        self.check = check
        """Which check refused it: "size", "json", "schema" or "sha"."""
