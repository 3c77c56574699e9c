"""Overlap graders: how near the answer's text comes to a reference text, by edits
(``levenshtein``), words in common (``rouge``) or runs of words in common (``bleu``).

The metrics are the libraries' own (rapidfuzz, Google's rouge-score, sacrebleu), imported
when a rubric builds such a grader: rouge-score loads NLTK, which no command should pay
for at start-up.
"""

from __future__ import annotations

from evalreg.graders._match import folder
from evalreg.graders._pattern import searched
from evalreg.graders.base import (
    GradeFn,
    GradingContext,
    Ungradable,
    Verdict,
    as_text,
    expected,
    needs_expected_field,
    register,
    show,
)
from evalreg.graders.parsing import Parsed
from evalreg.registry import schema
from evalreg.text.utf16 import code_units

_ROUGE_NAMES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}
_Overlap = schema.LevenshteinGrader | schema.RougeGrader | schema.BleuGrader


@register("levenshtein", needs=needs_expected_field)
def levenshtein(config: schema.LevenshteinGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the answer's text is within the bounds of a reference's, by edit distance.

    The distance is the Levenshtein distance (insertions, deletions and substitutions of
    one character each); the similarity, the score, is ``1 - distance / max(lengths)``
    (rapidfuzz's ``normalized_similarity``): two empty texts are equal.

    Args:
        config: ``max_distance``, the most edits that pass (promptfoo's threshold);
            ``min_similarity``, the least similarity that passes (both given: both must
            hold); ``value`` the reference, or several, one within the bounds being enough
            (absent: the item's ``expected[expected_field or field]``, text or a list);
            ``field`` the dotted path graded (absent: the whole answer, non-strings as
            sorted JSON; ``raw``: the output exactly as returned); ``ignore_case`` folds
            both texts as ``case`` says; ``utf16`` counts UTF-16 code units, as
            JavaScript's strings do.
        ctx: not used.
    """
    from rapidfuzz.distance import Levenshtein  # imported when a rubric uses it (start-up)

    fold = folder(config.case) if config.ignore_case else None

    def prepared(text: str) -> str:
        text = fold(text) if fold is not None else text
        return code_units(text) if config.utf16 else text

    def measured(got: str, reference: str) -> tuple[bool, float, str]:
        a, b = prepared(got), prepared(reference)
        distance = Levenshtein.distance(a, b)
        similarity = Levenshtein.normalized_similarity(a, b)
        passed, parts = True, []
        if config.max_distance is not None:
            within = distance <= config.max_distance
            passed &= within
            parts.append(f"distance {distance} {'≤' if within else '>'} {config.max_distance}")
        else:
            parts.append(f"distance {distance}")
        if config.min_similarity is not None:
            near, said = _compared("similarity", similarity, config.min_similarity)
            passed &= near
            parts.append(said)
        return passed, similarity, ", ".join(parts) + f" from {show(reference)}"

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = searched(parsed, config)
        # The nearest reference: one that passes, then the most similar.
        passed, score, detail = max(
            (measured(got, reference) for reference in _references(config, item)),
            key=lambda m: m[:2],
        )
        return Verdict(passed, score, detail)

    return grade


@register("rouge", needs=needs_expected_field)
def rouge(config: schema.RougeGrader, ctx: GradingContext) -> GradeFn:
    """Score the ROUGE F-measure of the answer's text against a reference; pass at or above
    ``threshold``.

    rouge-score lower-cases both texts and reads words as runs of the letters a-z and
    digits: punctuation and every other letter (``é``, ``ß``, Chinese) separate words and
    are not compared, so a reference in another script has no word to match.

    Args:
        config: ``variant`` (``rouge1``, ``rouge2``, ``rougeL``); ``threshold``, the least
            F-measure that passes; ``stemmer``, Porter stems for words of more than three
            letters; ``value`` the reference, or several, the best F-measure counting
            (absent: the item's ``expected[expected_field or field]``, text or a list);
            ``field`` and ``raw`` as for ``levenshtein``.
        ctx: not used.
    """
    from rouge_score.rouge_scorer import RougeScorer  # loads NLTK: only when a rubric uses it
    from rouge_score.tokenizers import DefaultTokenizer

    scorer = RougeScorer([config.variant], use_stemmer=config.stemmer)
    words = DefaultTokenizer().tokenize
    name = _ROUGE_NAMES[config.variant]

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        references = _references(config, item)
        got = searched(parsed, config)
        score = float(scorer.score_multi(references, got)[config.variant].fmeasure)
        passed, detail = _compared(name, score, config.threshold)
        if len(references) > 1:
            detail += f" (best of {len(references)} references)"
        if score == 0 and not any(words(r) for r in references):
            detail += ": the reference has no word rouge-score reads (letters a-z and digits)"
        return Verdict(passed, score, detail)

    return grade


@register("bleu", needs=needs_expected_field)
def bleu(config: schema.BleuGrader, ctx: GradingContext) -> GradeFn:
    """Score the sentence BLEU of the answer's text against the references; pass at or above
    ``threshold``.

    sacrebleu's ``BLEU(effective_order=True).sentence_score`` with its defaults otherwise
    (up to 4-grams, exponential smoothing, the reference length closest to the answer's
    for the brevity penalty), divided by 100. An empty answer scores 0.

    Args:
        config: ``threshold``, the least BLEU that passes (0 to 1); ``tokenize``, sacrebleu's
            tokenizer; ``ignore_case`` lower-cases both texts; ``value`` the reference, or
            several, counted together as BLEU counts several references (absent: the item's
            ``expected[expected_field or field]``, text or a list); ``field`` and ``raw`` as
            for ``levenshtein``.
        ctx: not used.
    """
    from sacrebleu.metrics.bleu import BLEU  # imported when a rubric uses it (start-up)

    metric = BLEU(lowercase=config.ignore_case, tokenize=config.tokenize, effective_order=True)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        references = _references(config, item)
        got = searched(parsed, config)
        # sacrebleu's 100 for an exact match may come out a rounding error above it
        score = min(metric.sentence_score(got, references).score / 100, 1.0)
        passed, detail = _compared("BLEU", score, config.threshold)
        if len(references) > 1:
            detail += f" ({len(references)} references)"
        return Verdict(passed, score, detail)

    return grade


def _references(config: _Overlap, item: schema.Item) -> list[str]:
    """The reference texts: ``value``, or the item's expected value (a list: several)."""
    source = (
        config.value
        if config.value is not None
        else expected(item, config.expected_field or config.field)
    )
    references = source if isinstance(source, list) else [source]
    if not references:
        raise Ungradable("the item's expected references are an empty list")
    return [as_text(r) for r in references]


def _compared(name: str, score: float, threshold: float) -> tuple[bool, str]:
    """Whether ``score`` reaches ``threshold``, and the comparison as a detail says it, with
    as many digits as it takes not to look like the opposite (``0.7499 < 0.75``)."""
    passed = score >= threshold
    for digits in (2, 4, 6):
        shown = f"{score:.{digits}f}"
        if (float(shown) >= threshold) == passed:
            break
    else:
        shown = repr(score)
    return passed, f"{name} {shown} {'≥' if passed else '<'} {threshold:g}"
