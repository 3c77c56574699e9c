"""Prompt text for evalreg's Jinja2 templates: Nunjucks templates checked, literal text escaped."""

from __future__ import annotations

from jinja2 import TemplateSyntaxError, nodes

from evalreg.templating import environment

_NUNJUCKS_ONLY = {
    "dump": "use 'tojson'",
    "nl2br": "write the line breaks into the template",
}
"""Nunjucks filters Jinja2 lacks, with what to write instead."""
_JS_PROPERTIES = {"length": "use '| length'"}
"""JavaScript properties Nunjucks templates read that Jinja2 does not have."""


def nunjucks_problems(source: str) -> list[str]:
    """Why the Nunjucks template ``source`` would not render the same as Jinja2 ([] if none).

    The two languages share their syntax for variables, tags and most filters, so a
    template converts unchanged; what does not is reported rather than guessed at.
    """
    env = environment()
    try:
        ast = env.parse(source)
    except TemplateSyntaxError as exc:
        return [f"not a Jinja2 template: {exc.message} (line {exc.lineno})"]
    problems = []
    for node in ast.find_all(nodes.Filter):
        if node.name not in env.filters:
            hint = _NUNJUCKS_ONLY.get(node.name, "write it out in the template")
            problems.append(f"filter {node.name!r} does not exist in Jinja2 ({hint})")
    for test in ast.find_all(nodes.Test):
        if test.name not in env.tests:
            problems.append(f"test {test.name!r} does not exist in Jinja2")
    for attr in ast.find_all(nodes.Getattr):
        if attr.attr in _JS_PROPERTIES:
            problems.append(f"'.{attr.attr}' is JavaScript ({_JS_PROPERTIES[attr.attr]})")
    return sorted(set(problems))


def literal(text: str) -> str:
    """A template that renders to ``text`` exactly, whatever braces it holds."""
    if not any(mark in text for mark in ("{{", "{%", "{#")):
        return text
    if "endraw" not in text:
        return "{% raw %}" + text + "{% endraw %}"
    return text.replace("{", "{{ '{' }}")
