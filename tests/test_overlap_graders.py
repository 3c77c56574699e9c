"""The overlap graders ``levenshtein``, ``rouge`` and ``bleu`` score what their libraries
document: rapidfuzz's docstring examples, rouge-score's README example and test suite,
sacrebleu's sentence-BLEU tests (``test/test_sentence_bleu.py``, ``test/test_bleu.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from evalreg.graders import GradingContext, Verdict, build_grader
from evalreg.graders.base import Needs, expected_needs
from evalreg.graders.parsing import parse_output
from evalreg.registry import schema

GRADER: TypeAdapter[Any] = TypeAdapter(schema.Grader)
JSON = schema.Output(parser="json")
TEXT = schema.Output(parser="text")


def grade(
    config: dict[str, Any], output: str, expected: Any = None, *, parser: schema.Output = TEXT
) -> Verdict:
    fn = build_grader(GRADER.validate_python(config), GradingContext())
    return fn(parse_output(output, parser), schema.Item(id="i", input={}, expected=expected))


# ---------------------------------------------------------------- levenshtein


def test_levenshtein_scores_rapidfuzz_documented_similarity() -> None:
    # rapidfuzz: distance("lewenstein", "levenshtein") == 2, normalized_similarity 0.8181...
    config = {"type": "levenshtein", "value": "levenshtein", "max_distance": 2}
    verdict = grade(config, "lewenstein")
    assert verdict == Verdict(True, pytest.approx(9 / 11), "distance 2 ≤ 2 from 'levenshtein'")


@pytest.mark.parametrize(
    ("output", "reference", "bound", "passed"),
    [  # promptfoo's own levenshtein tests, its threshold as max_distance
        ("test", "test", 5, True),
        ("tast", "test", 5, True),
        ("tist", "test", 2, True),
        ("completely different", "test", 5, False),
        ("tast", "test", 0, False),
        ("", "", 5, True),
        ("test!@#$", "test!@#$", 5, True),
    ],
)
def test_levenshtein_max_distance_decides_as_promptfoos_threshold(
    output: str, reference: str, bound: int, passed: bool
) -> None:
    config = {"type": "levenshtein", "value": reference, "max_distance": bound, "raw": True}
    assert grade(config, output).passed is passed


def test_levenshtein_min_similarity_is_normalised_by_the_longer_text() -> None:
    config = {"type": "levenshtein", "value": "sitting", "min_similarity": 0.6}
    verdict = grade(config, "kitten")  # 3 edits over 7 characters
    assert verdict == Verdict(
        False, pytest.approx(4 / 7), "distance 3, similarity 0.57 < 0.6 from 'sitting'"
    )


def test_levenshtein_with_both_bounds_needs_both() -> None:
    config = {"type": "levenshtein", "value": "sitting", "max_distance": 3, "min_similarity": 0.6}
    assert grade(config, "kitten").detail == (
        "distance 3 ≤ 3, similarity 0.57 < 0.6 from 'sitting'"
    )
    assert not grade(config, "kitten").passed


def test_levenshtein_needs_a_bound() -> None:
    with pytest.raises(ValidationError, match="give 'max_distance'"):
        GRADER.validate_python({"type": "levenshtein", "value": "x"})


def test_levenshtein_nearest_of_several_references_counts() -> None:
    config = {"type": "levenshtein", "expected_field": "names", "max_distance": 1}
    verdict = grade(config, "Jon", {"names": ["Johnny", "John"]})
    assert verdict == Verdict(True, 0.75, "distance 1 ≤ 1 from 'John'")
    missed = grade(config, "Bob", {"names": ["Johnny", "John"]})
    assert missed == Verdict(False, 0.25, "distance 3 > 1 from 'John'")


def test_levenshtein_reads_a_field_and_the_items_expected_field() -> None:
    config = {"type": "levenshtein", "field": "city", "max_distance": 1}
    assert grade(config, '{"city": "Pariss"}', {"city": "Paris"}, parser=JSON).passed
    verdict = grade(config, '{"town": "Paris"}', {"city": "Paris"}, parser=JSON)
    assert verdict == Verdict(False, 0.0, "output has no field 'city'")
    assert expected_needs(GRADER.validate_python(config)) == Needs("city")
    literal = GRADER.validate_python(config | {"value": "Paris"})
    assert expected_needs(literal) is None


def test_levenshtein_compares_a_non_string_answer_as_json() -> None:
    config = {"type": "levenshtein", "field": "ids", "value": "[1,2,3]", "max_distance": 0}
    assert grade(config, '{"ids": [1, 2, 3]}', parser=JSON).passed


def test_levenshtein_counts_emoji_as_two_code_units_with_utf16() -> None:
    config = {"type": "levenshtein", "value": "ok", "max_distance": 1, "raw": True}
    assert grade(config, "ok🙂").passed
    assert not grade(config | {"utf16": True}, "ok🙂").passed  # as JavaScript's strings


def test_levenshtein_ignore_case_folds_both_texts() -> None:
    config = {"type": "levenshtein", "value": "STRASSE", "max_distance": 0, "ignore_case": True}
    assert grade(config, "Straße").passed  # casefold: ß is ss
    assert not grade(config | {"case": "lower"}, "Straße").passed


# ---------------------------------------------------------------- rouge

FOX = "The quick brown fox jumps over the lazy dog"
"""rouge-score's README example: ``scorer.score(FOX, DOG)``, the target first."""
DOG = "The quick brown dog jumps on the log."


