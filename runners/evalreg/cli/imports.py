"""``evalreg import``: another tool's eval (promptfoo, OpenAI evals) as registry files."""

from __future__ import annotations

import argparse

from evalreg.cli.common import Commands, given_path, registry_root, writing


def add_parsers(sub: Commands) -> None:
    """Add ``import`` and its sources."""
    importer = sub.add_parser("import", help="turn another tool's eval into registry files")
    import_sub = importer.add_subparsers(dest="import_command", metavar="SOURCE")
    p = import_sub.add_parser("promptfoo", help="a promptfoo config (promptfooconfig.yaml)")
    p.add_argument("config", metavar="CONFIG", help="the promptfoo config file")
    p.add_argument(
        "--name",
        required=True,
        metavar="ID",
        help="id of the task, rubric, use case and eval set; pins are named ID-<model>",
    )
    p.add_argument(
        "--judge",
        metavar="PIN",
        help="an existing pin that grades model-graded asserts (llm-rubric, factuality, "
        "model-graded-closedqa) when the config names no grading provider",
    )
    p.set_defaults(handler=cmd_import_promptfoo)
    p = import_sub.add_parser("openai-evals", help="OpenAI evals samples (samples.jsonl)")
    p.add_argument("samples", metavar="SAMPLES", help="the samples JSONL file")
    p.add_argument(
        "--name", required=True, metavar="ID", help="id of the task, rubric, use case and eval set"
    )
    p.add_argument(
        "--pin",
        action="append",
        required=True,
        metavar="ID",
        help="an existing pin to compare (repeatable; the first is declared)",
    )
    p.add_argument(
        "--kind",
        choices=("match", "includes", "fuzzy_match", "json_match"),
        default="match",
        help="the basic eval class: starts with, contains, or overlaps once normalised, an "
        "ideal answer, or equals one as JSON (default match)",
    )
    p.add_argument(
        "--modelgraded",
        metavar="SPEC",
        help="a model-graded spec file (evals/registry/modelgraded/fact.yaml, ...) that "
        "grades instead of --kind; needs --judge",
    )
    p.add_argument("--judge", metavar="PIN", help="the existing pin that grades --modelgraded")
    p.set_defaults(handler=cmd_import_openai_evals)


def cmd_import_promptfoo(args: argparse.Namespace) -> int:
    from evalreg.importers import import_promptfoo
    from evalreg.report.terminal import print_import

    root = registry_root(args)
    with writing(root):
        result = import_promptfoo(
            given_path(args, args.config), root, name=args.name, judge=args.judge
        )
    print_import(result)
    return 0


def cmd_import_openai_evals(args: argparse.Namespace) -> int:
    from evalreg.importers import import_openai_evals
    from evalreg.report.terminal import print_import

    root = registry_root(args)
    with writing(root):
        result = import_openai_evals(
            given_path(args, args.samples),
            root,
            name=args.name,
            pins=args.pin,
            kind=args.kind,
            modelgraded=given_path(args, args.modelgraded) if args.modelgraded else None,
            judge=args.judge,
        )
    print_import(result)
    return 0
