"""The commands ``evalreg``'s parser defines, and which of them read no registry: the tests
that run every registry-reading command take their list from here, so a command added
later is run by them or must say here why it reads no registry."""

from __future__ import annotations

import argparse

from evalreg.cli import build_parser

READS_NO_REGISTRY = {
    ("init",): "creates one",
    ("comment",): "posts a diff from its JSON file",
    ("evalset", "sample"): "draws items from a log into a file",
}
"""Commands that work anywhere, and why (``evalset stats FILE`` reads only FILE too)."""


def command_paths(parser: argparse.ArgumentParser | None = None) -> set[tuple[str, ...]]:
    """Every command the parser knows, sub-commands spelled out (``store compact``)."""
    found: set[tuple[str, ...]] = set()
    # argparse lists sub-commands only through its parsers' actions.
    for action in (parser or build_parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                below = command_paths(sub)
                found |= {(name, *rest) for rest in below} if below else {(name,)}
    return found


def reading_a_registry() -> set[tuple[str, ...]]:
    """Every command that reads (or writes) a registry."""
    return command_paths() - set(READS_NO_REGISTRY)
