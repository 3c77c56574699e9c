"""Per-item evidence, gathered in one place for `evalreg show` (one item, the store scanned
for its keys) and `evalreg view` (every item, the store indexed): the same joining of
records, stored responses, judges' reasons and human grades, with the task's redaction a
parameter of the gatherer (show prints the fields, view writes them redacted)."""

from __future__ import annotations

import json

import pytest
from test_judges_human import judged_and_rated

from evalreg.redaction import REDACTED
from evalreg.registry.loader import load_registry
from evalreg.registry.tree import WorkspaceTree
from evalreg.results.freshness import status
from evalreg.results.item_evidence import Evidence, UseCase
from evalreg.store.segments import KeyLookup, ResponseStore, segment_names

from conftest import Repo

REASON = (
    "The answer names the queue in a calm, professional voice and says nothing a customer "
    "could read as blame, which is what the criterion asks for."
)
CANDIDATES = ["rules", "mini"]


@pytest.fixture
def graded(live: Repo, cli, server) -> Repo:
    """The standard registry run with a judge criterion (its reason longer than the 80
    characters a record keeps) and a human criterion two raters graded for m-003."""
    return judged_and_rated(live, cli, server, REASON)


def use_case(repo: Repo, *, indexed: bool, texts: bool = True, redact: bool = False) -> UseCase:
    tree = WorkspaceTree(repo.root)
    registry = load_registry(tree)
    store = ResponseStore.load(tree) if indexed else KeyLookup(tree)
    statuses = {s.cell.candidate.id: s for s in status(registry) if s.cell.selection == "labels"}
    gatherer = Evidence(registry, store, texts=texts, redact=redact)
    return gatherer.use_case([statuses[c] for c in CANDIDATES])


def items(repo: Repo):
    return sorted(load_registry(repo.root).evalset_of("labels").items, key=lambda i: i.id)


def test_one_item_and_every_item_are_gathered_alike(graded: Repo):
    scanned = use_case(graded, indexed=False)
    indexed = use_case(graded, indexed=True)
    for item in items(graded):
        one = scanned.item(item)
        assert one.text == indexed.text(item)
        for n, candidate in enumerate(one.candidates):
            assert candidate.samples == indexed.cell(n).samples(item)
    [m3] = [i for i in items(graded) if i.id == "m-003"]
    [sample] = indexed.cell(CANDIDATES.index("mini")).samples(m3)
    assert sample.record["criteria"]["tone"]["detail"] == REASON[:80]  # what the record keeps
    assert sample.rationales["tone"].reason == REASON  # read from the judge's stored response
    assert sample.grades == {"tone_human": {"alice": True, "bob": False}}
    assert json.loads(sample.output or "") == {"label": "a"}  # what the server answered
    assert sample.request["messages"][-1]["content"] == "Message: message 3"


def test_show_and_view_tell_the_same_story_of_an_item(graded: Repo, cli):
    shown = cli(graded, "show", "m-003", "--candidate", "mini", "--json")
    assert shown.code == 0, shown.err
    [view] = json.loads(shown.out)
    [sample] = view["candidates"][0]["samples"]
    criteria = {c["id"]: c for c in sample["criteria"]}
    assert cli(graded, "view").code == 0
    page = graded.read("reports/explorer/labels.html")
    start = page.index('id="explorer-data">') + len('id="explorer-data">')
    data = json.loads(page[start : page.index("</script>", start)])
    at = [i["id"] for i in data["items"]].index("m-003")
    [explored] = data["samples"][CANDIDATES.index("mini")][at]
    assert explored["judges"] == {"tone": criteria["tone"]["judge_reason"]} == {"tone": REASON}
    assert explored["human"] == {
        "tone_human": [[rater, grade] for rater, grade in criteria["tone_human"]["human"].items()]
    }
    assert explored["output"] == sample["output"]
    request = data["requests"][data["candidates"][CANDIDATES.index("mini")]["prompt"]][at]
    assert request == [[m["role"], m["content"]] for m in view["candidates"][0]["messages"]]


