"""``--dry-run`` and ``--max-cost`` estimate output tokens from the store's history."""

from __future__ import annotations

from conftest import Repo, items_jsonl

EVALSET = "evalsets/messages.jsonl"


def _estimate(out: str) -> float:
    return float(out.split("Estimated cost of missing responses: $")[1].split()[0])


def test_dry_run_uses_the_cells_stored_output_length_once_it_has_one(live: Repo, cli, server):
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace(
            "temperature: 0", "temperature: 0\n  max_tokens: 4000"
        ),
    )
    first = cli(live, "run", "--dry-run", "--candidate", "mini")
    assert first.code == 0
    assert "max_tokens, no history" in first.out
    before = _estimate(first.out)
    assert cli(live, "run", "--candidate", "mini").code == 0
    live.write(EVALSET, items_jsonl(8))
    assert cli(live, "evalset", "add", str(live.root / EVALSET)).code == 0
    second = cli(live, "run", "--dry-run", "--candidate", "mini")
    assert second.code == 0
    assert "mean of stored responses of the cell" in second.out.replace("\n", " ")
    # The same four missing requests, estimated from a few output tokens, not 4,000.
    assert _estimate(second.out) < before / 10
