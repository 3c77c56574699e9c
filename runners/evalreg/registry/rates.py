"""Which metrics are rates over items, and whether a use case's decision can be taken on part
of its items (``policy.sequential``, ``run --until-decided``): the registry's rule, which
``evalreg check`` applies to the files and the runner to a run."""

from __future__ import annotations

from evalreg.registry import schema

ITEM_RATES = frozenset(
    {"pass_rate", "correct_rate", "acceptable_rate", "unacceptable_rate", "error_rate"}
)
"""The rates that are a mean of per-item scores over every item (criteria's rates are over
the items each applies to)."""


def is_rate(metric: str) -> bool:
    """Whether ``metric`` is the mean of a score in [0, 1] per item."""
    return metric in ITEM_RATES or metric.startswith("criterion:")


def refusal(selection: schema.Selection, rubric: schema.Rubric) -> str | None:
    """Why the use case's decision cannot be taken on part of its items, or None."""
    policy = selection.policy
    human = [c.id for c in rubric.criteria if isinstance(c.grader, schema.HumanGrader)]
    if human:
        return (
            f"its rubric has human criteria ({', '.join(human)}): their grades arrive after "
            "the run, so no round can be decided"
        )
    for i, gate in enumerate(policy.gates, start=1):
        if not is_rate(gate.metric):
            return (
                f"gate {i} is on {gate.metric}, which is measured over every item, not a rate "
                "a part of them can settle"
            )
    terms = policy.objective.terms
    if policy.objective.lexicographic is not None and not is_rate(terms[0].metric):
        return f"its objective ranks by {terms[0].metric}, which is not a rate"
    if policy.objective.weighted is not None:
        other = [t.metric for t in terms if t.metric not in ITEM_RATES]
        if other:
            return (
                f"its weighted objective includes {', '.join(other)}: a weighted objective is "
                "settled on rates over every item (pass, level and error rates)"
            )
    if policy.non_inferiority is not None:
        return "a non-inferiority margin is not decided sequentially"
    return None