@pytest.mark.parametrize(
    ("variant", "f"),
    [  # 6 of 8 words in common (9 in the target); 2 of 7 pairs (8); a common subsequence of 5
        ("rouge1", 12 / 17),
        ("rouge2", 4 / 15),
        ("rougeL", 10 / 17),
    ],
)
def test_rouge_scores_the_readme_example(variant: str, f: float) -> None:
    config = {"type": "rouge", "variant": variant, "value": FOX, "stemmer": True, "threshold": 0}
    assert grade(config, DOG).score == pytest.approx(f)


@pytest.mark.parametrize(
    ("variant", "target", "prediction", "f"),
    [  # rouge_scorer_test.py
        ("rouge1", "testing one two", "testing", 1 / 2),
        ("rouge2", "testing one two", "testing one", 2 / 3),
        ("rougeL", "testing one two", "testing two", 4 / 5),
        ("rouge1", "testing one two", "", 0),
    ],
)
def test_rouge_scores_rouge_scores_own_tests(
    variant: str, target: str, prediction: str, f: float
) -> None:
    config = {"type": "rouge", "variant": variant, "value": target}
    assert grade(config, prediction).score == pytest.approx(f)


@pytest.mark.parametrize(("variant", "f"), [("rouge1", 1.0), ("rouge2", 0.0), ("rougeL", 0.5)])
def test_rouge_takes_the_best_of_several_references(variant: str, f: float) -> None:
    # rouge_scorer_test.py's testRougeAllMulti
    config = {"type": "rouge", "variant": variant, "expected_field": "refs", "threshold": 0.5}
    verdict = grade(config, "text first", {"refs": ["first text", "first something"]})
    assert verdict.score == pytest.approx(f)
    assert verdict.detail.endswith(" (best of 2 references)")


def test_rouge_passes_at_the_threshold_and_says_so() -> None:
    config = {"type": "rouge", "variant": "rougeL", "value": "testing one two", "threshold": 0.8}
    assert grade(config, "testing two") == Verdict(True, pytest.approx(0.8), "ROUGE-L 0.80 ≥ 0.8")
    assert grade(config | {"threshold": 0.81}, "testing two").detail == "ROUGE-L 0.80 < 0.81"


def test_rouge_detail_never_reads_as_the_opposite_decision() -> None:
    # 10 of 11 words in common with a reference of 12: F = 20/23 = 0.8696, "0.87" rounded
    config = {"type": "rouge", "value": "a b c d e f g h i j k l", "threshold": 0.87}
    verdict = grade(config, "a b c d e f g h i j x")
    assert verdict == Verdict(False, pytest.approx(20 / 23), "ROUGE-1 0.8696 < 0.87")


def test_rouge_stemmer_compares_porter_stems() -> None:
    config = {"type": "rouge", "value": "The cats were jumping", "threshold": 0.8}
    assert grade(config, "the cat jumped").score == pytest.approx(2 / 7)  # only "the"
    stemmed = grade(config | {"stemmer": True}, "the cat jumped")  # the, cat, jump
    assert stemmed == Verdict(True, pytest.approx(6 / 7), "ROUGE-1 0.86 ≥ 0.8")


