"""What a stored response cost at its pin's price, in micro-dollars."""

from __future__ import annotations

from evalreg.providers.base import Completion
from evalreg.registry import schema


def cost_micro_usd(price: schema.Price | None, completion: Completion) -> int:
    """What one response cost, in micro-dollars (prices are USD per million tokens).

    Cached input is at ``cached_input_per_mtok`` where the pin prices it (at most all the
    input is cached), the rest of the input at the input price; reasoning tokens, part of
    the output, at ``reasoning_per_mtok`` where priced. A response bought through a batch
    API is at the batch input and output prices where the pin gives them.
    """
    if price is None:
        return 0
    input_rate, output_rate = rates(price, batch=completion.batch)
    cached_rate = price.cached_input_per_mtok
    cached = 0
    if cached_rate is not None:
        cached = min(completion.cached_input_tokens, completion.input_tokens)
    cost = (completion.input_tokens - cached) * input_rate + price.per_call * 1_000_000
    if cached_rate is not None:  # else no input is cached: adding 0.0 would change nothing
        cost += cached * cached_rate
    output = completion.output_tokens
    if price.reasoning_per_mtok is not None:
        reasoning = min(completion.reasoning_tokens, output)
        cost += (output - reasoning) * output_rate + reasoning * price.reasoning_per_mtok
    else:
        cost += output * output_rate
    return round(cost)


def rates(price: schema.Price, *, batch: bool) -> tuple[float, float]:
    """The (input, output) prices per million tokens of a response bought live, or through
    a batch API (the batch prices where the pin gives them)."""
    if not batch:
        return price.input_per_mtok, price.output_per_mtok
    return (
        _given(price.batch_input_per_mtok, price.input_per_mtok),
        _given(price.batch_output_per_mtok, price.output_per_mtok),
    )


def _given(rate: float | None, otherwise: float) -> float:
    return otherwise if rate is None else rate
