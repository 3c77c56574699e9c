"""Near-duplicate texts among eval items, found in linear time by sorted-neighbourhood blocking."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

NEAR_WINDOW = 16
"""How many neighbours, in each sort order, a text is compared with for near duplicates."""
NEAR_CHARS = 2000
"""Characters of each text that near-duplicate similarity looks at."""


def normalised(value: Any) -> str:
    """The text of every string and number in ``value`` (dict keys in sorted order), case-
    folded, NFKC-normalised, with punctuation and runs of whitespace made single spaces."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in sorted(node):
                walk(node[key])
        elif isinstance(node, list):
            for inner in node:
                walk(inner)
        elif isinstance(node, str | int | float) and not isinstance(node, bool):
            parts.append(str(node))

    walk(value)
    text = unicodedata.normalize("NFKC", " ".join(parts)).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def near_duplicates(texts: Sequence[str], threshold: float) -> set[int]:
    """Indexes of the texts that nearly duplicate an earlier text that is kept.

    Similarity is the normalised Indel similarity (``rapidfuzz.fuzz.ratio`` / 100) of the
    texts' first :data:`NEAR_CHARS` characters; a text is a near duplicate when it is at
    least ``threshold`` similar to an earlier text that is not itself a near duplicate.
    Equal texts are found by hashing. The others are compared by sorted-neighbourhood
    blocking (Hernández & Stolfo 1995, "The merge/purge problem for large databases",
    SIGMOD): sorted once from the start and once from the end, each text is compared with
    the :data:`NEAR_WINDOW` texts before it. The cost is linear in the number of texts; a
    pair is found when it sorts that close in either order, as near duplicates that share
    their opening or their closing words do.
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Indel

    first: dict[str, int] = {}
    earlier: dict[int, set[int]] = defaultdict(set)
    for index, text in enumerate(texts):
        if text:
            earlier[index].add(first.setdefault(text, index))
    short = {index: texts[index][:NEAR_CHARS] for index in sorted(first.values())}
    cutoff = threshold - 1e-9
    for order in (
        sorted(short, key=short.__getitem__),
        sorted(short, key=lambda i: short[i][::-1]),
    ):
        strings = [short[index] for index in order]
        for position in range(1, len(order)):
            start = max(0, position - NEAR_WINDOW)
            found = process.extract(
                strings[position],
                strings[start:position],
                scorer=Indel.normalized_similarity,
                score_cutoff=cutoff,
                limit=None,
            )
            index = order[position]
            for _choice, _score, offset in found:
                other = order[start + offset]
                earlier[max(index, other)].add(min(index, other))
    removed: set[int] = set()
    for index in sorted(earlier):
        if any(other < index and other not in removed for other in earlier[index]):
            removed.add(index)
    return removed