def test_rouge_says_when_the_reference_has_no_word_it_reads() -> None:
    verdict = grade({"type": "rouge", "value": "東京は日本の首都です"}, "東京は日本の首都です")
    assert verdict == Verdict(
        False,
        0.0,
        "ROUGE-1 0.00 < 0.75: the reference has no word rouge-score reads (letters a-z and digits)",
    )


def test_rouge_reads_a_field_of_a_json_answer() -> None:
    config = {"type": "rouge", "field": "summary", "variant": "rougeL"}
    verdict = grade(config, f'{{"summary": "{DOG}"}}', {"summary": FOX}, parser=JSON)
    assert verdict == Verdict(False, pytest.approx(10 / 17), "ROUGE-L 0.59 < 0.75")
    raw = grade({"type": "rouge", "raw": True, "value": DOG}, f'{{"summary": "{DOG}"}}')
    assert raw.score == pytest.approx(16 / 17)  # "summary" is a word of the raw output


# ---------------------------------------------------------------- bleu

SYS = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"
"""sacrebleu's test_sentence_bleu.py (from its issue #98): a hypothesis and its reference."""
REF = "producţia de zahăr brut se exprimă în zahăr alb;"


@pytest.mark.parametrize(
    ("options", "bleu"),
    [
        ({}, 8.493),
        ({"tokenize": "none"}, 7.347),
        ({"tokenize": "intl"}, 8.493),
        ({"tokenize": "char"}, 40.8759),
        ({"tokenize": "char", "ignore_case": True}, 42.0267),
    ],
)
def test_bleu_scores_sacrebleus_sentence_tests(options: dict[str, Any], bleu: float) -> None:
    verdict = grade({"type": "bleu", "value": REF, "threshold": 0} | options, SYS)
    assert verdict.score == pytest.approx(bleu / 100, abs=1e-5)  # sacrebleu's EPSILON, scaled


def test_bleu_of_no_ngram_in_common_is_zero() -> None:
    assert grade({"type": "bleu", "value": "okay thanks"}, "this is a cat") == Verdict(
        False, 0.0, "BLEU 0.00 < 0.5"
    )


def test_bleu_uses_the_effective_order_and_the_closest_reference_length() -> None:
    # test_bleu.py's effective-order case: one word against two is the brevity penalty, 1/e
    config = {"type": "bleu", "value": "a test"}
    assert grade(config, "test") == Verdict(False, pytest.approx(math.exp(-1)), "BLEU 0.37 < 0.5")
    both = grade(config | {"value": ["a test", "test"]}, "test")
    assert both == Verdict(True, 1.0, "BLEU 1.00 ≥ 0.5 (2 references)")


def test_bleu_of_an_exact_match_is_one() -> None:
    verdict = grade({"type": "bleu", "value": "The cat sat on the mat."}, "The cat sat on the mat.")
    assert verdict == Verdict(True, 1.0, "BLEU 1.00 ≥ 0.5")  # not sacrebleu's 100.00000000000004


def test_bleu_of_an_empty_output_is_zero() -> None:
    assert grade({"type": "bleu", "value": "The cat sat."}, "").score == 0.0


def test_bleu_reads_a_list_of_expected_references() -> None:
    config = {"type": "bleu", "field": "fr", "threshold": 0.9}
    expected = {"fr": ["Le chat est assis.", "Le chat s'est assis."]}
    verdict = grade(config, '{"fr": "Le chat s\'est assis."}', expected, parser=JSON)
    assert verdict == Verdict(True, 1.0, "BLEU 1.00 ≥ 0.9 (2 references)")
    empty = grade(config, '{"fr": "Le chat"}', {"fr": []}, parser=JSON)
    assert empty == Verdict(False, 0.0, "the item's expected references are an empty list")


def test_bleu_refuses_an_empty_list_of_references_and_raw_with_a_field() -> None:
    with pytest.raises(ValidationError):
        GRADER.validate_python({"type": "bleu", "value": []})
    with pytest.raises(ValidationError, match="'raw' compares the whole output"):
        GRADER.validate_python({"type": "bleu", "value": "x", "raw": True, "field": "a"})
