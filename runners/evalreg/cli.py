"""The ``evalreg`` command line: parse arguments, call the library, render its data.

Heavy modules (pydantic, rich, DVC, GitPython) are imported inside the commands that
use them so ``evalreg --help`` stays fast.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from evalreg._version import __version__
from evalreg.compare.statuses import REPRODUCTION_STATUSES
from evalreg.errors import EvalregError, UsageError
from evalreg.report.numbers import plural

if TYPE_CHECKING:
    from evalreg.store.lock import RepositoryLock

Handler = Callable[[argparse.Namespace], int]


def find_root(start: Path) -> Path:
    """The repository root: the nearest ancestor holding ``.git`` or ``registry/``."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists() or (candidate / "registry").is_dir():
            return candidate
    return start


def _root(args: argparse.Namespace) -> Path:
    if args.directory is not None:
        path = Path(args.directory)
        if not path.is_dir():
            raise UsageError(f"-C {args.directory}: no such directory")
        return path.resolve()
    return find_root(Path.cwd())


def _path(args: argparse.Namespace, name: str) -> Path:
    """A path from the command line: with ``-C DIR`` a relative one is read from DIR, as
    ``git -C`` does for every path."""
    path = Path(name)
    if args.directory is not None and not path.is_absolute():
        return Path(args.directory) / path
    return path


def _registry_root(args: argparse.Namespace, rev: str | None = None) -> Path:
    """``_root``, refused (exit 2) unless it holds a registry: ``find_root`` stops at any
    git repository, and ``-C`` takes any directory. With ``rev``, the registry read is the
    one of that revision, which must hold one (the working tree need not)."""
    root = _root(args)
    held = (root / "registry").is_dir()
    where = ""
    if rev is not None:
        from evalreg.registry.tree import GitTree

        try:
            held = GitTree(root, rev).is_dir("registry")
        except UsageError:
            pass  # no git repository, or no such revision: in a registry, the command says so
        else:
            where = f" at {rev}"
    if not held:
        raise UsageError(
            f"{root}: not an evalreg registry{where} (no registry/ directory); "
            "`evalreg init DIR` creates one"
        )
    return root


def _note(text: str) -> None:
    from evalreg.report.terminal import plain

    # Notes quote what files say (the lock names the command line of its holder).
    sys.stderr.write(plain(f"evalreg: note: {text}") + "\n")


def _writing(root: Path) -> RepositoryLock:
    """Take the repository lock for a command that writes (``LockedError`` names the
    holder when another process has it), after repairing any interrupted run."""
    from evalreg.store.lock import RepositoryLock
    from evalreg.store.recovery import recover_locked

    lock = RepositoryLock(root).acquire()
    try:
        repaired = recover_locked(root)
    except BaseException:
        lock.release()
        raise
    for done in repaired:
        _note(done.describe())
    return lock


def _repaired(root: Path, *, quiet_if_live: bool = False) -> Path:
    """For a command that only reads: repair an interrupted run first, unless one is live
    (which is said, unless ``quiet_if_live``: the command says so itself)."""
    from evalreg.store.journal import Recovery
    from evalreg.store.recovery import recover

    for done in recover(root):
        live = isinstance(done, Recovery) and done.action == "in progress"
        if not (quiet_if_live and live):
            _note(done.describe())
    return root


def _emit(text: str, output: str | None = None) -> None:
    """Write a command's document (Markdown or JSON) to ``output`` or stdout, through
    ``render.plain``: documents quote model output, item text and provider errors."""
    from evalreg.report.terminal import plain

    text = plain(text)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


# ---------------------------------------------------------------- commands
def cmd_check(args: argparse.Namespace) -> int:
    from evalreg.check import check
    from evalreg.report.terminal import print_check

    result = check(
        _repaired(_registry_root(args), quiet_if_live=True), remote=args.remote, base=args.base
    )
    for note in result.notes():
        _note(note)
    if args.json:
        _emit(json.dumps(result.as_dict(strict=args.strict), indent=2) + "\n")
    else:
        print_check(result, strict=args.strict)
    return result.exit_code(strict=args.strict)


