"""Words the diff's data and its renderer share: a cell's status and the reproduction's."""

UNEXPLAINED = "changed without a cause"
"""A cell's status when its results moved and its fingerprint did not."""

REPRODUCTION_STATUSES = ("reproduced", "failed", "not_attempted")
"""What ``evalreg reproduce`` made of HEAD's results, as ``evalreg diff --reproduction`` says."""
