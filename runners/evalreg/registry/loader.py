"""Load a whole registry from a ``Tree``, reporting every problem in one pass.

Loading is pure reading: it never writes, never imports user code and never calls a
model. Files that fail to parse are remembered so a reference to them is not also
reported as dangling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from evalreg import redaction
from evalreg.errors import DataMissingError, RegistryError
from evalreg.evalsets.evalset import EvalSet, evalset_data, parse_evalset
from evalreg.prompting import ATTACHMENT_CALL, PARTS
from evalreg.registry import schema
from evalreg.registry.diagnostics import Finding, Severity
from evalreg.registry.migrations import upgrade
from evalreg.registry.rates import refusal as sequential_refusal
from evalreg.registry.tree import PathEscapes, Tree, WorkspaceTree, clean_relpath, pointer_md5_of
from evalreg.registry.validation import validate
from evalreg.registry.yamlio import Document, Loc, parse_yaml
from evalreg.templating import TemplateProblem, variables

REGISTRY_DIR = "registry"
YAML_SUFFIXES = (".yaml", ".yml")
MAX_TEMPLATE_FINDINGS = 5
_ID = re.compile(schema.ID_PATTERN)

M = TypeVar("M", bound=BaseModel)


@dataclass
class Registry:
    """Every registry file of one version of a repository, parsed and cross-checked."""

    tree: Tree
    pins: dict[str, schema.Pin] = field(default_factory=dict)
    tasks: dict[str, schema.Task] = field(default_factory=dict)
    rubrics: dict[str, schema.Rubric] = field(default_factory=dict)
    selections: dict[str, schema.Selection] = field(default_factory=dict)
    evalsets: dict[str, EvalSet] = field(default_factory=dict)
    settings: schema.Settings = field(
        default_factory=lambda: schema.Settings(schema_version=schema.SCHEMA_VERSION)
    )
    """``registry/evalreg.yaml``, or the defaults when the registry has none."""
    missing_data: list[str] = field(default_factory=list)
    """DVC-tracked files that could not be read here (only when that is allowed)."""
    documents: dict[tuple[str, str], Document] = field(default_factory=dict)
    """(kind, id) -> the parsed document, for positions in later findings."""

    def file_of(self, kind: str, ident: str) -> str:
        return self.documents[(kind, ident)].path

    def evalset_of(self, task_id: str, split: str = "dev") -> EvalSet:
        """The task's eval set, or its sealed hold-out set when ``split`` is "holdout"."""
        task = self.tasks[task_id]
        path = task.holdout if split == "holdout" else task.evalset
        if path is None:
            raise KeyError(f"task {task_id} has no hold-out set")
        return self.evalsets[clean_relpath(path)]


def load_registry(root: str | Path | Tree = ".") -> Registry:
    """Load and cross-check a registry; raise ``RegistryError`` listing every problem."""
    registry, findings = inspect_registry(root)
    if findings:
        raise RegistryError(findings)
    return registry


def inspect_registry(
    root: str | Path | Tree = ".", *, allow_missing_data: bool = False
) -> tuple[Registry, list[Finding]]:
    """Load what can be loaded and return it with every finding (errors first by file).

    With ``allow_missing_data``, DVC data that cannot be fetched here (a fork's pull request
    cannot read the team's remote) is a warning, and what depends on it is not checked.
    """
    tree = WorkspaceTree(root) if isinstance(root, (str, Path)) else root
    loader = _Loader(tree, allow_missing_data)
    loader.run()
    # What the pins' variables hold is redacted from everything this process writes.
    redaction.watch(n for pin in loader.registry.pins.values() for n in redaction.env_names(pin))
    return loader.registry, sorted(set(loader.findings))


