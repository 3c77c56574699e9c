"""``evalreg evalset``: eval sets tracked with DVC (``add``), drawn from logs (``sample``)
and sized (``stats``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evalreg.cli.common import Commands, emit, given_path, registry_root, working_root, writing


def add_parsers(sub: Commands) -> None:
    """Add ``evalset`` and its commands."""
    evalset = sub.add_parser("evalset", help="manage eval sets (tracked by DVC)")
    evalset_sub = evalset.add_subparsers(dest="evalset_command", metavar="COMMAND")
    p = evalset_sub.add_parser("add", help="validate a JSONL eval set and track it with DVC")
    p.add_argument("file", metavar="FILE", help="the JSONL file, inside the repository")
    p.add_argument("--no-push", action="store_true", help="do not push to the DVC remote")
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace the tracked version even if the new content drops items, or the old "
        "version is not here to compare with",
    )
    p.set_defaults(handler=cmd_evalset_add)

    p = evalset_sub.add_parser(
        "sample", help="draw a seeded, stratified, deduplicated sample of logs into an eval set"
    )
    p.add_argument("source", metavar="LOG", help="production log: JSONL or CSV, optionally .gz")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the new eval set (.jsonl); FILE.provenance.json is written beside it",
    )
    p.add_argument(
        "--stratify-by",
        required=True,
        metavar="FIELD",
        help="field whose values become the slices (each item's first tag)",
    )
    p.add_argument("--per-slice", type=int, metavar="N", help="at most N items a slice")
    p.add_argument(
        "--total",
        type=int,
        metavar="N",
        help="at most N items in all, shared in proportion (at least one a slice)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed (default 0)")
    p.add_argument(
        "--id-prefix", required=True, metavar="PREFIX", help="item ids are PREFIX-0001, ..."
    )
    p.add_argument(
        "--input-field",
        action="append",
        metavar="FIELD",
        help="a field of the item's input (repeatable; dotted paths reach into "
        "objects); default: each row's 'input' object or 'messages' list",
    )
    p.add_argument("--expected-field", metavar="FIELD", help="field holding the expected answer")
    p.add_argument("--keep-duplicates", action="store_true", help="keep exact and near duplicates")
    p.add_argument(
        "--near-threshold",
        type=float,
        default=0.9,
        metavar="X",
        help="similarity in (0, 1] from which rows are near duplicates (default 0.9)",
    )
    p.add_argument(
        "--scrub",
        metavar="HOOK",
        help="mask personal data: builtin:pii, or path/to/file.py:function in the repository",
    )
    p.set_defaults(handler=cmd_evalset_sample)

    p = evalset_sub.add_parser(
        "stats", help="per slice: size and the smallest change it can detect"
    )
    p.add_argument("file", metavar="FILE", nargs="?", help="one eval set (default: all in use)")
    p.add_argument(
        "--detect",
        type=float,
        default=0.05,
        metavar="X",
        help="the change that matters, as a share (default 0.05: 5 points)",
    )
    p.add_argument(
        "--baseline",
        type=float,
        default=0.5,
        metavar="X",
        help="expected pass rate for the single-rate MDE (default 0.5, the worst case)",
    )
    p.add_argument(
        "--discordance",
        type=float,
        default=0.1,
        metavar="X",
        help="share of items two candidates disagree on, for the paired MDE (default 0.1)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_evalset_stats)


def cmd_evalset_add(args: argparse.Namespace) -> int:
    from evalreg.evalsets.tracking import add_evalset
    from evalreg.report.terminal import print_evalset_added

    root = registry_root(args)
    with writing(root):
        added = add_evalset(
            root, given_path(args, args.file), push=not args.no_push, replace=args.replace
        )
    print_evalset_added(added, pushed=not args.no_push)
    return 0


def cmd_evalset_sample(args: argparse.Namespace) -> int:
    from evalreg.evalsets.sampling import sample_logs
    from evalreg.report.terminal import print_sample

    result = sample_logs(
        given_path(args, args.source),
        given_path(args, args.output),
        per_slice=args.per_slice,
        total=args.total,
        stratify_by=args.stratify_by,
        seed=args.seed,
        id_prefix=args.id_prefix,
        input_fields=args.input_field,
        expected_field=args.expected_field,
        dedupe=not args.keep_duplicates,
        near_threshold=args.near_threshold,
        scrub=args.scrub,
        root=working_root(args),
    )
    print_sample(result)
    return 0


def cmd_evalset_stats(args: argparse.Namespace) -> int:
    from evalreg.evalsets.evalset import read_evalset
    from evalreg.evalsets.slice_sizes import sizing_report
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import print_evalset_stats

    if args.file is None:
        evalsets = load_registry(registry_root(args)).evalsets
    else:
        # A file named on the command line is read as it is, registry or not.
        root = working_root(args)
        evalsets = dict([read_evalset(root, Path.cwd() / given_path(args, args.file), args.file)])
    plan = {"detect": args.detect, "baseline": args.baseline, "discordance": args.discordance}
    sizes = sizing_report(evalsets, **plan)
    if args.json:
        emit(json.dumps(sizes.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        print_evalset_stats(sizes.evalsets, sizes.needed, **plan)
    return 0
