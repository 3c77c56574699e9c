"""Prompt templates: what a prompt may use, and the bounds every rendering runs within."""

from __future__ import annotations

import pytest

from evalreg.templating import MAX_CHARS, RenderError, TemplateProblem, render, variables

BIG = "{% set s = 'a' * 10000000 %}"
"""A 10-million-character string: under MAX_CHARS, so what is done with it decides."""


def refused(source: str, **context: object) -> str:
    """The message of the RenderError rendering ``source`` raises: each names the budget
    that stopped it (counted in iterations, characters or digits, never in seconds, so a
    busy machine cannot make it pass or fail)."""
    with pytest.raises(RenderError) as caught:
        render(source, context)
    return str(caught.value)


def test_ordinary_templates_render_as_jinja2_renders_them():
    source = (
        "{{ title|upper }}: {{ tags|join(', ') }}\n"
        "{% for t in tags %}{{ loop.index }}. {{ t ~ '!' }}{{ '-' * 3 }}\n{% endfor %}"
        "{{ '%s/%d'|format(title, 2) }} {{ '{0:>4}'.format(n) }} {{ title.replace('a', 'o') }}"
    )
    assert render(source, {"title": "va", "tags": ["a", "b"], "n": 7}) == (
        "VA: a, b\n1. a!---\n2. b!---\nva/2    7 vo"
    )


def test_an_undefined_field_is_a_render_error():
    assert refused("{{ text }} {{ other }}", text="x") == "'other' is undefined"


@pytest.mark.parametrize(
    "value", ["a line\nand {{ braces }} kept", "", "ünïcode", 7, 1.5, None, True, ["a"], {"k": 1}]
)
def test_a_template_of_one_field_renders_what_jinja2_renders_for_it(value):
    # "{{ text }}" alone is answered without Jinja for a string; " {{ text }}" is not.
    assert render("{{ text }}", {"text": value}) == render(" {{ text }}", {"text": value})[1:]
    assert render("{{ text }}", {"text": value}) == str(value)


def test_a_template_of_one_field_still_refuses_what_jinja2_refuses():
    assert refused("{{ text }}") == "'text' is undefined"
    assert refused("{{ text }}", text="a" * (MAX_CHARS + 1)).startswith("the prompt would be")


def test_a_template_of_one_name_jinja2_binds_itself_is_not_read_from_the_item():
    assert render("{{ self }}", {"self": "the item's field"}).startswith("<TemplateReference")
    assert render("{{ range }}", {"range": "the item's field"}) == "the item's field"


def test_the_sandbox_still_refuses_unsafe_attributes_at_render_time():
    assert "unsafe" in refused("{{ text.format_map }}{{ [].append(1) }}", text="x")


def test_a_long_range_is_refused():
    assert refused("{{ range(10**7)|length }}") == "range() of 10,000,000 numbers; at most 100,000"


def test_string_repetition_is_refused_before_the_string_is_built():
    message = refused("{{ ('a' * 10**9)|length }}")
    assert message == "a repeated value would be 1,000,000,000 characters long; at most 16,777,216"


def test_repeating_a_list_counts_what_its_items_print():
    assert "a repeated value would be" in refused(BIG + "{{ ([s] * 100)|join|length }}")


def test_nested_loops_are_bounded_however_little_they_print():
    message = refused(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    )
    assert message == "more than 250,000 loop iterations and calls"


def test_loops_over_the_items_data_are_bounded_too():
    assert "loop iterations" in refused(
        "{% for a in xs %}{% for b in xs %}{% endfor %}{% endfor %}", xs=list(range(1000))
    )


def test_exponential_macro_recursion_is_bounded():
    source = (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    )
    assert refused(source) == "more than 250,000 loop iterations and calls"


def test_doubling_a_string_in_a_loop_is_refused_at_the_bound():
    source = (
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"
    )
    assert refused(source).startswith("a joined string would be 33,554,432 characters long")


def test_huge_powers_are_refused():
    assert refused("{{ 2 ** 100000000 }}") == "2 ** 100000000 is too large a number"


@pytest.mark.parametrize(
    "source",
    [
        "{{ '%999999999s' % 'a' }}",
        "{{ '%*s' % (999999999, 'a') }}",
        "{{ '{:>999999999}'.format('a') }}",
        "{{ '%999999999d'|format(1) }}",
    ],
)
def test_padding_wider_than_the_bound_is_refused(source):
    assert refused(source).startswith("a formatted field would be")


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a'|center(10**9) }}",
        "{{ 'a'.ljust(10**9) }}",
        "{{ 'a\tb'.expandtabs(10**9) }}",
        "{{ ('a\n' * 1000)|indent(100000) }}",
        BIG + "{{ s|replace('a', 'bb') }}",
        BIG + "{{ 'a b'.replace(' ', s * 1) ~ 'x'.join([s, s]) }}",
        "{{ range(100000)|map('string')|join('x' * 1000) }}",
    ],
)
def test_string_operations_that_grow_are_refused_before_they_build(source):
    assert refused(source).startswith("a string would be")


def test_everything_built_in_one_rendering_is_bounded():
    source = "{% for i in range(100000) %}{{ ('a' * 10000000)|length }}{% endfor %}"
    assert refused(source) == "the template built more than 134,217,728 characters in all"


def test_a_prompt_longer_than_the_bound_is_refused():
    message = refused(BIG + "{{ s }}{{ s }}")
    assert message == f"the prompt would be longer than {MAX_CHARS:,} characters"


def test_a_prompt_at_the_bound_renders():
    assert len(render("{{ text }}", {"text": "a" * MAX_CHARS})) == MAX_CHARS


def test_runaway_recursion_is_a_render_error():
    assert refused("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").startswith("RecursionError")


def test_each_rendering_starts_with_a_fresh_budget():
    # 160,400 steps: three renderings on one budget would exceed 250,000.
    source = "{% for i in range(400) %}{% for j in range(400) %}{% endfor %}{% endfor %}ok"
    assert [render(source, {}) for _ in range(3)] == ["ok"] * 3


@pytest.mark.parametrize(
    ("source", "lineno"),
    [
        ("line one\n{% include 'x' %}", 2),
        ("{{ text.__class__ }}", 1),
        ("{{ text|random }}", 1),
        ("a\nb\n{{ text|nope }}", 3),
    ],
)
def test_what_a_prompt_may_not_use_is_found_before_rendering_on_its_line(source, lineno):
    with pytest.raises(TemplateProblem) as caught:
        variables(source)
    assert caught.value.lineno == lineno


def test_a_field_named_like_a_refused_function_is_only_read():
    variables("{{ lipsum }}")
    assert render("{{ lipsum }}", {"lipsum": "text"}) == "text"
