"""A pin's params are the provider's well-known parameters, checked where they are written;
a parameter evalreg does not know is sent only from ``extra_params``."""

from __future__ import annotations

import json

import pytest

from evalreg.providers.anthropic import AnthropicProvider
from evalreg.providers.openai import OpenAIProvider
from evalreg.registry.schema import Pin

from conftest import Repo, assert_refused

PIN = "registry/models/mini.yaml"


def set_params(repo: Repo, block: str) -> None:
    text = repo.read(PIN)
    repo.write(PIN, text.replace("params:\n  temperature: 0\n", block))
    repo.commit("pin params")


@pytest.mark.parametrize(
    ("block", "where", "says"),
    [
        (
            "params:\n  temprature: 0\n",
            "7:15",
            "'temprature' is not a parameter evalreg knows for provider 'openai': did you mean "
            "`temperature`?",
        ),
        ("params:\n  temperature: hot\n", "7:16", "temperature must be a number from 0 to 2"),
        ("params:\n  temperature: 2.5\n", "7:16", "temperature must be a number from 0 to 2"),
        ('params:\n  max_tokens: "300"\n', "7:15", "max_tokens must be a positive integer"),
        ("params:\n  max_tokens: 0\n", "7:15", "max_tokens must be a positive integer"),
        ("params:\n  seed: 1.5\n", "7:9", "seed must be an integer"),
        ("params:\n  seed: true\n", "7:9", "seed must be an integer"),
        ("params:\n  top_p: 1.1\n", "7:10", "top_p must be a number from 0 to 1"),
        ("params:\n  stop: [1]\n", "7:9", "stop must be text or a list of texts"),
        ("params:\n  response_format: json\n", "7:20", "response_format must be an object"),
        ("params:\n  reasoning_effort: maximal\n", "7:21", "reasoning_effort must be one of"),
        (
            "params:\n  temperature: 0\nextra_params:\n  temperature: 1\n",
            "9:16",
            "'temperature' is also under 'params'",
        ),
        ("params:\n  temperature: 0\nextra_params:\n  seed: 1\n", "9:9", "'seed' is well known"),
    ],
)
def test_check_refuses_a_misspelt_or_mistyped_param_at_its_place(repo, cli, block, where, says):
    set_params(repo, block)
    err = assert_refused(repo, cli, "check", expect=(f"{PIN}:{where}: ", says))
    assert "Traceback" not in err


def test_every_bad_param_is_reported_at_its_place_not_only_the_first(repo, cli):
    set_params(repo, "params:\n  temprature: 0\n  max_tokens: 0\n  top_p: 1.1\n")
    assert_refused(
        repo,
        cli,
        "check",
        expect=(
            f"{PIN}:7:15: params.temprature: 'temprature' is not a parameter",
            f"{PIN}:8:15: params.max_tokens: max_tokens must be a positive integer, not 0 (int)\n",
            f"{PIN}:9:10: params.top_p: top_p must be a number from 0 to 1, not 1.1 (float)\n",
        ),
    )


def test_an_unknown_param_without_a_close_match_points_at_extra_params(repo, cli):
    set_params(repo, "params:\n  top_k: 5\n")
    assert_refused(
        repo, cli, "check", expect=(f"{PIN}:7:10: ", "'top_k' is not a parameter", "extra_params:")
    )


def test_anthropic_temperature_is_at_most_one(repo, cli):
    text = repo.read(PIN).replace("provider: openai", "provider: anthropic")
    repo.write(PIN, text.replace("temperature: 0", "temperature: 1.5"))
    repo.commit("an anthropic pin")
    assert_refused(repo, cli, "check", expect=("temperature must be a number from 0 to 1",))


def test_params_under_extra_params_pass_and_are_sent_after_params(repo, cli):
    set_params(repo, "params:\n  temperature: 0\nextra_params:\n  top_k: 5\n  min_p: 0.1\n")
    assert cli(repo, "check").code == 0
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "openai",
            "model": "m",
            "api_key_env": "K",
            "params": {"temperature": 0},
            "extra_params": {"top_k": 5},
        }
    )
    body = OpenAIProvider().body(pin, [{"role": "user", "content": "x"}], None)
    assert list(body) == ["model", "messages", "temperature", "top_k"]


def test_a_python_pin_takes_its_params_as_given_and_no_extra_params(repo, cli):
    text = repo.read("registry/models/rules.yaml")
    repo.write("registry/models/rules.yaml", text + "params:\n  anything: [1, 2]\n")
    repo.commit("python params")
    assert cli(repo, "check").code == 0
    repo.write("registry/models/rules.yaml", text + "extra_params:\n  anything: 1\n")
    repo.commit("python extra params")
    assert_refused(repo, cli, "check", expect=("write them under 'params'",))


@pytest.mark.parametrize(
    ("provider", "params"),
    [
        (
            "openai",
            {
                "temperature": 0,
                "max_tokens": 300,
                "seed": 7,
                "response_format": {"type": "json_object"},
            },
        ),
        ("anthropic", {"temperature": 0, "max_tokens": 300}),
    ],
)
def test_params_valid_before_extra_params_existed_give_the_same_body(provider, params):
    """Store keys hash the body: a pin that was valid keeps its bytes."""
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": provider,
            "model": "m",
            "api_key_env": "K",
            "params": params,
        }
    )
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
    cls = OpenAIProvider if provider == "openai" else AnthropicProvider
    body = cls().body(pin, messages, None)
    if provider == "openai":
        before = {"model": "m", "messages": messages, **params}
    else:
        before = {"model": "m", "messages": messages[1:], "system": "s", **params}
    assert json.dumps(body) == json.dumps(before)
