"""Import a promptfoo config as registry files: pins, a task, a rubric, a use case and an eval set.

What maps: OpenAI and Anthropic providers become model pins; the first prompt becomes the
task's template and every further prompt a prompt variant of each candidate; tests (inline,
from YAML/JSON files or from CSV) become eval items whose ``input`` is the test's vars;
asserts become rubric criteria (see ``promptfoo_asserts``). Everything else is listed in
the result's ``not_mapped``, with the reason.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalreg.importers.base import (
    IdPool,
    ImportLog,
    ImportProblem,
    ImportResult,
    NotMapped,
    check_name,
    read_text,
    read_yaml,
    require_pin,
    rubric_doc,
    selection_doc,
    slug,
    to_plain,
)
from evalreg.importers.promptfoo_asserts import (
    Check,
    Criteria,
    JudgeFor,
    build_criteria,
    to_check,
)
from evalreg.importers.templates import nunjucks_problems
from evalreg.importers.writer import Draft, write_draft
from evalreg.registry import schema
from evalreg.templating import variables

SOURCE = "promptfoo"
_TOP_LEVEL = frozenset(
    {
        "description",
        "prompts",
        "providers",
        "targets",
        "tests",
        "defaultTest",
        "evaluateOptions",
        "assertionTemplates",  # read through the $refs that name its entries
    }
)
_TEST_KEYS = frozenset({"vars", "assert", "description", "metadata", "options"})
_OPTION_KEYS = frozenset({"provider", "disableDefaultAsserts", "transform"})
_OPTION_WHY = {
    "prefix": "a text promptfoo adds before the prompt; put it in the task's template",
    "suffix": "a text promptfoo adds after the prompt; put it in the task's template",
    "rubricPrompt": "evalreg's imported judge prompt is its own; edit the criterion's prompt",
}
"""Why a test option has no mapping (others: "not mapped")."""
_TRANSFORM_WHY = (
    "options.transform runs code on the output before its asserts, so they would grade "
    "another text; the test's asserts are not imported"
)
_PROVIDER_KEYS = frozenset({"id", "label", "config"})
_CONNECTION = frozenset({"apiBaseUrl", "apiHost", "apiKey", "apiKeyEnvar"})
_PARAMS = {
    "openai": frozenset(
        {
            "temperature",
            "max_tokens",
            "max_completion_tokens",
            "top_p",
            "frequency_penalty",
            "presence_penalty",
            "seed",
            "stop",
            "response_format",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "logit_bias",
            "reasoning_effort",
            "user",
        }
    ),
    "anthropic": frozenset(
        {"temperature", "max_tokens", "top_p", "top_k", "stop_sequences", "tools", "tool_choice"}
    ),
}
"""Provider config keys that are request parameters, passed through to the pin's ``params``."""
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_OPENAI_OTHER_APIS = frozenset(
    {"completion", "embedding", "embeddings", "assistant", "image", "realtime", "responses"}
)
_URL = re.compile(r"^https?://[^\s]+$")
_DATED = re.compile(r"(?:\d{4}-\d{2}-\d{2}|\d{8})$")
"""A model id that ends in a snapshot date, as pinned models do."""
_CODE_SUFFIXES = (".py", ".js", ".ts", ".mjs", ".cjs")
_GLOB = re.compile(r"[*?\[]")
_CSV_TYPES = (
    "agent-rubric",
    "answer-relevance",
    "bleu",
    "classifier",
    "contains",
    "contains-all",
    "contains-any",
    "contains-html",
    "contains-json",
    "contains-sql",
    "contains-xml",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "conversation-relevance",
    "cost",
    "equals",
    "factuality",
    "finish-reason",
    "g-eval",
    "gleu",
    "guardrails",
    "icontains",
    "icontains-all",
    "icontains-any",
    "is-html",
    "is-json",
    "is-refusal",
    "is-sql",
    "is-valid-function-call",
    "is-valid-openai-function-call",
    "is-valid-openai-tools-call",
    "is-xml",
    "javascript",
    "latency",
    "levenshtein",
    "llm-rubric",
    "pi",
    "meteor",
    "model-graded-closedqa",
    "model-graded-factuality",
    "moderation",
    "perplexity",
    "perplexity-score",
    "python",
    "regex",
    "rouge-n",
    "ruby",
    "similar",
    "similar:cosine",
    "similar:dot",
    "similar:euclidean",
    "starts-with",
    "tool-call-f1",
    "skill-used",
    "trajectory:goal-success",
    "trajectory:tool-args-match",
    "trajectory:step-count",
    "trajectory:tool-sequence",
    "trajectory:tool-used",
    "trace-error-spans",
    "trace-span-count",
    "trace-span-duration",
    "search-rubric",
    "webhook",
    "word-count",
)
"""promptfoo 0.121.20's assert types (``BaseAssertionTypesSchema``), in its order."""
_CSV_ASSERT = re.compile(
    "^(not-)?("
    + "|".join(map(re.escape, _CSV_TYPES))
    + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$"
)
"""An assert written in a CSV ``__expected`` column: ``[not-]type[(threshold)][:value]``."""
_REMOTE_TESTS = (
    ("huggingface://datasets/", "a Hugging Face dataset"),
    ("https://docs.google.com/spreadsheets/", "a Google Sheet"),
    ("az://", "Azure Blob Storage"),
    ("https://", "a URL"),
    ("http://", "a URL"),
)
"""Where promptfoo fetches tests from, by prefix (SharePoint links are https:// URLs)."""
_CSV_UNTRIMMED = frozenset({"contains-json", "is-json"})
"""Assert types whose CSV value promptfoo keeps untrimmed (the rest it trims)."""
_CSV_SEPARATOR = re.compile(r"(?<!\\),")
"""Between the values of a ``__metadata:<key>[]`` column: a comma not escaped as ``\\,``."""


