"""JavaScript regular expressions (promptfoo's ``regex`` asserts) become Python ones that
decide the same, or are refused with the construct named.

``tests/test_importer_fidelity.py`` checks the translation against promptfoo itself on a
corpus of patterns and outputs; these tests pin the rules one at a time.
"""

from __future__ import annotations

import re
import warnings

import pytest

from evalreg.importers.base import NotMapped
from evalreg.importers.js_regex import to_python
from evalreg.text.utf16 import code_units


def matches(pattern: str, text: str) -> bool:
    """Whether the JavaScript ``pattern``, translated, is found in ``text`` (as the regex
    grader with ``ascii`` and ``utf16`` searches: ``re.search`` with ``re.ASCII``, the
    pattern and the text as UTF-16 code units)."""
    return re.search(code_units(to_python(pattern)), code_units(text), re.ASCII) is not None


def refusal(pattern: str) -> str:
    with pytest.raises(NotMapped) as caught:
        to_python(pattern)
    return str(caught.value)


def test_braces_that_quantify_nothing_are_literal_text():
    assert to_python("a{,3}") == r"a\{,3\}"
    assert matches("a{,3}", "a{,3}")
    assert not matches("a{,3}", "aa")
    assert matches("^a{1,2}$", "aa")
    assert matches("{foo}", "{foo}") and matches("a{", "a{") and matches("]", "]")
    assert matches(r"^\u{3}$", "uuu")  # no u flag: an escaped "u" repeated three times
    assert matches(r"\p{L}", "p{L}") and not matches(r"\p{L}", "é")


def test_identity_escapes_are_the_character_itself():
    assert matches(r"\Z", "Z") and not matches(r"\Z", "abc")
    assert matches(r"\A", "A") and not matches(r"\A", "abc")
    for letter in "zeagNULEGhRXKQ":
        assert to_python("\\" + letter) == letter
    assert matches(r"\/", "/") and matches(r"\-", "-")


def test_named_groups_and_back_references_work():
    assert to_python(r"(?<n>a)\k<n>") == r"(a)(?(1)\1)"
    assert matches(r"(?<n>a)\k<n>", "aa") and not matches(r"^(?<n>a)\k<n>$", "ab")
    assert matches(r"(?<$x>a)\k<$x>", "aa")
    assert matches(r"(?<\u0061>a)\k<a>", "aa")  # an escape in a group name
    # A group that has not matched yet, or did not take part, matches the empty text.
    assert matches(r"^(a)?\1b$", "b")
    assert matches(r"^\1(a)$", "a")
    assert matches(r"^(a\1)$", "a")
    # Without a named group, \k is the letter k.
    assert matches(r"\k<n>", "k<n>") and not matches(r"\k<n>", "aa")


def test_decimal_escapes_depend_on_the_number_of_groups():
    assert matches(r"(a)\1", "aa")
    assert to_python(r"\8") == "8" and to_python(r"\9") == "9"
    assert to_python(r"(a)\12") == r"(a)\n"  # octal 12: one group only
    assert to_python(r"(a)\18") == r"(a)\x018"
    assert to_python(r"\101") == "A" and to_python(r"\400") == " 0"
    assert to_python(r"\0") == r"\x00"
    assert matches(r"[\1]", "\x01") and matches(r"[\8]", "8")


def test_any_character_and_the_empty_classes():
    assert to_python("[^]") == "(?s:.)"
    assert matches("a[^]b", "a\nb") and matches("a[^]b", "a\u2028b")
    assert to_python("[]") == "(?!)"
    assert not matches("[]", "abc") and not matches("a[]", "a")
    assert not matches("[]a]", "a]")  # the empty class, then "a]": nothing matches
    assert matches("[^]a]", "xa]") and not matches("[^]a]", "a]")
    for terminator in "\n\r\u2028\u2029":
        assert not matches("a.b", f"a{terminator}b")
    assert matches("a.b", "a\u0085b")  # NEL is not a line terminator


def test_dollar_and_caret_are_the_ends_of_the_whole_text():
    assert not matches("c$", "abc\n")
    assert not matches("^abc$", "abc\r\n")
    assert matches("c$", "abc")
    assert not matches("^b", "a\nb")
    assert to_python("^abc$") == r"^abc\Z"


def test_digits_words_and_boundaries_are_ascii_spaces_are_javascripts():
    assert not matches(r"\d", "٣") and matches(r"\D", "٣")
    assert not matches(r"\w", "é") and not matches(r"é\b", "é")
    assert matches(r"\s", "\u00a0") and matches(r"\s", "\ufeff") and matches(r"\s", "\u3000")
    assert not matches(r"\s", "\u180e") and not matches(r"\s", "\u0085")
    assert matches(r"[^\s]", "x") and not matches(r"^\S$", "\u2028")
    assert matches(r"^\B$", "")  # Python's own \B does not match the empty text
    assert matches(r"[\d-z]", "-") and matches(r"[\d-z]", "z") and not matches(r"[\d-z]", "a")


