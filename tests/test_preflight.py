"""A pin's first request is its preflight: refused for the whole pin (bad key, unknown
model or route, no quota), the pin's other requests are not sent and the run says so once."""

from __future__ import annotations

import pytest

from evalreg.providers.base import ProviderError
from evalreg.providers.fetch import refuses_pin

from conftest import LIVE_KEY, Repo

PIN = "registry/models/mini.yaml"


def no_retries(repo: Repo) -> None:
    repo.write(PIN, repo.read(PIN) + "limits:\n  max_retries: 0\n")
    repo.commit("no retries")


def test_a_bad_key_is_refused_once_and_nothing_else_is_sent(live: Repo, cli, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key-0000")

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert server.count() == 1  # the preflight, and nothing after it
    assert "mini refused its first request (HTTP 401): HTTP 401: Incorrect API key" in result.err
    assert "; 3 requests not sent" in result.err
    assert "sk-not-the-right-key-0000" not in result.err + result.out

    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    assert cli(live, "run").code == 0
    assert server.count() == 1 + 4  # every item bought once the key is right


def test_an_unknown_route_is_refused_once(live: Repo, cli, server):
    live.write(PIN, live.read(PIN).replace(server.base_url, server.base_url + "/nowhere"))
    live.commit("a base_url with a typo")

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert server.count() == 1
    assert "mini refused its first request (HTTP 404)" in result.err


def test_a_spent_quota_is_not_retried_and_stops_the_pin(live: Repo, cli, server):
    server.fail_next("quota")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 1  # a 429 that waiting cannot fix: not retried either
    assert "mini refused its first request (HTTP 429)" in result.err
    assert "exceeded your current quota" in result.err


def test_a_first_request_that_fails_for_itself_does_not_stop_the_others(live: Repo, cli, server):
    no_retries(live)
    server.fail_next("500")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 4  # the failed one, then the other three
    assert "refused its first request" not in result.err
    assert "server 1" in result.out


def test_a_refused_pin_leaves_the_other_pins_running(live: Repo, cli, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key-0000")

    result = cli(live, "run")

    assert result.code == 1
    # The python system answered every item, graded and written as usual.
    assert len(live.read("reports/results/labels/rules.items.jsonl").splitlines()) == 4


@pytest.mark.parametrize(
    ("kind", "status", "refuses"),
    [
        ("auth", 401, True),
        ("auth", 403, True),
        ("quota", 429, True),
        ("client", 404, True),
        ("client", 400, False),  # one item's bad request, a content filter: that item only
        ("rate_limited", 429, False),
        ("server", 500, False),
        ("timeout", None, False),
        ("connection", None, False),  # the breaker handles an endpoint that is down
    ],
)
def test_what_refuses_a_whole_pin(kind, status, refuses):
    assert refuses_pin(ProviderError(kind, "x", status=status)) is refuses
