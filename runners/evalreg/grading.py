"""Grade one cell's stored responses into per-item records (pure: no I/O, no model calls)."""

from __future__ import annotations

from typing import Any

from evalreg.canonical import digest
from evalreg.graders import GradingContext, Verdict, build_grader
from evalreg.levels import applies, assign_level
from evalreg.parsing import parse_output
from evalreg.plan import Cell
from evalreg.providers.base import Completion
from evalreg.registry import schema
from evalreg.results import rounded


def item_content(item: schema.Item) -> str:
    """The hash that, with the id, identifies an item for pairing across revisions."""
    return digest(item.model_dump(mode="json", include={"input", "messages", "expected"}))[:16]


def cost_micro_usd(price: schema.Price | None, completion: Completion) -> int:
    """What one response cost, in micro-dollars (prices are USD per million tokens)."""
    if price is None:
        return 0
    output = completion.output_tokens
    cost = completion.input_tokens * price.input_per_mtok + price.per_call * 1_000_000
    if price.reasoning_per_mtok is not None:
        reasoning = min(completion.reasoning_tokens, output)
        cost += (output - reasoning) * price.output_per_mtok + reasoning * price.reasoning_per_mtok
    else:
        cost += output * price.output_per_mtok
    return round(cost)


class CellGrader:
    """Grades responses for one cell under its rubric and the task's output parser."""

    def __init__(self, cell: Cell, context: GradingContext) -> None:
        self.cell = cell
        self.criteria = [(c, build_grader(c.grader, context)) for c in cell.rubric.criteria]

    def record(
        self,
        item: schema.Item,
        sample: int,
        key: str | None,
        stored: dict[str, Any] | None,
        error: str | None,
    ) -> dict[str, Any]:
        """The per-item record for one sample: an error, or verdicts, level and usage."""
        base: dict[str, Any] = {
            "item": item.id,
            "content": item_content(item),
            "sample": sample,
            "tags": sorted(item.tags),
            "cluster": item.cluster,
            "key": key,
        }
        if stored is None:
            return {
                **base,
                "error": error or "missing",
                "criteria": {},
                "level": None,
                "score": 0.0,
                "latency_ms": 0,
                "tokens": {"input": 0, "output": 0, "reasoning": 0},
                "cost_micro_usd": 0,
            }
        completion = Completion.from_record(stored["response"])
        parsed = parse_output(completion.text, self.cell.task.output)
        verdicts: dict[str, Verdict | None] = {}
        for criterion, grade in self.criteria:
            verdicts[criterion.id] = grade(parsed, item) if applies(criterion, item.tags) else None
        level, score = assign_level(self.cell.rubric, verdicts, item.tags)
        return {
            **base,
            "error": None,
            "criteria": {
                cid: {"passed": v.passed, "score": rounded(v.score), "detail": v.detail}
                for cid, v in sorted(verdicts.items())
                if v is not None
            },
            "level": level,
            "score": rounded(score),
            "latency_ms": int(stored.get("latency_ms", 0)),
            "tokens": {
                "input": completion.input_tokens,
                "output": completion.output_tokens,
                "reasoning": completion.reasoning_tokens,
            },
            "cost_micro_usd": cost_micro_usd(self.cell.pin.price, completion),
        }
