"""Prompt templates: a sandboxed Jinja2 environment that fails on undefined variables and
bounds what rendering one prompt may cost.

Templates come from registry files that a pull request can change, and are rendered with
eval items' fields. Jinja2's sandbox keeps them from reaching Python internals; on top of
it, what a prompt may use is checked when the registry loads (``variables``), and every
rendering runs on a budget: loop iterations and calls, the size of each string or list it
builds, everything it builds in all, and the prompt's length. A template that exceeds one
fails with ``RenderError`` instead of taking the machine's CPU or memory.
"""

from __future__ import annotations

import contextvars
import functools
import re
import string
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.runtime import Context
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

MAX_CHARS = 1 << 24
"""Longest prompt a template may render, and longest string or list it may build on the way
(16,777,216 characters)."""
MAX_BUILT = 8 * MAX_CHARS
"""Characters (and list elements) one rendering may build in all."""
MAX_STEPS = 250_000
"""Loop iterations and calls one rendering may make: more than any prompt needs, fewer
than take a second (nested loops multiply; a macro call costs microseconds)."""
MAX_POWER_BITS = 1 << 16
"""Largest integer ``**`` may make, in bits (``10 ** 10 ** 10`` would take minutes)."""

_NONDETERMINISTIC = {"random": "filter", "lipsum": "function"}
"""What renders differently every time: a prompt must be the same request on every run."""
_TAGS = {
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "import",
    nodes.Extends: "extends",
}


class TemplateProblem(Exception):
    """A template does not parse or uses what a prompt may not; ``lineno`` is 1-based
    within the template text."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(message)
        self.lineno = lineno


class RenderError(Exception):
    """A template could not be rendered with one context: an undefined field, an error in
    one of its expressions, or a bound it exceeded (``OverBudget``)."""


class OverBudget(RenderError):
    """A rendering exceeded one of the bounds on what it may cost: a property of the
    template more than of the item, so rendering it for further items would pay again."""


class _Budget:
    __slots__ = ("built", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.built = 0


_BUDGET: contextvars.ContextVar[_Budget] = contextvars.ContextVar("evalreg_template_budget")


def _step() -> None:
    budget = _BUDGET.get(None)
    if budget is not None:
        budget.steps += 1
        if budget.steps > MAX_STEPS:
            raise OverBudget(f"more than {MAX_STEPS:,} loop iterations and calls")


def _fits(size: int, what: str) -> None:
    """Refuse to build ``what`` if it would hold more than MAX_CHARS characters."""
    if size > MAX_CHARS:
        raise OverBudget(f"{what} would be {size:,} characters long; at most {MAX_CHARS:,}")


def _built(value: Any) -> Any:
    """Charge a string or collection just built to the rendering's budget."""
    if type(value) in _COLLECTIONS:
        size = len(value)
        _fits(size, "a value")
        budget = _BUDGET.get(None)
        if budget is not None:
            budget.built += size
            if budget.built > MAX_BUILT:
                raise OverBudget(f"the template built more than {MAX_BUILT:,} characters in all")
    return value


_COLLECTIONS = frozenset({str, list, tuple, dict})