def test_redaction_is_a_parameter_of_the_one_gatherer(graded: Repo, cli):
    graded.write(
        "registry/tasks/labels.yaml",
        graded.read("registry/tasks/labels.yaml").replace(
            "rubric: labels", "rubric: labels\nredact: [input.text, output.label]"
        ),
    )
    [m3] = [i for i in items(graded) if i.id == "m-003"]
    mini = CANDIDATES.index("mini")
    plain = use_case(graded, indexed=True, redact=False)
    redacted = use_case(graded, indexed=True, redact=True)
    [as_is] = plain.cell(mini).samples(m3)
    [hidden] = redacted.cell(mini).samples(m3)
    assert plain.text(m3).fields["input"] == {"text": "message 3"}
    assert redacted.text(m3).fields["input"] == {"text": REDACTED}
    assert redacted.text(m3).requests[0][-1] == {"role": "user", "content": f"Message: {REDACTED}"}
    assert json.loads(as_is.output or "") == {"label": "a"}
    assert json.loads(hidden.output or "") == {"label": REDACTED}
    # The verdict details and judges' reasons may quote the output: redacted with it, and
    # the request as sent (the item's text) is left out.
    assert as_is.record["criteria"]["tone"]["detail"] == REASON[:80]
    assert {v["detail"] for v in hidden.record["criteria"].values()} == {REDACTED}
    assert as_is.rationales["tone"].reason == REASON and hidden.rationales == {}
    assert as_is.request is not None and hidden.request is None
    assert hidden.record["level"] == as_is.record["level"]  # only text is redacted
    assert hidden.grades == as_is.grades
    # `show` prints the fields on purpose; `view` writes them redacted.
    assert "message 3" in cli(graded, "show", "m-003").out
    assert cli(graded, "view").code == 0
    assert "message 3" not in graded.read("reports/explorer/labels.html")


def test_without_texts_nothing_of_the_items_or_outputs_is_gathered(graded: Repo):
    gathered = use_case(graded, indexed=True, texts=False)
    for item in items(graded):
        text = gathered.text(item)
        assert text.fields is None and text.requests == [None]
        for n in range(len(CANDIDATES)):
            for sample in gathered.cell(n).samples(item):
                assert sample.output is None and sample.request is None
                assert sample.rationales == {}
                assert {v["detail"] for v in sample.record["criteria"].values()} <= {REDACTED}
                assert sample.response is not None  # its model and usage are not text


def test_a_stale_cell_shows_its_records_and_a_pending_one_none(graded: Repo):
    graded.write(
        "registry/models/mini.yaml",
        graded.read("registry/models/mini.yaml").replace("temperature: 0\n", "temperature: 0.2\n"),
    )
    gathered = use_case(graded, indexed=True)
    assert [s.state for s in gathered.statuses] == ["fresh", "stale"]
    assert all(gathered.cell(1).samples(item) for item in items(graded))
    (graded.root / gathered.statuses[1].cell.summary_path).unlink()
    gathered = use_case(graded, indexed=True)
    assert [s.state for s in gathered.statuses] == ["fresh", "pending"]
    # Records no summary vouches for (a run stopped before it wrote one) are not shown.
    assert (graded.root / gathered.statuses[1].cell.items_path).is_file()
    for item in items(graded):
        assert gathered.cell(CANDIDATES.index("mini")).samples(item) == []
        assert gathered.cell(CANDIDATES.index("rules")).samples(item)


def test_a_key_lookup_answers_as_the_indexed_store(graded: Repo):
    tree = WorkspaceTree(graded.root)
    store = ResponseStore.load(tree)
    lookup = KeyLookup(tree)
    keys = sorted(store.keys())
    assert len(keys) > 8 and segment_names(tree)
    for key in [*keys, "0" * 64, "not a key"]:
        assert lookup.get(key) == store.get(key)