@dataclass(frozen=True)
class _Prompt:
    where: str
    label: str | None
    system: str | None
    template: str


@dataclass
class _Test:
    where: str
    vars: dict[str, Any]
    asserts: list[tuple[str, Any]]
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    grader: Any = None
    """The model promptfoo grades model-graded asserts with (``options.provider``)."""
    transformed: bool = False
    """``options.transform`` changes the output before the asserts see it."""


def import_promptfoo(
    config: Path, out_root: Path, *, name: str, judge: str | None = None
) -> ImportResult:
    """Write the registry files for the promptfoo config ``config`` into ``out_root``.

    Args:
        config: a ``promptfooconfig.yaml``; ``file://`` references resolve from its folder.
        out_root: the registry repository root.
        name: the id of the task, rubric, use case and eval set (``evalsets/<name>.jsonl``);
            model pins are named ``<name>-<provider label or model>``.
        judge: an existing pin that grades model-graded asserts (``llm-rubric``,
            ``factuality``, ``model-graded-closedqa``) whose config names no
            grading provider (``defaultTest.options.provider``); without either, those
            asserts are not mapped.

    Raises:
        ImportProblem: the config cannot be read, nothing gradable or no usable provider
            or prompt is left, or the files cannot be written. Nothing is written then.
    """
    check_name(name)
    if judge is not None:
        require_pin(out_root, judge, "--judge")
    data = read_yaml(config)
    if not isinstance(data, dict):
        raise ImportProblem(f"{config}: expected a promptfoo config (a YAML mapping)")
    data = _dereferenced(data, data, "")
    log = ImportLog()
    base = config.parent
    for key in sorted(set(data) - _TOP_LEVEL):
        log.skip(key, "not mapped")
    pins = _Pins(name, log)
    candidates = _candidate_pins(data.get("providers", data.get("targets")), pins)
    prompts = _prompts(data.get("prompts"), base, log)
    tests = _tests(data, base, log)
    found = build_criteria(_checks(tests, pins, judge, log), log)
    if not found.criteria:
        raise ImportProblem(
            f"{config}: no assert maps to an evalreg grader, so there is nothing to grade"
            + "".join(f"\n  {m}" for m in log.not_mapped)
        )
    if all("slices" in c for c in found.criteria):
        for test, tags in zip(tests, found.tags, strict=True):
            if not tags:
                log.note(f"{test.where}: no assert maps, so it passes whatever the output")
    description = str(data.get("description") or f"Imported from promptfoo ({config.name}).")
    evalset = f"evalsets/{name}.jsonl"
    draft = Draft(f"Imported from promptfoo ({config.name}); review before relying on it.")
    for ident, pin in pins.docs.items():
        draft.add_yaml("models", ident, pin)
    _pin_notes(pins.docs, log)
    draft.add_yaml(
        "rubrics",
        name,
        rubric_doc(
            f"The promptfoo asserts of {config.name}: a test passes when every mapped assert "
            "passes.",
            found.criteria,
        ),
    )
    task = _task_doc(name, description, evalset, prompts[0], found)
    run_options = _mapping(data, "evaluateOptions", "config")
    for key in sorted(set(run_options) - {"repeat"}):
        log.skip(f"evaluateOptions.{key}", "not mapped")
    repeat = run_options.get("repeat")
    if isinstance(repeat, int) and not isinstance(repeat, bool) and 1 < repeat <= 100:
        task["repeats"] = repeat
    draft.add_yaml("tasks", name, task)
    draft.add_yaml(
        "selections",
        name,
        selection_doc(description, name, _candidates(candidates, prompts), SOURCE),
    )
    draft.add_jsonl(evalset, _items(tests, prompts, found, log))
    return log.result(write_draft(out_root, draft), evalset)


