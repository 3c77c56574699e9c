"""Prompt templates: a sandboxed Jinja2 environment that fails on undefined variables."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment


@cache
def environment() -> ImmutableSandboxedEnvironment:
    """The one template environment: sandboxed, strict, no autoescape, stable whitespace."""
    return ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        auto_reload=False,
    )


class TemplateProblem(Exception):
    """A template does not parse; ``lineno`` is 1-based within the template text."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(message)
        self.lineno = lineno


@cache
def variables(source: str) -> frozenset[str]:
    """The top-level names a template reads from its context."""
    try:
        ast = environment().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(exc.message or "invalid template", exc.lineno or 1) from None
    return frozenset(meta.find_undeclared_variables(ast))


def render(source: str, context: dict[str, Any]) -> str:
    """Render ``source`` with ``context``; an undefined variable raises ``UndefinedError``."""
    if "{" not in source:
        # Every Jinja delimiter starts with "{" (line statements are off): plain text.
        return _constant(source)
    return _compiled(source).render(context)


@cache
def _compiled(source: str) -> jinja2.Template:
    template = environment().from_string(source)
    # A template's globals chain its own (none) to the environment's, and every render
    # copies them into its context; ChainMap makes that copy slow. The environment's
    # globals never change, so one flat dict is the same mapping.
    template.globals = dict(template.globals)
    return template


@cache
def _constant(source: str) -> str:
    """What a template without any Jinja syntax renders to (its newlines normalised)."""
    return _compiled(source).render({})