def _weight(value: Any, limit: int = MAX_CHARS) -> int:
    """About how many characters ``value`` prints as, counting shared parts each time they
    occur; the count stops once past ``limit``."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 4 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, int):
            total += v.bit_length() // 3 + 1
        else:
            total += 8
    return total


_WIDTH = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\d*|\*)(?:\.(\d*|\*))?")


def _check_widths(spec: str, what: str) -> None:
    for digits in _WIDTH.findall(spec):
        _fits(int(digits) if len(digits) < 12 else MAX_CHARS + 1, what)


def _check_format(fmt: str) -> None:
    """Refuse ``str.format`` fields padded wider than MAX_CHARS."""
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format itself reports the malformed format
    for _literal, _name, spec, _conversion in fields:
        if spec:
            _check_widths(spec, "a formatted field")


def _check_percent(fmt: str, args: Any) -> None:
    """Refuse ``%`` conversions padded wider than MAX_CHARS."""
    for match in _PERCENT_SPEC.finditer(fmt):
        _check_widths(match.group(1) + "." + (match.group(2) or ""), "a formatted field")
    values = args if isinstance(args, tuple) else (args,)
    if "*" in fmt:
        for v in values:
            if isinstance(v, int):
                _fits(abs(v), "a formatted field")


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


_SIZED = (str, list, tuple, dict, set, frozenset)


def _listed(value: Any) -> Any:
    """``value``, with an iterator's items listed (so that what joining them builds can be
    known before it is built; the join gets the list)."""
    if isinstance(value, _SIZED) or not hasattr(value, "__iter__"):
        return value
    return list(value)


def _grown(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """How long the result of string operation ``name`` on ``value`` will be, for the
    operations whose result can be much longer than what they are given."""
    if name == "join":
        items = args[0] if args else None
        if not isinstance(items, _SIZED):
            return None
        return _weight(items) + len(str(value)) * max(0, len(items) - 1)
    if not isinstance(value, str):
        return None
    if name in ("center", "ljust", "rjust", "zfill"):
        width = _arg(args, kwargs, 0, "width", 0)
        return max(len(value), width if isinstance(width, int) else 0)
    if name == "expandtabs":
        size = _arg(args, kwargs, 0, "tabsize", 8)
        return len(value) + value.count("\t") * (size if isinstance(size, int) else 0)
    if name == "indent":
        width = _arg(args, kwargs, 0, "width", 4)
        pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        return len(value) + (value.count("\n") + 1) * pad
    if name == "replace":
        old, new = _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", "")
        if not isinstance(old, str) or not isinstance(new, str):
            return None
        count = _arg(args, kwargs, 2, "count", -1)
        found = value.count(old)
        if isinstance(count, int) and count >= 0:
            found = min(found, count)
        return len(value) + found * max(0, len(new) - len(old))
    return None


class PromptEnvironment(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox, with every operation that can build a large value or
    loop for long checked against the current rendering's budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            auto_reload=False,
        )
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters.update(_INTERNAL_FILTERS)
        self.globals["range"] = _range

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and times > 1:
                    # Weighed, not counted: [text] * n prints text n times.
                    _fits(_weight(seq, MAX_CHARS // times) * times, "a repeated value")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if abs(left) > 1 and right > 0 and right * left.bit_length() > MAX_POWER_BITS:
                raise OverBudget(f"{left} ** {right} is too large a number")
        elif operator == "+" and isinstance(left, (str, list, tuple)):
            _fits(
                len(left) + (len(right) if isinstance(right, (str, list, tuple)) else 0),
                "a joined value",
            )
        elif operator == "%" and isinstance(left, str):
            _check_percent(left, right)
        return _built(super().call_binop(context, operator, left, right))

    def call(
        __self,  # jinja2's names: the call's own arguments may be called "self" or "obj"
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        _step()
        receiver = getattr(__obj, "__self__", None)
        if isinstance(receiver, str):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args:
                args = (_listed(args[0]), *args[1:])
            size = _grown(name, receiver, args, kwargs)
            if size is not None:
                _fits(size, "a string")
        return _built(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is not None:
            _check_format(value.__self__)
        return wrapper


def _bounded_filter(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` checked against the budget: a step, its result's size, and for the filters
    that can grow a string, that size before it is built."""
    # A filter that is passed the context, eval context or environment gets it first.
    skip = 1 if hasattr(f, "jinja_pass_arg") else 0

    if name not in _GROWING_FILTERS:

        @functools.wraps(f)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            _step()
            return _built(f(*args, **kwargs))

        return bounded

    @functools.wraps(f)
    def growing(*args: Any, **kwargs: Any) -> Any:
        _step()
        if len(args) > skip:
            value, rest = args[skip], args[skip + 1 :]
            size = None
            if name == "join":
                value = _listed(value)
                args = (*args[:skip], value, *rest)
                size = _grown("join", _arg(rest, kwargs, 0, "d", ""), (value,), {})
            elif name == "format" and isinstance(value, str):
                _check_percent(value, rest)
            else:
                size = _grown(name, value, rest, kwargs)
            if size is not None:
                _fits(size, "a string")
        return _built(f(*args, **kwargs))

    return growing


