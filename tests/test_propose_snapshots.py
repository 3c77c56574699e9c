"""Which listed model is a newer snapshot of a pinned one, on the ids providers list."""

from __future__ import annotations

import random

import pytest

from evalreg.propose.snapshots import examine, read

# Ids as the providers list them (OpenAI, Anthropic, Gemini without "models/", Bedrock,
# Mistral), the families next to each other.
OPENAI = [
    *("gpt-4o", "gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20"),
    *("gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-audio-preview"),
    *("gpt-4o-mini-audio-preview-2024-12-17", "gpt-4o-mini-realtime-preview-2024-12-17"),
    *("gpt-4-0613", "gpt-4-1106-preview", "gpt-4-0125-preview", "gpt-3.5-turbo-0125"),
    *("gpt-3.5-turbo-1106", "o1", "o1-2024-12-17", "o3-mini-2025-01-31", "chatgpt-4o-latest"),
    *("gpt-4.1-2025-04-14", "gpt-4.1-mini-2025-04-14", "text-embedding-3-small"),
]
ANTHROPIC = [
    *("claude-3-5-sonnet-20240620", "claude-3-5-sonnet-20241022", "claude-3-5-haiku-20241022"),
    *("claude-3-7-sonnet-20250219", "claude-sonnet-4-20250514", "claude-opus-4-20250514"),
    *("claude-opus-4-1-20250805", "claude-3-5-sonnet-latest", "claude-3-haiku-20240307"),
]
GEMINI = [
    *("gemini-1.5-pro-001", "gemini-1.5-pro-002", "gemini-1.5-pro", "gemini-1.5-pro-latest"),
    *("gemini-1.5-flash-001", "gemini-1.5-flash-002", "gemini-1.5-flash-8b-001"),
    *("gemini-2.0-flash-001", "gemini-2.0-flash", "gemini-2.5-flash-preview-05-20"),
    *("gemini-2.5-flash-preview-04-17", "gemini-2.5-pro"),
]
BEDROCK = [
    *("anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic.claude-3-5-sonnet-20241022-v2:0"),
    *("anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-v2", "anthropic.claude-v2:1"),
    *("amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0", "meta.llama3-1-70b-instruct-v1:0"),
    *("amazon.titan-text-express-v1", "cohere.command-r-plus-v1:0"),
]
MISTRAL = ["mistral-large-2407", "mistral-large-2411", "mistral-large-latest"]
LISTED = OPENAI + ANTHROPIC + GEMINI + BEDROCK + MISTRAL


@pytest.mark.parametrize(
    ("pinned", "newer", "also"),
    [
        ("gpt-4o-2024-05-13", "gpt-4o-2024-11-20", ("gpt-4o-2024-08-06",)),
        ("gpt-4o-2024-11-20", None, ()),
        ("gpt-4o-mini-2024-07-18", None, ()),  # the audio and realtime previews are others
        ("o1-2024-12-17", None, ()),
        ("claude-3-5-sonnet-20240620", "claude-3-5-sonnet-20241022", ()),
        ("claude-opus-4-20250514", None, ()),  # claude-opus-4-1 is another model
        ("gemini-1.5-pro-001", "gemini-1.5-pro-002", ()),
        ("gemini-1.5-flash-001", "gemini-1.5-flash-002", ()),  # not the 8b
        (
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "anthropic.claude-3-5-sonnet-20241022-v2:0",
            (),
        ),
        ("anthropic.claude-v2", "anthropic.claude-v2:1", ()),
        ("amazon.nova-pro-v1:0", None, ()),
    ],
)
def test_a_newer_snapshot_of_the_same_model_is_proposed(pinned, newer, also):
    found = examine(pinned, LISTED)
    assert found.listed and not found.retired
    assert (found.newer, found.also_newer) == (newer, also)


@pytest.mark.parametrize(
    ("pinned", "unclear", "because"),
    [
        ("gpt-4o", ("gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20"), "alias"),
        ("gpt-4-0613", (), "four-digit"),
        ("gpt-3.5-turbo-0125", ("gpt-3.5-turbo-1106",), "four-digit"),  # 1106 is older
        ("mistral-large-2407", ("mistral-large-2411",), "four-digit"),
        ("gemini-2.5-flash-preview-04-17", ("gemini-2.5-flash-preview-05-20",), "no year"),
        ("claude-3-5-sonnet-latest", (), "alias"),
    ],
)
def test_what_cannot_be_ordered_is_listed_with_the_reason_never_proposed(pinned, unclear, because):
    found = examine(pinned, LISTED)
    assert found.newer is None
    assert found.unclear == unclear
    assert because in found.why and pinned in found.why


def test_a_listed_id_of_the_same_stem_in_another_shape_is_unclear_beside_the_proposal():
    found = examine("gemini-1.5-pro-001", [*GEMINI, "gemini-1.5-pro-2025-01-01"])
    assert found.newer == "gemini-1.5-pro-002"
    assert found.unclear == ("gemini-1.5-pro-2025-01-01",)
    assert "no version comparable" in found.why


def test_a_pinned_snapshot_no_longer_listed_is_retired_and_its_successor_still_found():
    listed = [i for i in LISTED if i != "claude-3-5-sonnet-20240620"]
    found = examine("claude-3-5-sonnet-20240620", listed)
    assert found.retired and found.newer == "claude-3-5-sonnet-20241022"
    assert examine("gpt-4-32k-0314", LISTED).retired


def test_impossible_dates_are_no_dates():
    assert read("model-20241399").version is None
    assert read("model-1999-01-01").version is None
    assert read("gpt-4o-2024-08-06").version.key == (2024, 8, 6, 0, 0)


def test_the_finding_does_not_depend_on_the_lists_order_or_repeats():
    rng = random.Random(3)
    for pinned in LISTED:
        expected = examine(pinned, LISTED)
        for _ in range(5):
            shuffled = LISTED + rng.sample(LISTED, 10)
            rng.shuffle(shuffled)
            assert examine(pinned, shuffled) == expected


def test_a_proposal_is_newer_by_its_own_reading_and_never_the_pinned_id():
    """Every pair of listed ids: a proposal has the pinned id's stem and a greater version
    of the same shape, and reading the proposal back finds nothing between them."""
    for pinned in LISTED:
        found = examine(pinned, LISTED)
        if found.newer is None:
            continue
        a, b = read(pinned), read(found.newer)
        assert a.stem == b.stem and a.version and b.version
        assert a.version.shape == b.version.shape and b.version > a.version
        assert examine(found.newer, LISTED).newer is None  # the newest: nothing after it


@pytest.mark.parametrize(
    "listed",
    [
        "gpt-4o-mini-2026-10-01\n",  # a line end: `$` would match before it
        "gpt-4o-mini-\u0662\u0660\u0662\u0667-\u0661\u0660-\u0660\u0661",  # Arabic-Indic digits
        "gpt-4o-mini-\uff12\uff10\uff12\uff17-10-01",  # full-width digits
        "gpt-4o-mini-2026-10-01 ",
    ],
)
def test_only_ascii_digits_at_the_very_end_make_a_version(listed: str):
    found = examine("gpt-4o-mini-2024-07-18", ["gpt-4o-mini-2024-07-18", listed])
    assert found.newer is None
    assert read(listed).version is None
