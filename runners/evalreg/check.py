"""``evalreg check``: validate a registry and summarise it, as data for a renderer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalreg import dvcrepo
from evalreg.audit.introduced import Introduced, introduced
from evalreg.dvcrepo import missing_on_remote, pointer_md5, remote_description
from evalreg.errors import BodyError, DataMissingError, PromptError
from evalreg.registry import schema
from evalreg.registry.diagnostics import Finding, Severity
from evalreg.registry.loader import MAX_TEMPLATE_FINDINGS, Registry, inspect_registry
from evalreg.registry.tree import Tree, WorkspaceTree
from evalreg.registry.yamlio import Loc
from evalreg.store.lock import Holder

if TYPE_CHECKING:
    from evalreg.cells import Cell


@dataclass(frozen=True)
class SelectionRow:
    selection: str
    use_case: str
    task: str
    evalset: str
    items: int
    slices: dict[str, int]
    candidates: int
    selected: str


@dataclass(frozen=True)
class RemoteObjects:
    """The DVC objects that pointers under ``evalsets/`` and ``reports/`` name, looked up on
    the default remote: a merge whose objects are not there leaves main unreproducible."""

    remote: str
    checked: int
    missing: list[tuple[str, str]]
    """(pointer, md5) of each object the remote lacks."""
    error: str | None = None
    """Why the remote could not be read (then nothing is known about ``missing``)."""
    introduced: dict[str, Introduced] = field(default_factory=dict)
    """By pointer in ``missing``: the first-parent commit (and pull request) that brought
    that version of it in."""
    in_repo: dict[str, str] = field(default_factory=dict)
    """With a remote inside the repository: where it keeps each missing md5 (relative to
    the root). Such a remote reaches a clone through git, so a missing object is one that
    was never committed."""

    def as_dict(self) -> dict[str, object]:
        return {
            "remote": self.remote,
            "checked": self.checked,
            "missing": [
                {
                    "path": p,
                    "md5": m,
                    **(
                        {"introduced": self.introduced[p].as_dict()} if p in self.introduced else {}
                    ),
                }
                for p, m in self.missing
            ],
            "error": self.error,
        }


@dataclass
class CheckResult:
    """What ``check`` found: findings, counts and one row per use case."""

    findings: list[Finding]
    counts: dict[str, int] = field(default_factory=dict)
    use_cases: list[SelectionRow] = field(default_factory=list)
    remote: RemoteObjects | None = None
    """Whether the DVC objects the results and eval sets use are on the remote (``--remote``)."""
    run_in_progress: Holder | None = None
    """The run writing to the repository while it was checked: the files it writes are
    its own, not findings (``journal.live_run``)."""

    def notes(self) -> list[str]:
        """What the reader should know beside the findings."""
        if self.run_in_progress is None:
            return []
        from evalreg.store.journal import in_progress

        return [f"{in_progress(self.run_in_progress)}; the files it is writing were not checked"]

    def exit_code(self, *, strict: bool = False) -> int:
        severities = {f.severity for f in self.findings}
        if Severity.ERROR in severities:
            return 2
        if Severity.FINDING in severities or (strict and Severity.WARNING in severities):
            return 1
        return 0

    def as_dict(self, *, strict: bool = False) -> dict[str, object]:
        return {
            "ok": self.exit_code(strict=strict) == 0,
            "exit_code": self.exit_code(strict=strict),
            "findings": [f.as_dict() for f in self.findings],
            "counts": self.counts,
            "use_cases": [row.__dict__ for row in self.use_cases],
            **({"remote": self.remote.as_dict()} if self.remote is not None else {}),
            **(
                {"run_in_progress": self.run_in_progress.__dict__}
                if self.run_in_progress is not None
                else {}
            ),
        }


def check(
    root: str | Path | Tree = ".", *, remote: bool = False, base: str | None = None
) -> CheckResult:
    """Load the registry at ``root`` and run every check that needs no results; with
    ``remote``, also ask the default DVC remote for every object the pointers name.

    With ``base`` (a pull request's base branch), a change of the default remote since the
    merge-base must come alone, and with ``remote`` the new remote must hold every object
    ``base``'s pointers name (``compare.remote``)."""
    running = None
    if isinstance(root, str | Path):
        from evalreg.store.journal import live_run

        live = live_run(Path(root))
        running = live.holder if live is not None else None
        merged = _merge_findings(Path(root))
        if merged:  # the files it would check are half one branch's, half the other's
            return CheckResult(merged, run_in_progress=running)
    registry, findings = inspect_registry(root, allow_missing_data=True)
    if registry.missing_data and not any(f.severity is Severity.ERROR for f in findings):
        findings.append(
            Finding(
                registry.missing_data[0],
                0,
                0,
                "results, waivers and the report were not checked: eval data is not available "
                "here (`dvc pull`)",
                Severity.WARNING,
            )
        )
    elif not findings:
        # With errors, "unused" is often only a consequence of a file that failed to load.
        findings = (
            _prompt_findings(registry) + _body_findings(registry) + _expected_findings(registry)
        )
        if not findings:
            findings = (
                _warnings(registry)
                + _data_findings(registry)
                + _result_findings(registry)
                + _workspace_findings(registry)
                + _in_repo_object_findings(registry)
                + _raw_output_in_git(registry)
            )
    moved = _moved_remote_findings(root, base, lookup=remote) if base is not None else []
    objects = _remote_objects(registry) if remote else None
    if objects is not None:
        # A pointer the move's findings name is not named twice.
        named = {f.path for f in moved}
        findings = findings + [f for f in _remote_findings(objects) if f.path not in named]
    findings = findings + moved
    return CheckResult(
        sorted(set(findings)),
        _counts(registry),
        _use_cases(registry),
        remote=objects,
        run_in_progress=running,
    )


POINTER_DIRS = ("evalsets", "reports")


def _moved_remote_findings(root: str | Path | Tree, base: str, *, lookup: bool) -> list[Finding]:
    """What a move of the default remote since ``base`` needs: to come alone, and (with
    ``lookup``) a new remote that holds ``base``'s objects."""
    from evalreg.compare.remote import DVC_CONFIG, ConfigUnreadable, move_findings, remote_move

    if not isinstance(root, str | Path):
        return []
    try:
        move = remote_move(Path(root), base)
    except ConfigUnreadable as exc:
        return [Finding(DVC_CONFIG, exc.line, 0, f"cannot be read: {exc}", Severity.ERROR)]
    if move is None:
        return []
    return move_findings(Path(root), move, dirs=POINTER_DIRS, lookup=lookup)


def _remote_objects(registry: Registry) -> RemoteObjects | None:
    """Look up on the default remote the object of every pointer under ``POINTER_DIRS``."""

    tree = registry.tree
    if not isinstance(tree, WorkspaceTree):
        return None
    root = tree.root
    pointers = _pointers(root)
    where = remote_description(root)
    try:
        missing = set(missing_on_remote(root, sorted(set(pointers.values()))))
    except DataMissingError as exc:
        return RemoteObjects(where, len(pointers), [], error=str(exc))
    in_repo = {m: p for m in missing if (p := dvcrepo.remote_object(root, m)) is not None}
    lacking = [(p, m) for p, m in sorted(pointers.items()) if m in missing]
    return RemoteObjects(
        where,
        len(pointers),
        lacking,
        introduced=introduced(root, [p for p, _ in lacking]),
        in_repo=in_repo,
    )


def _pointers(root: Path) -> dict[str, str]:
    """The md5 each DVC pointer under ``POINTER_DIRS`` names, by the pointer's path."""
    pointers: dict[str, str] = {}
    for top in POINTER_DIRS:
        for path in sorted((root / top).rglob("*.dvc")):
            md5 = pointer_md5(path.read_bytes()) if path.is_file() else None
            if md5 is not None:
                pointers[path.relative_to(root).as_posix()] = md5
    return pointers


def _remote_findings(objects: RemoteObjects) -> list[Finding]:
    if objects.error is not None:
        return [
            Finding(
                ".dvc/config",
                0,
                0,
                f"cannot tell whether the DVC objects of the results and eval sets are on the "
                f"remote: {objects.error}",
                Severity.FINDING,
            )
        ]
    return [
        Finding(path, 0, 0, _missing_object(objects, path, md5), Severity.FINDING)
        for path, md5 in objects.missing
    ]


def _missing_object(objects: RemoteObjects, path: str, md5: str) -> str:
    """Why a pointer's object is missing from the remote, and the fix."""
    where = objects.in_repo.get(md5)
    brought = objects.introduced.get(path)
    came = f"; {brought.describe()} brought it in" if brought is not None else ""
    if where is None:
        return (
            f"its DVC object (md5 {md5}) is not on the {objects.remote}{came}: main cannot "
            "reproduce it. Run `evalreg run` (and `dvc push`) where it was produced; once "
            "merged, `evalreg run` on main buys its responses again"
        )
    return (
        f"its DVC object (md5 {md5}) is not in the {objects.remote}, a folder of the "
        f"repository that clones receive through git: {where} was never committed{came}. "
        f"Where it was produced, `git add {where}` (after `dvc push`, if it was never "
        "pushed) and commit; `evalreg check` there names every such object"
        + (
            ". A pull request merged without it: `evalreg run` on main buys its responses again"
            if brought is not None and brought.pr is not None
            else ""
        )
    )


def _in_repo_object_findings(registry: Registry) -> list[Finding]:
    """Objects of an in-repository remote that pointers name and git does not track: a
    clone gets the pointer and not the object, so its ``dvc pull`` fails."""
    from evalreg.store.journal import live_run

    tree = registry.tree
    if not isinstance(tree, WorkspaceTree) or dvcrepo.in_repo_remote(tree.root) is None:
        return []
    root = tree.root
    live = live_run(root)
    pointers = {
        p: m
        for p, m in _pointers(root).items()
        if live is None or p.removesuffix(".dvc") not in live.files  # staged when it ends
    }
    out = []
    for obj in dvcrepo.untracked_objects(root, pointers.values()):
        if obj.ignored_by is None:
            fix = f"`git add {obj.path}` and commit it"
        else:
            fix = f"git ignores it ({obj.ignored_by}): remove that rule, then `git add {obj.path}`"
        out += [
            Finding(
                pointer,
                0,
                0,
                f"its DVC object {obj.path}, in the repository's DVC remote, is not tracked by "
                f"git, so a clone's `dvc pull` cannot find it: {fix}",
                Severity.FINDING,
            )
            for pointer, md5 in pointers.items()
            if md5 == obj.md5
        ]
    return out


def _merge_findings(root: Path) -> list[Finding]:
    """Generated files a ``git merge`` left conflicted, with the command that fixes them."""
    from evalreg.gitops.merging import RESOLVE_HINT, conflicts

    return [
        Finding(
            rel,
            0,
            0,
            f"generated file left conflicted by a merge: {RESOLVE_HINT}",
            Severity.FINDING,
        )
        for rel in conflicts(root.resolve())
    ]


def _counts(registry: Registry) -> dict[str, int]:
    return {
        "model pins": len(registry.pins),
        "tasks": len(registry.tasks),
        "rubrics": len(registry.rubrics),
        "selections": len(registry.selections),
        "eval sets": len(registry.evalsets),
        "eval items": sum(len(e.items) for e in registry.evalsets.values()),
    }


def _use_cases(registry: Registry) -> list[SelectionRow]:
    rows = []
    for ident, sel in sorted(registry.selections.items()):
        task = registry.tasks.get(sel.task)
        evalset = (
            registry.evalset_of(sel.task)
            if task is not None and _has_evalset(registry, sel.task)
            else None
        )
        rows.append(
            SelectionRow(
                selection=ident,
                use_case=sel.use_case,
                task=sel.task,
                evalset=evalset.path if evalset else "-",
                items=len(evalset.items) if evalset else 0,
                slices=dict(sorted(evalset.slices.items())) if evalset else {},
                candidates=len(sel.candidates),
                selected=sel.selected,
            )
        )
    return rows


def _has_evalset(registry: Registry, task_id: str) -> bool:
    try:
        registry.evalset_of(task_id)
    except (KeyError, ValueError):
        return False
    return True


def _warnings(registry: Registry) -> list[Finding]:
    used_pins = {c.pin for s in registry.selections.values() for c in s.candidates}
    used_pins |= {
        pin
        for r in registry.rubrics.values()
        for c in r.criteria
        if (pin := schema.grading_pin(c.grader)) is not None
    }
    used_tasks = {s.task for s in registry.selections.values()}
    used_rubrics = {t.rubric for t in registry.tasks.values()}
    out = []
    for kind, ids, used in (
        ("models", registry.pins, used_pins),
        ("tasks", registry.tasks, used_tasks),
        ("rubrics", registry.rubrics, used_rubrics),
    ):
        for ident in sorted(set(ids) - used):
            out.append(
                Finding(
                    registry.file_of(kind, ident),
                    0,
                    0,
                    f"{ident!r} is not used by any selection",
                    Severity.WARNING,
                )
            )
    for sid, selection in sorted(registry.selections.items()):
        for candidate in selection.candidates:
            pinned = registry.pins.get(candidate.pin)
            if pinned is not None and pinned.retired is not None:
                out.append(
                    Finding(
                        registry.file_of("selections", sid),
                        0,
                        0,
                        f"candidate {candidate.id!r} uses the retired pin {candidate.pin!r} "
                        f"({pinned.retired}): its cells can no longer be bought; replace it",
                        Severity.WARNING,
                    )
                )
    for ident, model in sorted(registry.pins.items()):
        if model.price is not None and model.price.review is not None:
            doc = registry.documents[("models", ident)]
            line, col = doc.locate(("price", "review"), key=True)
            out.append(
                Finding(
                    doc.path,
                    line,
                    col,
                    f"the prices of {ident!r} are to be confirmed ({model.price.review}): "
                    "check them against the provider's price sheet, then remove price.review",
                    Severity.WARNING,
                )
            )
    return out


def _prompt_findings(registry: Registry) -> list[Finding]:
    """Every item's prompt, rendered as ``run`` renders it: a template that fails for some
    item (a field it lacks, a bound it exceeds) is found here, not halfway into a run."""
    from evalreg.cells import cells
    from evalreg.prompting import effective_prompt, render_messages

    out = []
    seen = set()
    for cell in cells(registry) + cells(registry, "holdout"):
        variant = cell.candidate.prompt
        evalset = registry.evalset_of(cell.task_id, cell.split)
        prompt = effective_prompt(cell.task, variant)
        if (prompt, evalset.path) in seen:
            continue
        seen.add((prompt, evalset.path))
        failed = 0
        for index, item in enumerate(evalset.items):
            try:
                render_messages(cell.task, variant, item, cell=cell.id)
            except PromptError as exc:
                failed += 1
                if failed <= MAX_TEMPLATE_FINDINGS or exc.over_budget:
                    out.append(
                        Finding(
                            evalset.path,
                            evalset.lines[item.id],
                            0,
                            f"item {item.id!r}: the {exc.what} of "
                            f"{_prompt_source(registry, cell, exc.part)} cannot be rendered for "
                            f"it: {exc.problem}",
                        )
                    )
                if exc.over_budget:
                    # As `run` does: the bound is the template's, and every further item
                    # would pay it again before failing.
                    left = len(evalset.items) - index - 1
                    if left:
                        out.append(
                            Finding(
                                evalset.path,
                                0,
                                0,
                                f"{left} more items not rendered for {cell.id}: its template "
                                "exceeded a bound on what rendering may cost",
                            )
                        )
                    break
        if failed > MAX_TEMPLATE_FINDINGS:
            out.append(
                Finding(
                    evalset.path,
                    0,
                    0,
                    f"{failed - MAX_TEMPLATE_FINDINGS} more items whose prompt for {cell.id} "
                    "cannot be rendered",
                )
            )
    return out


def _body_findings(registry: Registry) -> list[Finding]:
    """Every item's request body for each ``http`` pin, rendered as ``run`` renders it: a
    template that fails for some item (a field it lacks) is found here, as prompts are."""
    from evalreg.cells import cells
    from evalreg.prompting import render_messages
    from evalreg.providers import get_provider
    from evalreg.providers.tools import toolset

    out = []
    seen = set()
    for cell in cells(registry) + cells(registry, "holdout"):
        if cell.pin.provider != "http":
            continue
        evalset = registry.evalset_of(cell.task_id, cell.split)
        if (cell.id, evalset.path) in seen:
            continue
        seen.add((cell.id, evalset.path))
        provider = get_provider("http")
        pin_file = registry.file_of("models", cell.candidate.pin)
        tools = toolset(cell.task)
        if tools is not None:
            out.append(
                Finding(
                    registry.file_of("tasks", cell.task_id),
                    0,
                    0,
                    f"{cell.id}: an 'http' pin ({pin_file}) cannot run a task with tools: its "
                    "answers carry no tool calls evalreg can read",
                )
            )
            continue
        failed = 0
        for item in evalset.items:
            try:
                messages = render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
                provider.body(cell.pin, messages, item.input)
            except PromptError:
                continue  # the prompt's finding says why
            except BodyError as exc:
                failed += 1
                if failed <= MAX_TEMPLATE_FINDINGS:
                    out.append(
                        Finding(
                            evalset.path,
                            evalset.lines[item.id],
                            0,
                            f"item {item.id!r}: the request body of {pin_file} cannot be "
                            f"rendered for it ({cell.id}): {exc}",
                        )
                    )
        if failed > MAX_TEMPLATE_FINDINGS:
            out.append(
                Finding(
                    evalset.path,
                    0,
                    0,
                    f"{failed - MAX_TEMPLATE_FINDINGS} more items whose request body for "
                    f"{cell.id} cannot be rendered",
                )
            )
    return out


def _expected_findings(registry: Registry) -> list[Finding]:
    """Items lacking the ``expected`` value a criterion of their task's rubric compares
    with: graded, each would fail for want of an answer, not for a wrong output."""
    from evalreg.graders.base import expected_needs, lacks
    from evalreg.graders.levels import applies

    out = []
    seen = set()
    for task_id, task in sorted(registry.tasks.items()):
        rubric = registry.rubrics.get(task.rubric)
        if rubric is None:
            continue
        doc = registry.documents[("rubrics", task.rubric)]
        for split in ("dev", "holdout") if task.holdout is not None else ("dev",):
            evalset = registry.evalset_of(task_id, split)
            if (task.rubric, evalset.path) in seen:
                continue
            seen.add((task.rubric, evalset.path))
            for index, criterion in enumerate(rubric.criteria):
                needs = expected_needs(criterion.grader)
                if needs is None:
                    continue
                what = "expected value" if needs.key is None else f"expected {needs.key!r}"
                where = f"{doc.path}:{doc.locate(('criteria', index, 'grader'))[0]}"
                lacking = [
                    item
                    for item in evalset.items
                    if applies(criterion, item.tags) and lacks(item, needs)
                ]
                for item in lacking[:MAX_TEMPLATE_FINDINGS]:
                    out.append(
                        Finding(
                            evalset.path,
                            evalset.lines[item.id],
                            0,
                            f"item {item.id!r} has no {what}, which criterion "
                            f"{criterion.id!r} of rubric {task.rubric} ({where}) compares with: "
                            "it would fail whatever the model answers",
                        )
                    )
                if len(lacking) > MAX_TEMPLATE_FINDINGS:
                    out.append(
                        Finding(
                            evalset.path,
                            0,
                            0,
                            f"{len(lacking) - MAX_TEMPLATE_FINDINGS} more items with no {what} "
                            f"for criterion {criterion.id!r} ({where})",
                        )
                    )
    return out


def _prompt_source(registry: Registry, cell: Cell, part: str) -> str:
    """``path:line`` of the prompt part ``cell`` renders: its candidate's variant, if that
    sets the part, else the task's."""
    variant = cell.candidate.prompt
    if variant is not None and getattr(variant, part) is not None:
        candidates = registry.selections[cell.selection].candidates
        doc = registry.documents[("selections", cell.selection)]
        loc: Loc = ("candidates", candidates.index(cell.candidate), "prompt", part)
    else:
        doc = registry.documents[("tasks", cell.task_id)]
        loc = ("prompt", part)
    return f"{doc.path}:{doc.locate(loc)[0]}"


def _data_findings(registry: Registry) -> list[Finding]:
    """Eval sets should be tracked by DVC (the loader checks that a tracked one is the
    version its pointer records)."""
    return [
        Finding(
            path,
            0,
            0,
            f"not tracked by DVC: run `evalreg evalset add {path}`",
            Severity.WARNING,
        )
        for path in sorted(registry.evalsets)
        if not registry.tree.is_file(path + ".dvc")
    ]


def _result_findings(registry: Registry) -> list[Finding]:
    """Stale and pending cells, missing waivers, and a stale governance report."""
    from evalreg.report.writer import INDEX, input_digest, recorded_digest
    from evalreg.results.freshness import status
    from evalreg.selection.evidence import gather

    out = []
    statuses = status(registry)
    for st in statuses:
        doc = registry.documents[("selections", st.cell.selection)]
        if st.state == "pending":
            out.append(
                Finding(
                    doc.path, 0, 0, f"cell {st.cell.id} is pending (never run)", Severity.WARNING
                )
            )
        elif st.state == "stale":
            out.append(
                Finding(
                    st.cell.summary_path,
                    0,
                    0,
                    f"results of {st.cell.id} are stale ({'; '.join(st.reasons)}): "
                    "run `evalreg run`",
                    Severity.FINDING,
                )
            )
    for sid in sorted(registry.selections):
        decision = gather(registry, sid, statuses, comparisons=False).decision
        has_evidence = any(not a.pending for a in decision.assessments.values())
        if decision.needs_waiver and has_evidence:
            doc = registry.documents[("selections", sid)]
            line, col = doc.locate(("selected",))
            recommended = repr(decision.recommended) if decision.recommended else "no candidate"
            declared = decision.assessments.get(decision.declared)
            fails = "".join(
                f"; it fails gate {g.index} ({g.describe()}): {g.why()}"
                for g in (declared.gates if declared else ())
                if not g.passed
            )
            keep = (
                f"`evalreg select {sid} {decision.declared} --reason '…' --approver '…'` "
                "records a waiver for it"
            )
            switch = (
                f"; `evalreg select {sid} {decision.recommended} --reason '…'` declares the "
                "recommended one"
                if decision.recommended
                else ""
            )
            out.append(
                Finding(
                    doc.path,
                    line,
                    col,
                    f"declared candidate {decision.declared!r} is not what the policy recommends "
                    f"({recommended}){fails}: add a waiver for it (candidate, reason, approver, "
                    f"date) or change the declared candidate: {keep}{switch}",
                    Severity.FINDING,
                )
            )
    recorded = recorded_digest(registry)
    if recorded is None:
        out.append(
            Finding(INDEX, 0, 0, "no governance report: run `evalreg report`", Severity.WARNING)
        )
    elif recorded != input_digest(registry):
        out.append(
            Finding(
                INDEX,
                1,
                1,
                "the governance report is out of date: run `evalreg report` and commit reports/",
                Severity.FINDING,
            )
        )
    return out


def _workspace_findings(registry: Registry) -> list[Finding]:
    """Run output in the working tree that DVC does not track or that is not the version
    its pointer names, and pushes still owed."""
    from evalreg.cells import RESULTS_DIR
    from evalreg.ignores import missing_patterns
    from evalreg.store.hashes import altered, file_md5s
    from evalreg.store.journal import live_run, unpushed
    from evalreg.store.segments import SEGMENT_SUFFIX, STORE_DIR

    tree = registry.tree
    if not isinstance(tree, WorkspaceTree):
        return []
    root = tree.root
    out = []
    data = [*(root / STORE_DIR).glob(f"*{SEGMENT_SUFFIX}"), *(root / RESULTS_DIR).glob("*/*.jsonl")]
    # Asked after listing: a run's journal names each of its files before it exists.
    live = live_run(root)
    tracked: list[str] = []
    untracked: list[str] = []
    for path in sorted(data):
        rel = path.relative_to(root).as_posix()
        if live is not None and rel in live.files:
            continue  # a live run's own, tracked when it ends
        (tracked if path.with_name(path.name + ".dvc").is_file() else untracked).append(rel)
    # A file gone since it was listed (a run removes an empty segment of its own) has no md5.
    held = file_md5s(root, untracked)
    for rel in untracked:
        if rel not in held or _tracked_elsewhere(root, held[rel]):
            continue
        out.append(
            Finding(
                rel,
                0,
                0,
                "not tracked by DVC, here or on any branch, so it may be the only copy of "
                f"what it holds: `dvc add {rel}` and commit its pointer (never commit the "
                "file itself to git)",
                Severity.FINDING,
            )
        )
    out += [Finding(a.path, 0, 0, a.describe(), Severity.ERROR) for a in altered(root, tracked)]
    if (root / ".dvc").is_dir():
        missing = missing_patterns(root)
        if missing:
            out.append(
                Finding(
                    ".gitignore",
                    0,
                    0,
                    "raw run output is not ignored by pattern, so `git add -A` can commit a "
                    "store segment or records file before DVC tracks it: add these lines: "
                    + "  ".join(missing),
                    Severity.WARNING,
                )
            )
    owed = unpushed(root)
    if owed:
        out.append(
            Finding(
                owed[0],
                0,
                0,
                f"{len(owed)} files a run tracked are not on the DVC remote yet (the push "
                "failed or was interrupted): `evalreg run` retries it, or `dvc push`",
                Severity.WARNING,
            )
        )
    return out


def _tracked_elsewhere(root: Path, md5: str) -> bool:
    """Whether DVC's cache holds a file's content (``md5``): another branch or revision
    tracks it (its pointer stayed there; the ignored file stays in the working tree)."""
    return dvcrepo.cached_file(root, md5) is not None


def _raw_output_in_git(registry: Registry) -> list[Finding]:
    """Store segments and per-item records committed to git instead of DVC: in the index
    of a working tree, or in the tree of a revision."""
    from evalreg.cells import RESULTS_DIR
    from evalreg.store.segments import SEGMENT_SUFFIX, STORE_DIR

    tree = registry.tree
    if isinstance(tree, WorkspaceTree):
        import subprocess

        done = subprocess.run(
            [
                "git",
                "ls-files",
                "-z",
                "--",
                f"{STORE_DIR}/*{SEGMENT_SUFFIX}",
                f"{RESULTS_DIR}/*.jsonl",
            ],
            cwd=tree.root,
            capture_output=True,
        )
        listed = done.stdout.decode("utf-8", "replace").split("\0") if done.returncode == 0 else []
        in_git = [
            p
            for p in listed
            if (p.startswith(f"{STORE_DIR}/") and p.count("/") == 2 and p.endswith(SEGMENT_SUFFIX))
            or (p.startswith(f"{RESULTS_DIR}/") and p.endswith(".items.jsonl"))
        ]
    else:
        in_git = [
            f"{STORE_DIR}/{n}" for n in tree.list_dir(STORE_DIR) if n.endswith(SEGMENT_SUFFIX)
        ]
        for task in sorted(registry.tasks):
            folder = f"{RESULTS_DIR}/{task}"
            in_git += [f"{folder}/{n}" for n in tree.list_dir(folder) if n.endswith(".items.jsonl")]
    return [
        Finding(
            rel,
            0,
            0,
            "raw run output is committed to git, where DVC must track it (it holds model "
            f"responses and grows with every run): `git rm --cached {rel}`, then `dvc add {rel}` "
            "and commit the pointer",
            Severity.FINDING,
        )
        for rel in sorted(set(in_git))
    ]
