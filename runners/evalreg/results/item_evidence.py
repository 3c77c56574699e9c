"""Per-item evidence, gathered in one place: an item with the request each candidate's
prompt renders for it, and each of its samples' records joined with the stored response
(and the request body exactly as sent), the judges' whole reasons (from their stored
responses: the record keeps 80 characters) and each rater's grade.

Read from one version of the repository (its tree: the working tree, or a revision through
git and DVC) and its response store. ``evalreg show`` (``results.item``) asks for one item
across candidates, ``evalreg view`` (``selection.samples``) for every item of a use case,
one cell at a time so that only one cell's records are held. Nothing is bought and nothing
is re-graded: the verdicts are the recorded ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalreg.cells import Cell
from evalreg.errors import PromptError
from evalreg.evalsets.evalset import item_content
from evalreg.evalsets.privacy import redact_fields, redact_output, redacts_output
from evalreg.graders.human import parse_grades
from evalreg.graders.levels import applies
from evalreg.graders.llm_judge import JudgeFailed, Judges
from evalreg.prompting import as_text, effective_prompt, render_messages
from evalreg.providers.tools import call_text
from evalreg.redaction import REDACTED
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results.freshness import CellStatus
from evalreg.results.records import ItemRecord, read_records
from evalreg.store.segments import StoredRecords, collection_paused

Message = dict[str, Any]
"""One turn of a rendered request: its ``role`` and ``content``."""


class Evidence:
    """One version's per-item evidence, the one place it is gathered: each item with the
    request every candidate's prompt renders for it, and each sample's record joined with
    its stored response, the judges' whole reasons and the raters' grades.

    ``evalreg show`` asks a use case for one item (``UseCase.item``), ``evalreg view`` for
    every item, one cell after the other (``UseCase.cell``, ``UseCase.text``). The store
    answers through ``store`` (a ``ResponseStore`` indexes it for every item, a
    ``KeyLookup`` scans it for a few); each human grades file is read once.

    ``texts`` false leaves item text, requests and outputs out (a registry whose
    ``privacy.snippets`` is off); ``redact`` applies the task's ``redact`` fields to the
    item, the request rendered from it and the output, and the verdict details and judges'
    reasons, which may quote the output, are left out with it. ``show`` prints the fields
    on purpose (it is a local view); what is written (``view``) applies them.
    """

    def __init__(
        self, registry: Registry, store: StoredRecords, *, texts: bool = True, redact: bool = False
    ) -> None:
        self.registry = registry
        self.store = store
        self.texts = texts
        self.redact = redact
        self.judges = Judges(registry.pins, store)
        self._human: dict[str, dict[str, dict[str, bool]]] = {}

    def use_case(self, statuses: Sequence[CellStatus]) -> UseCase:
        """The evidence of the cells of ``statuses`` (one task and split: a use case's
        candidates, in the order given)."""
        return UseCase(self, statuses)

    def grades(self, path: str, key: str | None) -> dict[str, bool]:
        """Each rater's grade of the response ``key`` in the human grades file ``path``
        (none when it is missing)."""
        if path not in self._human:
            tree = self.registry.tree
            present = tree.is_file(path) or tree.is_file(path + ".dvc")
            self._human[path] = parse_grades(tree.read_data(path), path).grades if present else {}
        if key is None:
            return {}
        return dict(sorted(self._human[path].get(key, {}).items()))


@dataclass(frozen=True)
class Rationale:
    """A judge's whole reason, read from its stored response, or why there is none."""

    reason: str | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class SampleEvidence:
    record: ItemRecord
    """As recorded; its verdict details are ``[redacted]`` when the output is."""
    response: dict[str, Any] | None
    """The stored response (text, model, usage...); None when the store has none."""
    output: str | None
    """The response's text, redacted as asked; None when there is none or texts are left out."""
    request: Any
    """The request body exactly as sent; None when texts are left out or redacted."""
    rationales: dict[str, Rationale]
    """By criterion: the judge's reason, for each judge criterion that applies to the item
    or has a recorded verdict, when there is an output that may be quoted."""
    grades: dict[str, dict[str, bool]]
    """By human criterion: each rater's grade of the response."""
    outdated: bool
    """Recorded for another version of the item (its content changed since)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """The functions the response called (name, arguments, and why the arguments did not
    parse), as stored; empty when it called none or texts are left out or redacted."""


@dataclass(frozen=True)
class ItemText:
    """An item as it may be shown, and what each prompt renders for it."""

    item: schema.Item
    fields: Any
    """The item as JSON data, redacted as asked; None when texts are left out."""
    requests: list[list[Message] | str | None]
    """Per prompt of ``UseCase.prompts``: the messages it renders for the item (system
    first), why it cannot be rendered, or None when texts are left out."""


@dataclass(frozen=True)
class CandidateEvidence:
    status: CellStatus
    prompt: int
    """The index of its prompt in ``UseCase.prompts``."""
    samples: list[SampleEvidence]


@dataclass(frozen=True)
class ItemEvidence:
    """One item across the use case's candidates."""

    text: ItemText
    candidates: list[CandidateEvidence]


