"""A use case's explorer data at any size, without a run: ``samples.use_case_samples``'s
shape filled with seeded values, for the explorer's scale test and its benchmark."""

from __future__ import annotations

import random
from typing import Any

from evalreg.selection.samples import SAMPLES_FORMAT

LEVELS = ["correct", "acceptable", "unacceptable"]
SLICES = ["adversarial", "common", "edge", "messy", "regression"]
CRITERIA = ["valid_json", "label", "summary_length"]


def synthetic(items: int, candidates: int, *, seed: int = 7, base: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    ids = [f"item-{i:05d}" for i in range(items)]
    tags = [sorted(rng.sample(SLICES, rng.randint(1, 2))) for _ in ids]
    samples = []
    passes = []
    for _ in range(candidates):
        column = []
        marks = []
        for _ in range(items):
            if rng.random() < 0.01:
                column.append([_sample(rng, error="HTTP 500 after 3 attempts")])
                marks.append(".")
                continue
            sample = _sample(rng)
            column.append([sample])
            marks.append("1" if sample["level"] == "correct" else "0")
        samples.append(column)
        passes.append("".join(marks))
    flipped = [
        "".join(("1" if m == "0" else "0") if m != "." and rng.random() < 0.05 else m for m in p)
        for p in passes
    ]
    return {
        "format": SAMPLES_FORMAT,
        "use_case": "synthetic",
        "title": "Synthetic use case",
        "task": "synthetic",
        "evalset": {"path": "evalsets/synthetic.jsonl", "md5": "0" * 32, "items": items},
        "label": "working tree",
        "base_label": "revision 000000000000" if base else None,
        "pass_level": "correct",
        "pass_levels": ["correct"],
        "levels": LEVELS,
        "texts": True,
        "redacted": [],
        "slices": SLICES,
        "criteria": [
            {"id": c, "description": c, "critical": c != "summary_length", "grader": "exact"}
            for c in CRITERIA
        ],
        "candidates": [
            {
                "id": f"candidate-{c}",
                "pin": f"pin-{c}",
                "provider": "openai",
                "model": f"model-{c}",
                "params": {"temperature": 0},
                "declared": c == 0,
                "state": "fresh",
                "prompt": 0,
            }
            for c in range(candidates)
        ],
        "prompts": [{"system": "Answer with JSON.", "template": "Message: {{ text }}"}],
        "items": [
            {
                "id": item,
                "tags": tags[i],
                "input": {"text": _words(rng, 40)},
                "expected": {"label": "a"},
            }
            for i, item in enumerate(ids)
        ],
        "requests": [
            [
                [["system", "Answer with JSON."], ["user", "Message: " + _words(rng, 40)]]
                for _ in ids
            ]
        ],
        "samples": samples,
        "passes": passes,
        "base_passes": flipped if base else [None] * candidates,
    }


def _sample(rng: random.Random, error: str | None = None) -> dict[str, Any]:
    level = None if error else rng.choice(LEVELS)
    return {
        "sample": 0,
        "level": level,
        "error": error,
        "score": "0" if error else rng.choice(["0", "0.5", "1"]),
        "latency": f"{rng.randint(200, 3000)} ms",
        "tokens": [str(rng.randint(50, 400)), str(rng.randint(10, 200)), "0"],
        "cost": "$0.000120",
        "criteria": []
        if error
        else [[c, rng.random() < 0.7, "", "expected 'a', got 'b'"] for c in CRITERIA],
        "ungraded": [],
        **({} if error else {"output": '{"label": "a", "summary": "' + _words(rng, 30) + '"}'}),
    }


_VOCABULARY = [
    "the",
    "order",
    "refund",
    "invoice",
    "late",
    "shipped",
    "account",
    "password",
    "reset",
    "login",
    "error",
]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCABULARY) for _ in range(n))
