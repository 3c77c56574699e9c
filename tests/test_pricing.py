"""What a response costs at its pin's price: cached input, reasoning and batch prices."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from evalreg.providers.base import Completion
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry.schema import Price

AS_OF = datetime.date(2026, 1, 1)


def price(**rates: float) -> Price:
    return Price(as_of=AS_OF, **rates)


def usage(**tokens: Any) -> Completion:
    return Completion(text="", **tokens)


def test_without_a_price_a_response_costs_nothing():
    assert cost_micro_usd(None, usage(input_tokens=10, output_tokens=10)) == 0


def test_without_a_cached_price_cached_input_is_input():
    plain = price(input_per_mtok=2.0, output_per_mtok=8.0, per_call=0.001)
    got = usage(input_tokens=1000, cached_input_tokens=600, output_tokens=100)
    assert cost_micro_usd(plain, got) == 1000 * 2 + 100 * 8 + 1000


def test_cached_input_is_priced_apart_from_the_rest():
    cached = price(input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0)
    got = usage(input_tokens=1000, cached_input_tokens=600, output_tokens=100)
    assert cost_micro_usd(cached, got) == 400 * 2 + 600 * 0.5 + 100 * 8


def test_more_cached_tokens_than_input_tokens_are_clamped_to_the_input():
    cached = price(input_per_mtok=2.0, cached_input_per_mtok=0.5)
    got = usage(input_tokens=100, cached_input_tokens=250)
    assert cost_micro_usd(cached, got) == 100 * 0.5


def test_reasoning_and_cached_tokens_together():
    rates = price(
        input_per_mtok=1.25,
        cached_input_per_mtok=0.125,
        output_per_mtok=10.0,
        reasoning_per_mtok=12.0,
    )
    got = usage(
        input_tokens=2000, cached_input_tokens=1500, output_tokens=900, reasoning_tokens=700
    )
    expected = 500 * 1.25 + 1500 * 0.125 + 200 * 10.0 + 700 * 12.0
    assert cost_micro_usd(rates, got) == round(expected)


def test_a_batch_response_is_at_the_batch_prices_and_its_cache_at_the_cached_price():
    rates = price(
        input_per_mtok=2.0,
        output_per_mtok=8.0,
        cached_input_per_mtok=0.5,
        batch_input_per_mtok=1.0,
        batch_output_per_mtok=4.0,
    )
    record = usage(input_tokens=1000, cached_input_tokens=200, output_tokens=100).as_record()
    record["batch"] = True
    bought = Completion.from_record(record)
    assert bought.batch and bought.as_record() == record
    assert cost_micro_usd(rates, bought) == 800 * 1.0 + 200 * 0.5 + 100 * 4.0
    interactive = Completion.from_record({**record, "batch": False})
    assert cost_micro_usd(rates, interactive) == 800 * 2.0 + 200 * 0.5 + 100 * 8.0


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        ({"batch_input_per_mtok": 1.0}, 1000 * 1.0 + 100 * 8.0),
        ({"batch_output_per_mtok": 4.0}, 1000 * 2.0 + 100 * 4.0),
        ({}, 1000 * 2.0 + 100 * 8.0),
    ],
)
def test_a_batch_price_the_pin_does_not_give_falls_back_to_the_standard_one(rates, expected):
    rates = price(input_per_mtok=2.0, output_per_mtok=8.0, **rates)
    bought = Completion(text="", input_tokens=1000, output_tokens=100, batch=True)
    assert cost_micro_usd(rates, bought) == expected


def test_a_record_that_was_not_batch_keeps_its_bytes():
    record = usage(input_tokens=3, output_tokens=4, finish_reason="stop").as_record()
    assert "batch" not in record and "cached_input_tokens" not in record["usage"]