class _Loader:
    def __init__(self, tree: Tree, allow_missing_data: bool = False) -> None:
        self.tree = tree
        self.allow_missing_data = allow_missing_data
        self.registry = Registry(tree)
        self.findings: list[Finding] = []
        self.broken: set[tuple[str, str]] = set()
        self.attachment_data: dict[str, bytes] = {}
        """Each eval set's bytes, to place findings about its attachments."""

    # ------------------------------------------------------------ files
    def run(self) -> None:
        for kind, model in schema.KINDS.items():
            self._load_kind(kind, model)
        self._load_settings()
        self._check_pins()
        self._check_rubrics()
        self._check_tasks()
        self._check_selections()

    def _load_kind(self, kind: str, model: type[schema.VersionedFile]) -> None:
        directory = f"{REGISTRY_DIR}/{kind}"
        seen: dict[str, str] = {}
        try:
            names = self.tree.list_dir(directory)
        except PathEscapes as exc:
            self.findings.append(
                Finding(
                    directory, 0, 0, f"not read: {exc}; the registry must be inside the repository"
                )
            )
            return
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if not dot or f".{suffix}" not in YAML_SUFFIXES:
                continue
            path = f"{directory}/{name}"
            if not _ID.match(stem):
                self.findings.append(
                    Finding(
                        path,
                        0,
                        0,
                        f"file name {stem!r} is not a valid id: use letters, "
                        "digits, '.', '_' and '-', starting with a letter or digit",
                    )
                )
                continue
            if stem in seen:
                self.findings.append(
                    Finding(path, 0, 0, f"id {stem!r} is also defined by {seen[stem]}")
                )
                continue
            seen[stem] = path
            self._load_file(kind, stem, path, model)

    def _load_settings(self) -> None:
        # Optional: a registry without one gets the defaults. Listed rather than probed, so
        # a symbolic link out of the repository is reported by _load_file, not ignored.
        directory, _, name = schema.SETTINGS_FILE.rpartition("/")
        try:
            present = name in self.tree.list_dir(directory)
        except PathEscapes:
            return  # the registry directory itself: _load_kind has reported it
        if present:
            self._load_file("settings", "evalreg", schema.SETTINGS_FILE, schema.Settings)

    def _load_file(self, kind: str, ident: str, path: str, model: type[M]) -> None:
        try:
            doc = parse_yaml(self.tree.read(path), path)
        except RegistryError as exc:
            self.findings.extend(exc.findings)
            self.broken.add((kind, ident))
            return
        except PathEscapes as exc:
            self.findings.append(
                Finding(
                    path,
                    0,
                    0,
                    f"not read: {exc}; a registry file must be a regular file in the repository",
                )
            )
            self.broken.add((kind, ident))
            return
        data, problems = upgrade(kind, doc)
        obj = None
        if data is not None:
            obj, problems = validate(doc, model, data)
        if obj is None:
            self.findings.extend(problems)
            self.broken.add((kind, ident))
            return
        self.registry.documents[(kind, ident)] = doc
        if isinstance(obj, schema.Settings):
            self.registry.settings = obj
        else:
            getattr(self.registry, _ATTR[kind])[ident] = obj

    # ------------------------------------------------------------ helpers
    def _doc(self, kind: str, ident: str) -> Document:
        return self.registry.documents[(kind, ident)]

    def _error(self, kind: str, ident: str, loc: Loc, message: str) -> None:
        self.findings.append(self._doc(kind, ident).finding(loc, message))

    def _ref(self, kind: str, ident: str, loc: Loc, target_kind: str, target: str) -> bool:
        """Check that ``target`` names an existing file of ``target_kind``."""
        if (target_kind, target) in self.broken:
            return False
        if (target_kind, target) in self.registry.documents:
            return True
        known = sorted(i for k, i in self.registry.documents if k == target_kind)
        label = _LABEL[target_kind]
        hint = f"; known: {', '.join(known)}" if known else ""
        self._error(
            kind,
            ident,
            loc,
            f"{label} {target!r} does not exist (expected {REGISTRY_DIR}/{target_kind}/"
            f"{target}.yaml){hint}",
        )
        return False

    def _repo_file(self, kind: str, ident: str, loc: Loc, rel: str, what: str) -> str | None:
        try:
            path = clean_relpath(rel)
        except PathEscapes as exc:
            self._error(kind, ident, loc, f"{what}: {exc}")
            return None
        if not self.tree.is_file(path) and not self.tree.is_file(path + ".dvc"):
            self._error(
                kind, ident, loc, f"{what} {path!r} does not exist in the {self.tree.label}"
            )
            return None
        return path

    def _ca_bundle(self, kind: str, ident: str, loc: Loc, rel: str) -> None:
        """A CA bundle is read by the HTTP layer as a plain file of the working tree."""
        try:
            path = clean_relpath(rel)
        except PathEscapes as exc:
            self._error(kind, ident, loc, f"CA bundle: {exc}")
            return
        if not self.tree.is_file(path):
            self._error(
                kind,
                ident,
                loc,
                f"CA bundle {path!r} does not exist in the {self.tree.label} (a PEM file of "
                "CA certificates, as a path from the repository root)",
            )

    def _callable(self, kind: str, ident: str, loc: Loc, spec: str, files: list[str]) -> None:
        module = spec.rpartition(":")[0]
        self._repo_file(kind, ident, loc, module, "callable module")
        for i, rel in enumerate(files):
            self._repo_file(kind, ident, (*loc[:-1], "files", i), rel, "declared file")

    # ------------------------------------------------------------ cross-checks
    def _check_pins(self) -> None:
        settings_bundle = self.registry.settings.network.ca_bundle
        if settings_bundle is not None and ("settings", "evalreg") in self.registry.documents:
            self._ca_bundle("settings", "evalreg", ("network", "ca_bundle"), settings_bundle)
        for ident, pin in self.registry.pins.items():
            if pin.limits.ca_bundle is not None:
                self._ca_bundle("models", ident, ("limits", "ca_bundle"), pin.limits.ca_bundle)
            if pin.callable is not None:
                self._callable("models", ident, ("callable",), pin.callable, pin.files)
            else:
                for i, rel in enumerate(pin.files):
                    self._repo_file("models", ident, ("files", i), rel, "declared file")

    def _check_rubrics(self) -> None:
        for ident, rubric in self.registry.rubrics.items():
            ids: dict[str, int] = {}
            for i, criterion in enumerate(rubric.criteria):
                if criterion.id in ids:
                    self._error(
                        "rubrics",
                        ident,
                        ("criteria", i, "id"),
                        f"duplicate criterion id {criterion.id!r} "
                        f"(also criteria[{ids[criterion.id]}])",
                    )
                ids.setdefault(criterion.id, i)
                grader = criterion.grader
                loc: Loc = ("criteria", i, "grader")
                if isinstance(grader, schema.JudgeGrader):
                    self._ref("rubrics", ident, (*loc, "judge"), "models", grader.judge)
                    self._judge_prompt(ident, (*loc, "prompt"), grader.prompt)
                elif isinstance(grader, schema.SimilarGrader):
                    if self._ref("rubrics", ident, (*loc, "embedder"), "models", grader.embedder):
                        self._embedder(ident, (*loc, "embedder"), grader.embedder)
                elif isinstance(grader, schema.PythonGrader):
                    self._callable(
                        "rubrics", ident, (*loc, "callable"), grader.callable, grader.files
                    )
                elif isinstance(grader, schema.HumanGrader):
                    self._repo_file(
                        "rubrics", ident, (*loc, "file"), grader.file, "human grades file"
                    )
                    judged = {c.id for c in rubric.criteria if c.grader.type == "llm_judge"}
                    if grader.calibrates is not None and grader.calibrates not in judged:
                        self._error(
                            "rubrics",
                            ident,
                            (*loc, "calibrates"),
                            f"calibrates {grader.calibrates!r}, which is not an llm_judge "
                            "criterion of this rubric",
                        )
            if not any(c.critical for c in rubric.criteria):
                for level in ("correct", "acceptable"):
                    if getattr(rubric.levels, level).require == "critical":
                        self._error(
                            "rubrics",
                            ident,
                            ("levels", level, "require"),
                            "require: critical, but no criterion is marked critical",
                        )
            for level in ("correct", "acceptable"):
                require = getattr(rubric.levels, level).require
                if isinstance(require, list):
                    for j, cid in enumerate(require):
                        if cid not in ids:
                            self._error(
                                "rubrics",
                                ident,
                                ("levels", level, "require", j),
                                f"criterion {cid!r} is not in this rubric "
                                f"(criteria: {', '.join(ids)})",
                            )

    def _embedder(self, ident: str, loc: Loc, pin_id: str) -> None:
        pin = self.registry.pins.get(pin_id)
        if pin is not None and pin.provider != "openai":
            self._error(
                "rubrics",
                ident,
                loc,
                f"embedder {pin_id!r} is a {pin.provider!r} pin: embeddings come from an "
                "OpenAI-compatible /embeddings endpoint, through an 'openai' pin",
            )

    def _judge_prompt(self, ident: str, loc: Loc, prompt: str) -> None:
        try:
            names = variables(prompt)
        except TemplateProblem as exc:
            self._error("rubrics", ident, loc, f"judge prompt: {exc}")
            return
        unknown = sorted(names - schema.JUDGE_PROMPT_VARIABLES)
        if unknown:
            self._error(
                "rubrics",
                ident,
                loc,
                f"judge prompt uses {', '.join(unknown)}; it may use "
                f"{', '.join(sorted(schema.JUDGE_PROMPT_VARIABLES))}",
            )

    def _check_tool_graders(self, ident: str, task: schema.Task, rubric: schema.Rubric) -> None:
        """A rubric that grades tool calls needs a task that declares tools."""
        if task.tools:
            return
        for c in rubric.criteria:
            grader = c.grader
            tooled = isinstance(
                grader,
                schema.ToolChoiceGrader | schema.ToolArgumentGrader | schema.ToolCallsF1Grader,
            ) or (isinstance(grader, schema.JsonSchemaGrader) and grader.parse == "tool_arguments")
            if tooled:
                self._error(
                    "tasks",
                    ident,
                    ("rubric",),
                    f"rubric {task.rubric!r} criterion {c.id!r} grades tool calls, but this "
                    "task declares no 'tools'",
                )

    def _check_tasks(self) -> None:
        for ident, task in self.registry.tasks.items():
            rubric_ok = self._ref("tasks", ident, ("rubric",), "rubrics", task.rubric)
            if rubric_ok:
                rubric = self.registry.rubrics[task.rubric]
                criteria = {c.id for c in rubric.criteria}
                self._check_tool_graders(ident, task, rubric)
                if task.output.schema_ is None:
                    for c in rubric.criteria:
                        if (
                            isinstance(c.grader, schema.JsonSchemaGrader)
                            and c.grader.schema_ is None
                            and c.grader.parse != "tool_arguments"
                        ):
                            self._error(
                                "tasks",
                                ident,
                                ("output",),
                                f"rubric {task.rubric!r} criterion {c.id!r} checks the "
                                "task's output schema, but this task has no "
                                "output.schema",
                            )
                for i, mode in enumerate(task.failure_modes):
                    for j, cid in enumerate(mode.detected_by):
                        if cid not in criteria:
                            self._error(
                                "tasks",
                                ident,
                                ("failure_modes", i, "detected_by", j),
                                f"criterion {cid!r} is not in rubric {task.rubric!r}",
                            )
            self._template("tasks", ident, ("prompt",), task.prompt.system, task.prompt.template)
            holdout = None
            if task.holdout is not None:
                holdout = self._evalset(ident, task, ("holdout",), task.holdout)
                if holdout is not None:
                    self._template_fields(
                        "tasks",
                        ident,
                        ("prompt",),
                        task.prompt.system,
                        task.prompt.template,
                        holdout,
                    )
            evalset = self._evalset(ident, task)
            if evalset is not None and task.holdout is not None and holdout is not None:
                shared = {i.id for i in evalset.items} & {i.id for i in holdout.items}
                if holdout.path == evalset.path or shared:
                    self._error(
                        "tasks",
                        ident,
                        ("holdout",),
                        "the hold-out set must be sealed from the development set: "
                        f"{len(shared) or len(evalset.items)} items are in both",
                    )
            if evalset is not None:
                self._template_fields(
                    "tasks", ident, ("prompt",), task.prompt.system, task.prompt.template, evalset
                )

    def _evalset(
        self, ident: str, task: schema.Task, loc: Loc = ("evalset",), rel: str | None = None
    ) -> EvalSet | None:
        try:
            path = clean_relpath(rel if rel is not None else task.evalset)
        except PathEscapes as exc:
            self._error("tasks", ident, loc, f"{loc[-1]}: {exc}")
            return None
        if path in self.registry.evalsets:
            return self.registry.evalsets[path]
        try:
            data, file = evalset_data(self.tree, path)
        except FileNotFoundError:
            self._error(
                "tasks",
                ident,
                loc,
                f"eval set {path!r} does not exist in the {self.tree.label}",
            )
            return None
        except DataMissingError as exc:
            if self.allow_missing_data:
                line, col = self._doc("tasks", ident).locate(loc)
                self.findings.append(
                    Finding(
                        self._doc("tasks", ident).path,
                        line,
                        col,
                        f"not checked here: {exc}",
                        Severity.WARNING,
                    )
                )
                self.registry.missing_data.append(path)
            else:
                self._error("tasks", ident, loc, str(exc))
            return None
        except PathEscapes as exc:
            self._error("tasks", ident, loc, f"{loc[-1]}: {exc}")
            return None
        evalset, problems = parse_evalset(data, path, file)
        self.findings.extend(problems)
        if evalset is not None and evalset.has_attachments:
            # Where an attachment is named is found in the file's text (read whole only then).
            text = self.tree.read_data(path) if data is None else data
            evalset = self._attachments(evalset, text)
        if evalset is not None:
            self.registry.evalsets[path] = evalset
            self._check_pointer(evalset)
        return evalset

    def _attachments(self, evalset: EvalSet, data: bytes) -> EvalSet | None:
        """``evalset`` with its items' attached files read from this tree; None when some
        are DVC data not available here (left out, as an eval set that cannot be read)."""
        from evalreg.evalsets.attachments import resolve_attachments

        resolved, problems, missing = resolve_attachments(
            self.tree, evalset, data, allow_missing_data=self.allow_missing_data
        )
        self.findings.extend(problems)
        if missing:
            self.registry.missing_data.append(evalset.path)
            return None
        if resolved is not evalset:
            self.attachment_data[evalset.path] = data
        return resolved

    def _check_attachments(self, ident: str, pin_id: str, task: schema.Task) -> None:
        """Every file the task's items attach must be one the candidate's provider takes,
        within its size limit (``providers.attachments.LIMITS``)."""
        from evalreg.evalsets.attachments import attachment_column
        from evalreg.providers.attachments import count_problem, limit_problem

        pin = self.registry.pins.get(pin_id)
        if pin is None:
            return
        for rel in (task.evalset, task.holdout):
            evalset = self.registry.evalsets.get(_safe(rel)) if rel is not None else None
            if evalset is None or not evalset.has_attachments:
                continue
            data = self.attachment_data.get(evalset.path, b"")
            for item in evalset.items:
                if not item.files:  # most items attach nothing: nothing to count or size
                    continue
                counted = count_problem(pin.provider, [f.media_type for f in item.files])
                if counted is not None:
                    self.findings.append(
                        Finding(
                            evalset.path,
                            evalset.lines.get(item.id, 0),
                            0,
                            f"item {item.id!r}: {counted} (candidate pin {pin_id!r} of "
                            f"selection {ident!r})",
                        )
                    )
                for file in item.files:
                    problem = limit_problem(pin.provider, file.media_type, len(file.data))
                    if problem is None:
                        continue
                    line, col = attachment_column(data, evalset, item, file.path)
                    self.findings.append(
                        Finding(
                            evalset.path,
                            line,
                            col,
                            f"item {item.id!r}: attachment {file.path!r}: {problem} "
                            f"(candidate pin {pin_id!r} of selection {ident!r})",
                        )
                    )

    def _check_pointer(self, evalset: EvalSet) -> None:
        """A DVC-tracked eval set must be the version its pointer records: results name
        that version, and only it can be read back at a later revision."""
        path, pointer = evalset.path, evalset.path + ".dvc"
        if not self.tree.is_file(pointer):
            return  # not tracked by DVC: `check` warns
        try:
            md5 = pointer_md5_of(self.tree, path)
        except RegistryError as exc:
            self.findings.extend(exc.findings)
            return
        if md5 is None:
            self.findings.append(
                Finding(
                    pointer,
                    0,
                    0,
                    "not a single-file DVC pointer with an md5: restore it (`git checkout -- "
                    f"{pointer}`) or track the file again (`evalreg evalset add {path}`)",
                )
            )
        elif md5 != evalset.md5:
            self.findings.append(
                Finding(
                    path,
                    0,
                    0,
                    f"differs from the version DVC tracks ({pointer} says md5 {md5}, the file "
                    f"has {evalset.md5}): run `evalreg evalset add {path}` to record the "
                    f"change, or `dvc checkout {pointer}` to undo it",
                )
            )

    def _template(
        self, kind: str, ident: str, loc: Loc, system: str | None, template: str | None
    ) -> set[str] | None:
        names: set[str] = set()
        for part, source in (("system", system), ("template", template)):
            if source is None:
                continue
            try:
                names |= variables(source)
            except TemplateProblem as exc:
                line, col = self._doc(kind, ident).locate((*loc, part))
                self.findings.append(
                    Finding(
                        self._doc(kind, ident).path,
                        line + exc.lineno - 1,
                        col if exc.lineno == 1 else 0,
                        f"{PARTS[part]}: {exc}",
                    )
                )
                return None
        return names

    def _template_fields(
        self,
        kind: str,
        ident: str,
        loc: Loc,
        system: str | None,
        template: str | None,
        evalset: EvalSet,
    ) -> None:
        names = self._template(kind, ident, loc, system, template)
        if not names:
            return
        doc = self._doc(kind, ident)
        for name in sorted(names):
            if not evalset.may_lack(name):
                continue
            lacking = [
                item
                for item in evalset.items
                if item.input is not None
                and name not in item.input
                and not (name == ATTACHMENT_CALL and item.attachments)
            ]
            line = doc.locate((*loc, "template"))[0]
            for item in lacking[:MAX_TEMPLATE_FINDINGS]:
                self.findings.append(
                    Finding(
                        evalset.path,
                        evalset.lines[item.id],
                        0,
                        f"item {item.id!r} has no input field {name!r}, which the prompt of "
                        f"{doc.path}:{line} uses",
                    )
                )
            if len(lacking) > MAX_TEMPLATE_FINDINGS:
                self.findings.append(
                    Finding(
                        evalset.path,
                        0,
                        0,
                        f"{len(lacking) - MAX_TEMPLATE_FINDINGS} more items lack input field "
                        f"{name!r}",
                    )
                )

    def _check_selections(self) -> None:
        self._check_shared_cells()
        for ident, sel in self.registry.selections.items():
            task_ok = self._ref("selections", ident, ("task",), "tasks", sel.task)
            task = self.registry.tasks.get(sel.task) if task_ok else None
            candidates: dict[str, int] = {}
            for i, cand in enumerate(sel.candidates):
                if cand.id in candidates:
                    self._error(
                        "selections",
                        ident,
                        ("candidates", i, "id"),
                        f"duplicate candidate id {cand.id!r}",
                    )
                candidates.setdefault(cand.id, i)
                self._ref("selections", ident, ("candidates", i, "pin"), "models", cand.pin)
                if task is not None:
                    self._check_attachments(ident, cand.pin, task)
                if task is not None and cand.prompt is not None:
                    system = (
                        cand.prompt.system if cand.prompt.system is not None else task.prompt.system
                    )
                    template = cand.prompt.template or task.prompt.template
                    evalset = self.registry.evalsets.get(_safe(task.evalset))
                    if evalset is not None:
                        self._template_fields(
                            "selections",
                            ident,
                            ("candidates", i, "prompt"),
                            system,
                            template,
                            evalset,
                        )
                    else:
                        self._template(
                            "selections",
                            ident,
                            ("candidates", i, "prompt"),
                            cand.prompt.system,
                            cand.prompt.template,
                        )
            if sel.selected not in candidates:
                self._error(
                    "selections",
                    ident,
                    ("selected",),
                    f"selected candidate {sel.selected!r} is not among the candidates "
                    f"({', '.join(candidates)})",
                )
            for i, waiver in enumerate(sel.waivers):
                if waiver.candidate not in candidates:
                    self._error(
                        "selections",
                        ident,
                        ("waivers", i, "candidate"),
                        f"waiver for {waiver.candidate!r}, which is not a candidate",
                    )
            self._check_policy(ident, sel, task)

    def _check_shared_cells(self) -> None:
        """A cell is one (task, candidate id): use cases that run one task with a candidate
        of one id share its results, so they must mean one candidate by it (one pin, one
        prompt), or one use case would be shown the other's results as its own."""
        first: dict[tuple[str, str], tuple[str, int, schema.Candidate]] = {}
        for ident, sel in sorted(self.registry.selections.items()):
            for i, cand in enumerate(sel.candidates):
                seen = first.setdefault((sel.task, cand.id), (ident, i, cand))
                other, at, earlier = seen
                if other == ident:
                    continue
                if earlier.pin != cand.pin:
                    what, loc = f"pin {earlier.pin!r}", ("candidates", i, "pin")
                elif earlier.prompt != cand.prompt:
                    what, loc = "another prompt", ("candidates", i, "prompt")
                else:
                    continue
                line = self._doc("selections", other).locate(("candidates", at, "id"))[0]
                self._error(
                    "selections",
                    ident,
                    loc,
                    f"candidate {cand.id!r} of task {sel.task!r} is another candidate in use "
                    f"case {other!r} ({self._doc('selections', other).path}:{line}: {what}): "
                    "use cases that run one task share each candidate's results by its id, "
                    "so give this one an id of its own",
                )

    def _check_policy(self, ident: str, sel: schema.Selection, task: schema.Task | None) -> None:
        criteria: dict[str, schema.Criterion] | None = None
        slices: set[str] | None = None
        if task is not None:
            rubric = self.registry.rubrics.get(task.rubric)
            criteria = {c.id: c for c in rubric.criteria} if rubric else None
            evalset = self.registry.evalsets.get(_safe(task.evalset))
            slices = set(evalset.slices) if evalset else None
        policy = sel.policy
        metrics: list[tuple[Loc, str]] = [
            (("policy", "gates", i, "metric"), g.metric) for i, g in enumerate(policy.gates)
        ]
        for kind in ("lexicographic", "weighted"):
            for i, term in enumerate(getattr(policy.objective, kind) or []):
                goal = "maximize" if term.maximize is not None else "minimize"
                metrics.append((("policy", "objective", kind, i, goal), term.metric))
        if policy.non_inferiority is not None:
            ni = policy.non_inferiority
            metrics.append((("policy", "non_inferiority", "metric"), ni.metric))
            goal = "maximize" if ni.prefer.maximize is not None else "minimize"
            metrics.append((("policy", "non_inferiority", "prefer", goal), ni.prefer.metric))
        for loc, metric in metrics:
            problem = metric_problem(metric, criteria)
            if problem:
                self._error("selections", ident, loc, problem)
        rubric = self.registry.rubrics.get(task.rubric) if task is not None else None
        if policy.sequential is not None and rubric is not None:
            why = sequential_refusal(sel, rubric)
            if why is not None:
                self._error(
                    "selections",
                    ident,
                    ("policy", "sequential"),
                    f"this use case cannot be decided on part of its items: {why} "
                    "(remove `sequential` to buy every item)",
                )
        if slices is not None:
            for i, gate in enumerate(policy.gates):
                if gate.slice != "all" and gate.slice not in slices:
                    self._error(
                        "selections",
                        ident,
                        ("policy", "gates", i, "slice"),
                        f"slice {gate.slice!r} has no items in the eval set (slices: "
                        f"{', '.join(sorted(slices))})",
                    )


