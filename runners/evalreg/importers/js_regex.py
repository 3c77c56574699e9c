"""JavaScript regular expressions as Python ones: promptfoo's ``new RegExp(value)``, no flags.

A pattern is read as ECMAScript 2024 (ECMA-262, 15th edition) reads it without the ``u``
flag: the grammar of §22.2.1 (Patterns) as Annex B.1.2 (Regular Expressions Patterns)
extends it for web compatibility. There a ``{`` or ``]`` that starts nothing is a literal,
``\\8`` is ``8``, ``\\12`` is a back reference only when the pattern has twelve groups (an
octal escape otherwise), ``\\k`` is a letter unless the pattern names a group, ``\\c``
before a non-letter is a backslash, and a lookahead may take a quantifier. The early errors
of §22.2.1.1 and Annex B.1.2 are the syntax errors promptfoo reports as an invalid pattern,
failing every output. The result is a Python pattern for ``re.search`` with ``re.ASCII``, on
the text as UTF-16 code units (a ``regex`` grader's ``utf16``), that decides as §22.2.2
(Pattern Semantics) does:

- ``^`` and ``$`` are the start and the very end of the text (CompileAssertion without the
  ``m`` flag), so ``$`` becomes ``\\Z``; ``.`` matches anything but a line terminator
  (``\\n``, ``\\r``, U+2028, U+2029: §12.3 Line Terminators);
- ``\\d``, ``\\w`` and ``\\b`` are ASCII (WordCharacters without ``u`` or ``i``); ``\\s`` is
  WhiteSpace and LineTerminator (§12.2, §12.3; CharacterClassEscape), spelled out as a
  class; ``\\B`` is spelled out too, as Python's does not match the empty text;
- escapes are read as JavaScript reads them (``\\Z`` is ``Z``, ``\\a`` is ``a``, ``\\0``,
  ``\\xHH``, ``\\uHHHH``, ``\\cX``, legacy octal) and written as Python literals;
- a back reference to a group that has not matched matches the empty text
  (BackreferenceMatcher), written ``(?(1)\\1)``;
- a quantified lookahead matches as the assertion once, or as nothing (RepeatMatcher ends a
  repetition at an iteration that matches nothing);
- named groups become numbered ones, with the same numbers.

What Python cannot express is refused with ``NotMapped`` naming the construct: a lookbehind
whose body can match texts of different lengths (JavaScript allows it), a back reference
JavaScript resolves differently from Python (into a repeated group, which RepeatMatcher
clears at each repetition, or into or out of a lookbehind, which JavaScript matches right
to left), and ECMAScript 2025 syntax Node 20 rejects (pattern modifiers, a group name used
twice).

JavaScript without ``u`` matches UTF-16 code units, so a character beyond U+FFFF (most
emoji) is two of them, its surrogate pair: ``^.$`` does not match ``🙂``, ``[🙂]`` matches
either half, and ``🙂+`` repeats the second half. The grader reads the pattern and the text
the same way, so each of these decides as in promptfoo. A pair of literals in the pattern is
written as the character it encodes, when printable; a surrogate on its own as ``\\uHHHH``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalreg.importers.base import NotMapped
from evalreg.text.utf16 import code_units, from_code_units

MAX_PATTERN = 2000
"""The longest pattern a ``regex`` grader takes (the registry schema's limit)."""
MAX_REPEAT = 4294967295
"""Python's limit on a repetition count (``re._constants.MAXREPEAT``)."""
MAX_BACKREF = 99
"""Python writes back references to groups 1 to 99 only."""

Ranges = tuple[tuple[int, int], ...]
"""A set of UTF-16 code units as sorted, disjoint, inclusive ranges."""

_BMP = 0xFFFF
_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_SPACE: Ranges = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
"""WhiteSpace (tab, vertical tab, form feed, space, U+FEFF and category Zs) and
LineTerminator: what ``\\s`` matches."""
_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_PYTHON_CONTROL = {code: "\\" + letter for letter, code in _CONTROL.items()}
_BRACED = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_OCTAL = frozenset("01234567")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_MODIFIERS = re.compile(r"\(\?(?=[ims-]*[ims])[ims]*(-[ims]*)?:")
_PYTHON_SPECIAL = frozenset("()[]{}?*+-|^$\\.&~#")
_NOT_WORD_BOUNDARY = r"(?:(?<=\w)(?=\w)|(?<!\w)(?!\w))"


# ------------------------------------------------------------------ the pattern as a tree
@dataclass(frozen=True, eq=False)
class Char:
    """One literal character: a UTF-16 code unit, or a character beyond U+FFFF written as
    its surrogate pair."""

    code: int


@dataclass(frozen=True, eq=False)
class Units:
    """One code unit from a set: ``.``, ``\\d`` and the like, or a character class."""

    ranges: Ranges


@dataclass(frozen=True, eq=False)
class Anchor:
    """``^``, ``$``, ``\\b`` (``b``) or ``\\B`` (``B``)."""

    kind: str


@dataclass(frozen=True, eq=False)
class Backref:
    """``\\1`` or ``\\k<name>``, at offset ``at`` of the pattern."""

    group: int
    at: int
    text: str


@dataclass(frozen=True, eq=False)
class Group:
    """``( )`` (``index`` is its number) or ``(?: )`` (``index`` None); ``end`` is the
    offset of its ``)``."""

    body: Node
    index: int | None
    end: int


@dataclass(frozen=True, eq=False)
class Look:
    """A lookahead (``ahead``) or lookbehind, negative or not, as written (``text``, code
    units)."""

    body: Node
    ahead: bool
    negative: bool
    text: str


@dataclass(frozen=True, eq=False)
class Repeat:
    """An atom and its quantifier, as written (``text``, code units); ``high`` None is
    unbounded."""

    atom: Node
    low: int
    high: int | None
    greedy: bool
    text: str


@dataclass(frozen=True, eq=False)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Alt:
    branches: tuple[Node, ...]


Node = Char | Units | Anchor | Backref | Group | Look | Repeat | Seq | Alt


def to_python(pattern: str) -> str:
    """The Python pattern that decides as ``pattern`` does as a JavaScript regular expression
    without flags, for a ``regex`` grader with ``ascii`` and ``utf16``: ``re.search`` with
    ``re.ASCII``, the pattern and the text both as UTF-16 code units (``text.utf16``).

    Raises:
        NotMapped: the pattern is not valid JavaScript (promptfoo fails every output with
            it), or uses a construct Python cannot express; the message names it.
    """
    tree = _Parser(pattern).parse()
    translated = _Writer(tree).write(tree, ()) or "(?:)"
    if len(translated) > MAX_PATTERN:
        raise NotMapped(
            f"{pattern!r} translates to a Python pattern of {len(translated)} characters, "
            f"more than a regex grader's {MAX_PATTERN}"
        )
    try:
        re.compile(code_units(translated), re.ASCII)
    except (re.error, OverflowError, RecursionError) as exc:  # not expected: a safety net
        raise NotMapped(f"{pattern!r} has no Python equivalent ({exc})") from None
    return translated


# ------------------------------------------------------------------ reading the pattern
def _shown(units: str) -> str:
    """Code units as a message quotes them: characters, a lone surrogate as ``\\uHHHH``."""
    text = from_code_units(units)
    return "".join(f"\\u{ord(c):04X}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def _high(code: int) -> bool:
    return 0xD800 <= code <= 0xDBFF


def _low(code: int) -> bool:
    return 0xDC00 <= code <= 0xDFFF


def _scan_groups(src: str) -> list[str | None]:
    """Every capturing group in order of its ``(``, by name (None: unnamed), skipping
    escapes and character classes: what ``\\N`` and ``\\k<name>`` may refer to."""
    groups: list[str | None] = []
    i, in_class = 0, False
    while i < len(src):
        char = src[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(" and src[i + 1 : i + 2] != "?":
            groups.append(None)
        elif char == "(" and src[i + 2 : i + 3] == "<" and src[i + 3 : i + 4] not in ("=", "!"):
            found = _group_name(src, i + 3)
            groups.append(found[0] if found else "")
        i += 1
    return groups


def _group_name(src: str, pos: int) -> tuple[str, int] | None:
    """The group name starting at ``pos`` (RegExpIdentifierName, escapes decoded) and the
    offset after its ``>``; None when there is no valid name there."""
    name, i = "", pos
    while i < len(src) and src[i] != ">":
        found = _name_unit(src, i)
        if found is None:
            return None
        char, i = found
        after = _name_unit(src, i) if _high(ord(char)) else None
        if after is not None and _low(ord(after[0])):
            char, i = from_code_units(char + after[0]), after[1]
        if not _name_char(char, first=not name):
            return None
        name += char
    if not name or i >= len(src):
        return None
    return name, i + 1


def _name_unit(src: str, pos: int) -> tuple[str, int] | None:
    """The character at ``pos`` of a group name, written or escaped, and the offset after."""
    if pos >= len(src):
        return None
    if src[pos] == "\\":
        return _name_escape(src, pos + 1)
    return src[pos], pos + 1


def _name_char(char: str, first: bool) -> bool:
    """Whether ``char`` may start (``first``) or continue a group name: ``$``, ``_``, a
    Unicode identifier character, or (not first) a zero-width joiner or non-joiner."""
    if char in ("$", "_"):
        return True
    if first:
        return char.isidentifier()
    return char in ("\u200c", "\u200d") or ("_" + char).isidentifier()


def _name_escape(src: str, pos: int) -> tuple[str, int] | None:
    """A ``\\uHHHH`` or ``\\u{H...}`` escape in a group name (``pos`` after the ``\\``)."""
    if src[pos : pos + 1] != "u":
        return None
    braced = re.compile(r"\{([0-9A-Fa-f]+)\}").match(src, pos + 1)
    if braced:
        code = int(braced[1], 16)
        return (chr(code), braced.end()) if code <= 0x10FFFF else None
    if _HEX4.match(src, pos + 1):
        return chr(int(src[pos + 1 : pos + 5], 16)), pos + 5
    return None


class _Parser:
    """A recursive-descent parser of the Annex B.1.2 grammar (no ``u`` flag)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.src = code_units(pattern)
        self.pos = 0
        self.groups = _scan_groups(self.src)
        self.named = any(name is not None for name in self.groups)
        self.opened = 0
        self.names: set[str] = set()

    # ---------------------------------------------------------- errors and helpers
    def invalid(self, what: str) -> NotMapped:
        return NotMapped(
            f"{self.pattern!r} is not a valid JavaScript regular expression ({what}); "
            "promptfoo fails every output with it"
        )

    def raw(self, start: int, end: int | None = None) -> str:
        """The pattern's code units from ``start`` to ``end`` (None: the current offset)."""
        return self.src[start : self.pos if end is None else end]

    def text(self, start: int, end: int | None = None) -> str:
        """The same, as a message quotes them."""
        return _shown(self.raw(start, end))

    def peek(self, ahead: int = 0) -> str:
        return self.src[self.pos + ahead : self.pos + ahead + 1]

    # ---------------------------------------------------------- Pattern, Disjunction, Term
    def parse(self) -> Node:
        tree = self.disjunction()
        if self.pos < len(self.src):  # only a ")" stops a disjunction early
            raise self.invalid("unmatched `)`")
        return tree

    def disjunction(self) -> Node:
        branches = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.alternative())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def alternative(self) -> Seq:
        items: list[Node] = []
        while self.pos < len(self.src) and self.peek() not in ("|", ")"):
            items.append(self.term())
        return Seq(tuple(items))

    def term(self) -> Node:
        start = self.pos
        atom = self.atom()
        if not self.quantifier_ahead():
            return atom
        if isinstance(atom, Anchor) or (isinstance(atom, Look) and not atom.ahead):
            raise self.invalid(f"nothing to repeat: `{self.text(start)}` is an assertion")
        low, high, greedy = self.quantifier()
        if high is not None and low > high:
            raise self.invalid(f"numbers out of order in `{self.text(start)}`")
        return Repeat(atom, low, high, greedy, self.raw(start))

    def quantifier_ahead(self) -> bool:
        return self.peek() in ("*", "+", "?") or bool(_BRACED.match(self.src, self.pos))

    def quantifier(self) -> tuple[int, int | None, bool]:
        char = self.peek()
        low: int
        high: int | None
        if char in ("*", "+", "?"):
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
            self.pos += 1
        else:
            braced = _BRACED.match(self.src, self.pos)
            assert braced is not None
            low = _count(braced[1])
            high = low if braced[2] is None else (_count(braced[3]) if braced[3] else None)
            self.pos = braced.end()
        greedy = self.peek() != "?"
        self.pos += 0 if greedy else 1
        return low, high, greedy

    # ---------------------------------------------------------- atoms
    def atom(self) -> Node:
        char = self.peek()
        if char in ("^", "$"):
            self.pos += 1
            return Anchor(char)
        if char == ".":
            self.pos += 1
            return Units(_complement(_LINE_TERMINATORS))
        if char == "(":
            return self.group()
        if char == "[":
            return self.char_class()
        if char == "\\":
            return self.atom_escape()
        if char in ("*", "+", "?") or _BRACED.match(self.src, self.pos):
            raise self.invalid(f"nothing to repeat before `{self.text(self.pos, self.pos + 1)}`")
        self.pos += 1
        return Char(ord(char))

    def atom_escape(self) -> Node:
        start = self.pos
        self.pos += 1
        char = self.peek()
        if not char:
            raise self.invalid("`\\` at the end of the pattern")
        if char in ("b", "B"):
            self.pos += 1
            return Anchor(char)
        if char in "dDsSwW":
            self.pos += 1
            return Units(_class_escape(char))
        if char in "123456789":
            return self.decimal_escape(start)
        if char == "k" and self.named:
            return self.named_reference(start)
        if char == "c":
            return Char(self.control_letter(in_class=False))
        return Char(self.character_escape())

    def decimal_escape(self, start: int) -> Node:
        """``\\N``: a back reference when the pattern has N groups; otherwise an octal
        escape (Annex B), or an identity escape for ``\\8`` and ``\\9``."""
        digits = re.compile("[0-9]+").match(self.src, self.pos)
        assert digits is not None
        if len(digits[0]) <= 6 and int(digits[0]) <= len(self.groups):
            self.pos = digits.end()
            return Backref(int(digits[0]), start, self.raw(start))
        if self.peek() in ("8", "9"):
            self.pos += 1
            return Char(ord(self.src[self.pos - 1]))
        return Char(self.octal())

    def named_reference(self, start: int) -> Node:
        self.pos += 1
        found = _group_name(self.src, self.pos + 1) if self.peek() == "<" else None
        if found is None or found[0] not in self.groups:
            raise self.invalid(f"invalid named reference at `{self.text(start, start + 2)}`")
        self.pos = found[1]
        return Backref(self.groups.index(found[0]) + 1, start, self.raw(start))

    def control_letter(self, in_class: bool) -> int:
        """``\\cX`` (``pos`` at ``c``): X modulo 32 for an ASCII letter (and, in a class,
        a digit or ``_``); otherwise the backslash alone, ``c`` read next (Annex B)."""
        letter = self.peek(1)
        digit_or_underscore = letter != "" and letter in "0123456789_"
        if letter.isascii() and (letter.isalpha() or (in_class and digit_or_underscore)):
            self.pos += 2
            return ord(letter) % 32
        return ord("\\")

    def character_escape(self) -> int:
        """The code unit of a CharacterEscape (``pos`` after the ``\\``): a control escape,
        ``\\0`` and legacy octal, ``\\xHH``, ``\\uHHHH``, or the character itself."""
        char = self.peek()
        if char in _CONTROL:
            self.pos += 1
            return _CONTROL[char]
        if char in "01234567":
            return self.octal()
        for mark, digits in (("x", _HEX2), ("u", _HEX4)):
            found = digits.match(self.src, self.pos + 1) if char == mark else None
            if found:
                self.pos = found.end()
                return int(found[0], 16)
        self.pos += 1
        return ord(char)

    def octal(self) -> int:
        """A LegacyOctalEscapeSequence: up to three octal digits, at most 0o377."""
        value, used = 0, 0
        while used < 3 and self.peek() in _OCTAL and value * 8 < 0o400:
            value = value * 8 + int(self.peek())
            self.pos += 1
            used += 1
        return value

    # ---------------------------------------------------------- groups
    def group(self) -> Node:
        start = self.pos
        if self.src.startswith("(?:", start):
            self.pos += 3
            return self.closed(start, None)
        for mark, ahead, negative in (
            ("(?=", True, False),
            ("(?!", True, True),
            ("(?<=", False, False),
            ("(?<!", False, True),
        ):
            if self.src.startswith(mark, start):
                self.pos += len(mark)
                body = self.disjunction()
                self.close(start)
                return Look(body, ahead, negative, self.raw(start))
        if self.src.startswith("(?<", start):
            return self.named_group(start)
        modifiers = _MODIFIERS.match(self.src, start)
        if modifiers:
            raise NotMapped(
                f"the pattern modifier `{self.text(start, modifiers.end())}` is ECMAScript "
                "2025 syntax that Node 20 rejects: promptfoo's decision depends on the Node "
                "version"
            )
        if self.src.startswith("(?", start):
            raise self.invalid(f"invalid group `{self.text(start, start + 3)}`")
        self.pos += 1
        self.opened += 1
        return self.closed(start, self.opened)

    def named_group(self, start: int) -> Node:
        found = _group_name(self.src, start + 3)
        if found is None:
            raise self.invalid(f"invalid capture group name after `{self.text(start, start + 3)}`")
        name, self.pos = found
        if name in self.names:
            raise NotMapped(
                f"the group name `{name}` is used twice: ECMAScript 2025 allows it in "
                "different alternatives, Node 20 rejects it, so promptfoo's decision depends "
                "on the Node version"
            )
        self.names.add(name)
        self.opened += 1
        return self.closed(start, self.opened)

    def closed(self, start: int, index: int | None) -> Group:
        body = self.disjunction()
        self.close(start)
        return Group(body, index, self.pos - 1)

    def close(self, start: int) -> None:
        if self.peek() != ")":
            raise self.invalid(f"unterminated group `{self.text(start, start + 1)}`")
        self.pos += 1

    # ---------------------------------------------------------- character classes
    def char_class(self) -> Units:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        self.pos += 1 if negated else 0
        parts: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek():
                raise self.invalid(f"unterminated character class `{self.text(start)}`")
            parts.extend(self.class_ranges())
        self.pos += 1
        ranges = _normalized(parts)
        return Units(_complement(ranges) if negated else ranges)

    def class_ranges(self) -> list[tuple[int, int]]:
        """One class atom, or a range ``a-z``; with a class escape at either end (``\\d-z``)
        the ``-`` is a literal (Annex B)."""
        at = self.pos
        first = self.class_atom()
        if self.peek() != "-" or self.peek(1) in ("]", ""):
            return list(first) if isinstance(first, tuple) else [(first, first)]
        self.pos += 1
        second = self.class_atom()
        if isinstance(first, tuple) or isinstance(second, tuple):
            return [*_as_ranges(first), (0x2D, 0x2D), *_as_ranges(second)]
        if first > second:
            raise self.invalid(f"range out of order in `{self.text(at)}`")
        return [(first, second)]

    def class_atom(self) -> int | Ranges:
        char = self.peek()
        self.pos += 1
        if char != "\\":
            return ord(char)
        char = self.peek()
        if not char:
            raise self.invalid("`\\` at the end of the pattern")
        if char == "b":
            self.pos += 1
            return 0x08
        if char in "dDsSwW":
            self.pos += 1
            return _class_escape(char)
        if char == "c":
            return self.control_letter(in_class=True)
        if char == "k" and self.named:
            raise self.invalid("`\\k` in a character class of a pattern with named groups")
        if char in ("8", "9"):
            self.pos += 1
            return ord(char)
        return self.character_escape()


def _count(digits: str) -> int:
    """A quantifier's count; beyond any limit when it is longer than 12 digits."""
    return int(digits) if len(digits) <= 12 else 10**12


# ------------------------------------------------------------------ sets of code units
def _normalized(parts: list[tuple[int, int]] | Ranges) -> Ranges:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(parts):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(ranges: Ranges) -> Ranges:
    out, next_low = [], 0
    for low, high in _normalized(ranges):
        if low > next_low:
            out.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= _BMP:
        out.append((next_low, _BMP))
    return tuple(out)


def _as_ranges(atom: int | Ranges) -> Ranges:
    return atom if isinstance(atom, tuple) else ((atom, atom),)


def _class_escape(letter: str) -> Ranges:
    ranges = {"d": _DIGIT, "s": _SPACE, "w": _WORD}[letter.lower()]
    return _complement(ranges) if letter.isupper() else ranges


# ------------------------------------------------------------------ writing Python
Ancestors = tuple[Node, ...]


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Group | Look):
        return (node.body,)
    if isinstance(node, Repeat):
        return (node.atom,)
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.branches
    return ()


def _capturing(node: Node, ancestors: Ancestors = ()) -> dict[int, tuple[Group, Ancestors]]:
    """Every capturing group under ``node``, by number, with the nodes enclosing it."""
    found: dict[int, tuple[Group, Ancestors]] = {}
    if isinstance(node, Group) and node.index is not None:
        found[node.index] = (node, ancestors)
    for child in _children(node):
        found |= _capturing(child, (*ancestors, node))
    return found


def _nullable(node: Node) -> bool:
    """Whether ``node`` can match the empty text."""
    if isinstance(node, Char | Units):
        return False
    if isinstance(node, Group):
        return _nullable(node.body)
    if isinstance(node, Repeat):
        return node.low == 0 or _nullable(node.atom)
    if isinstance(node, Seq):
        return all(_nullable(item) for item in node.items)
    if isinstance(node, Alt):
        return any(_nullable(branch) for branch in node.branches)
    return True  # assertions, and a back reference (to a group that matched nothing)


def _width(node: Node) -> int | None:
    """The number of characters ``node`` always matches; None when it varies."""
    if isinstance(node, Char | Units):
        return 1
    if isinstance(node, Anchor | Look):
        return 0
    if isinstance(node, Group):
        return _width(node.body)
    if isinstance(node, Repeat):
        return _repeat_width(node)
    if isinstance(node, Seq):
        widths = [_width(item) for item in node.items]
        return None if None in widths else sum(w for w in widths if w is not None)
    if isinstance(node, Alt):
        alike = {_width(branch) for branch in node.branches}
        return alike.pop() if len(alike) == 1 else None
    return None  # a back reference


def _repeat_width(node: Repeat) -> int | None:
    width = _width(node.atom)
    if width == 0 or isinstance(node.atom, Look):
        return 0
    if width is None or node.high != node.low:
        return None
    return width * node.low


class _Writer:
    """Writes a parsed pattern as Python, refusing what Python cannot express."""

    def __init__(self, tree: Node) -> None:
        self.groups = _capturing(tree)

    def write(self, node: Node, ancestors: Ancestors) -> str:
        inner = (*ancestors, node)
        if isinstance(node, Char):
            return _literal(node.code)
        if isinstance(node, Units):
            return _units(node.ranges)
        if isinstance(node, Anchor):
            return {"^": "^", "$": r"\Z", "b": r"\b", "B": _NOT_WORD_BOUNDARY}[node.kind]
        if isinstance(node, Group):
            opening = "(" if node.index is not None else "(?:"
            return opening + self.write(node.body, inner) + ")"
        if isinstance(node, Look):
            return self.look(node, inner)
        if isinstance(node, Backref):
            return self.backref(node, ancestors)
        if isinstance(node, Repeat):
            return self.repeat(node, inner)
        if isinstance(node, Seq):
            return self.seq(node.items, inner)
        return "|".join(self.write(branch, inner) for branch in node.branches)

    def seq(self, items: tuple[Node, ...], inner: Ancestors) -> str:
        """Items in order; a surrogate pair of literals is written as the character it
        encodes, when printable (the ``utf16`` grader splits it again)."""
        out, i = [], 0
        while i < len(items):
            item, after = items[i], items[i + 1 : i + 2]
            if isinstance(item, Char) and _high(item.code) and after:
                char = _paired(item, after[0])
                if char is not None:
                    out.append(char)
                    i += 2
                    continue
            out.append(self.write(item, inner))
            i += 1
        return "".join(out)

    def look(self, node: Look, inner: Ancestors) -> str:
        if not node.ahead and _width(node.body) is None:
            raise NotMapped(
                f"the variable-length lookbehind `{_shown(node.text)}` has no Python equivalent "
                "(Python's lookbehinds match a fixed number of characters)"
            )
        opening = "(?" + ("" if node.ahead else "<") + ("!" if node.negative else "=")
        return opening + self.write(node.body, inner) + ")"

    def repeat(self, node: Repeat, inner: Ancestors) -> str:
        atom = self.write(node.atom, inner)
        if isinstance(node.atom, Look):
            # Annex B: the lookahead holds once, or (no minimum) is skipped: an iteration
            # that matches nothing ends the repetition. Its groups never keep a value then.
            if node.low > 0:
                return atom
            return f"(?:(?!){atom})?" if _capturing(node.atom) else "(?:)"
        if max(node.low, node.high or 0) >= MAX_REPEAT:
            raise NotMapped(f"the repetition count in `{_shown(node.text)}` exceeds Python's limit")
        counts = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.low, node.high))
        if counts is None:
            high = "" if node.high is None else str(node.high)
            counts = f"{{{node.low}}}" if node.high == node.low else f"{{{node.low},{high}}}"
        return atom + counts + ("" if node.greedy else "?")

    def backref(self, node: Backref, ancestors: Ancestors) -> str:
        group, enclosing = self.groups[node.group]
        if any(isinstance(a, Look) and not a.ahead for a in (*enclosing, *ancestors)):
            raise NotMapped(
                f"the back reference `{_shown(node.text)}` into or out of a lookbehind has no "
                "Python equivalent (JavaScript matches lookbehinds right to left)"
            )
        for outer in enclosing:
            if not isinstance(outer, Repeat) or outer.high in (0, 1):
                continue
            if outer.atom is not group or _nullable(group):
                raise NotMapped(
                    f"the back reference `{_shown(node.text)}` to a group repeated by "
                    f"`{_shown(outer.text)}` "
                    "has no Python equivalent (JavaScript forgets the group's text at each "
                    "repetition, Python keeps it)"
                )
        negative = [a for a in enclosing if isinstance(a, Look) and a.negative]
        if negative and not any(a is negative[-1] for a in ancestors):
            return "(?:)"  # a negative lookahead's groups never keep a value
        if node.at < group.end:
            return "(?:)"  # the group has not matched yet: the empty text
        if node.group > MAX_BACKREF:
            raise NotMapped(
                f"the back reference `{_shown(node.text)}` is to a group after the 99th"
            )
        return f"(?({node.group})\\{node.group})"


