"""The diff document: what ``evalreg diff --format json`` writes, as typed models.

``compare.diff`` (and ``compare.summaries`` for a fork's pull request) produce it, the
renderers in ``report`` read it, and ``evalreg comment`` reads it back from a file that a
pull request's own job wrote: a contract between evalreg releases as well as between
modules, so its JSON Schema is committed beside the registry's (``diff.schema.json``).

The producers build plain JSON data and the document is validated against these models
before it is written or rendered; the bytes written are the data's own (``json_text``),
so a model never reorders, drops or reformats anything. Validation is strict: no text
is read as a number, no number as a flag.

Fields follow what the JSON does. A required field is always written; ``X | None`` there
means an explicit ``null``. A field with a default may be absent: ``Omittable`` ones are
absent or a value, never ``null``; the others (``rev``, ``mde_note``, ``level``,
``counterfactual``) are absent in some documents and ``null`` in others.

Fields the models do not know are ignored, not refused: the comment job runs the evalreg
pinned on the default branch while the pull request's job runs the pull request's pin,
so a pull request that upgrades evalreg writes a document with what the newer release
added. A field added later must therefore have a default here, or the document's
``schema_version`` goes up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

DIFF_SCHEMA = 1
"""The document's ``schema_version``: raised when a reader of the old one would misread it."""

_T = TypeVar("_T")


if TYPE_CHECKING:
    Omittable = Annotated[_T | None, "omittable"]
else:  # absent is None; given, it must be a value: null is refused as any wrong type is
    Omittable = Annotated[_T, "omittable"]
"""A field the producer leaves out rather than writing ``null`` (None here when absent)."""

CellStatus = Literal[
    "removed",
    "added",
    "added, pending",
    "pending",
    "new results",
    "changed without a cause",
    "unchanged",
    "compared",
]
Verdict = Literal["better", "worse", "no detectable difference", "too small to test", "untested"]
"""A slice's verdict: paired tests' four, and ``untested`` (compared from summaries)."""
ReproductionStatus = Literal["reproduced", "failed", "not_attempted"]
Severity = Literal["error", "finding", "warning"]


class _Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)


# ------------------------------------------------------------------ who and what was compared
class DiffSide(_Part):
    """One side compared: the merge-base of BASE, or HEAD (a revision or the working tree)."""

    label: str
    rev: str | None = None
    """The commit compared (``null``: the working tree); absent from a diff of summaries."""
    commit: Omittable[str] = None
    subject: Omittable[str] = None
    merge_base: Omittable[bool] = None
    """Written (true) on the base: it is the merge-base of the named revision and HEAD."""
    uncommitted: Omittable[bool] = None
    """Written on a working-tree head: whether it has changes not yet committed."""


class Reproduction(_Part):
    """What ``evalreg reproduce`` made of HEAD's committed results, as the job said."""

    status: ReproductionStatus
    reason: str


class CheckFinding(_Part):
    path: str
    line: int
    col: int
    message: str
    severity: Severity


class Introduced(_Part):
    """The first-parent commit (and pull request) that brought a pointer's version in."""

    commit: str
    subject: str
    pr: int | None


class MissingObject(_Part):
    path: str
    """The DVC pointer whose object the remote lacks."""
    md5: str
    introduced: Omittable[Introduced] = None


class RemoteObjects(_Part):
    """``evalreg check --remote``: the DVC objects looked up on the default remote."""

    remote: str
    checked: int
    missing: list[MissingObject]
    error: str | None


class CheckEntry(_Part):
    """The parts of ``evalreg check --json`` output the comment states."""

    ok: bool
    exit_code: int
    findings: list[CheckFinding]
    remote: RemoteObjects | None


class RemoteConfig(_Part):
    """The DVC remotes one side's ``.dvc/config`` configures (passwords in URLs redacted)."""

    default: str | None
    remotes: dict[str, str]
    unreadable: Omittable[bool] = None
    """Written (true) when the file could not be read."""


class RemoteChange(_Part):
    base: RemoteConfig
    head: RemoteConfig
    changed: bool


# ------------------------------------------------------------------------------- decisions
class WaiverEntry(_Part):
    candidate: str
    approver: str
    date: str
    reason: str


class GateChange(_Part):
    """A gate whose state for a candidate differs between the sides (an en dash: not there)."""

    candidate: str
    gate: str
    before: str
    after: str


class SelectionChange(_Part):
    """A selection on both sides; each pair is [base, head] (``null``: not on that side)."""

    id: str
    use_case: str
    declared: tuple[str | None, str | None]
    recommended: tuple[str | None, str | None]
    waiver: tuple[bool, bool]
    waivers: tuple[WaiverEntry | None, WaiverEntry | None]
    policy_changed: bool
    ruler_changed: bool
    gates: list[GateChange]


# ------------------------------------------------------------------------------------ cells
class Overall(_Part):
    """A cell's headline metrics on one side, each absent when it cannot be read there."""

    pass_rate: Omittable[float] = None
    unacceptable_rate: Omittable[float] = None
    error_rate: Omittable[float] = None
    latency_p50_ms: Omittable[float] = None
    latency_p95_ms: Omittable[float] = None
    cost_per_item_usd: Omittable[float] = None
    failure_cost_per_1k_usd: Omittable[float] = None


class OverallPair(_Part):
    base: Overall | None
    head: Overall | None