def _checks(
    tests: list[_Test], pins: _Pins, judge: str | None, log: ImportLog
) -> list[list[Check]]:
    """Each test's asserts as checks; what does not map is logged."""

    def judge_for(test: _Test) -> JudgeFor:
        def resolve(spec: Any, embedding: bool = False) -> str:
            if embedding:  # promptfoo's options.provider.embedding, or its default
                grading = test.grader.get("embedding") if isinstance(test.grader, dict) else None
                chosen = spec if spec is not None else grading or DEFAULT_EMBEDDER
                return pins.add(chosen, "embedding provider", embedding=True)[0]
            chosen = spec if spec is not None else test.grader
            if chosen is not None:
                return pins.add(chosen, "grading provider")[0]
            if judge is not None:
                return judge
            raise NotMapped(
                "a model-graded assert needs a judge model: set defaultTest.options.provider, "
                "or pass --judge PIN"
            )

        return resolve

    out: list[list[Check]] = []
    for test in tests:
        mine: list[Check] = []
        if test.transformed:
            log.skip(test.where, _TRANSFORM_WHY)
            out.append(mine)
            continue
        for where, raw, weight, why in _flattened(test.asserts):
            if why is not None:
                log.skip(where, why)
                continue
            try:
                check = to_check(raw, where, test.vars, judge_for(test))
            except NotMapped as exc:
                log.skip(where, str(exc))
                continue
            mine.append(dataclasses.replace(check, weight=check.weight * weight))
        out.append(mine)
    return out


def _flattened(asserts: list[tuple[str, Any]]) -> Iterator[tuple[str, Any, float, str | None]]:
    """Each assert with the share of weight its assert-set gives it (1 outside a set), or
    why the set does not map.

    An assert-set without a threshold passes when every one of its asserts does, so its
    asserts are criteria of their own, its weight shared as their weights share it, as
    promptfoo scores it. One with a threshold passes on a share of them, which no
    criterion does.
    """
    for where, raw in asserts:
        if not (isinstance(raw, dict) and raw.get("type") == "assert-set"):
            yield where, raw, 1.0, None
            continue
        children = raw.get("assert")
        share = raw.get("weight", 1)
        weights = [c.get("weight", 1) if isinstance(c, dict) else 1 for c in children or []]
        if raw.get("threshold") is not None:
            yield where, raw, 1.0, _SET_THRESHOLD_WHY
        elif not isinstance(children, list) or not children:
            yield where, raw, 1.0, "an assert-set needs a list of asserts ('assert')"
        elif not all(_positive(w) for w in [share, *weights]):
            yield where, raw, 1.0, "an assert-set's weights are positive numbers"
        else:
            for k, child in enumerate(children):
                yield f"{where}.assert[{k}]", child, share / sum(weights), None


def _positive(weight: Any) -> bool:
    return isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight > 0


_SET_THRESHOLD_WHY = (
    "an assert-set with a threshold passes when a share of its asserts do; evalreg "
    "criteria pass or fail one by one"
)


def _task_doc(
    name: str, description: str, evalset: str, prompt: _Prompt, found: Criteria
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "schema_version": schema.SCHEMA_VERSION,
        "description": description,
        "evalset": evalset,
        "prompt": _prompt_doc(prompt),
        "rubric": name,
    }
    if found.parser == "json":
        task["output"] = {"parser": "json", "extract": "strict"}
    return task


