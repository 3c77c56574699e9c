"""``evalreg propose``: the pull requests a model change needs, found in the providers'
model lists (``snapshots`` decides what a listed model is to a pinned one)."""
