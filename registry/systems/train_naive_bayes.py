"""Train the naive-Bayes triage baseline from training/tickets.jsonl into naive_bayes_weights.json.

Deterministic: features are selected by chi-square with ties broken by name, probabilities are
rounded, and the JSON is written with sorted keys, so re-running gives identical bytes. Run it
after regenerating the training data: ``python registry/systems/train_naive_bayes.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
TRAIN_PATH = HERE / "training" / "tickets.jsonl"
ALPHA = 1.0
MIN_DF = 3
DIGITS = 4
TOP_K = {"category": 3000, "priority": 2000, "needs_human": 1500}
CLASSES = {
    "category": (
        "billing", "technical", "account", "shipping", "security", "feature_request", "other",
    ),
    "priority": ("low", "medium", "high", "urgent"),
    "needs_human": ("false", "true"),
}


def load_system() -> ModuleType:
    """Import naive_bayes.py by path so the trainer and the system share one featurizer."""
    spec = importlib.util.spec_from_file_location("naive_bayes", HERE / "naive_bayes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chi_square(n: int, a: int, b: int, c: int, d: int) -> float:
    """Chi-square of a 2x2 table: a=feature&class, b=feature&not, c=class&not feature, d=rest."""
    denom = (a + c) * (b + d) * (a + b) * (c + d)
    return n * (a * d - b * c) ** 2 / denom if denom else 0.0


def select(
    docs: list[set[str]], labels: list[str], classes: tuple[str, ...], k: int
) -> list[str]:
    """The k features most associated with any class (document-level chi-square)."""
    n = len(docs)
    df: Counter[str] = Counter()
    df_class: dict[str, Counter[str]] = {c: Counter() for c in classes}
    for doc, lab in zip(docs, labels, strict=True):
        df.update(doc)
        df_class[lab].update(doc)
    size = Counter(labels)
    scored = []
    for feat, total in df.items():
        if total < MIN_DF:
            continue
        best = 0.0
        for c in classes:
            a = df_class[c][feat]
            b = total - a
            best = max(best, chi_square(n, a, b, size[c] - a, n - size[c] - b))
        scored.append((-best, feat))
    scored.sort()
    return [feat for _, feat in scored[:k]]


def fit(
    bags: list[list[str]],
    labels: list[str],
    classes: tuple[str, ...],
    vocab: list[str],
    weight: Callable[[str], float],
) -> dict[str, Any]:
    """Multinomial naive Bayes with Laplace smoothing over a fixed vocabulary.

    Feature occurrences count with their family weight, so down-weighted families contribute
    fractional counts, matching how the system scores them.
    """
    keep = set(vocab)
    counts: dict[str, dict[str, float]] = {c: {} for c in classes}
    for bag, lab in zip(bags, labels, strict=True):
        row = counts[lab]
        for f in bag:
            if f in keep:
                row[f] = row.get(f, 0.0) + weight(f)
    size = Counter(labels)
    n = len(labels)
    log_prior = [round(math.log((size[c] + ALPHA) / (n + ALPHA * len(classes))), DIGITS)
                 for c in classes]
    denoms = {c: sum(counts[c].values()) + ALPHA * len(vocab) for c in classes}
    table = {
        feat: [
            round(math.log((counts[c].get(feat, 0.0) + ALPHA) / denoms[c]), DIGITS)
            for c in classes
        ]
        for feat in sorted(vocab)
    }
    return {"classes": list(classes), "log_prior": log_prior, "log_likelihood": table}


def train(
    rows: list[dict[str, Any]],
    featurize: Callable[..., list[str]],
    weight: Callable[[str], float],
) -> dict[str, Any]:
    """Fit all three field models."""
    bags = [
        featurize(r["subject"], r["body"], r["customer_tier"], r["channel"]) for r in rows
    ]
    docs = [set(bag) for bag in bags]
    fields = {}
    for name, classes in CLASSES.items():
        labels = [str(r[name]).lower() for r in rows]
        vocab = select(docs, labels, classes, TOP_K[name])
        fields[name] = fit(bags, labels, classes, vocab, weight)
    return fields


def main() -> None:
    """Train from the training file and write the weights next to the system."""
    system = load_system()
    data = TRAIN_PATH.read_bytes()
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    weights = {
        "format": system.FORMAT,
        "alpha": ALPHA,
        "min_df": MIN_DF,
        "top_k": TOP_K,
        "trained_on": {
            "file": TRAIN_PATH.relative_to(HERE).as_posix(),
            "rows": len(rows),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        "feature_weights": system.FEATURE_WEIGHTS,
        "fields": train(
            rows, system.features, lambda f: system.feature_weight(f, system.FEATURE_WEIGHTS)
        ),
    }
    text = json.dumps(weights, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    system.WEIGHTS_PATH.write_text(text + "\n", encoding="utf-8", newline="\n")
    size = system.WEIGHTS_PATH.stat().st_size
    print(f"trained on {len(rows)} tickets; wrote {system.WEIGHTS_PATH.name} ({size:,} bytes)")


if __name__ == "__main__":
    main()