def _dereferenced(value: Any, root: dict[str, Any], where: str, depth: int = 0) -> Any:
    """``value`` with every ``$ref: '#/a/b'`` replaced by what it points to in the config, as
    promptfoo's reference parser does (keys beside ``$ref`` extend what it points to).

    Raises:
        ImportProblem: a reference points outside the config, to nothing, or in a loop.
    """
    if isinstance(value, list):
        return [_dereferenced(v, root, f"{where}[{i}]", depth) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if "$ref" not in value:
        return {
            k: _dereferenced(v, root, f"{where}.{k}".lstrip("."), depth) for k, v in value.items()
        }
    ref = value["$ref"]
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise ImportProblem(
            f"{where}: $ref {ref!r}: only references within the config ('#/...') are read"
        )
    if depth > _MAX_REF_DEPTH:
        raise ImportProblem(f"{where}: $ref {ref!r} refers to itself")
    target: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise ImportProblem(f"{where}: $ref {ref!r} points to nothing in the config")
    resolved = _dereferenced(target, root, where, depth + 1)
    rest = {k: v for k, v in value.items() if k != "$ref"}
    if rest and isinstance(resolved, dict):
        resolved = resolved | _dereferenced(rest, root, where, depth)
    return resolved


_MAX_REF_DEPTH = 32


# ---------------------------------------------------------------- providers -> pins
class _Pins:
    """Model pins made from promptfoo providers: one file per distinct configuration."""

    def __init__(self, name: str, log: ImportLog) -> None:
        self.name = name
        self.log = log
        self.docs: dict[str, dict[str, Any]] = {}
        self._ids = IdPool()
        self._by_content: dict[str, str] = {}

    def add(self, raw: Any, where: str, *, embedding: bool = False) -> tuple[str, str]:
        """(pin id, short label) for a provider (``embedding``: an embedding model's);
        raises NotMapped when it has no pin."""
        pid, label, config = _provider_parts(raw, where, self.log)
        provider, model = _split_embedding_id(pid) if embedding else _split_provider_id(pid)
        doc: dict[str, Any] = {
            "schema_version": schema.SCHEMA_VERSION,
            "description": f"Imported from promptfoo {where}: {pid}.",
            "provider": provider,
            "model": model,
        }
        url = config.get("apiBaseUrl")
        if url is None and provider == "openai" and isinstance(config.get("apiHost"), str):
            url = f"https://{config['apiHost']}/v1"
        if url is not None:
            if not isinstance(url, str) or not _URL.match(url):
                raise NotMapped(f"apiBaseUrl {url!r} is not an http(s) URL")
            doc["base_url"] = url
        env = config.get("apiKeyEnvar", _KEY_ENV[provider])
        if not isinstance(env, str) or not schema.ENV_NAME.match(env):
            raise NotMapped(f"apiKeyEnvar {env!r} is not an environment variable name")
        doc["api_key_env"] = env
        params = {}
        for key, value in config.items():
            if key in _PARAMS[provider]:
                if isinstance(value, str) and value.startswith("file://"):
                    self.log.skip(f"{where}.config.{key}", "a value read from a file")
                else:
                    params[key] = value
            elif key == "apiKey":
                self.log.skip(
                    f"{where}.config.apiKey",
                    f"a key never goes into a registry file; set {env} in the environment",
                )
            elif key not in _CONNECTION:
                self.log.skip(f"{where}.config.{key}", "not a request parameter evalreg sends")
        if params:
            doc["params"] = params
        content = json.dumps({k: v for k, v in doc.items() if k != "description"}, sort_keys=True)
        short = slug(label or model) or "model"
        if content not in self._by_content:
            ident = self._ids.claim(f"{self.name}-{short}")
            self._by_content[content] = ident
            self.docs[ident] = doc
        return self._by_content[content], short


def _pin_notes(pins: dict[str, dict[str, Any]], log: ImportLog) -> None:
    """What imported pins lack: a price, and sometimes a dated snapshot."""
    if pins:
        log.note(
            "pins carry no price (the source has none): cost metrics read 0 until each pin "
            "in registry/models has a dated 'price'"
        )
    for ident, pin in pins.items():
        if not _DATED.search(str(pin["model"])):
            log.note(
                f"pin {ident} names model {pin['model']!r}, an alias the provider may move: pin "
                "a dated snapshot so results stay reproducible"
            )


def _provider_parts(raw: Any, where: str, log: ImportLog) -> tuple[str, str | None, dict[str, Any]]:
    """(id, label, config) of a provider written as a string, an object, or ``{id: options}``."""
    if isinstance(raw, str):
        return raw, None, {}
    if isinstance(raw, dict) and "id" not in raw and len(raw) == 1:
        ((pid, options),) = raw.items()
        raw = {"id": pid, **(options if isinstance(options, dict) else {})}
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise NotMapped("a provider needs an 'id' such as openai:gpt-4o-mini")
    for key in sorted(set(raw) - _PROVIDER_KEYS):
        log.skip(f"{where}.{key}", "not mapped")
    label = raw.get("label")
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise NotMapped("its config is not a mapping")
    return raw["id"], label if isinstance(label, str) else None, config


DEFAULT_EMBEDDER = "openai:embedding:text-embedding-3-large"
"""The embedding model promptfoo's ``similar`` asks when none is named."""


def _split_embedding_id(pid: str) -> tuple[str, str]:
    """("openai", model) from ``openai:embedding:model`` (or ``openai:embeddings:model``)."""
    vendor, _, rest = pid.partition(":")
    api, _, model = rest.partition(":")
    if vendor != "openai" or api not in ("embedding", "embeddings") or not model:
        raise NotMapped(
            f"{pid}: evalreg's similar grader asks an OpenAI-compatible /embeddings endpoint "
            "(openai:embedding:<model>)"
        )
    return vendor, model


def _split_provider_id(pid: str) -> tuple[str, str]:
    """(evalreg provider, model) from ``openai:[chat:]model`` or ``anthropic:[messages:]model``."""
    vendor, _, rest = pid.partition(":")
    api, _, model = rest.partition(":")
    if vendor == "openai":
        if api in _OPENAI_OTHER_APIS:
            raise NotMapped(f"{pid}: evalreg calls the chat completions API only")
        model = model if api == "chat" else rest
    elif vendor == "anthropic":
        if api == "completion":
            raise NotMapped(f"{pid}: evalreg calls the Messages API only")
        model = model if api == "messages" else rest
    else:
        raise NotMapped(f"{pid}: evalreg pins OpenAI-compatible and Anthropic models only")
    if not model:
        raise NotMapped(f"{pid}: no model named")
    return vendor, model


def _candidate_pins(raw: Any, pins: _Pins) -> list[tuple[str, str]]:
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    out = []
    for i, entry in enumerate(entries):
        where = f"providers[{i}]"
        try:
            out.append(pins.add(entry, where))
        except NotMapped as exc:
            pins.log.skip(where, str(exc))
    if not out:
        raise ImportProblem(
            "no provider maps to a model pin (evalreg pins openai:... and anthropic:... "
            "providers)" + "".join(f"\n  {m}" for m in pins.log.not_mapped)
        )
    return out


def _candidates(pins: list[tuple[str, str]], prompts: list[_Prompt]) -> list[dict[str, Any]]:
    """One candidate per provider and prompt: the first prompt is the task's own."""
    ids = IdPool()
    out = []
    for pin, label in pins:
        for k, prompt in enumerate(prompts):
            suffix = "" if k == 0 else "-" + (slug(prompt.label or "") or f"p{k + 1}")
            candidate: dict[str, Any] = {"id": ids.claim(label + suffix), "pin": pin}
            if k:
                variant = _prompt_doc(prompt)
                if prompts[0].system is not None and prompt.system is None:
                    variant["system"] = ""  # the task's system prompt is not this prompt's
                candidate["prompt"] = variant
                candidate["description"] = f"The prompt of promptfoo {prompt.where}."
            out.append(candidate)
    return out


# ---------------------------------------------------------------- prompts
def _prompts(raw: Any, base: Path, log: ImportLog) -> list[_Prompt]:
    if isinstance(raw, dict):  # the older {path: label} form
        raw = [{"id": path, "label": label} for path, label in raw.items()]
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    out: list[_Prompt] = []
    for i, entry in enumerate(entries):
        where = f"prompts[{i}]"
        try:
            found = _prompt_entry(entry, where, base, log)
        except NotMapped as exc:
            log.skip(where, str(exc))
            continue
        for prompt in found:
            problems = nunjucks_problems(prompt.template) + nunjucks_problems(prompt.system or "")
            for problem in problems:
                log.skip(prompt.where, problem)
            if not problems:
                out.append(prompt)
    if not out:
        raise ImportProblem(
            "no prompt maps to a task template" + "".join(f"\n  {m}" for m in log.not_mapped)
        )
    return out


def _prompt_entry(entry: Any, where: str, base: Path, log: ImportLog) -> list[_Prompt]:
    label: str | None = None
    if isinstance(entry, dict):
        for key in sorted(set(entry) - {"raw", "id", "label"}):
            log.skip(f"{where}.{key}", "not mapped")
        label = entry.get("label") if isinstance(entry.get("label"), str) else None
        entry = entry.get("raw", entry.get("id"))
    if not isinstance(entry, str):
        raise NotMapped("a prompt is text, a file:// path, or an object with 'raw' or 'id'")
    if _bare_path(entry, base):
        entry = "file://" + entry
    if not entry.startswith("file://"):
        return [_prompt_from_text(entry, where, label, chat_json=True)]
    out = []
    for path in _files(entry, base):
        if path.suffix in _CODE_SUFFIXES or ":" in path.name:
            raise NotMapped(f"{path.name}: prompt functions are code; not mapped")
        if path.suffix in (".json", ".yaml", ".yml"):
            out.append(_prompt_from_chat(read_yaml(path), f"{where} ({path.name})", label))
        elif path.suffix == ".txt":
            parts = re.split(r"\r?\n---\r?\n", read_text(path))
            for k, part in enumerate(parts):
                part_where = f"{where} ({path.name}" + (
                    f" part {k + 1})" if len(parts) > 1 else ")"
                )
                out.append(_prompt_from_text(part, part_where, label, chat_json=False))
        else:
            text = read_text(path)
            out.append(_prompt_from_text(text, f"{where} ({path.name})", label, chat_json=False))
    return out


def _bare_path(entry: str, base: Path) -> bool:
    """Whether a prompt is a path without ``file://``, which promptfoo also reads as a file."""
    if not entry or any(c.isspace() or c == "{" for c in entry):
        return False
    try:
        return (base / entry).is_file()
    except OSError:  # a name too long to be a file
        return False


def _prompt_from_text(text: str, where: str, label: str | None, *, chat_json: bool) -> _Prompt:
    if chat_json and text.lstrip().startswith("["):
        try:
            return _prompt_from_chat(json.loads(text), where, label)
        except json.JSONDecodeError:
            pass  # a text prompt that happens to start with '['
    return _Prompt(where, label, None, text)


def _prompt_from_chat(messages: Any, where: str, label: str | None) -> _Prompt:
    """A chat prompt of an optional system message and one user message; a message's
    content is text, or a list of text parts (``{type: text, text: ...}``)."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise NotMapped("a chat prompt is a list of {role, content} messages with text content")
    messages = [m | {"content": _content_text(m.get("content"))} for m in messages]
    roles = [m.get("role") for m in messages]
    if roles not in (["user"], ["system", "user"]):
        raise NotMapped(
            f"a chat prompt with the turns {roles}: a task's template is one user turn, after "
            "an optional system prompt"
        )
    system = messages[0]["content"] if len(messages) == 2 else None
    return _Prompt(where, label, system, messages[-1]["content"])


def _content_text(content: Any) -> str:
    """A message's text: its content, or its one text part.

    Raises:
        NotMapped: the content is not text, or has parts other than one text part.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        kinds = [p.get("type") for p in content]
        if kinds == ["text"] and isinstance(content[0].get("text"), str):
            return str(content[0]["text"])
        if any(k != "text" for k in kinds):
            others = sorted({str(k) for k in kinds if k != "text"})
            raise NotMapped(
                f"a chat message with {', '.join(others)} content parts: evalreg sends text only"
            )
        raise NotMapped(
            "a chat message of several text parts: a task's template is one text; join them"
        )
    raise NotMapped("a chat prompt is a list of {role, content} messages with text content")


def _prompt_doc(prompt: _Prompt) -> dict[str, Any]:
    doc = {"template": prompt.template}
    return {"system": prompt.system, **doc} if prompt.system is not None else doc


# ---------------------------------------------------------------- tests -> items
def _tests(data: dict[str, Any], base: Path, log: ImportLog) -> list[_Test]:
    default = data.get("defaultTest") or {}
    if isinstance(default, str):
        default = _load_file(_files(default, base)[0])
    if not isinstance(default, dict):
        raise ImportProblem("defaultTest is not a mapping")
    for key in sorted(set(default) - _TEST_KEYS):
        log.skip(f"defaultTest.{key}", "not mapped")
    for key in sorted(set(_mapping(default, "options", "defaultTest")) - _OPTION_KEYS):
        log.skip(f"defaultTest.options.{key}", _OPTION_WHY.get(key, "not mapped"))
    raw = data.get("tests")
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    tests: list[_Test] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and "path" in entry:
            entry = entry["path"]
        if isinstance(entry, str):
            tests.extend(_tests_from_files(entry, base, default, log))
        else:
            tests.extend(_expand(_test(entry, f"tests[{i}]", default, log), base, log))
    if not tests:
        raise ImportProblem(
            "the config has no tests to import" + "".join(f"\n  {m}" for m in log.not_mapped)
        )
    return tests


def _tests_from_files(ref: str, base: Path, default: dict[str, Any], log: ImportLog) -> list[_Test]:
    remote = next((name for prefix, name in _REMOTE_TESTS if ref.startswith(prefix)), None)
    if remote is not None:
        log.skip(
            ref,
            f"tests from {remote} are not downloaded by an import: save them as a CSV or "
            "JSONL file next to the config and point 'tests' at it",
        )
        return []
    out = []
    for path in _files(ref, base):
        if path.suffix in _CODE_SUFFIXES or ":" in path.name:
            log.skip(ref, "tests generated by code are not imported")
            continue
        if path.suffix == ".csv":
            rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
            for n, row in enumerate(rows, start=1):
                where = f"{path.name} row {n}"
                out.extend(
                    _expand(_test(_csv_test(row, where, log), where, default, log), base, log)
                )
            continue
        raw = _jsonl(path) if path.suffix == ".jsonl" else _load_file(path)
        for n, entry in enumerate(raw if isinstance(raw, list) else [raw]):
            out.extend(_expand(_test(entry, f"{path.name}[{n}]", default, log), base, log))
    return out


def _csv_test(row: dict[str, Any], where: str, log: ImportLog) -> dict[str, Any]:
    """A CSV row as a test, read as promptfoo reads one: column names trimmed, vars kept as
    written, ``__expected*`` columns asserts, ``__metadata:<key>`` (a list with ``[]``)."""
    test: dict[str, Any] = {"vars": {}, "assert": [], "metadata": {}}
    thresholds: dict[int, float] = {}
    for column, value in row.items():
        column, value = str(column).strip(), value or ""
        if column.startswith("__expected"):
            if value.strip():
                test["assert"].append(_csv_assert(value.strip()))
        elif column == "__description":
            if value:
                test["description"] = value
        elif column.startswith("__metadata:"):
            key = column.removeprefix("__metadata:")
            if not value.strip():
                continue
            if key.endswith("[]"):
                parts = _CSV_SEPARATOR.split(value)
                test["metadata"][key[:-2]] = [p.strip().replace("\\,", ",") for p in parts]
            else:
                test["metadata"][key] = value
        elif column.startswith("__config:"):
            _csv_config(column, value, where, thresholds)
        elif column.startswith("__"):
            if value.strip():
                log.skip(f"{where} {column}", _CSV_WHY.get(column, "not mapped"))
        else:
            test["vars"][column] = value
    for index, threshold in thresholds.items():
        if index < len(test["assert"]):  # the n-th assert written, as promptfoo counts
            test["assert"][index]["threshold"] = threshold
            test["metadata"]["threshold"] = threshold
    return test


def _csv_config(column: str, value: str, where: str, thresholds: dict[int, float]) -> None:
    """A ``__config:__expected<N>:threshold`` column: the threshold of the N-th assert."""
    parts = column.removeprefix("__config:").split(":")
    found = re.fullmatch(r"__expected(\d*)", parts[0]) if len(parts) == 2 else None
    index = (int(found.group(1) or 1) - 1) if found else -1
    if found is None or index < 0 or parts[1] != "threshold":
        raise ImportProblem(
            f"{where}: column {column!r}: expected __config:__expected<N>:threshold"
        )
    number = value.strip()
    if not re.fullmatch(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", number):
        raise ImportProblem(f"{where}: column {column!r}: {value!r} is not a number")
    thresholds[index] = float(number)


_CSV_WHY = {
    "__prefix": "a text promptfoo adds before the prompt; put it in the task's template",
    "__suffix": "a text promptfoo adds after the prompt; put it in the task's template",
    "__providerOutput": "a recorded output, not a model call; evalreg records its own",
    "__metric": "named metrics are not mapped; each criterion is its own column",
    "__threshold": "a test's pass threshold is not mapped; set the rubric's levels",
}
"""Why a special CSV column has no mapping."""


def _csv_assert(text: str) -> dict[str, Any]:
    """An assert from its (trimmed) CSV form, as promptfoo reads it; plain text is ``equals``."""
    for prefix, kind in (
        ("javascript:", "javascript"),
        ("fn:", "javascript"),
        ("eval:", "javascript"),
        ("python:", "python"),
        ("grade:", "llm-rubric"),
        ("llm-rubric:", "llm-rubric"),
    ):
        if text.startswith(prefix):
            return {"type": kind, "value": text.removeprefix(prefix)}
    if text.startswith("file://") and text.split(":")[1].endswith(_CODE_SUFFIXES):
        return {"type": "python" if ".py" in text else "javascript", "value": text}
    match = _CSV_ASSERT.match(text)
    if match is None:
        return {"type": "equals", "value": text}
    negated, kind, threshold, value = match.groups()
    out: dict[str, Any] = {"type": (negated or "") + kind, "value": value}
    # A list of texts stays one text here: the assert splits it as promptfoo does.
    if value is not None and kind not in _CSV_UNTRIMMED and not kind.endswith(("-all", "-any")):
        out["value"] = value.strip()
    if threshold is not None:
        out["threshold"] = float(threshold)
    return out


def _test(raw: Any, where: str, default: dict[str, Any], log: ImportLog) -> _Test:
    if not isinstance(raw, dict):
        raise ImportProblem(f"{where}: a test is a mapping (vars, assert, ...)")
    for key in sorted(set(raw) - _TEST_KEYS):
        log.skip(f"{where}.{key}", "not mapped")
    own_options = _mapping(raw, "options", where)
    for key in sorted(set(own_options) - _OPTION_KEYS):
        log.skip(f"{where}.options.{key}", _OPTION_WHY.get(key, "not mapped"))
    options = _mapping(default, "options", "defaultTest") | own_options
    own = [(f"{where}.assert[{k}]", a) for k, a in enumerate(_list(raw, "assert", where))]
    inherited = [
        (f"defaultTest.assert[{k}]", a)
        for k, a in enumerate(_list(default, "assert", "defaultTest"))
    ]
    description = raw.get("description")
    return _Test(
        where=where,
        vars=_mapping(default, "vars", "defaultTest") | _mapping(raw, "vars", where),
        asserts=own if options.get("disableDefaultAsserts") is True else inherited + own,
        description=description if isinstance(description, str) else None,
        metadata=_mapping(default, "metadata", "defaultTest") | _mapping(raw, "metadata", where),
        grader=options.get("provider"),
        transformed=options.get("transform") is not None,
    )


def _mapping(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        raise ImportProblem(f"{where}.{key} is not a mapping")
    return value


def _list(raw: dict[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise ImportProblem(f"{where}.{key} is not a list")
    return value


def _expand(test: _Test, base: Path, log: ImportLog) -> list[_Test]:
    """One test per combination of its list vars (as promptfoo runs them), files read."""
    choices: list[list[Any]] = []
    try:
        for value in test.vars.values():
            if isinstance(value, str) and value.startswith("file://"):
                choices.append([_var_file(p) for p in _files(value, base)])
            elif isinstance(value, list) and value and isinstance(value[0], str):
                choices.append(value)
            else:
                choices.append([value])
    except NotMapped as exc:
        log.skip(f"{test.where}.vars", f"{exc}; the test is not imported")
        return []
    combos = list(itertools.product(*choices))
    return [
        dataclasses.replace(
            test,
            where=test.where + (f" (vars combination {n})" if len(combos) > 1 else ""),
            vars=dict(zip(test.vars, combo, strict=True)),
        )
        for n, combo in enumerate(combos, start=1)
    ]


def _var_file(path: Path) -> str:
    if path.suffix in _CODE_SUFFIXES:
        raise NotMapped(f"{path.name}: a var computed by code")
    return read_text(path).strip()


def _items(
    tests: list[_Test], prompts: list[_Prompt], found: Criteria, log: ImportLog
) -> list[dict[str, Any]]:
    used: set[str] = set()
    for prompt in prompts:
        used |= variables(prompt.template) | variables(prompt.system or "")
    rows = []
    for k, test in enumerate(tests):
        inputs = to_plain(test.vars)
        for var in sorted(used - set(inputs)):
            # promptfoo renders a missing var as empty text; evalreg would refuse the item.
            inputs[var] = ""
            log.note(f"var {var!r} is missing from some tests: their items set it to ''")
        own = _metadata_tags(test.metadata)
        row: dict[str, Any] = {
            "id": f"test-{k + 1:03d}",
            "input": inputs,
            "tags": sorted(set(own or ["imported"]) | set(found.tags[k])),
            "meta": {"source": test.where}
            | ({"description": test.description} if test.description else {})
            | ({"metadata": to_plain(test.metadata)} if test.metadata else {}),
        }
        if found.expected[k]:
            row["expected"] = found.expected[k]
        rows.append(row)
    return rows


def _metadata_tags(metadata: dict[str, Any]) -> list[str]:
    """Slices from a test's ``metadata.tags`` (a list, or comma-separated text)."""
    raw = metadata.get("tags")
    values = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return [t for t in (slug(str(v)) for v in values) if t]


# ---------------------------------------------------------------- files
def _files(ref: str, base: Path) -> list[Path]:
    """The files a ``file://`` reference names, relative to the config's folder (globs too)."""
    rel = ref.removeprefix("file://")
    if _GLOB.search(rel):
        pattern = base / rel
        anchor = Path(pattern.anchor)  # Path.glob takes relative patterns only
        found = sorted(p for p in anchor.glob(str(pattern.relative_to(anchor))) if p.is_file())
        if not found:
            raise ImportProblem(f"{ref}: no file matches")
        return found
    path = base / rel
    if not path.is_file() and not (":" in rel and (base / rel.rpartition(":")[0]).is_file()):
        raise ImportProblem(f"{ref}: no such file (looked for {path})")
    return [path]


def _jsonl(path: Path) -> list[Any]:
    try:
        return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ImportProblem(f"{path}: not JSONL ({exc.msg} at line {exc.lineno})") from None


def _load_file(path: Path) -> Any:
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise ImportProblem(f"{path}: tests are read from .csv, .yaml, .yml, .json or .jsonl")
    return read_yaml(path)