class UseCase:
    """The evidence of one use case's cells, one task and split."""

    def __init__(self, evidence: Evidence, statuses: Sequence[CellStatus]) -> None:
        self.evidence = evidence
        self.statuses = list(statuses)
        first = self.statuses[0].cell
        self.task_id = first.task_id
        self.task = first.task
        self.fields = tuple(first.task.redact) if evidence.redact else ()
        self.quoting = evidence.texts and not redacts_output(self.fields)
        """Whether verdict details and judges' reasons, which may quote the output, are kept."""
        self.prompts: list[tuple[str | None, str]] = []
        """Each distinct prompt of the candidates, (system, template), in their order."""
        self.prompt_of: list[int] = []
        """Per cell of ``statuses``: the index of its prompt in ``prompts``."""
        for st in self.statuses:
            prompt = effective_prompt(st.cell.task, st.cell.candidate.prompt)
            if prompt not in self.prompts:
                self.prompts.append(prompt)
            self.prompt_of.append(self.prompts.index(prompt))
        self._contents: dict[str, str] = {}

    def item(self, item: schema.Item) -> ItemEvidence:
        """``item`` with every cell's samples of it (each cell's records read for it: for
        one item; ``cell`` reads a cell once for all of them)."""
        return ItemEvidence(
            text=self.text(item),
            candidates=[
                CandidateEvidence(st, self.prompt_of[n], self.cell(n, item.id).samples(item))
                for n, st in enumerate(self.statuses)
            ],
        )

    def text(self, item: schema.Item) -> ItemText:
        """``item`` as it may be shown, with each prompt's request for it."""
        texts = self.evidence.texts
        fields = redact_fields(item, self.fields) if texts else None
        subject = schema.Item.validate(fields) if texts and self.fields else item
        requests: list[list[Message] | str | None] = [
            self._request(schema.PromptVariant(system=s, template=t), subject) if texts else None
            for s, t in self.prompts
        ]
        return ItemText(item=item, fields=fields, requests=requests)

    def cell(self, n: int, only: str | None = None) -> CellEvidence:
        """The ``n``th cell of ``statuses``, its records read once (a use case's cells are
        read one after the other, so one cell's records are held at a time); with ``only``,
        the records of that item alone are kept."""
        return CellEvidence(self, self.statuses[n], only)

    def content(self, item: schema.Item) -> str:
        """``item_content(item)``, worked out once for every cell."""
        if item.id not in self._contents:
            self._contents[item.id] = item_content(item)
        return self._contents[item.id]

    def _request(self, variant: schema.PromptVariant, item: schema.Item) -> list[Message] | str:
        try:
            return [
                {"role": m["role"], "content": _turn_text(m)}
                for m in render_messages(self.task, variant, item, cell=self.task_id)
            ]
        except PromptError as exc:
            return str(exc)


