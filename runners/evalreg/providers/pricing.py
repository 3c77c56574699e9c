"""What a stored response cost at its pin's price, in micro-dollars."""

from __future__ import annotations

from evalreg.providers.base import Completion
from evalreg.registry import schema


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