def cmd_init(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_init
    from evalreg.scaffold import init_registry

    snippets = args.snippets
    if snippets is None and sys.stdin.isatty():
        # Whether the repository will be public is not known here: ask.
        answer = input(
            "Will this repository be public while its eval data stays private? Then pull-"
            "request comments should show no item text or model output. [y/N] "
        )
        snippets = answer.strip().lower() not in ("y", "yes")
    created = init_registry(
        Path(args.path),
        remote=args.remote,
        evalreg_spec=args.evalreg_spec,
        snippets=snippets is not False,
    )
    print_init(created, args.path, snippets=snippets is not False)
    return created.exit_code


def cmd_evalset_add(args: argparse.Namespace) -> int:
    from evalreg.evalsets.tracking import add_evalset
    from evalreg.report.terminal import print_evalset_added

    root = _registry_root(args)
    with _writing(root):
        added = add_evalset(
            root, _path(args, args.file), push=not args.no_push, replace=args.replace
        )
    print_evalset_added(added, pushed=not args.no_push)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import print_status, print_waiting_batches
    from evalreg.results.freshness import status
    from evalreg.store.batches import BatchJournal

    root = _repaired(_registry_root(args))
    statuses = status(load_registry(root))
    batches = BatchJournal.load(root).batches
    if args.json:
        _emit(json.dumps([s.as_dict() for s in statuses], indent=2) + "\n")
        print_waiting_batches(batches)
    else:
        print_status(statuses, batches)
    return 0


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number from 1 (``--limit -1`` would drop the last item)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number from 1")
    return value


def _amount(text: str) -> float:
    """An argparse type: a finite amount from 0 (a NaN budget compares false with every
    cost)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: expected an amount from 0, like 2.50")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: expected seconds above 0, like 15")
    return value


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None

    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text}: expected i/n, like 2/4") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: i must be between 1 and n")
    return index, count


def cmd_show(args: argparse.Namespace) -> int:
    from evalreg.report.escape import json_text
    from evalreg.report.terminal import print_item
    from evalreg.results.item import show_item

    root = _registry_root(args, args.rev)
    if args.rev is None:
        _repaired(root)
    views = show_item(
        root,
        args.item,
        rev=args.rev,
        candidates=tuple(args.candidate or ()),
        use_cases=tuple(args.use_case or ()),
        tasks=tuple(args.task or ()),
    )
    if args.json:
        _emit(json_text([view.as_dict() for view in views]) + "\n")
    else:
        print_item(views)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import RunProgress, plain, print_run
    from evalreg.runner.command import run_command
    from evalreg.runner.run import RunInterrupted, RunOptions

    root = _registry_root(args)
    options = RunOptions(
        offline=args.offline,
        tasks=tuple(args.task or ()),
        candidates=tuple(args.candidate or ()),
        max_concurrency=args.max_concurrency,
        limit=args.limit,
        max_cost_usd=args.max_cost,
        dry_run=args.dry_run,
        shard=_shard(args.shard),
        force=args.force,
        push=not args.no_push,
        holdout=args.holdout,
        strict=args.strict,
        allow_pending=args.allow_pending,
        batch=args.batch,
        wait=not args.no_wait,
        batch_poll_s=args.batch_poll,
    )
    if args.no_wait and not args.batch:
        raise UsageError("--no-wait goes with --batch: a live run has nothing to wait for")
    if options.dry_run:
        verdict = run_command(_repaired(root), options)
    else:
        with _writing(root) as lock:
            try:
                verdict = run_command(root, options, lock=lock, display=RunProgress)
            except RunInterrupted as exc:
                _note(
                    f"interrupted: {plural(exc.stored, 'response')} bought by this run "
                    "are kept in the store; the next evalreg command tracks them. Resume with "
                    f"`{_resume_command(args)}`: it buys only what is missing"
                )
                raise
    print_run(verdict.result, dry_run=options.dry_run)
    for refusal in verdict.refusals:
        sys.stderr.write(plain(f"evalreg: error: {refusal}") + "\n")
    if verdict.refusals and not (options.strict or options.allow_pending):
        _note(
            "set what is named to buy these cells; to run only the others, name them with "
            "--task/--candidate, or leave these pending with --allow-pending"
        )
    return verdict.exit_code


def _resume_command(args: argparse.Namespace) -> str:
    """The ``evalreg run`` command line that continues an interrupted run."""
    import shlex

    words = ["evalreg"]
    if args.directory is not None:
        words += ["-C", args.directory]
    words.append("run")
    for flag, values in (("--task", args.task), ("--candidate", args.candidate)):
        for value in values or ():
            words += [flag, value]
    for flag, value in (
        ("--limit", args.limit),
        ("--max-cost", args.max_cost),
        ("--shard", args.shard),
        ("--max-concurrency", None if args.max_concurrency == 64 else args.max_concurrency),
    ):
        if value is not None:
            words += [flag, str(value)]
    for flag, on in (
        ("--offline", args.offline),
        ("--force", args.force),
        ("--no-push", args.no_push),
        ("--holdout", args.holdout),
        ("--strict", args.strict),
        ("--allow-pending", args.allow_pending),
        ("--batch", args.batch),
    ):
        if on:
            words.append(flag)
    return shlex.join(words)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_range_reproduction, print_reproduction
    from evalreg.runner.reproduce import range_bounds, reproduce, reproduce_range

    if (args.rev is None) == (args.range is None):
        raise UsageError("give a revision (REV) or a range (--range BASE..HEAD), not both")
    if args.range is not None:
        # BASE may predate the registry; HEAD, the revision verified last, may not.
        root = _repaired(_registry_root(args, range_bounds(args.range)[1]))
        done = reproduce_range(root, args.range)
        print_range_reproduction(done)
        return 0 if done.identical else 1
    outcome = reproduce(_repaired(_registry_root(args, args.rev)), args.rev)
    print_reproduction(outcome)
    return 0 if outcome.identical else 1


def cmd_store_compact(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_compaction
    from evalreg.runner.interrupts import deferred
    from evalreg.store.compaction import compact

    root = _registry_root(args)
    with _writing(root):
        done = compact(root, push=not args.no_push, guard=deferred)
    print_compaction(done)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import console
    from evalreg.report.writer import write_report

    root = _registry_root(args)
    with _writing(root):
        written = write_report(root, load_registry(root))
    console().print("Wrote " + ", ".join(written))
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from evalreg.report.explorer import EXPLORER_DIR, write_explorer
    from evalreg.report.terminal import console
    from evalreg.selection.samples import samples_at

    root = _repaired(_registry_root(args, args.rev))
    directory = _path(args, args.output) if args.output else root / EXPLORER_DIR
    texts = True if args.with_text else None
    written = [
        write_explorer(directory, data)
        for data in samples_at(root, args.use_case, rev=args.rev, base=args.base, texts=texts)
    ]
    console().print("Wrote " + ", ".join(str(p) for p in written))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from evalreg.report import reference
    from evalreg.report.terminal import console

    root = _registry_root(args)
    with _writing(root):
        written = reference.write(root)
    console().print(
        ("Wrote " + ", ".join(written)) if written else f"{reference.SCHEMA_DIR}/ is up to date"
    )
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from evalreg.gitops.merging import resolve
    from evalreg.report.terminal import print_resolution

    root = _registry_root(args)
    with _writing(root):
        done = resolve(root, push=not args.no_push)
    print_resolution(done)
    return done.exit_code


def cmd_select(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_selected
    from evalreg.selection.edit import select_candidate

    root = _registry_root(args)
    with _writing(root):
        changed = select_candidate(
            root, args.use_case, args.candidate, reason=args.reason, approver=args.approver
        )
    print_selected(changed)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from evalreg.audit.record import build_audit, reviews_from_environment
    from evalreg.report.audit import audit_markdown, write_html

    root = _registry_root(args, args.rev)
    reviews = reviews_from_environment(
        os.environ, token_env=args.github_token_env, repository=args.repository
    )
    with reviews if reviews is not None else nullcontext():
        record = build_audit(root, args.rev, github=reviews, verify=not args.no_verify)
    output = str(_path(args, args.output)) if args.output else None
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    _emit(audit_markdown(record), output)
    if args.html:
        from evalreg.report.writer import decisions_at

        try:
            decisions = decisions_at(root, record.rev)
        except EvalregError as exc:  # the record is written all the same, saying why
            write_html(record, _path(args, args.html), str(exc))
        else:
            write_html(record, _path(args, args.html), decisions)
    return record.exit_code


def cmd_diff(args: argparse.Namespace) -> int:
    from evalreg.compare.diff import diff
    from evalreg.compare.diff_document import diff_document
    from evalreg.gitops.trusted import read_json_object
    from evalreg.report.diff_markdown import comment_body, diff_markdown
    from evalreg.report.escape import json_text

    checked = (
        read_json_object(
            _path(args, args.check),
            flag="--check",
            name=str(_path(args, args.check)),
            what="the output of `evalreg check --json`",
        )
        if args.check
        else None
    )
    # BASE may predate the registry (the pull request that adds it); what it became may not.
    root = _registry_root(args, args.head)
    data = diff(
        _repaired(root),
        args.base,
        args.head,
        check=checked,
        reproduction=(args.reproduction, args.reproduction_reason),
    )
    output = str(_path(args, args.output)) if args.output else None
    form = args.format or ("terminal" if output is None and sys.stdout.isatty() else "md")
    # Validated before it is written, and rendered from the JSON the comment job reads.
    text = json_text(data)
    document = diff_document(text)
    if form == "terminal":
        from evalreg.report.terminal import print_diff

        print_diff(document)
        return 0
    if form == "json":
        text += "\n"
    elif form == "comment":
        text = comment_body(document)
    else:
        text = diff_markdown(document)
    _emit(text, output)
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    from evalreg.compare.drift import drift, drift_json
    from evalreg.report.drift import render_drift
    from evalreg.report.escape import json_text

    root = _registry_root(args)
    report = drift(
        root, sample=args.sample, seed=args.seed, cells=args.cell, threshold=args.threshold
    )
    text = json_text(drift_json(report)) + "\n" if args.json else render_drift(report)
    _emit(text, str(_path(args, args.output)) if args.output else None)
    if args.record:
        from evalreg.compare.drift_log import append_log

        append_log(root, report)
    return report.exit_code


def cmd_import_promptfoo(args: argparse.Namespace) -> int:
    from evalreg.importers import import_promptfoo
    from evalreg.report.terminal import print_import

    root = _registry_root(args)
    with _writing(root):
        result = import_promptfoo(_path(args, args.config), root, name=args.name, judge=args.judge)
    print_import(result)
    return 0


def cmd_import_openai_evals(args: argparse.Namespace) -> int:
    from evalreg.importers import import_openai_evals
    from evalreg.report.terminal import print_import

    root = _registry_root(args)
    with _writing(root):
        result = import_openai_evals(
            _path(args, args.samples),
            root,
            name=args.name,
            pins=args.pin,
            kind=args.kind,
            modelgraded=_path(args, args.modelgraded) if args.modelgraded else None,
            judge=args.judge,
        )
    print_import(result)
    return 0


def cmd_comment(args: argparse.Namespace) -> int:

    from evalreg.gitops.github import (
        GitHubClient,
        api_url_from_environment,
        context_from_environment,
        token_from_environment,
    )
    from evalreg.gitops.trusted import check_head_sha, comment_target, read_diff
    from evalreg.report.diff_markdown import COMMENT_MARKER, comment_body
    from evalreg.report.terminal import console, shown

    data = read_diff(_path(args, args.diff), str(_path(args, args.diff)))
    head_sha = check_head_sha(args.head_sha)
    body = comment_body(data)
    if args.dry_run:
        # The body as it would be posted, made here: no token, no request.
        _emit(body)
        return 0
    ctx = context_from_environment(
        os.environ, pr=args.pr, repository=args.repository, head=head_sha
    )
    client = GitHubClient(
        token_from_environment(os.environ),
        ctx.repository,
        api_url=api_url_from_environment(os.environ),
    )
    with client:
        target = comment_target(client, ctx.number, ctx.head_sha)
        if target.number is None or not target.post:
            console().print(target.describe())
            return 0
        number = target.number
        result = client.upsert_comment(
            number, body, marker=COMMENT_MARKER, bot_login=args.bot_login
        )
    console().print(
        f"{result.action} comment on #{number}" + (f": {shown(result.url)}" if result.url else "")
    )
    return 0


def cmd_evalset_sample(args: argparse.Namespace) -> int:
    from evalreg.evalsets.sampling import sample_logs
    from evalreg.report.terminal import print_sample

    result = sample_logs(
        _path(args, args.source),
        _path(args, args.output),
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
        root=_root(args),
    )
    print_sample(result)
    return 0


def cmd_evalset_stats(args: argparse.Namespace) -> int:
    from evalreg.evalsets.evalset import read_evalset
    from evalreg.evalsets.slice_sizes import sizing_report
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import print_evalset_stats

    if args.file is None:
        evalsets = load_registry(_registry_root(args)).evalsets
    else:
        # A file named on the command line is read as it is, registry or not.
        root = _root(args)
        evalsets = dict([read_evalset(root, Path.cwd() / _path(args, args.file), args.file)])
    plan = {"detect": args.detect, "baseline": args.baseline, "discordance": args.discordance}
    sizes = sizing_report(evalsets, **plan)
    if args.json:
        _emit(json.dumps(sizes.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        print_evalset_stats(sizes.evalsets, sizes.needed, **plan)
    return 0


def cmd_store_purge(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_purge
    from evalreg.store.purge import purge_item

    root = _registry_root(args)
    with _writing(root):
        try:
            record = purge_item(
                root,
                args.item,
                reason=args.reason,
                evalset=args.evalset,
                at=args.date,
                push=not args.no_push,
            )
        except KeyboardInterrupt:
            # An erasure asked for is never dropped: its journal stays.
            _note("the purge is journalled: the next evalreg command finishes it")
            raise
    print_purge(record)
    return 0


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalreg",
        description="Choose AI models on your own evidence: a versioned, reproducible eval "
        "registry.",
    )
    parser.add_argument("--version", action="version", version=f"evalreg {__version__}")
    parser.add_argument(
        "-C",
        dest="directory",
        metavar="DIR",
        help="run as if started in DIR (the repo root): relative paths given to any command "
        "are read from DIR too, as with git -C",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("check", help="validate the registry and summarise it")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--strict", action="store_true", help="warnings fail the check (exit 1)")
    p.add_argument(
        "--remote",
        action="store_true",
        help="also fail when an object the results or eval sets point at is not on the "
        "default DVC remote (needs read access to it)",
    )
    p.add_argument(
        "--base",
        metavar="REV",
        help="a pull request's base: fail when the default DVC remote moved since the "
        "merge-base together with results, selections, criteria, pins or eval sets; with "
        "--remote, also when the new remote lacks an object REV's pointers name",
    )
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("init", help="scaffold a new registry repository")
    p.add_argument("path", metavar="DIR", help="directory to create (must be empty or absent)")
    p.add_argument(
        "--remote",
        metavar="URL",
        help="DVC remote for eval data and responses (s3://, gs://, azure://, a path); "
        "default: a folder inside the repository",
    )
    p.add_argument(
        "--evalreg-spec",
        metavar="SPEC",
        help=f"the pip requirement CI installs evalreg from: evalreg==X.Y.Z on an index you "
        f"control, git+https://host/org/evalreg@<commit>, or a wheel URL "
        f"(default: the evalreg running now: the git commit it was installed from, else "
        f"evalreg=={__version__}); a --remote in s3://, gs:// or azure:// adds its extra",
    )
    snippets = p.add_mutually_exclusive_group()
    snippets.add_argument(
        "--no-snippets",
        dest="snippets",
        action="store_false",
        default=None,
        help="keep item text and model output out of pull-request comments (a public "
        "repository with private eval data); asked when run in a terminal",
    )
    snippets.add_argument(
        "--snippets",
        dest="snippets",
        action="store_true",
        default=None,
        help="quote item text and model output in pull-request comments",
    )
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("status", help="show fresh, stale and pending cells and why")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser(
        "show",
        help="one item: its input, each candidate's request, stored output and verdicts",
    )
    p.add_argument("item", metavar="ITEM", help="the item id")
    p.add_argument(
        "--candidate", action="append", metavar="ID", help="only this candidate (repeatable)"
    )
    p.add_argument(
        "--use-case", action="append", metavar="ID", help="only this use case (repeatable)"
    )
    p.add_argument(
        "--task", action="append", metavar="ID", help="only this task's use cases (repeatable)"
    )
    p.add_argument(
        "--rev",
        metavar="REV",
        help="read the registry, eval sets, results and store as of REV (default: the "
        "working tree)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("run", help="run the stale cells: buy missing responses, grade, write")
    p.add_argument(
        "--offline",
        action="store_true",
        help="never call a model: a missing response is an error naming the item",
    )
    p.add_argument("--task", action="append", metavar="ID", help="only this task (repeatable)")
    p.add_argument(
        "--candidate", action="append", metavar="ID", help="only this candidate (repeatable)"
    )
    p.add_argument(
        "--max-concurrency",
        type=_at_least_one,
        default=64,
        metavar="N",
        help="requests in flight across all pins (default 64)",
    )
    p.add_argument(
        "--limit",
        type=_at_least_one,
        metavar="N",
        help="only the first N items of each cell (a smoke test; writes no results)",
    )
    p.add_argument(
        "--max-cost",
        type=_amount,
        metavar="USD",
        help="stop buying before the estimated spend would exceed USD",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="show what would run, why, and its estimated cost"
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="buy only shard I of N of the missing responses (a CI matrix job)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="re-grade fresh cells too (stored responses are never re-bought)",
    )
    p.add_argument(
        "--no-push",
        action="store_true",
        help="do not push new responses and records to the DVC remote",
    )
    p.add_argument(
        "--holdout",
        action="store_true",
        help="run the sealed hold-out cells (when deciding, not while tuning)",
    )
    pending = p.add_mutually_exclusive_group()
    pending.add_argument(
        "--strict",
        action="store_true",
        help="a cell left pending (its key unset, or never run under --offline) fails the "
        "run (exit 1); without it, only an online run fails for a cell whose key or "
        "credentials are unset, naming them",
    )
    pending.add_argument(
        "--allow-pending",
        action="store_true",
        help="a cell whose key or credentials are unset here stays pending without failing "
        "the run (exit 0), unless --task/--candidate name it: for a job that buys what its "
        "keys allow",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="buy missing responses through the batch APIs of OpenAI, Anthropic and the "
        "Gemini API (about half the price, within 24 hours); other providers, and Vertex AI "
        "pins, are bought live",
    )
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="with --batch: submit the batches and exit; a later `run --batch` collects them",
    )
    p.add_argument(
        "--batch-poll",
        type=_positive_seconds,
        default=15.0,
        metavar="S",
        help="seconds before the first poll of a batch (doubling up to 5 minutes; default 15)",
    )
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("reproduce", help="recompute a revision's results offline and compare")
    p.add_argument("rev", metavar="REV", nargs="?", help="a commit, branch or tag")
    p.add_argument(
        "--range",
        metavar="BASE..HEAD",
        help="every first-parent commit after BASE up to HEAD that recorded results, oldest "
        "first; a cell with the same evidence as at a revision already checked keeps its "
        "verdict (named) instead of being graded again",
    )
    p.set_defaults(handler=cmd_reproduce)

    p = sub.add_parser("report", help="write the governance report into reports/")
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser(
        "view", help="write an offline HTML explorer of each use case's items and outputs"
    )
    p.add_argument("use_case", nargs="*", help="use cases to explore (default: every one)")
    p.add_argument("--rev", help="read the results of this revision (default: the working tree)")
    p.add_argument(
        "--base", help="a second revision: filter the items whose outcome changed since it"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="write <use case>.html here (default: reports/explorer)",
    )
    p.add_argument(
        "--with-text",
        action="store_true",
        help="include item text and outputs even when privacy.snippets is off "
        "(then keep the file private)",
    )
    p.set_defaults(handler=cmd_view)

    p = sub.add_parser(
        "schema",
        help="write the JSON Schemas of the registry's files and their reference "
        "into registry/schemas/",
    )
    p.set_defaults(handler=cmd_schema)

    p = sub.add_parser(
        "resolve",
        help="after a git merge: regenerate results and reports offline, and stage them",
    )
    p.add_argument("--no-push", action="store_true", help="do not push to the DVC remote")
    p.set_defaults(handler=cmd_resolve)
    p = sub.add_parser("select", help="change a use case's declared candidate")
    p.add_argument("use_case", metavar="USE_CASE", help="the selection id")
    p.add_argument("candidate", metavar="CANDIDATE", help="the candidate to declare")
    p.add_argument("--reason", required=True, help="why: becomes the rationale")
    p.add_argument(
        "--approver",
        help="who approves a choice the policy does not recommend (records a waiver with --reason)",
    )
    p.set_defaults(handler=cmd_select)

    p = sub.add_parser("drift", help="re-ask live models a seeded sample of recorded requests")
    p.add_argument(
        "--sample",
        type=int,
        default=50,
        metavar="N",
        help="requests re-asked per cell (default 50; each one is paid for)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="sample seed (default 0)")
    p.add_argument(
        "--cell", action="append", metavar="ID", help="only this cell, TASK/CANDIDATE (repeatable)"
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        metavar="X",
        help="a cell drifts when more than this share of its levels differ (default 0.1)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--record",
        action="store_true",
        help="append each cell's result to reports/drift.jsonl (the report's drift section)",
    )
    p.set_defaults(handler=cmd_drift)

    p = sub.add_parser("diff", help="what changed between two revisions' results, per slice")
    p.add_argument("base", metavar="BASE", help="base revision (its merge-base with HEAD is used)")
    p.add_argument("head", metavar="HEAD", nargs="?", help="head revision (default: working tree)")
    p.add_argument(
        "--format",
        choices=("terminal", "md", "json", "comment"),
        help="terminal (the default on a terminal: tables that fit it), md (the default "
        "otherwise: the pull-request comment's Markdown), json (what `evalreg comment --diff` "
        "reads), or comment: the exact body `evalreg comment` would post",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--check",
        metavar="FILE",
        help="the output of `evalreg check --json` for HEAD, stated in the diff with its findings",
    )
    p.add_argument(
        "--reproduction",
        choices=REPRODUCTION_STATUSES,
        default="not_attempted",
        help="whether `evalreg reproduce` reproduced HEAD's results (default not_attempted: "
        "the numbers are shown as the pull request's own claims)",
    )
    p.add_argument(
        "--reproduction-reason",
        default="",
        metavar="TEXT",
        help="why, in a few words (e.g. 'a fork cannot read the DVC remote')",
    )
    p.set_defaults(handler=cmd_diff)

    p = sub.add_parser("comment", help="post the diff as one sticky pull-request comment")
    p.add_argument(
        "--diff",
        required=True,
        metavar="FILE",
        help="a JSON diff (evalreg diff --format json); the Markdown is rendered from it here",
    )
    p.add_argument(
        "--pr",
        type=int,
        metavar="N",
        help="pull request number (0: find it from --head-sha); default: from the event payload",
    )
    p.add_argument(
        "--head-sha",
        metavar="SHA",
        help="the commit the diff was made for; the "
        "comment is only posted while it is still the PR's head",
    )
    p.add_argument("--repository", metavar="OWNER/NAME", help="default: GITHUB_REPOSITORY")
    p.add_argument(
        "--bot-login",
        default="github-actions[bot]",
        metavar="LOGIN",
        help="the account that owns the sticky comment (default github-actions[bot])",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact comment body instead of posting it (no token, no network)",
    )
    p.set_defaults(handler=cmd_comment)

    p = sub.add_parser("audit", help="the audit record of a revision, from git history")
    p.add_argument("rev", metavar="REV", nargs="?", default="HEAD", help="default: HEAD")
    p.add_argument(
        "--html", metavar="DIR", help="also write a static site an auditor opens offline"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the Markdown to FILE")
    p.add_argument("--no-verify", action="store_true", help="skip the reproduce verdict")
    p.add_argument(
        "--github-token-env",
        default="GITHUB_TOKEN",
        metavar="NAME",
        help="environment variable holding a token to read PR reviews "
        "(default GITHUB_TOKEN; unset: approvals not checked)",
    )
    p.add_argument(
        "--repository", metavar="OWNER/NAME", help="GitHub repository (default: GITHUB_REPOSITORY)"
    )
    p.set_defaults(handler=cmd_audit)

    store = sub.add_parser("store", help="the response store")
    store_sub = store.add_subparsers(dest="store_command", metavar="COMMAND")
    p = store_sub.add_parser("compact", help="merge all store segments into one")
    p.add_argument("--no-push", action="store_true", help="do not push to the DVC remote")
    p.set_defaults(handler=cmd_store_compact)
    p = store_sub.add_parser(
        "purge",
        help="remove every stored record rendered from one item (its responses and the judge "
        "verdicts on them), and log the purge",
    )
    p.add_argument("item", metavar="ITEM", help="the item id")
    p.add_argument(
        "--reason", required=True, help="why (logged for auditors: no personal data here)"
    )
    p.add_argument(
        "--evalset",
        metavar="PATH",
        help="the eval set holding the item (repository path), when its id is in several",
    )
    p.add_argument(
        "--date", metavar="YYYY-MM-DD", help="when the purge was requested, recorded as given"
    )
    p.add_argument(
        "--no-push", action="store_true", help="do not push the new segment to the DVC remote"
    )
    p.set_defaults(handler=cmd_store_purge)

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
    return parser


RARE_COLLECTIONS = (100_000, 20, 20)
"""The collector's thresholds while a command runs. A command builds many long-lived
objects (modules, pydantic schemas, the registry) and few cycles: collecting every 700
allocations re-walks them for nothing (a tenth of `evalreg check`). Its start-up alone
leaves 60,000 to 90,000 (a 5,000-item run at its first request, `evalreg check` on the
example registry at its end): the first collection comes after it, not in the middle of
it, walking all of them to free nothing (5 % of `evalreg check`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command as a library call: the collector's thresholds are restored after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(*RARE_COLLECTIONS)
    try:
        return _command(argv)
    finally:
        gc.set_threshold(*thresholds)


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    from evalreg.runner.interrupts import unwinding

    try:
        # SIGTERM and SIGHUP (a cancelled CI job, a stopped container, a closed terminal)
        # unwind like Ctrl-C: whatever a command holds is released on the way out.
        with unwinding():
            return handler(args)
    except EvalregError as exc:
        _print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        import signal

        from evalreg.runner.interrupts import received

        signum = received()
        sys.stderr.write(f"interrupted ({signal.Signals(signum).name})\n")
        return 128 + signum
    except OSError as exc:
        # The disk is full, a directory is read-only, a file size limit was hit.
        where = f" {exc.filename}:" if exc.filename else ""
        sys.stderr.write(
            f"evalreg: error:{where} {exc.strerror or exc}. What was written before this is "
            "kept: fix it and run the command again\n"
        )
        return 2


def entry() -> NoReturn:
    """The program: one command, then exit without a full collection of what it built.

    Everything a command built lives until the process ends. Restoring the default
    thresholds, as ``main`` does for a library caller, would make the next allocation
    collect every generation (a tenth of a second after a 5,000-item run), and the
    collection Python runs while shutting down walks all of it again: both free nothing
    the exit would not. So the thresholds stay raised, and frozen objects are outside the
    collector's sight.

    NumPy's OpenBLAS starts a thread per core as it loads, and each spins about a tenth
    of a second of CPU before it sleeps: evalreg multiplies no matrices, so the program
    asks for one thread (unless the environment already chose), before anything imports
    NumPy. On two cores that spin took the core a run's DVC child or a loopback server
    needs, and a fifth of ``evalreg check``'s CPU.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.set_threshold(*RARE_COLLECTIONS)
    code = _command(None)
    gc.freeze()
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End the process as ``sys.exit`` would, less the teardown of every module.

    Python's finalisation clears each module and frees what it held one object at a time:
    50 ms after a run, a fifth of ``evalreg check``, and it writes nothing. What the exit
    must still do is done here: waiting for threads (there are none once a command has
    returned, else the ordinary exit is taken), the ``atexit`` handlers (temporary
    directories, multiprocessing's children, logging), and flushing stdout and stderr,
    with the status Python gives when stdout cannot be flushed (a closed pipe). Under a
    profiler or a tracer (``python -m cProfile``, coverage), which write what they found
    once the program returns, the ordinary exit is taken too.
    """
    import threading

    if threading.active_count() > 1 or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout and code == 0:
                code = 120
    os._exit(code)


def _print_error(exc: EvalregError) -> None:
    from evalreg.errors import RegistryError
    from evalreg.report.terminal import plain

    # Findings quote item text; other errors may quote a provider or GitHub.
    if isinstance(exc, RegistryError):
        for finding in exc.findings:
            sys.stderr.write(plain(finding.render()) + "\n")
    else:
        sys.stderr.write(plain(f"evalreg: error: {exc}") + "\n")


if __name__ == "__main__":
    entry()