def _turn_text(message: dict[str, Any]) -> str:
    """A turn's text as a reader sees it: its content, then the tool calls it made, one a
    line (an assistant turn that only calls tools has no content of its own)."""
    content = as_text(message["content"])
    calls = [f"calls {call_text(call)}" for call in message.get("tool_calls") or ()]
    return "\n".join(part for part in (content, *calls) if part)


class CellEvidence:
    """One cell's records, by item, joined sample by sample with what they rest on."""

    def __init__(self, use_case: UseCase, st: CellStatus, only: str | None = None) -> None:
        self.use_case = use_case
        self.status = st
        records = self._read()
        self.records = records if only is None else [r for r in records if r["item"] == only]
        """As its items file holds them (of item ``only``, when given); none for a pending
        cell."""
        criteria = st.cell.rubric.criteria
        self._judged = [c for c in criteria if isinstance(c.grader, schema.MODEL_GRADED)]
        self._graded = [c for c in criteria if isinstance(c.grader, schema.HumanGrader)]
        self._by_item: dict[str, list[ItemRecord]] = {}
        with collection_paused():  # a list an item: acyclic, and 10,000s of them
            for record in self.records:
                self._by_item.setdefault(record["item"], []).append(record)

    def _read(self) -> list[ItemRecord]:
        if self.status.state == "pending":
            return []
        return read_records(self.use_case.evidence.registry.tree, self.status.cell)

    def samples(self, item: schema.Item) -> list[SampleEvidence]:
        """The cell's samples of ``item``, in the order recorded."""
        records = self._by_item.get(item.id, ())
        if not records:
            return []
        content = self.use_case.content(item)
        return [self._sample(self.status.cell, item, r, content) for r in records]

    def _sample(
        self, cell: Cell, item: schema.Item, record: ItemRecord, content: str
    ) -> SampleEvidence:
        evidence = self.use_case.evidence
        key = record["key"]
        stored = evidence.store.get(key) if key else None
        response = stored.get("response") if stored else None
        response = response if isinstance(response, dict) else None
        text = response.get("text") if response is not None else None
        text = text if isinstance(text, str) else None
        quoting = self.use_case.quoting
        if not quoting and record["criteria"]:
            record = {
                **record,
                "criteria": {
                    cid: {**v, "detail": REDACTED} for cid, v in record["criteria"].items()
                },
            }
        calls = response.get("tool_calls") if response is not None else None
        calls = calls if isinstance(calls, list) else []
        rationales = {
            c.id: self._rationale(cell, c, item, text, calls)
            for c in self._judged
            if text is not None and quoting
            if c.id in record["criteria"] or applies(c, item.tags)
        }
        grades = {
            c.id: evidence.grades(c.grader.file, key)
            for c in self._graded
            if isinstance(c.grader, schema.HumanGrader)
        }
        return SampleEvidence(
            record=record,
            response=response,
            output=redact_output(text, self.use_case.fields)
            if evidence.texts and text is not None
            else None,
            request=stored.get("request")
            if stored and evidence.texts and not self.use_case.fields
            else None,
            rationales=rationales,
            grades=grades,
            outdated=record["content"] != content,
            tool_calls=calls if evidence.texts and not self.use_case.fields else [],
        )

    def _rationale(
        self,
        cell: Cell,
        criterion: schema.Criterion,
        item: schema.Item,
        output: str,
        calls: list[dict[str, Any]],
    ) -> Rationale:
        try:
            verdict = self.use_case.evidence.judges.verdict(
                criterion, item, output, f"{cell.id}/{item.id}", calls
            )
        except JudgeFailed as exc:
            return Rationale(None, str(exc))
        return Rationale(verdict.reason)