_GROWING_FILTERS = frozenset({"center", "format", "indent", "join", "replace"})
"""Filters whose result can be much longer than their input."""


def _range(*args: int) -> range:
    """``range``, no longer than the sandbox's MAX_RANGE (100,000)."""
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise OverBudget(f"range() of {len(numbers):,} numbers; at most {MAX_RANGE:,}")
    return numbers


def _loop(iterable: Any) -> Iterator[Any]:
    """What a ``for`` loop iterates: ``iterable``, one step of the budget an item."""
    for item in iterable:
        _step()
        yield item


def _concat(parts: list[Any]) -> str:
    """What ``~`` builds: its operands as one string, checked before it is built."""
    texts = [p if type(p) is str else str(p) for p in parts]
    size = 0
    for text in texts:
        size += len(text)
    _fits(size, "a joined string")
    return str(_built("".join(texts)))


def _capture(value: Any) -> str:
    """Keep ``value`` as the rendering's value (``render_value``); write nothing."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    _CAPTURED.get().append(value)
    return ""


_CAPTURED: contextvars.ContextVar[list[Any]] = contextvars.ContextVar("evalreg_template_value")
_INTERNAL_FILTERS = {"_bounded_loop": _loop, "_bounded_concat": _concat, "_capture": _capture}
"""How compiled templates call ``_loop``, ``_concat`` and ``_capture``: a filter is called
directly, a function through the sandbox's checks."""


@cache
def environment() -> PromptEnvironment:
    """The one template environment: sandboxed, strict, bounded, no autoescape, stable
    whitespace."""
    return PromptEnvironment()


@cache
def variables(source: str) -> frozenset[str]:
    """The top-level names a template reads from its context.

    Raises ``TemplateProblem`` when it does not parse or compile (an unknown filter), or
    uses what a prompt may not: other templates, Python's internals, or randomness.
    """
    ast = _parse(source)
    for node in ast.find_all(nodes.Node):
        problem = _not_for_prompts(node)
        if problem is not None:
            raise TemplateProblem(problem, node.lineno)
    _compiled(source)  # an unknown filter or test fails here, not in the run
    return frozenset(meta.find_undeclared_variables(ast))


def _parse(source: str) -> nodes.Template:
    try:
        return environment().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(exc.message or "invalid template", exc.lineno or 1) from None