class CoveragePair(_Part):
    """Per human criterion: [graded, applicable] samples of the cell on each side."""

    base: dict[str, tuple[int, int]]
    head: dict[str, tuple[int, int]]


class SliceRow(_Part):
    """Head against base on one slice: paired (with a test), or from summaries (unpaired,
    ``verdict`` untested, ``n_base`` given and no test's fields)."""

    slice: str
    n: int
    """Items compared (paired), or graded samples on the head (summaries)."""
    diff: float
    lo: float
    hi: float
    only_base: int | None
    only_head: int | None
    p_adjusted: float | None
    verdict: Verdict
    mde: float | None
    mde_note: str | None = None
    family: Omittable[str] = None
    level: float | None = None
    n_base: Omittable[int] = None
    clusters: Omittable[int] = None
    """The clusters a clustered comparison rests on; absent for independent items."""


class Flip(_Part):
    """An item that passed on one side and not on the other; texts redacted and cut
    (``null`` when the registry keeps snippets out, or the text is not readable here)."""

    item: str
    tags: list[str]
    base_level: str | None
    head_level: str | None
    failed_criteria: list[str]
    input: str | None
    base_output: str | None
    head_output: str | None


class ChangedItems(_Part):
    count: int
    ids: list[str]


class Flips(_Part):
    regressions_total: int
    improvements_total: int
    regressions: list[Flip]
    improvements: list[Flip]
    changed_items: ChangedItems
    added_items: int
    removed_items: int


class Counterfactual(_Part):
    """BASE's responses re-graded under HEAD's rubric: the ruler's share of the change
    (``ruler``) apart from the model's (``model``, tested per slice)."""

    base: float
    base_regraded: float
    head: float
    ruler: float
    model: float
    model_slices: list[SliceRow]


class ConfigChange(_Part):
    """A pin or prompt setting that differs, as a dotted path (``null``: not set there)."""

    what: str
    base: JsonValue
    head: JsonValue


class ItemsBought(_Part):
    """The items a cell's results hold on each side, and of how many."""

    base: int
    head: int
    of: int


class CellChange(_Part):
    id: str
    """``task/candidate``."""
    status: CellStatus
    fingerprint_changes: Omittable[list[str]] = None
    unexplained: Omittable[list[str]] = None
    """Result fields that moved while the fingerprint did not (both sides' summaries)."""
    items_bought: Omittable[ItemsBought] = None
    """Written when a sequential run stopped the cell before its last item on either side,
    at another item (``run --until-decided``), or a later run completed it."""
    config_changes: Omittable[list[ConfigChange]] = None
    ruler_changed: Omittable[bool] = None
    overall: OverallPair
    coverage: Omittable[CoveragePair] = None
    slices: Omittable[list[SliceRow]] = None
    flips: Omittable[Flips] = None
    counterfactual: Counterfactual | None = None
    """Written when the ruler changed: ``null`` when the base cannot be re-graded here."""


# ----------------------------------------------------------------------------- the document
class DiffDocument(_Part):
    """``evalreg diff --format json``: what changed between the merge-base and HEAD."""

    model_config = ConfigDict(title="evalreg diff (evalreg diff --format json)")

    schema_version: Literal[1]
    mode: Omittable[Literal["summaries"]] = None
    """Written when the eval sets could not be read: compared from the summaries alone."""
    data_unavailable: Omittable[list[str]] = None
    """With ``mode``: the DVC-tracked files that could not be read here."""
    snippets: bool
    """Whether item texts and outputs are shown (a registry may keep them out)."""
    base: DiffSide
    head: DiffSide
    warnings: list[str]
    selections: list[SelectionChange]
    cells: list[CellChange]
    reproduction: Reproduction
    check: CheckEntry | None
    remote_objects: RemoteObjects | None
    dvc_remote: RemoteChange


class InvalidDiff(ValueError):
    """A document that is not a diff this evalreg can read; the message says where."""


def diff_document(text: str | bytes) -> DiffDocument:
    """The document in the JSON ``text``, validated; ``InvalidDiff`` names each field
    that does not validate (at most five, by its path) and why."""
    try:
        return DiffDocument.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidDiff(problems(exc)) from None


def problems(exc: ValidationError, shown: int = 5) -> str:
    """What failed to validate, field by field (at most ``shown``; the values are left
    out, as they are the pull request's text)."""
    errors = exc.errors(include_url=False, include_input=False)
    lines = [f"{_where(e['loc'])}: {e['msg']}" for e in errors]
    more = f"; and {len(lines) - shown} more" if len(lines) > shown else ""
    return "; ".join(lines[:shown]) + more


def json_schema() -> dict[str, Any]:
    """The document's JSON Schema (validation mode: what a reader accepts). An omittable
    field is not required and has no default there: absent, it is simply not written."""
    body = DiffDocument.model_json_schema(mode="validation")
    for model in [body, *body.get("$defs", {}).values()]:
        for prop in model.get("properties", {}).values():
            if prop.get("default", ...) is None and "type" in prop:  # not nullable
                del prop["default"]
    return body


def _where(loc: tuple[int | str, ...]) -> str:
    """A field's path, ``cells.0.status``; a key from the document is cut, as it is text
    the pull request chose."""
    return ".".join(str(p) if len(str(p)) <= 40 else str(p)[:39] + "…" for p in loc) or "(document)"
