"""The governance report: one Markdown page per use case and an index, from evidence alone.

Pure functions of the evidence (the registry and committed results of one tree): the same
tree gives the same bytes. Text a PR author or a model controls is escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalreg import stats
from evalreg.audit.commits import CommitInfo
from evalreg.audit.criteria import CriteriaDates
from evalreg.compare.config import config_changes
from evalreg.compare.drift_log import DRIFT_LOG, DriftCheck, DriftWorkflow
from evalreg.evalsets.slice_sizes import evalset_stats
from evalreg.families import MIN_SLICE_ITEMS, NONE_DETECTABLE, family_sentence
from evalreg.graders.human import ONE_GRADE
from evalreg.metrics import COVERAGE, Metric, SliceMetrics, covered
from evalreg.providers.pricing import rates
from evalreg.report.chart import Bar, HeatCell, Panel, Threshold, heatmap, panel_chart
from evalreg.selection.evidence import SelectionEvidence
from evalreg.selection.policy import GateResult
from evalreg.text.escape import block, cell, inline, link, prose
from evalreg.text.numbers import (
    compared_on,
    count,
    coverage_text,
    exact,
    gate_comparison,
    gate_text,
    milliseconds,
    number,
    objective_text,
    p_value,
    percent,
    plural,
    points,
    points_interval,
    rate,
    statistic,
    threshold_text,
    usd,
    whole_points,
    wide_by_necessity,
)

# Slices with fewer than MIN_SLICE_ITEMS items are listed under Limitations instead of the
# evidence tables (and are not tested).
DETECT = 0.05


_SAFE_CODE = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
_CRON = re.compile(r"^[A-Za-z0-9*/,? -]{1,100}$")


def code(text: str) -> str:
    """An identifier as inline code; anything else is escaped as plain text instead."""
    return f"`{text}`" if _SAFE_CODE.match(text) else cell(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Provenance:
    """What the repository says about a use case beyond its evidence: when git shows its
    criteria were fixed, and when drift was last checked and is scheduled."""

    dates: CriteriaDates | None = None
    """None: not looked up (the criteria section says so)."""
    drift: dict[str, DriftCheck] = field(default_factory=dict)
    """Cell id → its latest logged drift check."""
    workflow: DriftWorkflow | None = None


def chart_name(ev: SelectionEvidence) -> str:
    return f"{ev.selection_id}.svg"


def slices_chart_name(ev: SelectionEvidence) -> str:
    return f"{ev.selection_id}-slices.svg"


def _is_rate(metric: str) -> bool:
    return metric.endswith("_rate") or metric.startswith(("criterion:", COVERAGE))


def _bar(cid: str, m: Metric | None, ev: SelectionEvidence) -> Bar:
    return Bar(
        cid,
        m.value if m else None,
        m.lo if m else None,
        m.hi if m else None,
        highlight=cid == ev.selection.selected,
    )


def chart(ev: SelectionEvidence) -> str:
    """Pass rate on the whole eval set, then one panel per gate with its threshold (for the
    candidates with results: a pending one has nothing to gate)."""
    ranked = [cid for cid in ev.candidates if cid in ev.metrics]

    def bars(slice_: str, metric: str, ids: Sequence[str]) -> list[Bar]:
        return [_bar(cid, ev.metrics.get(cid, {}).get(slice_, {}).get(metric), ev) for cid in ids]

    panels = [Panel("pass rate, all items", bars("all", "pass_rate", list(ev.candidates)))]
    for i, g in enumerate(ev.selection.policy.gates if ranked else [], start=1):
        bound = g.min if g.min is not None else g.max
        assert bound is not None
        where = "" if g.on == "point" else f", {compared_on(g)}"
        panels.append(
            Panel(
                f"gate {i}: {gate_text(g)}",
                bars(g.slice, g.metric, ranked),
                Threshold(bound, f"{threshold_text(g)}{where}", g.min is not None, g.on),
                rate=_is_rate(g.metric),
            )
        )
    return panel_chart(f"{ev.selection.use_case}: results and gates", panels)


def slices_chart(ev: SelectionEvidence) -> str | None:
    """Pass rate per reported slice and candidate with results; None without either."""
    ranked = [c for c in ev.candidates if c in ev.metrics]
    rows = _big_slices(ev)
    if not ranked or not rows:
        return None
    cells = []
    for name in rows:
        found = [ev.metrics[cid].get(name, {}).get("pass_rate") for cid in ranked]
        cells.append([HeatCell(m.value, m.n) if m else HeatCell(None) for m in found])
    title = f"{ev.selection.use_case}: pass rate by slice"
    return heatmap(title, rows, ranked, cells, highlight=ev.selection.selected)


def page(
    ev: SelectionEvidence,
    *,
    evalreg_version: str,
    install: str,
    provenance: Provenance | None = None,
) -> str:
    """The use-case page: decision, task, criteria, candidates, evidence, drift, limits,
    reproduce.

    ``install`` is the pip requirement for evalreg that the reproduce section names (the
    registry's ``install:`` setting, or the exact version that wrote the report).
    """
    known = provenance or Provenance()
    parts = [
        f"# {inline(ev.selection.use_case)}\n",
        "_Generated by `evalreg report` from the registry and the committed results; do not "
        "edit. The commit, merge and approvals of this decision are in the audit record "
        "(`evalreg audit`)._\n",
        _decision(ev),
        f"![Pass rate by candidate, and each gate with its threshold]({chart_name(ev)})\n",
        _use_case(ev),
        _criteria(ev, known.dates),
        _candidates(ev),
        _evidence(ev, evalreg_version),
        _drift(ev, known),
        _limitations(ev),
        _reproduce(ev, install),
    ]
    return "\n".join(parts)


def _decision(ev: SelectionEvidence) -> str:
    return "## 1. Decision\n\n" + _decision_lines(ev)


def headline(ev: SelectionEvidence) -> str:
    """A use case's decision for a page about something else (the audit record): declared
    and recommended candidates, why, each gate's verdict and the results on all items."""
    parts = [
        f"### {inline(ev.selection.use_case)} (`{ev.selection_id}`)\n",
        _decision_lines(ev),
        _gates(ev) or "No gates.\n",
        "Results on all items:\n" if ev.settled is None else "Results on the items bought:\n",
        table(_OVERALL_HEADERS, _overall_rows(ev)),
    ]
    return "\n".join(parts)


def _decision_lines(ev: SelectionEvidence) -> str:
    d = ev.decision
    sel = ev.selection
    lines = [f"- **Declared candidate:** {code(d.declared)}"]
    lines.append(
        "- **Policy recommends:** "
        + (f"{code(d.recommended)}" if d.recommended else "no candidate (none passes every gate)")
    )
    if d.agrees:
        lines.append("- **Agreement:** the declared candidate is the policy's recommendation.")
    elif d.waiver is not None:
        w = d.waiver
        # A waiver written from the rationale says the same thing: it is printed once.
        same = " ".join(w.reason.split()) == " ".join(sel.rationale.split())
        reason = "the rationale below" if same else prose(w.reason, limit=500)
        lines.append(
            f"- **Waiver:** the declared candidate differs from the policy's recommendation. "
            f"Reason: {reason} — approved by {prose(w.approver)} on {w.date.isoformat()}."
        )
    else:
        lines.append(
            "- **⚠ No waiver:** the declared candidate differs from the policy's recommendation "
            "and no waiver records why; `evalreg check` fails until one is added."
        )
    lines.append(f"- **Rationale (as declared):** {prose(sel.rationale, limit=1000)}")
    if ev.settled is not None:
        most = max(ev.settled.items.values())
        lines.append(
            f"- **Decided on part of the items:** the decision rests on at most {most:,} of "
            f"the {ev.settled.case.size:,} items, bought in a seeded random order until it was "
            "settled (see Evidence, Decided on part of the items)."
        )
    lines.append("\nWhy the policy decided as it did:\n")
    lines += [f"- {prose(r, limit=300)}" for r in d.reasons]
    return "\n".join(lines) + "\n"


def _use_case(ev: SelectionEvidence) -> str:
    task = ev.task
    out = ["## 2. Use case and task\n"]
    if ev.selection.description:
        out.append(prose(ev.selection.description, limit=1000) + "\n")
    out.append(f"**Task {code(ev.selection.task)}:** {prose(task.description, limit=1000)}\n")
    if task.prompt.system:
        out.append("System prompt:\n\n" + block(task.prompt.system, limit_lines=40))
    out.append(
        "Prompt template (item fields fill the `{{ }}` slots):\n\n"
        + block(task.prompt.template, limit_lines=40)
    )
    out.append(
        f"Output: `{task.output.parser}`"
        + (" validated against a JSON schema." if task.output.schema_ else ".")
        + "\n"
    )
    volume = f"{task.monthly_volume:,}" if task.monthly_volume is not None else "not stated"
    out.append(f"Expected volume: {volume} requests a month; samples per item: {task.repeats}.\n")
    if task.failure_modes:
        out.append("The failures that cost most:\n")
        rows = [
            [
                cell(m.id),
                prose(m.description, limit=200),
                usd(m.cost_usd),
                ", ".join(f"{code(c)}" for c in m.detected_by),
            ]
            for m in sorted(task.failure_modes, key=lambda m: (-m.cost_usd, m.id))
        ]
        out.append(
            table(["failure mode", "what happens", "cost per occurrence", "detected by"], rows)
        )
    return "\n".join(out)


def _criteria(ev: SelectionEvidence, dates: CriteriaDates | None) -> str:
    policy = ev.selection.policy
    out = ["## 3. Criteria\n", _when_fixed(ev, dates)]
    out.append(
        f"An item **passes** when its level is `{policy.pass_level}`"
        + (" or better" if policy.pass_level == "acceptable" else "")
        + f". Intervals are {percent(policy.confidence, 0)} (Wilson, clustered by item and by the "
        "item's `cluster` when given); differences are called better or worse only when "
        "their paired interval (Tango's score interval, or a cluster-robust one with "
        "repeats or clusters) excludes 0. " + family_sentence(policy.confidence) + "\n"
    )
    if policy.gates:
        rows = []
        for i, g in enumerate(policy.gates, start=1):
            rows.append(
                [str(i), f"{code(g.metric)}", cell(g.slice), threshold_text(g), compared_on(g)]
            )
        out.append("Gates every candidate must pass:\n")
        out.append(table(["#", "metric", "slice", "threshold", "compared on"], rows))
    else:
        out.append("No gates: every candidate with results is ranked.\n")
    weighted = policy.objective.weighted is not None
    terms = objective_text(policy.objective.terms, weighted=weighted, name=code)
    kind = "weighted" if weighted else "lexicographic"
    out.append(f"Objective ({kind}, ties broken by candidate id): {terms}.\n")
    if policy.sequential is not None:
        seq = policy.sequential
        out.append(
            f"Bought until decided: items in rounds of {seq.round:,} (at least the run's "
            f"concurrency) after the first "
            f"{seq.min_items:,}, stopping once the decision is settled with at most a "
            f"{percent(seq.alpha)} chance that a run of every item would decide otherwise.\n"
        )
    if policy.non_inferiority:
        ni = policy.non_inferiority
        prefer = ni.prefer
        out.append(
            f"Non-inferiority: a candidate within {exact(ni.margin)} of the best on "
            f"{code(ni.metric)} is preferred when it is better on "
            f"{code(prefer.metric)} ({'higher' if prefer.maximize else 'lower'} is better).\n"
        )
    return "\n".join(out)


def _commit(c: CommitInfo) -> str:
    pr = f", #{c.pr}" if c.pr else ""
    return f"`{c.sha[:12]}` ({c.committed_at}{pr})"


def _part(what: str, ident: str | None) -> str:
    return f"the rubric {code(ident)}" if what == "rubric" and ident else f"the {what}"


def _when_fixed(ev: SelectionEvidence, dates: CriteriaDates | None) -> str:
    """When git shows the policy and rubric were fixed, against the first evidence.

    Nothing here names the commit of the first results: a report is written before the
    commit that records it, which may be that commit, and must read the same after it."""
    if dates is None:
        return "When the criteria were fixed was not looked up in git for this page.\n"
    if dates.unknown is not None:
        return f"When the criteria were fixed cannot be told from git: {inline(dates.unknown)}.\n"
    if dates.late is not None or dates.declared is not None:
        verdict = "\n\n".join(
            f"**⚠ {title}:** {prose(message, limit=1000)}."
            for title, message in (
                ("Criteria changed after the evidence", dates.late),
                ("Selection declared after its evidence", dates.declared),
            )
            if message is not None
        )
    elif not ev.metrics:
        verdict = "**Criteria fixed before evidence:** no candidate has results yet."
    else:
        verdict = (
            "**Criteria fixed before evidence:** the policy and the rubric were last changed "
            "before the first results they judge were committed."
        )
    lines = [verdict, ""]
    for part in dates.parts:
        name = _part(part.what, part.id)
        name = name[0].upper() + name[1:]
        if part.uncommitted:
            lines.append(f"- {name}: changed here, not committed yet.")
        elif part.commit is None:
            lines.append(f"- {name}: in no commit.")
        else:
            lines.append(f"- {name} last changed in {_commit(part.commit)}.")
    lines.append(
        "\nFrom the first-parent git history (dates UTC); the audit record (`evalreg audit`) "
        "names every change and the commit of the first results.\n"
    )
    return "\n".join(lines)


def _candidates(ev: SelectionEvidence) -> str:
    out = ["## 4. Candidates\n"]
    rows = []
    for cid, c in ev.candidates.items():
        pin = c.cell.pin
        price = (
            f"in {usd(pin.price.input_per_mtok)}/M, out {usd(pin.price.output_per_mtok)}/M"
            + (f", {usd(pin.price.per_call)}/call" if pin.price.per_call else "")
            + f" ({pin.price.as_of.isoformat()})"
            if pin.price
            else "not stated"
        )
        variant = "yes" if c.candidate.prompt is not None else "–"
        rows.append(
            [
                f"{code(cid)}",
                cell(c.candidate.pin),
                cell(pin.provider),
                cell(pin.snapshot() or "–"),
                _params(ev, cid),
                cell(price, limit=90),
                variant,
                c.state,
            ]
        )
    out.append(
        f"Params: the declared {code(ev.selection.selected)}'s in full; for every other "
        "candidate, the keys that differ from them (`key: declared → this`; a key the declared "
        "candidate does not set, with its value alone).\n"
    )
    out.append(
        table(
            [
                "candidate",
                "pin",
                "provider",
                "snapshot",
                "params",
                "price (sheet date)",
                "prompt variant",
                "results",
            ],
            rows,
        )
    )
    out += _cleartext(ev)
    variants = [(cid, c) for cid, c in ev.candidates.items() if c.candidate.prompt is not None]
    for cid, c in variants:
        prompt = c.candidate.prompt
        assert prompt is not None
        if prompt.system is not None:
            out.append(f"System prompt of {code(cid)}:\n\n" + block(prompt.system, limit_lines=30))
        if prompt.template is not None:
            out.append(f"Template of {code(cid)}:\n\n" + block(prompt.template, limit_lines=30))
    shortlist = [
        [
            f"{code(cid)}",
            cell(b.name),
            number(b.score),
            b.date.isoformat(),
            link(b.source),
        ]
        for cid, c in ev.candidates.items()
        for b in c.cell.pin.benchmarks
    ]
    if shortlist:
        out.append(
            "Public benchmark scores — why a model made the shortlist; filter-only "
            "evidence, never a selection criterion:\n"
        )
        out.append(table(["candidate", "benchmark", "score", "date", "source"], shortlist))
    baselines = [cid for cid, c in ev.candidates.items() if c.cell.pin.provider == "python"]
    if baselines:
        out.append(
            "Non-AI and local baselines on the shortlist: "
            + ", ".join(f"{code(b)}" for b in baselines)
            + ".\n"
        )
    return "\n".join(out)


def _cleartext(ev: SelectionEvidence) -> list[str]:
    """A line for each candidate whose pin sends its credential over plain HTTP (its
    ``allow_insecure_http: true``, for a service inside a private network)."""
    lines = []
    for cid, c in ev.candidates.items():
        pin = c.cell.pin
        host = pin.cleartext_host()
        if host is not None:
            lines.append(
                f"- {code(cid)} sends {inline(pin.credential() or '')} over plain HTTP, "
                f"unencrypted, to {code(host)} (pin {code(c.candidate.pin)} says "
                "`allow_insecure_http: true`: a service inside a private network)."
            )
    return ["Credentials sent in clear text:\n\n" + "\n".join(lines) + "\n"] if lines else []


def _latency(m: SliceMetrics) -> str:
    """Median / 95th-percentile latency, or why there is none (every response bought in a
    batch, which measures no latency)."""
    p50, p95 = m.get("latency_p50_ms"), m.get("latency_p95_ms")
    if p50 is None or p95 is None:
        return "n/a (batch)"
    return f"{count(p50.value)} / {milliseconds(p95.value)}"


_PARAMS = ("pin.params.", "pin.extra_params.")


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _params(ev: SelectionEvidence, cid: str) -> str:
    """The declared candidate's params in full; another's as the keys that differ."""
    declared = ev.candidates[ev.selection.selected].cell
    this = ev.candidates[cid].cell
    if cid == ev.selection.selected:
        pin = this.pin
        flat = {
            f"{prefix}.{k}" if prefix else k: v
            for prefix, values in (("", pin.params), ("extra_params", pin.extra_params))
            for k, v in sorted((values or {}).items())
        }
        shown = ", ".join(f"{k}: {_value(v)}" for k, v in flat.items())
        return cell(shown, limit=2000) if shown else "none"
    changes = [c for c in config_changes(declared, this) if c["what"].startswith(_PARAMS)]
    if not changes:
        return "same as declared"
    return cell(", ".join(_param_change(c) for c in changes), limit=2000)


def _param_change(change: dict[str, Any]) -> str:
    key = change["what"].removeprefix("pin.").removeprefix("params.")
    base, head = change["base"], change["head"]
    if base is None:
        return f"{key}: {_value(head)}"
    if head is None:
        return f"{key}: none (declared {_value(base)})"
    return f"{key}: {_value(base)} → {_value(head)}"


_OVERALL_HEADERS = (
    "candidate",
    "pass rate (95 % CI)",
    "unacceptable",
    "errors",
    "latency p50 / p95",
    "cost per request",
    "monthly cost at volume",
    "failure cost per 1,000",
    "items",
)


def _overall_rows(ev: SelectionEvidence) -> list[list[str]]:
    rows = []
    for cid in ev.candidates:
        m = ev.metrics.get(cid, {}).get("all")
        if m is None:
            rows.append([f"{code(cid)}", "pending", "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                f"{code(cid)}",
                rate(m["pass_rate"]),
                rate(m["unacceptable_rate"], interval=False),
                rate(m["error_rate"], interval=False),
                _latency(m),
                usd(m["cost_per_item_usd"].value),
                usd(m["monthly_cost_usd"].value),
                usd(m["failure_cost_per_1k_usd"].value),
                str(m["pass_rate"].n),
            ]
        )
    return rows


def _batch_pricing(ev: SelectionEvidence) -> str:
    """What the monthly cost at volume would be at each pin's batch prices, where the pin
    gives them and the volume is stated: the token part of the cost scaled by what the
    recorded tokens cost at batch rates over what they cost at live ones (an estimate:
    per-call fees are kept, cached input is priced as input)."""
    volume = ev.task.monthly_volume
    if not volume:
        return ""
    lines = []
    for cid, candidate in ev.candidates.items():
        price = candidate.cell.pin.price
        m = ev.metrics.get(cid, {}).get("all")
        totals = candidate.summary.get("totals") if candidate.summary else None
        if price is None or m is None or totals is None:
            continue
        if price.batch_input_per_mtok is None and price.batch_output_per_mtok is None:
            continue
        tokens = totals["tokens"]
        live_in, live_out = rates(price, batch=False)
        batch_in, batch_out = rates(price, batch=True)
        live = tokens["input"] * live_in + tokens["output"] * live_out
        batch = tokens["input"] * batch_in + tokens["output"] * batch_out
        if not live:
            continue
        # Per-call fees stay as they are; the tokens' part scales by batch over the rates the
        # recorded responses were bought at: live ones, batch ones for those bought through a
        # batch API (so a batched run's cost is not discounted twice).
        batched = totals.get("batched", 0) / totals["graded"] if totals.get("graded") else 0.0
        bought = (1 - batched) * live + batched * batch
        monthly = m["monthly_cost_usd"].value
        fees = min(monthly, price.per_call * volume)
        at_batch = fees + (monthly - fees) * batch / bought
        at_live = fees + (monthly - fees) * live / bought
        lines.append(
            f"- {code(cid)}: {usd(at_batch)} a month instead of {usd(at_live)} "
            f"({plural(volume, 'request')} at the pin's batch prices)"
        )
    if not lines:
        return ""
    return (
        "Bought through a batch API (`evalreg run --batch`; answers within 24 hours, so for "
        "work nobody waits on), the monthly cost at volume would be:\n\n" + "\n".join(lines) + "\n"
    )


def _evidence(ev: SelectionEvidence, evalreg_version: str) -> str:
    out = ["## 5. Evidence\n"]
    es = ev.evalset
    # Counted as the eval set was parsed: an eval set read back from its file is not read.
    conversations, sources = es.facts.slices["all"].conversations, es.facts.sources
    judges = sorted({c.grader.judge for c in ev.rubric.criteria if c.grader.type == "llm_judge"})
    recorded = sorted(
        {str(c.summary.get("evalreg_version")) for c in ev.candidates.values() if c.summary}
    )
    out.append(
        f"- Eval set {code(es.path)}: {plural(len(es.items), 'item')} "
        f"({plural(conversations, 'conversation')}), "
        f"md5 `{es.md5}`"
        + (f"; provenance: {', '.join(cell(s) for s in sources)}" if sources else "")
        + "."
    )
    out.append(
        f"- Rubric {code(ev.task.rubric)} version {cell(ev.rubric.version)}: "
        f"{len(ev.rubric.criteria)} criteria, "
        f"{sum(c.critical for c in ev.rubric.criteria)} critical."
    )
    out.append(_judges(ev, judges))
    out.append(
        f"- Results recorded with evalreg {', '.join(recorded) or '–'}; this report "
        f"was written by evalreg {evalreg_version}."
    )
    tried = len(ev.candidates)
    variants = sum(c.candidate.prompt is not None for c in ev.candidates.values())
    out.append(
        f"- {tried} candidates ({variants} prompt variant{'' if variants == 1 else 's'}) "
        "have been tried against this "
        "eval set in this use case. Every variant tuned on one frozen set overfits it a "
        "little; a sealed hold-out set keeps the final decision honest.\n"
    )
    rubric_rows = [
        [
            f"{code(c.id)}",
            prose(c.description, limit=160),
            c.grader.type,
            "critical" if c.critical else "minor",
            exact(c.weight),
            ", ".join(c.slices) if c.slices else "all",
        ]
        for c in ev.rubric.criteria
    ]
    out.append("Criteria of the rubric:\n")
    out.append(
        table(
            ["criterion", "what it checks", "grader", "kind", "weight", "applies to"], rubric_rows
        )
    )
    out.append(_settled(ev))
    out.append("### Overall\n")
    out.append(table(_OVERALL_HEADERS, _overall_rows(ev)))
    out.append(_batch_pricing(ev))
    out.append(_slices(ev))
    out.append(_human(ev))
    out.append(_calibration(ev))
    out.append(_gates(ev))
    out.append(_comparisons(ev))
    out.append(_holdout(ev))
    out.append(_benchmark_contradiction(ev))
    # A section with nothing to show is left out, not left as a blank line.
    return "\n".join(section for section in out if section)


def _settled(ev: SelectionEvidence) -> str:
    """What a decision taken on part of the items rests on: the items, the method and the
    anytime-valid intervals of every statement it needed."""
    settled = ev.settled
    if settled is None:
        return ""
    state, case = settled.state, settled.case
    params = case.params
    gates = ev.selection.policy.gates
    out = [
        "### Decided on part of the items\n",
        f"A sequential run bought the items in one seeded random order (SHA-256 of the eval "
        f"set's md5 and each item's id), the same for every candidate, and stopped once the "
        f"decision was settled; method: {settled.method}. With probability at least "
        f"{percent(1 - params.alpha)} over that order, the decision is the one a run of all "
        f"{case.size:,} items would make: alpha {number(params.alpha)} is split evenly over "
        f"the {plural(case.family, 'statement')} the decision may need (every candidate's "
        f"gates, and every pair of candidates on the objective), {number(state.alpha_each)} "
        "each. The intervals below hold at that level whenever the run stopped. Every other "
        "figure in this report (rates and their fixed-size intervals, latency, cost) is of "
        "the items bought only.\n",
    ]
    rows = []
    for cand in ev.selection.candidates:
        items = settled.items.get(cand.id, 0)
        row = [code(cand.id), f"{items:,} of {case.size:,}"]
        for i, gate in enumerate(gates, start=1):
            verdict = state.gates.get((cand.id, i))
            if verdict is None:
                row.append("–")
                continue
            outcome = {"pass": "✅ proved to pass", "fail": "❌ proved to fail"}.get(
                verdict.outcome or "", "❔ not settled"
            )
            lo, hi = verdict.interval or (0.0, 1.0)
            row.append(f"{outcome}: {number(lo)} to {number(hi)} ({cell(gate_text(gate))})")
        rows.append(row)
    headers = ["candidate", "items", *(f"gate {i}" for i in range(1, len(gates) + 1))]
    out.append(table(headers, rows))
    if state.pairs:
        term = ev.selection.policy.objective.terms[0]
        what = f"{term.metric}" if ev.selection.policy.objective.lexicographic else "the objective"
        pair_rows = []
        for (a, b), verdict in state.pairs.items():
            lo, hi = verdict.interval or (0.0, 1.0)
            outcome = {
                "first": f"{code(a)} is better",
                "second": f"{code(b)} is better",
                "tie": "equal on every item",
            }.get(verdict.outcome or "", "not settled")
            pair_rows.append([f"{code(a)} − {code(b)}", f"{number(lo)} to {number(hi)}", outcome])
        out.append(f"\nDifferences on {cell(what)} (first minus second, on the items both have):\n")
        out.append(table(["pair", "anytime-valid interval", "verdict"], pair_rows))
    return "\n".join(out) + "\n"


def _judges(ev: SelectionEvidence, judges: list[str]) -> str:
    if not judges:
        return "- Judge models: none (every criterion is graded by code)."
    prompts = sorted(
        {
            f"{c.id} v{c.grader.prompt_version}"
            for c in ev.rubric.criteria
            if c.grader.type == "llm_judge"
        }
    )
    text = (
        "- Judge models: "
        + ", ".join(code(j) for j in judges)
        + f" (prompts: {', '.join(cell(p) for p in prompts)})."
    )
    measured = sorted({c.judge for found in ev.calibrations.values() for c in found})
    if measured:
        text += (
            " Calibrated against human grades: "
            + ", ".join(code(j) for j in measured)
            + " (see Judge calibration)."
        )
    else:
        text += " The judge is not calibrated against human grades yet."
    for path, a in sorted(ev.rater_agreement.items()):
        text += f" Agreement among the human raters of {code(path)}: " + (
            a if isinstance(a, str) else f"alpha {statistic(a)}"
        )
        if path in ev.rater_kappa and not isinstance(a, str):
            kappa, n = ev.rater_kappa[path]
            text += f", Cohen's kappa {statistic(kappa)} on {n} responses both graded"
        text += "."
    return text


def _calibration(ev: SelectionEvidence) -> str:
    """Judge-human agreement where it was measured: per judge criterion and candidate."""
    rows = [
        [
            code(c.judge),
            code(c.human),
            code(cid),
            str(c.n),
            c.undefined or statistic(c.alpha),
            c.undefined or statistic(c.kappa),
            coverage_text(*covered(c.coverage)) if c.coverage is not None else "–",
        ]
        for cid, found in ev.calibrations.items()
        for c in found
    ]
    if not rows:
        return ""
    headers = [
        "judge criterion",
        "human criterion",
        "candidate",
        "pairs",
        "Krippendorff's alpha",
        "Cohen's kappa",
        "human coverage",
    ]
    return (
        "### Judge calibration\n\n"
        "Agreement of the judge's verdicts with the human majority on the responses both "
        "graded (pairs); n/a where a statistic is undefined for too few pairs, and "
        f'"{ONE_GRADE}" where every grade was the same (both statistics are then 0/0: '
        "agreeing on a single value shows nothing about agreeing on the other).\n\n"
        + table(headers, rows)
    )


def _uncalibrated(ev: SelectionEvidence) -> list[str]:
    """Judge criteria whose agreement with human grades was not measured on some candidate
    with results, each with where it is missing."""
    judged = [c.id for c in ev.rubric.criteria if c.grader.type == "llm_judge"]
    ran = [cid for cid in ev.candidates if cid in ev.metrics]
    out = []
    for judge in judged:
        missing = [
            cid for cid in ran if judge not in {c.judge for c in ev.calibrations.get(cid, [])}
        ]
        if not ran or len(missing) == len(ran):
            out.append(code(judge))
        elif missing:
            out.append(f"{code(judge)} on {', '.join(code(m) for m in missing)}")
    return out


def _human(ev: SelectionEvidence) -> str:
    """Human criteria: pass rate on the responses graded, and coverage per slice."""
    human = [c.id for c in ev.rubric.criteria if c.grader.type == "human"]
    ranked = [c for c in ev.candidates if c in ev.metrics]
    if not human or not ranked:
        return ""
    slices = [s for s in _big_slices(ev) if s != "all"]
    rows = []
    for cid in ranked:
        for hid in human:
            m = ev.metrics[cid]
            row = [code(cid), code(hid), rate(m["all"].get(f"criterion:{hid}"))]
            for name in ("all", *slices):
                coverage = m.get(name, {}).get(f"{COVERAGE}{hid}")
                row.append(coverage_text(*covered(coverage)) if coverage is not None else "–")
            rows.append(row)
    headers = ["candidate", "criterion", "pass rate of graded (95 % CI)", "coverage"]
    headers += [f"coverage {cell(s)}" for s in slices]
    return (
        "### Human grades\n\n"
        "Coverage is graded / applicable responses. A response with too few human grades "
        "is not graded for that criterion: it is left out of the response's score and "
        "level, as a criterion that does not apply is, and out of the criterion's pass "
        "rate and the judge-human agreement.\n\n" + table(headers, rows)
    )


def _big_slices(ev: SelectionEvidence) -> list[str]:
    sizes = ev.evalset.slices
    return sorted(s for s, n in sizes.items() if n >= MIN_SLICE_ITEMS)


def _slices(ev: SelectionEvidence) -> str:
    ranked = [c for c in ev.candidates if c in ev.metrics]
    if not ranked:
        return "No candidate has results yet.\n"
    rows = [_slice_row(ev, name, ranked) for name in _big_slices(ev)]
    headers = ["slice", "items", *[f"{code(c)}" for c in ranked]]
    text = (
        "### Pass rate by slice\n\nSlices with at least "
        f"{MIN_SLICE_ITEMS} items; 95 % intervals in brackets.\n\n"
        f"![Pass rate by slice and candidate]({slices_chart_name(ev)})\n\n" + table(headers, rows)
        if rows
        else f"### Pass rate by slice\n\nNo slice has {MIN_SLICE_ITEMS} items or more.\n"
    )
    small = sorted((n, s) for s, n in ev.evalset.slices.items() if n < MIN_SLICE_ITEMS)
    if not small:
        return text
    rows = [_slice_row(ev, name, ranked) for _, name in sorted(small, key=lambda pair: pair[1])]
    return (
        text + f"\n<details><summary>{plural(len(small), 'slice')} under {MIN_SLICE_ITEMS} items: "
        "shown, not tested (too few items to tell candidates apart)</summary>\n\n"
        + table(headers, rows)
        + "\n</details>\n"
    )


def _slice_row(ev: SelectionEvidence, name: str, ranked: Sequence[str]) -> list[str]:
    """A slice's name, items and each candidate's pass rate; the items say once when the
    intervals rest on few clusters."""
    rates = [ev.metrics[cid].get(name, {}).get("pass_rate") for cid in ranked]
    items = str(ev.evalset.slices[name]) + wide_by_necessity(_clusters(ev, name))
    return [cell(name), items, *(rate(m, note=False) for m in rates)]


def _clusters(ev: SelectionEvidence, name: str) -> int:
    """The clusters slice ``name``'s pass-rate intervals rest on (0: not clustered)."""
    rates = [m.get(name, {}).get("pass_rate") for m in ev.metrics.values()]
    return max((r.clusters for r in rates if r is not None), default=0)


def _gates(ev: SelectionEvidence) -> str:
    if not ev.selection.policy.gates:
        return ""
    rows = [
        [f"{code(cid)}", *(gate_line(g, ev) for g in a.gates)]
        for cid, a in ev.decision.assessments.items()
        if not a.pending
    ]
    pending = [cid for cid, a in ev.decision.assessments.items() if a.pending]
    gates = ev.selection.policy.gates
    headers = ["candidate", *[f"gate {i}" for i in range(1, len(gates) + 1)]]
    key = "; ".join(f"gate {i}: {cell(gate_text(g), limit=200)}" for i, g in enumerate(gates, 1))
    text = (
        "### Gate results\n\nEach gate shows the point estimate and, for a gate on a bound, "
        f"the bound it compared with the threshold ({key}).\n\n"
    )
    if rows:
        text += table(headers, rows)
    if pending:
        text += (
            "\n" if rows else ""
        ) + f"Not gated yet (no results): {', '.join(code(c) for c in pending)}.\n"
    return text


def gate_line(g: GateResult, ev: SelectionEvidence) -> str:
    """One gate's verdict: ``✅ pass: pass rate 0.82, lower 95 % bound 0.74 ≥ min 0.7``."""
    mark = "✅ pass" if g.passed else ("❔ too small to tell" if g.too_small else "❌ fail")
    if g.value is None or g.gate.metric.startswith(COVERAGE):
        # Unmeasured, or a count of graded responses rather than an estimate.
        return f"{mark}: {g.compared()}"
    text = gate_comparison(g.gate, g.point, g.value, ev.selection.policy.confidence, g.passed)
    text += wide_by_necessity(g.clusters)
    # Numbers and a metric id: nothing Markdown reads, unless the id is not a plain one.
    return f"{mark}: {text if _SAFE_CODE.match(g.gate.metric) else cell(text, limit=200)}"


def _comparisons(ev: SelectionEvidence) -> str:
    if not ev.comparisons:
        return (
            "### Paired comparisons\n\nNo other candidate with results to compare with the "
            "declared one.\n"
        )
    out = [
        f"### Paired comparisons against the declared {code(ev.selection.selected)}\n",
        "Same items, difference in pass rate (other − declared) with its interval at the "
        'level its test used. "No detectable difference" comes with the smallest difference '
        "that test could have detected (MDE, power 0.8). "
        + family_sentence(ev.selection.policy.confidence)
        + "\n",
    ]
    big = set(_big_slices(ev)) | {"all"}
    for cid, comps in ev.comparisons.items():
        rows = []
        for c in sorted(comps, key=lambda c: (c.slice != "all", c.slice)):
            if c.slice not in big:
                continue
            d = c.diff
            rows.append(
                [
                    cell(c.slice),
                    str(d.n),
                    points_interval(d.mean, d.lo, d.hi) + wide_by_necessity(d.clusters),
                    f"{d.b} / {d.c}",
                    p_value(c.p_adjusted),
                    c.verdict + _mde_text(c.verdict, c.mde),
                ]
            )
        out.append(f"{code(cid)} against {code(ev.selection.selected)}:\n")
        out.append(
            table(
                [
                    "slice",
                    "items",
                    "difference",
                    "only declared / only other passes",
                    "p (Holm for slices)",
                    "verdict",
                ],
                rows,
            )
        )
    return "\n".join(out)


def _mde_text(verdict: str, mde: float | None) -> str:
    """What a "no detectable difference" could have detected."""
    if verdict != "no detectable difference":
        return ""
    return f" ({NONE_DETECTABLE})" if mde is None else f" (MDE {points(mde, signed=False)})"


def _holdout(ev: SelectionEvidence) -> str:
    if ev.task.holdout is None:
        return ""
    out = [
        "### Sealed hold-out\n",
        f"Hold-out set `{cell(ev.task.holdout)}`: run only when deciding "
        "(`evalreg run --holdout`), never while tuning, so it shows whether the development "
        "results hold up.\n",
    ]
    rows = []
    for cid in ev.candidates:
        dev = ev.metrics.get(cid, {}).get("all", {}).get("pass_rate")
        held = ev.holdout.get(cid, {}).get("pass_rate")
        flag = ""
        if dev and held and dev.lo is not None and held.hi is not None and held.hi < dev.lo:
            flag = "⚠ lower than on the development set: tuned to it?"
        rows.append(
            [
                code(cid),
                rate(dev),
                rate(held) if held else "not run",
                str(held.n) if held else "–",
                flag,
            ]
        )
    out.append(
        table(["candidate", "development pass rate", "hold-out pass rate", "items", ""], rows)
    )
    return "\n".join(out)


def _benchmark_contradiction(ev: SelectionEvidence) -> str:
    scored = {}
    for cid, c in ev.candidates.items():
        if cid in ev.metrics and c.cell.pin.benchmarks:
            scored[cid] = (
                c.cell.pin.benchmarks[0].score,
                ev.metrics[cid]["all"]["pass_rate"].value,
            )
    if len(scored) < 2:
        return (
            "Public-benchmark check: fewer than two candidates have both public scores and "
            "results, so the rankings cannot be compared yet.\n"
        )
    public = sorted(scored, key=lambda c: -scored[c][0])
    ours = sorted(scored, key=lambda c: -scored[c][1])
    if public == ours:
        return "Public-benchmark check: the ranking on our eval agrees with the public one.\n"
    return (
        "**⚠ The ranking on our own eval contradicts the public benchmarks:** public order "
        + " > ".join(public)
        + "; our order "
        + " > ".join(ours)
        + ". Our eval decides.\n"
    )


def _drift(ev: SelectionEvidence, known: Provenance) -> str:
    """Per hosted candidate: when drift was last checked, with what result; and when the
    drift workflow runs."""
    out = ["## 6. Drift\n"]
    workflow = known.workflow
    if workflow is None:
        out.append(
            "No drift workflow: nothing under `.github/workflows` runs `evalreg drift`, so "
            "drift is checked only when someone runs it.\n"
        )
    elif workflow.schedules:
        out.append(
            f"The drift workflow {code(workflow.path)} runs on the schedule "
            + ", ".join(f"`{c}`" if _CRON.match(c) else cell(c) for c in workflow.schedules)
            + " (cron, UTC), and when started by hand.\n"
        )
    else:
        out.append(
            f"The drift workflow {code(workflow.path)} has no schedule: it runs only when "
            "started by hand.\n"
        )
    hosted = [cid for cid, c in ev.candidates.items() if c.cell.pin.provider != "python"]
    if not hosted:
        out.append("No hosted candidate: every candidate runs here, so none can drift.\n")
        return "\n".join(out)
    rows = []
    unrun = []
    for cid in hosted:
        check = known.drift.get(ev.candidates[cid].cell.id)
        if check is None and ev.candidates[cid].state == "pending":
            unrun.append(cid)
            continue
        if check is None:
            rows.append([code(cid), "never", "–", "no check logged"])
            continue
        agreement = (
            f"{check.same_level} of {check.compared} samples at the same level"
            if check.compared
            else ""
        )
        detail = "; ".join(x for x in (agreement, prose(check.detail, limit=300)) if x)
        mark = {"drifted": "🔻 drifted", "no drift": "no drift"}.get(check.result, check.result)
        rows.append([code(cid), check.checked_at, mark, detail])
    if rows:
        out.append(
            f"Last check of each hosted candidate with results, from `{DRIFT_LOG}` "
            "(`evalreg drift --record` appends to it):\n"
        )
        out.append(table(["candidate", "last checked (UTC)", "result", "detail"], rows))
    if unrun:
        out.append(
            "Never checked, with no results to compare with yet: "
            + ", ".join(code(c) for c in unrun)
            + ".\n"
        )
    return "\n".join(out)


def _limitations(ev: SelectionEvidence) -> str:
    out = ["## 7. Limitations\n"]
    small = sorted((n, s) for s, n in ev.evalset.slices.items() if n < MIN_SLICE_ITEMS)
    bullets = []
    big = {"all", *_big_slices(ev)}
    weak = [
        s for s in evalset_stats(ev.evalset, detect=DETECT) if s.slice in big and not s.detectable
    ]
    if weak:
        bullets.append(
            f"Too small to detect a {whole_points(DETECT)}-point change between two "
            "candidates (the smallest change each slice can show, in points, as "
            "`evalreg evalset stats` sizes it): "
            + ", ".join(f"{code(s.slice)} {whole_points(s.mde_paired)}" for s in weak)
            + "."
        )
    few = _few_clusters(ev, big)
    if few:
        bullets.append(
            f"Intervals wide by necessity (items in {stats.FEW_CLUSTERS} clusters or fewer, "
            "so few independent units of evidence): "
            + ", ".join(f"{code(name)} ({plural(g, 'cluster')})" for name, g in few)
            + "."
        )
    if small:
        bullets.append(
            f"{plural(len(small), 'slice')} under {MIN_SLICE_ITEMS} items are too small to "
            "test: their counts and pass rates are listed, collapsed, under Pass rate by slice."
        )
    pending = [cid for cid, c in ev.candidates.items() if c.state == "pending"]
    if pending:
        bullets.append(
            "Pending candidates, never run and not ranked: "
            + ", ".join(f"{code(p)}" for p in pending)
            + ". Run them with their keys set: `evalreg run`."
        )
    stale = [cid for cid, c in ev.candidates.items() if c.state == "stale"]
    if stale:
        bullets.append(
            "Stale results (the registry changed since they were recorded): "
            + ", ".join(f"{code(s)}" for s in stale)
            + "."
        )
    if ev.task.holdout is None:
        bullets.append(
            "No sealed hold-out set: every candidate and prompt variant was chosen "
            "on the same eval set that judges it."
        )
    uncalibrated = _uncalibrated(ev)
    unread = all(c.grader.type not in ("llm_judge", "human") for c in ev.rubric.criteria)
    bullets.append(
        "Unmeasured risks: behaviour on inputs unlike this eval set; drift of hosted "
        "models under the same name (see Drift)"
        + (
            f"; judge calibration against human grades ({', '.join(uncalibrated)})"
            if uncalibrated
            else ""
        )
        + (
            "; every criterion is checked by code, so no judge or person reads the answers "
            "for what code cannot check"
            if unread
            else ""
        )
        + "."
    )
    out += [f"- {b}" for b in bullets]
    return "\n".join(out) + "\n"


def _few_clusters(ev: SelectionEvidence, slices: set[str]) -> list[tuple[str, int]]:
    """The ``slices`` whose pass-rate intervals rest on few clusters, with how many."""
    counts = ((name, _clusters(ev, name)) for name in sorted(slices))
    return [(name, clusters) for name, clusters in counts if stats.few_clusters(clusters)]


def _reproduce(ev: SelectionEvidence, install: str) -> str:
    # The same exact install CI uses (the spec was validated: no spaces or shell characters),
    # so the commands work as written from a clean clone of the registry.
    return (
        "## 8. How to reproduce\n\n"
        f"From a clean clone of this repository. The install needs {_install_source(install)} "
        "and `dvc pull` read access to the DVC remote; the two evalreg commands then run "
        "offline and call no model:\n\n"
        "```sh\n"
        f"python -m pip install '{install}'\n"
        "dvc pull\n"
        "evalreg reproduce HEAD\n"
        f"evalreg run --offline --force --task {ev.selection.task}\n"
        "```\n"
    )


def _install_source(install: str) -> str:
    """What ``pip install`` of ``install`` reaches over the network."""
    url = install.partition("@")[2] if "]@" in install else install
    if "://" in url:
        host = url.partition("://")[2].partition("/")[0]
        return f"{host} (which holds evalreg) and the package index (its dependencies)"
    if "/" in install or install.startswith("."):
        return "the package index for evalreg's dependencies (evalreg itself is built from a path)"
    return "the package index"


def index(evidences: Sequence[SelectionEvidence], digest: str) -> str:
    """The report index: one row per use case, and the digest of the inputs it was made from."""
    rows = []
    for ev in evidences:
        d = ev.decision
        state = "agrees" if d.agrees else ("waiver" if d.waiver else "⚠ no waiver")
        declared = ev.metrics.get(d.declared, {}).get("all", {}).get("pass_rate")
        rows.append(
            [
                f"[{cell(ev.selection.use_case)}]({ev.selection_id}.md)",
                f"{code(d.declared)}",
                f"{code(d.recommended)}" if d.recommended else "none",
                state,
                rate(declared),
            ]
        )
    return (
        f"<!-- evalreg-report-inputs: {digest} -->\n"
        "# Model selection report\n\n"
        "Which model serves each use case, why, and on what evidence. Generated by "
        "`evalreg report`; `evalreg check` fails when it is out of date.\n\n"
        + table(
            ["use case", "declared", "policy recommends", "decision", "declared pass rate"], rows
        )
    )