def _paired(high: Char, low: Node) -> str | None:
    """The printable character beyond U+FFFF that ``high`` and ``low`` encode, if they do."""
    if not isinstance(low, Char) or not _low(low.code):
        return None
    char = from_code_units(chr(high.code) + chr(low.code))
    return char if char.isprintable() else None


def _units(ranges: Ranges) -> str:
    """A set of code units as one Python atom: a class, or the complement's class negated
    when that is shorter."""
    named = {
        _DIGIT: r"\d",
        _complement(_DIGIT): r"\D",
        _WORD: r"\w",
        _complement(_WORD): r"\W",
    }
    if ranges in named:
        return named[ranges]
    if not ranges:
        return "(?!)"
    if ranges == ((0, _BMP),):
        return "(?s:.)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _literal(ranges[0][0])
    inside, outside = _class_body(ranges), _class_body(_complement(ranges))
    return "[^" + outside + "]" if len(outside) < len(inside) else "[" + inside + "]"


def _class_body(ranges: Ranges) -> str:
    parts = []
    for low, high in ranges:
        parts.append(_literal(low))
        if high > low:
            parts.append(("-" if high > low + 1 else "") + _literal(high))
    return "".join(parts)


def _literal(code: int) -> str:
    """One code unit as a Python pattern writes it literally (a surrogate as ``\\uHHHH``)."""
    char = chr(code)
    if char in _PYTHON_SPECIAL:
        return "\\" + char
    if char == " " or (char.isprintable() and not char.isspace()):
        return char
    if code in _PYTHON_CONTROL:
        return _PYTHON_CONTROL[code]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"