def test_control_and_hexadecimal_escapes():
    assert to_python(r"\cJ") == r"\n" and to_python(r"\cj") == r"\n"
    assert matches(r"\c1", "\\c1")  # not a letter: a backslash, then "c1"
    assert matches(r"[\c1]", "\x11") and matches(r"[\c_]", "\x1f")
    assert to_python(r"\x41\u0042") == "AB"
    assert to_python(r"\x4") == "x4" and to_python(r"\u004") == "u004"
    assert to_python("[\\b]") == r"\x08"


def test_quantified_lookaheads_hold_once_or_not_at_all():
    assert to_python("(?=a)*") == "(?:)"
    assert to_python("(?=a){2}") == "(?=a)"
    assert matches(r"^(?=(a))?\1b", "b")  # its group never keeps a value


def test_slashes_and_flags_are_part_of_the_pattern():
    assert matches("/Paris/i", "/Paris/i") and not matches("/Paris/i", "paris")


def test_a_character_beyond_the_basic_plane_is_two_code_units():
    assert to_python("🙂") == "🙂" and to_python(r"\uD83D\uDE42") == "🙂"
    assert matches(r"^\uD83D\uDE42$", "🙂") and matches("^🙂$", "🙂")
    assert not matches("^.$", "🙂") and matches("^..$", "🙂") and matches("^[^]{2}$", "🙂")
    assert matches(r"\B", "a🙂b") and not matches(r"\B", "a b")  # between the halves
    assert matches("^🙂+$", "🙂") and not matches("^(?:🙂)+$", "🙂🙂x")  # + repeats a half
    assert to_python("[🙂]") == r"[\ud83d\ude42]" and matches("^[🙂]{2}$", "🙂")
    assert matches("^[^🙂]$", "a") and not matches("[^🙂]", "🙂")


def test_a_surrogate_on_its_own_is_written_escaped():
    assert to_python(r"\uD83D") == r"\ud83d" and matches(r"\uD83D", "🙂")
    assert to_python(r"a\uDE42") == r"a\ude42"
    assert not matches(r"^\uDE42", "🙂") and matches(r"\uDE42$", "🙂")


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        ("(?<=a+)b", "the variable-length lookbehind `(?<=a+)` has no Python equivalent"),
        ("(?<=a|bc)d", "the variable-length lookbehind `(?<=a|bc)`"),
        (r"(?:(a)|b)+\1", r"the back reference `\1` to a group repeated by `(?:(a)|b)+`"),
        (r"(?<=(a))b\1", r"the back reference `\1` into or out of a lookbehind"),
        ("(?i:a)", "the pattern modifier `(?i:` is ECMAScript 2025 syntax"),
        ("(?<a>x)|(?<a>y)", "the group name `a` is used twice"),
        ("a{99999999999}", "the repetition count in `a{99999999999}` exceeds Python's limit"),
    ],
)
def test_a_construct_python_cannot_express_is_refused_by_name(pattern: str, named: str):
    assert named in refusal(pattern)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("x{2,1}", "numbers out of order in `x{2,1}`"),
        ("{2}", "nothing to repeat before `{`"),
        ("a**", "nothing to repeat before `*`"),
        ("^*", "nothing to repeat: `^` is an assertion"),
        ("(?<=a)?", "nothing to repeat: `(?<=a)` is an assertion"),
        ("[z-a]", "range out of order in `z-a`"),
        ("(a", "unterminated group `(`"),
        ("a)", "unmatched `)`"),
        ("[a", "unterminated character class `[a`"),
        ("a\\", "`\\` at the end of the pattern"),
        ("(?P<n>a)", "invalid group `(?P`"),
        ("(?<1a>a)", "invalid capture group name after `(?<`"),
        (r"(?<n>a)\k<m>", r"invalid named reference at `\k`"),
    ],
)
def test_an_invalid_pattern_is_refused_saying_why(pattern: str, why: str):
    assert refusal(pattern) == (
        f"{pattern!r} is not a valid JavaScript regular expression ({why}); "
        "promptfoo fails every output with it"
    )


def test_a_translation_longer_than_a_grader_takes_is_refused():
    assert "more than a regex grader's 2000" in refusal(r"\s" * 40)


def test_python_reads_every_translation_without_warnings():
    # Class contents are escaped: no "possible nested set" or "set difference" warnings.
    for pattern in ("[[]", "[&&]", "[~~]", "[||]", "[--0]", "[a[]"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(to_python(pattern), re.ASCII)