def _not_for_prompts(node: nodes.Node) -> str | None:
    """Why a prompt template may not hold ``node``, or None if it may."""
    if isinstance(node, (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        return (
            f"'{{% {_TAGS[type(node)]} %}}' is not available: a prompt is one template, "
            "with no other templates to read"
        )
    name: Any = None
    if isinstance(node, nodes.Getattr):
        name = node.attr
    elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        name = node.arg.value
    elif isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
        first = node.args[0]
        name = first.value if isinstance(first, nodes.Const) else None
    if isinstance(name, str) and name.startswith("__"):
        return f"{name!r} is not available: Python's internal attributes are off limits in a prompt"
    if isinstance(node, nodes.Filter):
        kind, name = "filter", node.name
    elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name):
        kind, name = "function", node.node.name
    else:
        return None
    if _NONDETERMINISTIC.get(name) != kind:
        return None
    return (
        f"the {kind} {name!r} renders differently every time: a prompt must be the same "
        "request on every run (to be stored and reproduced)"
    )


def render(source: str, context: dict[str, Any]) -> str:
    """Render ``source`` with ``context`` on a fresh budget; raise ``RenderError`` if it
    cannot be rendered (an undefined variable, a failing expression, a bound exceeded)."""
    if "{" not in source:
        # Every Jinja delimiter starts with "{" (line statements are off): plain text.
        return _constant(source)
    name = _sole_variable(source)
    if name is not None:
        value = context.get(name)
        if type(value) is str and len(value) <= MAX_CHARS:
            return value  # what Jinja writes for it: str(value), the string itself
    return "".join(_generated(source, _compiled, context))


def render_value(source: str, context: dict[str, Any]) -> Any:
    """What ``source`` stands for as a value: a template that is exactly one expression
    (``{{ messages }}``, ``{{ item.max_items }}``) gives that expression's value, with its
    type; any other renders as text (``render``). Raises ``RenderError`` as ``render`` does."""
    if "{" not in source or _sole_expression(source) is None:
        return render(source, context)
    captured: list[Any] = []
    token = _CAPTURED.set(captured)
    try:
        for _ in _generated(source, _capturing, context):
            pass
    finally:
        _CAPTURED.reset(token)
    return captured[0]


def _generated(
    source: str, compiled: Callable[[str], jinja2.Template], context: dict[str, Any] | None = None
) -> Iterator[str]:
    """The parts ``compiled(source)`` renders, on a fresh budget, errors as ``RenderError``."""
    token = _BUDGET.set(_Budget())
    try:
        size = 0
        for part in compiled(source).generate(context or {}):
            size += len(part)
            if size > MAX_CHARS:
                raise OverBudget(f"the prompt would be longer than {MAX_CHARS:,} characters")
            yield part
    except RenderError:
        raise
    except TemplateProblem as exc:
        raise RenderError(str(exc)) from None
    except jinja2.TemplateError as exc:
        raise RenderError(exc.message or type(exc).__name__) from None
    except Exception as exc:  # a template's expressions can fail in any way Python can
        raise RenderError(f"{type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


@cache
def _compiled(source: str) -> jinja2.Template:
    return _compile(_parse(source))


@cache
def _capturing(source: str) -> jinja2.Template:
    """``source``, one expression, compiled to hand its value to ``_capture``."""
    ast = _parse(source)
    output = ast.body[0]
    assert isinstance(output, nodes.Output)  # as _sole_expression found it
    expression = output.nodes[0]
    output.nodes = [_filtered(expression, "_capture")]
    return _compile(ast)


def _compile(ast: nodes.Template) -> jinja2.Template:
    env = environment()
    _Bounded().visit(ast)
    try:
        code = env.compile(ast)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(exc.message or "invalid template", exc.lineno or 1) from None
    template = env.template_class.from_code(env, code, env.make_globals(None), None)
    # A template's globals chain its own (none) to the environment's, and every render
    # copies them into its context; ChainMap makes that copy slow. The environment's
    # globals never change, so one flat dict is the same mapping.
    template.globals = dict(template.globals)
    return template


class _Bounded(NodeTransformer):
    """Routes ``for`` loops and ``~``, which the sandbox does not intercept, through their
    bounded versions."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        assert isinstance(node.iter, nodes.Expr)  # what the parser puts after "in"
        node.iter = _filtered(node.iter, "_bounded_loop")
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _filtered(nodes.List(node.nodes, lineno=node.lineno), "_bounded_concat")


def _filtered(value: nodes.Expr, name: str) -> nodes.Filter:
    return nodes.Filter(value, name, [], [], None, None, lineno=value.lineno)


@cache
def _sole_variable(source: str) -> str | None:
    """The name of the context field that is all ``source`` is (``{{ text }}``: a
    template made of one variable, with no filter, test or text around it), or None."""
    node = _sole_expression(source)
    # Globals and the names Jinja binds itself (``self`` is the template) are not fields.
    if not isinstance(node, nodes.Name) or node.name in environment().globals:
        return None
    return None if node.name in _BOUND_NAMES else node.name


_BOUND_NAMES = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super"})


@cache
def _sole_expression(source: str) -> nodes.Expr | None:
    """The expression that is all ``source`` is (``{{ item.count }}``, no text around it),
    or None."""
    try:
        body = _parse(source).body
    except TemplateProblem:
        return None
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        return None
    node = body[0].nodes[0]
    return None if isinstance(node, nodes.TemplateData) else node


@cache
def _constant(source: str) -> str:
    """What a template without any Jinja syntax renders to (its newlines normalised)."""
    return "".join(_compiled(source).generate({}))