def metric_problem(metric: str, criteria: dict[str, schema.Criterion] | None) -> str | None:
    """Why ``metric`` is not a metric a policy can use, or None if it is (``criteria``: the
    task's rubric's, by id, when known)."""
    if metric in schema.BASE_METRICS:
        return None
    kind, _, cid = metric.partition(":")
    if kind in ("criterion", "coverage") and cid:
        if criteria is None:
            return None
        if cid not in criteria:
            return f"criterion {cid!r} is not in the task's rubric ({', '.join(sorted(criteria))})"
        if kind == "coverage" and not isinstance(criteria[cid].grader, schema.HumanGrader):
            human = sorted(
                c for c, v in criteria.items() if isinstance(v.grader, schema.HumanGrader)
            )
            return (
                f"coverage is measured for human criteria, and {cid!r} is graded by "
                f"{criteria[cid].grader.type}"
                + (f" (human criteria: {', '.join(human)})" if human else "")
            )
        return None
    return (
        f"unknown metric {metric!r}; expected one of: {', '.join(schema.BASE_METRICS)}, "
        "criterion:<id> or coverage:<human criterion id>"
    )


def _safe(rel: str) -> str:
    try:
        return clean_relpath(rel)
    except PathEscapes:
        return rel


_ATTR = {"models": "pins", "tasks": "tasks", "rubrics": "rubrics", "selections": "selections"}
_LABEL = {"models": "model pin", "tasks": "task", "rubrics": "rubric", "selections": "selection"}
