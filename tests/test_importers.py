"""Importers turn a promptfoo config or OpenAI evals samples into registry files that load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.graders import GradingContext, build_grader
from evalreg.graders.levels import applies, assign_level
from evalreg.graders.parsing import parse_output
from evalreg.importers import ImportProblem, import_openai_evals, import_promptfoo
from evalreg.importers.promptfoo_asserts import BLEU_NOTE, ROUGE_NOTE
from evalreg.registry.loader import load_registry
from evalreg.templating import render

from conftest import (
    PIN_OPENAI,
    PIN_PYTHON,
    RUBRIC,
    SELECTION,
    SYSTEM,
    TASK,
    Repo,
    items_jsonl,
)

DATA = Path(__file__).parent / "data" / "importers"
PROMPTFOO = DATA / "promptfoo" / "promptfooconfig.yaml"
SAMPLES = DATA / "openai_evals" / "samples.jsonl"

GEOGRAPHY_FILES = (
    "registry/models/geography-gpt-4o-mini.yaml",
    "registry/models/geography-local-llama.yaml",
    "registry/models/geography-gpt-4o-2024-08-06.yaml",
    "registry/rubrics/geography.yaml",
    "registry/tasks/geography.yaml",
    "registry/selections/geography.yaml",
    "evalsets/geography.jsonl",
)


def standard_registry(root: Path) -> Repo:
    """The shared test registry's files (pins mini and rules, use case labels), without git."""
    team = Repo(root)
    team.write("registry/models/rules.yaml", PIN_PYTHON)
    team.write("registry/models/mini.yaml", PIN_OPENAI)
    team.write("registry/rubrics/labels.yaml", RUBRIC)
    team.write("registry/tasks/labels.yaml", TASK)
    team.write("registry/selections/labels.yaml", SELECTION)
    team.write("registry/systems/rules.py", SYSTEM)
    team.write("evalsets/messages.jsonl", items_jsonl())
    return team


@pytest.fixture
def team(tmp_path: Path) -> Repo:
    return standard_registry(tmp_path / "team")


@pytest.fixture(scope="module")
def geography(tmp_path_factory: pytest.TempPathFactory):
    """The promptfoo fixture imported into the standard registry (read-only for the tests)."""
    team = standard_registry(tmp_path_factory.mktemp("geography"))
    result = import_promptfoo(PROMPTFOO, team.root, name="geography")
    return team, result, load_registry(team.root)


def items_of(root: Path, rel: str) -> dict[str, dict]:
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def grade(registry, task_id: str, item_id: str, output: str) -> tuple[str, dict[str, bool]]:
    """The level and the verdicts of the applicable criteria for one output of one item."""
    task = registry.tasks[task_id]
    rubric = registry.rubrics[task.rubric]
    item = next(i for i in registry.evalset_of(task_id).items if i.id == item_id)
    parsed = parse_output(output, task.output)
    context = GradingContext(output_schema=task.output.schema_)
    verdicts = {
        c.id: build_grader(c.grader, context)(parsed, item)
        for c in rubric.criteria
        if applies(c, item.tags) and c.grader.type != "llm_judge"
    }
    level, _ = assign_level(rubric, verdicts, item.tags)
    return level, {cid: v.passed for cid, v in verdicts.items()}


def write_config(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "promptfooconfig.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def bare_registry(tmp_path: Path) -> Path:
    root = tmp_path / "registry-root"
    (root / "registry").mkdir(parents=True)
    return root


# ---------------------------------------------------------------- promptfoo
def test_promptfoo_import_writes_every_file_and_the_registry_loads(geography):
    team, result, registry = geography
    assert result.written == GEOGRAPHY_FILES
    assert result.evalset == "evalsets/geography.jsonl"
    assert "geography" in registry.selections  # load_registry raised on any finding
    assert "labels" in registry.selections  # the registry's own use case is untouched
    for rel in result.written:
        if rel.endswith(".yaml"):
            first = (team.root / rel).read_text().splitlines()[0]
            assert (
                first
                == "# Imported from promptfoo (promptfooconfig.yaml); review before relying on it."
            )


def test_promptfoo_import_passes_evalreg_check(geography, cli):
    checked = cli(geography[0], "check", "--json")
    assert checked.code == 0, checked.out
    findings = json.loads(checked.out)["findings"]
    assert {f["severity"] for f in findings} == {"warning"}
    assert "evalsets/geography.jsonl" in {f["path"] for f in findings}  # not on DVC yet


def test_providers_become_pins_with_base_url_key_name_and_params(geography):
    _, _, registry = geography
    mini = registry.pins["geography-gpt-4o-mini"]
    assert (mini.provider, mini.model, mini.base_url) == ("openai", "gpt-4o-mini", None)
    assert mini.api_key_env == "OPENAI_API_KEY"
    assert mini.params == {} and mini.price is None
    local = registry.pins["geography-local-llama"]
    assert (local.provider, local.model) == ("openai", "llama-3.1-8b-instruct")
    assert local.base_url == "http://localhost:8000/v1"
    assert local.params == {"temperature": 0, "max_tokens": 256}
    judge = registry.pins["geography-gpt-4o-2024-08-06"]
    assert judge.description == (
        "Imported from promptfoo grading provider: openai:gpt-4o-2024-08-06."
    )


def test_first_prompt_is_the_template_and_the_second_a_variant_of_each_candidate(geography):
    _, _, registry = geography
    task = registry.tasks["geography"]
    assert task.prompt.system is None
    assert (
        task.prompt.template
        == "Answer the question in one short sentence.\n\nQuestion: {{question}}\n"
    )
    assert task.output.parser == "text"
    selection = registry.selections["geography"]
    assert [(c.id, c.pin) for c in selection.candidates] == [
        ("gpt-4o-mini", "geography-gpt-4o-mini"),
        ("gpt-4o-mini-p2", "geography-gpt-4o-mini"),
        ("local-llama", "geography-local-llama"),
        ("local-llama-p2", "geography-local-llama"),
    ]
    variant = selection.candidates[1].prompt
    assert variant is not None and variant.template == "{{ question }}"
    assert variant.system == "You are a patient geography tutor. Be brief and exact."
    assert selection.selected == "gpt-4o-mini"
    assert selection.rationale == "Imported from promptfoo; review the policy before relying on it."
    assert selection.use_case == "Geography answers for the travel assistant"
    assert [t.maximize for t in selection.policy.objective.terms] == ["pass_rate"]
    assert selection.policy.gates == []


def test_asserts_become_criteria_fixed_or_read_from_each_item(geography):
    _, _, registry = geography
    criteria = {
        c.id: (c.grader.model_dump(exclude_defaults=True, by_alias=True), c.slices)
        for c in registry.rubrics["geography"].criteria
    }
    assert criteria == {
        # defaultTest: on every test, one value -> a fixed criterion for all items.
        # promptfoo compares the raw output; its i-asserts lower-case (not casefold).
        "not-icontains": (
            {"type": "not_contains", "value": "as an AI", "raw": True, "case": "lower"},
            None,
        ),
        "equals": ({"type": "exact", "value": "Paris", "raw": True}, ["assert-equals"]),
        # "{{city}}" is rendered with the test's vars, as promptfoo does.
        "contains": (
            {"type": "contains", "value": "Tokyo", "ignore_case": False, "raw": True},
            ["assert-contains"],
        ),
        # A different value on each test that has it -> read from the item's expected.
        "icontains": (
            {"type": "contains", "expected_field": "icontains", "raw": True, "case": "lower"},
            ["assert-icontains"],
        ),
        # A JavaScript pattern: \b is ASCII, as with re.ASCII.
        "regex": (
            {"type": "regex", "pattern": r"\b1960\b", "raw": True, "ascii": True, "utf16": True},
            ["assert-regex"],
        ),
        # is-json on one test only: the raw output of that item must be JSON.
        "is-json": (
            {"type": "json_schema", "parse": "strict", "schema": {}},
            ["assert-is-json"],
        ),
        "llm-rubric": (
            {
                "type": "llm_judge",
                "judge": "geography-gpt-4o-2024-08-06",
                "prompt": "Grade the output against the rubric.\n\nRubric: {{ criterion }}\n\n"
                "Output:\n{{ output }}\n",
                "prompt_version": "promptfoo-llm-rubric-1",
            },
            ["assert-llm-rubric"],
        ),
    }
    rubric = registry.rubrics["geography"]
    judged = next(c for c in rubric.criteria if c.id == "llm-rubric")
    assert judged.description == "Explains evaporation from a lake with no outflow, in plain words"
    assert rubric.levels.correct.require == "all" and rubric.levels.acceptable.require == "all"


def test_tests_and_csv_rows_become_items(geography):
    items = items_of(geography[0].root, "evalsets/geography.jsonl")
    assert list(items) == [f"test-{n:03d}" for n in range(1, 8)]
    japan = items["test-002"]
    assert japan["input"] == {"question": "What is the capital of Japan?", "city": "Tokyo"}
    assert japan["expected"] == {"icontains": "japan"}
    assert japan["tags"] == ["assert-contains", "assert-icontains", "imported"]
    assert japan["meta"] == {"source": "tests[1]", "description": "Capital of Japan"}
    assert items["test-003"]["tags"] == ["assert-regex", "dates", "edge"]  # metadata.tags
    assert "expected" not in items["test-001"]  # its equals value is fixed in the rubric
    berlin = items["test-006"]
    assert berlin["input"] == {"question": "What is the capital of Germany?"}
    assert berlin["expected"] == {"icontains": "berlin"}
    assert berlin["meta"] == {"source": "tests.csv row 1", "description": "Capital of Germany"}


def test_what_did_not_map_is_listed_with_the_reason(geography):
    _, result, _ = geography
    assert result.not_mapped == (
        "tests[3].assert[1]: javascript asserts run code; rewrite it as a 'python' grader",
    )
    assert result.notes == (
        "pins carry no price (the source has none): cost metrics read 0 until each pin in "
        "registry/models has a dated 'price'",
        "pin geography-gpt-4o-mini names model 'gpt-4o-mini', an alias the provider may move: "
        "pin a dated snapshot so results stay reproducible",
        "pin geography-local-llama names model 'llama-3.1-8b-instruct', an alias the provider "
        "may move: pin a dated snapshot so results stay reproducible",
    )


def test_imported_criteria_grade_as_promptfoo_would(geography):
    _, _, registry = geography
    assert grade(registry, "geography", "test-001", "Paris") == (
        "correct",
        {"not-icontains": True, "equals": True},
    )
    # promptfoo's equals compares the raw output: a trailing newline is a difference.
    assert grade(registry, "geography", "test-001", "Paris\n")[1]["equals"] is False
    assert grade(registry, "geography", "test-001", "As an AI, I say Paris")[0] == "unacceptable"
    assert grade(registry, "geography", "test-002", "Tokyo is the capital of JAPAN.") == (
        "correct",
        {"not-icontains": True, "contains": True, "icontains": True},
    )
    assert grade(registry, "geography", "test-002", "tokyo, Japan")[1]["contains"] is False
    assert grade(registry, "geography", "test-006", "It is Berlin.")[0] == "correct"
    assert grade(registry, "geography", "test-003", "In 1960.")[0] == "correct"


def test_importing_twice_refuses_and_changes_nothing(geography):
    team = geography[0]
    before = team.snapshot()
    with pytest.raises(ImportProblem, match=r"already exist.*choose another --name"):
        import_promptfoo(PROMPTFOO, team.root, name="geography")
    assert team.snapshot() == before


def test_one_existing_file_means_no_file_is_written(team: Repo):
    team.write("registry/tasks/geography.yml", "schema_version: 1\n")
    before = team.snapshot()
    with pytest.raises(ImportProblem, match=r"registry/tasks/geography\.yaml already exists"):
        import_promptfoo(PROMPTFOO, team.root, name="geography")
    assert team.snapshot() == before
    assert not (team.root / "registry/models/geography-gpt-4o-mini.yaml").exists()


def test_llm_rubric_without_a_grading_provider_needs_a_judge_pin(tmp_path: Path, team: Repo):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Q: {{q}}"]
providers: [anthropic:messages:claude-3-5-haiku-20241022]
tests:
  - vars: {q: Hello}
    assert:
      - {type: icontains, value: hello}
      - {type: llm-rubric, value: Friendly}
""",
    )
    result = import_promptfoo(config, team.root, name="hello")
    assert result.not_mapped == (
        "tests[0].assert[1]: a model-graded assert needs a judge model: set "
        "defaultTest.options.provider, or pass --judge PIN",
    )
    pin = load_registry(team.root).pins["hello-claude-3-5-haiku-20241022"]
    assert (pin.provider, pin.api_key_env) == ("anthropic", "ANTHROPIC_API_KEY")

    judged = import_promptfoo(config, team.root, name="hello-judged", judge="mini")
    assert judged.not_mapped == ()
    rubric = load_registry(team.root).rubrics["hello-judged"]
    assert [c.grader.type for c in rubric.criteria] == ["contains", "llm_judge"]
    assert rubric.criteria[1].grader.judge == "mini"  # type: ignore[union-attr]
    with pytest.raises(ImportProblem, match="--judge nobody: no model pin 'nobody'"):
        import_promptfoo(config, team.root, name="other", judge="nobody")


def test_a_default_assert_with_vars_is_read_from_each_item(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Tell me about {{topic}}"]
providers: [anthropic:messages:claude-3-5-haiku-20241022]
evaluateOptions: {repeat: 3}
defaultTest:
  assert:
    - type: llm-rubric
      value: Talks about {{topic}} politely
      provider: openai:gpt-4o-2024-08-06
      threshold: 0.7
tests:
  - vars: {topic: cats}
    threshold: 0.5
  - vars: {topic: dogs}
    assert: [{type: equals, value: Woof, transform: output.trim()}]
  - vars: {topic: fish}
    options: {disableDefaultAsserts: true}
    assert: [{type: icontains, value: fish}]
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="pets")
    registry = load_registry(root)
    judged, fish = registry.rubrics["pets"].criteria
    assert judged.slices == ["assert-llm-rubric"] and fish.slices == ["assert-icontains"]
    assert judged.grader.model_dump(exclude_defaults=True) == {
        "type": "llm_judge",
        "judge": "pets-gpt-4o-2024-08-06",
        "prompt": 'Grade the output against the rubric.\n\nRubric: {{ expected["llm-rubric"] }}'
        "\n\nOutput:\n{{ output }}\n",
        "prompt_version": "promptfoo-llm-rubric-1",
        "pass_threshold": 0.7,
    }
    expected = [i.get("expected") for i in items_of(root, "evalsets/pets.jsonl").values()]
    assert expected == [
        {"llm-rubric": "Talks about cats politely"},
        {"llm-rubric": "Talks about dogs politely"},
        None,  # its one assert has one value: the rubric holds it
    ]
    assert fish.grader.model_dump(exclude_defaults=True) == {
        "type": "contains",
        "value": "fish",
        "raw": True,
        "case": "lower",
    }
    assert registry.tasks["pets"].repeats == 3
    assert result.not_mapped == (
        "tests[0].threshold: not mapped",
        "tests[1].assert[0]: transform is not supported",
    )


def test_is_json_on_every_test_parses_json_output(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Extract the city from: {{text}}"]
providers:
  - id: openai:gpt-4o-mini-2024-07-18
    config: {response_format: {type: json_object}, apiKey: sk-not-copied, showThinking: true}
defaultTest:
  assert:
    - type: is-json
tests:
  - vars: {text: I live in Lyon}
    assert:
      - {type: equals, value: {city: Lyon}}
      - {type: equals, value: Lyon}
  - vars: {text: Bonjour de Nantes}
    assert:
      - {type: equals, value: {city: Nantes}}
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="cities")
    registry = load_registry(root)
    task = registry.tasks["cities"]
    # promptfoo's equals with a JSON value is JSON.parse of the whole output: strict.
    assert (task.output.parser, task.output.extract) == ("json", "strict")
    criteria = {
        c.id: c.grader.model_dump(exclude_defaults=True)
        for c in registry.rubrics["cities"].criteria
    }
    assert criteria == {
        "is-json": {"type": "json_schema", "parse": "strict", "schema_": {}},
        "equals": {"type": "exact", "expected_field": "equals"},
        "equals-2": {"type": "exact", "value": "Lyon", "raw": True},
    }
    assert registry.pins["cities-gpt-4o-mini-2024-07-18"].params == {
        "response_format": {"type": "json_object"}
    }
    assert result.not_mapped == (
        "providers[0].config.apiKey: a key never goes into a registry file; set OPENAI_API_KEY "
        "in the environment",
        "providers[0].config.showThinking: not a request parameter evalreg sends",
    )
    assert "sk-not-copied" not in "".join(p.read_text() for p in root.rglob("*.yaml"))
    assert grade(registry, "cities", "test-001", ' {"city": "Lyon"}\n')[1] == {
        "is-json": True,
        "equals": True,
        "equals-2": False,
    }
    # promptfoo rejects fenced JSON, and so does the strict parse.
    fenced = grade(registry, "cities", "test-001", '```json\n{"city": "Lyon"}\n```')[1]
    assert fenced["is-json"] is False and fenced["equals"] is False
    assert grade(registry, "cities", "test-002", "Nantes")[1] == {"is-json": False, "equals": False}


def test_nunjucks_filters_missing_from_jinja2_drop_the_prompt(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts:
  - "Summarise: {{ doc | dump }}"
  - raw: "Summarise: {{ doc }}"
    label: Plain
providers: [openai:gpt-4o-mini]
tests:
  - vars: {doc: [a, b]}
    assert: [{type: contains, value: a}]
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="docs")
    assert result.not_mapped == (
        "prompts[0]: filter 'dump' does not exist in Jinja2 (use 'tojson')",
    )
    registry = load_registry(root)
    assert registry.tasks["docs"].prompt.template == "Summarise: {{ doc }}"
    # A list of strings is one test per value, as promptfoo runs it.
    items = items_of(root, "evalsets/docs.jsonl")
    assert [i["input"] for i in items.values()] == [{"doc": "a"}, {"doc": "b"}]
    assert items["test-002"]["meta"]["source"] == "tests[0] (vars combination 2)"


def test_a_var_the_prompt_uses_but_a_test_lacks_is_set_empty(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["{{ greeting }}, {{ name }}"]
providers: [openai:gpt-4o-mini]
defaultTest:
  vars: {greeting: Hello}
tests:
  - vars: {name: Ada}
    assert: [{type: starts-with, value: Hello}]
  - assert: [{type: starts-with, value: Hello}]
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="greet")
    inputs = [i["input"] for i in items_of(root, "evalsets/greet.jsonl").values()]
    assert inputs == [{"greeting": "Hello", "name": "Ada"}, {"greeting": "Hello", "name": ""}]
    assert "var 'name' is missing from some tests: their items set it to ''" in result.notes
    regex = load_registry(root).rubrics["greet"].criteria[0].grader
    assert regex.model_dump(exclude_defaults=True) == {
        "type": "regex",
        "pattern": r"\AHello",
        "raw": True,
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("prompts: [x]\nproviders: [vertex:gemini-pro]\ntests: [{assert: []}]", "no provider maps"),
        (
            "prompts: [x]\nproviders: [openai:gpt-4o-mini]\n"
            "tests: [{assert: [{type: javascript, value: 'true'}]}]",
            "no assert maps to an evalreg grader",
        ),
        ("prompts: [file://missing.txt]\nproviders: [openai:x]\ntests: []", "no such file"),
        ("- a list", "expected a promptfoo config"),
        ("prompts: [x\n", "not valid YAML"),
        ("prompts: " + "[" * 5000 + "]" * 5000, "nested too deep to read"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
            + "prompts: [x]\nproviders: [openai:gpt-4o-mini]\ntests: *a9\n",
            "holds more than 1,000,000 values once its aliases are expanded",
        ),
    ],
)
def test_unusable_configs_are_refused_without_writing(tmp_path: Path, config, message):
    root = bare_registry(tmp_path)
    with pytest.raises(ImportProblem, match=message):
        import_promptfoo(write_config(tmp_path / "pf", config), root, name="x")
    assert not any(p.is_file() for p in root.rglob("*"))


def test_the_name_must_be_an_id(tmp_path: Path):
    with pytest.raises(ImportProblem, match="--name 'my eval' is not an id"):
        import_promptfoo(PROMPTFOO, bare_registry(tmp_path), name="my eval")


# ---------------------------------------------------------------- OpenAI evals
def test_openai_evals_samples_become_conversation_items(team: Repo, cli):
    result = import_openai_evals(SAMPLES, team.root, name="capitals", pins=["mini", "rules"])
    assert result.written == (
        "registry/rubrics/capitals.yaml",
        "registry/tasks/capitals.yaml",
        "registry/selections/capitals.yaml",
        "evalsets/capitals.jsonl",
    )
    registry = load_registry(team.root)
    task = registry.tasks["capitals"]
    assert task.prompt.system == "Answer with the country's capital city only."
    selection = registry.selections["capitals"]
    assert [(c.id, c.pin) for c in selection.candidates] == [("mini", "mini"), ("rules", "rules")]
    assert selection.selected == "mini"
    assert (
        selection.rationale == "Imported from OpenAI evals; review the policy before relying on it."
    )
    items = items_of(team.root, "evalsets/capitals.jsonl")
    assert len(items) == 6
    assert items["sample-001"]["messages"] == [{"role": "user", "content": "France"}]
    assert items["sample-001"]["expected"] == {"ideal": "Paris"}
    assert items["sample-004"]["expected"] == {"ideal": "Berlin"}
    # Several ideal answers: any one passes, as in OpenAI evals.
    assert items["sample-003"]["expected"] == {"ideal": ["Brasília", "Brasilia"]}
    assert [m["role"] for m in items["sample-006"]["messages"]] == ["user", "assistant", "user"]
    assert result.not_mapped == ()
    assert cli(team, "check").code == 0


def test_json_match_samples_grade_as_json_match_does(tmp_path: Path, team: Repo, cli):
    samples = tmp_path / "samples.jsonl"
    ideals = ['{"label": "a"}', '{"label": "b"}', ['{"label": null}', '{"label": "a"}'], "[1, 2]"]
    samples.write_text(
        "".join(
            json.dumps({"input": f"message {n}", "ideal": ideal}) + "\n"
            for n, ideal in enumerate(ideals)
        ),
        encoding="utf-8",
    )
    result = cli(
        team,
        "import",
        "openai-evals",
        str(samples),
        "--name",
        "j",
        "--pin",
        "rules",
        "--kind",
        "json_match",
    )
    assert result.code == 0, result.err
    registry = load_registry(team.root)
    task = registry.tasks["j"]
    assert (task.output.parser, task.output.extract) == ("json", "strict")
    items = items_of(team.root, "evalsets/j.jsonl")
    # Always a list of the ideal JSON values: a lone ideal that is a JSON list stays one.
    assert items["sample-004"]["expected"] == {"ideal": [[1, 2]]}
    assert items["sample-003"]["expected"] == {"ideal": [{"label": None}, {"label": "a"}]}
    team.git("init", "-q", "-b", "main")
    dvcrepo.init(team.root, remote=None)
    team.commit("import")
    run = cli(team, "run", "--task", "j")  # a python pin: nothing leaves the machine
    assert run.code == 0, run.err
    records = [
        json.loads(line)
        for line in (team.root / "reports/results/j/rules.items.jsonl").read_text().splitlines()
    ]
    # The rules baseline answers {"label": "a"} to everything.
    assert {r["item"]: r["criteria"]["json_match"]["passed"] for r in records} == {
        "sample-001": True,
        "sample-002": False,
        "sample-003": True,
        "sample-004": False,
    }


MATCH = {
    "type": "exact",
    "expected_field": "ideal",
    "raw": True,
    "compare": "prefix",
    "match": "any",
}
INCLUDES = {
    "type": "contains",
    "expected_field": "ideal",
    "ignore_case": False,
    "raw": True,
    "match": "any",
}
FUZZY = {
    "type": "normalized",
    "expected_field": "ideal",
    "form": "squad",
    "compare": "overlap",
    "match": "any",
}


@pytest.mark.parametrize(
    ("kind", "grader", "output", "passed"),
    [
        # OpenAI evals' Match: the raw output starts with an ideal answer.
        ("match", MATCH, "Paris.", True),
        ("match", MATCH, " Paris\n", False),
        ("includes", INCLUDES, "It is Paris.", True),
        ("includes", INCLUDES, "paris", False),
        ("fuzzy_match", FUZZY, "the paris!", True),
        ("fuzzy_match", FUZZY, "Lyon", False),
    ],
)
def test_each_eval_kind_has_its_grader(tmp_path: Path, team: Repo, kind, grader, output, passed):
    import_openai_evals(SAMPLES, team.root, name="capitals", pins=["mini"], kind=kind)
    registry = load_registry(team.root)
    (criterion,) = registry.rubrics["capitals"].criteria
    assert criterion.id == kind
    assert criterion.grader.model_dump(exclude_defaults=True) == grader
    level, _ = grade(registry, "capitals", "sample-001", output)
    assert (level == "correct") is passed


def test_system_prompts_that_differ_stay_in_the_items_and_braces_stay_text(
    tmp_path: Path, team: Repo
):
    samples = tmp_path / "samples.jsonl"
    rows = [
        {
            "input": [
                {"role": "system", "content": "Reply as {{json}}"},
                {"role": "user", "content": "a"},
            ],
            "ideal": "1",
        },
        {"input": "b", "ideal": 2},
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_openai_evals(samples, team.root, name="mixed", pins=["mini"])
    registry = load_registry(team.root)
    assert registry.tasks["mixed"].prompt.system is None
    items = items_of(team.root, "evalsets/mixed.jsonl")
    assert items["sample-001"]["messages"][0] == {"role": "system", "content": "Reply as {{json}}"}
    assert items["sample-002"] == {
        "id": "sample-002",
        "messages": [{"role": "user", "content": "b"}],
        "expected": {"ideal": "2"},
        "tags": ["imported"],
        "meta": {"source": "line 2"},
    }

    shared = tmp_path / "shared.jsonl"
    shared.write_text(json.dumps(rows[0]) + "\n")
    import_openai_evals(shared, team.root, name="shared", pins=["mini"])
    system = load_registry(team.root).tasks["shared"].prompt.system
    assert system is not None and render(system, {}) == "Reply as {{json}}"


def test_openai_evals_needs_an_existing_pin(tmp_path: Path, team: Repo):
    with pytest.raises(ImportProblem, match="give at least one existing pin"):
        import_openai_evals(SAMPLES, team.root, name="capitals", pins=[])
    with pytest.raises(ImportProblem, match="--pin gpt-5: no model pin 'gpt-5'"):
        import_openai_evals(SAMPLES, team.root, name="capitals", pins=["gpt-5"])
    with pytest.raises(ImportProblem, match="--kind exact: expected one of match, includes"):
        import_openai_evals(SAMPLES, team.root, name="capitals", pins=["mini"], kind="exact")


def test_a_broken_samples_file_is_refused_naming_the_line(tmp_path: Path, team: Repo):
    samples = tmp_path / "samples.jsonl"
    shutil.copy(SAMPLES, samples)
    with samples.open("a") as handle:
        handle.write('{"input": "x", "ideal": "y"\n')
    before = team.snapshot()
    with pytest.raises(ImportProblem, match=r"line 7: invalid JSON"):
        import_openai_evals(samples, team.root, name="capitals", pins=["mini"])
    assert team.snapshot() == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input": ' + "[" * 5000 + "]" * 5000 + "}", "line 7: unreadable JSON"),
        ('{"input": "q", "ideal": ' + "1" * 5000 + "}", "line 7: unreadable JSON"),
        (
            '{"input": "q\\ud800", "ideal": "x"}',
            "would hold '\\\\ud800', half of a UTF-16 surrogate pair that no file can hold",
        ),
    ],
)
def test_a_samples_file_no_item_can_hold_is_refused_without_writing(
    tmp_path: Path, team: Repo, line, message
):
    samples = tmp_path / "samples.jsonl"
    shutil.copy(SAMPLES, samples)
    with samples.open("a") as handle:
        handle.write(line + "\n")
    before = team.snapshot()
    with pytest.raises(ImportProblem, match=message):
        import_openai_evals(samples, team.root, name="capitals", pins=["mini"])
    assert team.snapshot() == before


def test_samples_that_cannot_be_items_are_skipped_with_the_reason(tmp_path: Path, team: Repo):
    samples = tmp_path / "samples.jsonl"
    rows = [
        {"input": "ok", "ideal": "yes"},
        {
            "input": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            "ideal": "x",
        },
        {"input": "no ideal"},
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_openai_evals(samples, team.root, name="few", pins=["mini"])
    assert result.not_mapped == (
        "line 2: the conversation does not end with a user turn; the sample is not imported",
        "line 3: 'ideal' is neither an answer nor a list of answers; the sample is not imported",
    )
    assert list(items_of(team.root, "evalsets/few.jsonl")) == ["sample-001"]


def test_csv_tests_import_as_promptfoo_reads_them(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Explain {{ topic }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests: file://tests.csv
""",
    )
    (tmp_path / "pf" / "tests.csv").write_text(
        " topic ,__expected1,__expected2,__metadata:tags[],__metadata:owner,__prefix,"
        "__config:__expected2:threshold\n"
        'sorting,contains: algorithm ,"icontains-any: heap, ""merge, sort""",'
        '"math, edge\\,case",ana,Q:,0.5\n'
        "graphs,contains: algorithm,,,,,0.5\n",
        encoding="utf-8",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="explain")
    registry = load_registry(root)
    criteria = {
        c.id: c.grader.model_dump(exclude_defaults=True)
        for c in registry.rubrics["explain"].criteria
    }
    # promptfoo trims a CSV assert's value: "contains: algorithm " looks for "algorithm".
    assert criteria["contains"]["value"] == "algorithm"
    # A quoted field keeps its comma, as promptfoo's list parser does.
    assert criteria["icontains-any"]["value"] == ["heap", "merge, sort"]
    items = items_of(root, "evalsets/explain.jsonl")
    sorting, graphs = items["test-001"], items["test-002"]
    assert sorting["input"] == {"topic": "sorting"}  # the column name is trimmed
    # __metadata:tags[] is a list, split on unescaped commas, and its tags become slices.
    # __config:__expected2:threshold sets the second assert's threshold (and, as promptfoo
    # does, the test's metadata.threshold); row 2 has no second assert.
    assert sorting["meta"]["metadata"] == {
        "tags": ["math", "edge,case"],
        "owner": "ana",
        "threshold": 0.5,
    }
    assert {"math", "edge-case"} <= set(sorting["tags"])
    assert "metadata" not in graphs["meta"]  # empty metadata cells are no metadata
    assert result.not_mapped == (
        "tests.csv row 1 __prefix: a text promptfoo adds before the prompt; put it in the "
        "task's template",
    )
    assert grade(registry, "explain", "test-001", "A merge, sort algorithm")[0] == "correct"
    assert grade(registry, "explain", "test-002", "An algorithm")[0] == "correct"
    (tmp_path / "pf" / "tests.csv").write_text(
        "topic,__expected,__config:__expected0:threshold\nx,contains: y,1\n", encoding="utf-8"
    )
    with pytest.raises(ImportProblem, match=r"tests\.csv row 1: column '__config:__expected0"):
        import_promptfoo(config, bare_registry(tmp_path / "again"), name="explain")


def test_refs_assert_sets_transforms_and_content_parts_map_or_say_why(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts:
  - id: file://chat.json
providers: [openai:gpt-4o-mini-2024-07-18]
assertionTemplates:
  polite: {type: icontains, value: please}
defaultTest:
  options: {prefix: "Q: "}
tests:
  - vars: {q: a}
    assert:
      - $ref: "#/assertionTemplates/polite"
      - type: assert-set
        weight: 2
        assert:
          - {type: contains, value: thanks}
          - {type: starts-with, value: Dear, weight: 3}
  - vars: {q: b}
    options: {transform: output.toUpperCase()}
    assert:
      - {type: contains, value: THANKS}
  - vars: {q: c}
    assert:
      - type: assert-set
        threshold: 0.5
        assert: [{type: contains, value: x}, {type: contains, value: y}]
  - huggingface://datasets/org/questions
""",
    )
    chat = [
        {"role": "system", "content": [{"type": "text", "text": "Be kind."}]},
        {"role": "user", "content": [{"type": "text", "text": "Write to {{ q }}"}]},
    ]
    (tmp_path / "pf" / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="letters")
    registry = load_registry(root)
    task = registry.tasks["letters"]
    # promptfoo's chat prompt with text content parts: a system prompt and a template.
    assert (task.prompt.system, task.prompt.template) == ("Be kind.", "Write to {{ q }}")
    criteria = {c.id: c for c in registry.rubrics["letters"].criteria}
    # $ref resolved to the template; the assert-set's asserts share its weight 2 as 1:3.
    assert criteria["icontains"].grader.value == "please"
    assert (criteria["contains"].grader.value, criteria["contains"].weight) == ("thanks", 0.5)
    assert (criteria["starts-with"].grader.pattern, criteria["starts-with"].weight) == (
        r"\ADear",
        1.5,
    )
    assert "THANKS" not in json.dumps([c.grader.model_dump() for c in criteria.values()])
    assert result.not_mapped == (
        "defaultTest.options.prefix: a text promptfoo adds before the prompt; put it in the "
        "task's template",
        "huggingface://datasets/org/questions: tests from a Hugging Face dataset are not "
        "downloaded by an import: save them as a CSV or JSONL file next to the config and "
        "point 'tests' at it",
        "tests[1]: options.transform runs code on the output before its asserts, so they "
        "would grade another text; the test's asserts are not imported",
        "tests[2].assert[0]: an assert-set with a threshold passes when a share of its "
        "asserts do; evalreg criteria pass or fail one by one",
    )


def test_a_ref_that_points_nowhere_is_an_error_that_names_it(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["{{ q }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {q: a}
    assert: [{$ref: "#/assertionTemplates/missing"}]
""",
    )
    root = bare_registry(tmp_path)
    with pytest.raises(
        ImportProblem,
        match=r"tests\[0\]\.assert\[0\]: \$ref '#/assertionTemplates/missing' points to nothing",
    ):
        import_promptfoo(config, root, name="refs")
    assert not (root / "registry" / "tasks").exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ([{"type": "image_url", "image_url": {"url": "x"}}], "image_url content parts"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "several text parts"),
    ],
)
def test_chat_content_parts_that_are_not_one_text_are_listed(tmp_path: Path, content, why):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: [file://chat.json, "{{ q }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests: [{vars: {q: a}, assert: [{type: contains, value: a}]}]
""",
    )
    (tmp_path / "pf" / "chat.json").write_text(
        json.dumps([{"role": "user", "content": content}]), encoding="utf-8"
    )
    result = import_promptfoo(config, bare_registry(tmp_path), name="parts")
    assert any(why in m for m in result.not_mapped), result.not_mapped


def test_javascript_patterns_import_translated_and_refusals_say_why(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["{{ q }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {q: a}
    assert:
      - {type: regex, value: "a{,3}$"}
      - {type: regex, value: "(?<=a+)b"}
      - {type: starts-with, value: ""}
      - {type: not-starts-with, value: 5}
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="patterns")
    (criterion,) = load_registry(root).rubrics["patterns"].criteria
    assert criterion.grader.model_dump(exclude_defaults=True) == {
        "type": "regex",
        "pattern": r"a\{,3\}\Z",
        "raw": True,
        "ascii": True,
        "utf16": True,
    }
    assert result.not_mapped == (
        "tests[0].assert[1]: the variable-length lookbehind `(?<=a+)` has no Python "
        "equivalent (Python's lookbehinds match a fixed number of characters)",
        "tests[0].assert[2]: starts-with needs a text value: promptfoo refuses an empty string",
        "tests[0].assert[3]: not-starts-with needs a text value: promptfoo refuses a number",
    )


def test_a_pattern_reading_half_an_emoji_survives_the_registry_and_decides_as_javascript(
    tmp_path: Path,
):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["{{ q }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {q: a}
    assert:
      - {type: regex, value: "^\\\\uD83D.$"}
      - {type: not-regex, value: "[🙂]{3}"}
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="emoji")
    assert result.not_mapped == ()
    rubric = (root / "registry/rubrics/emoji.yaml").read_text(encoding="utf-8")
    assert "\\ud83d" in rubric and "[\\ud83d\\ude42]{3}" in rubric  # escaped, never a lone half
    registry = load_registry(root)
    (item_id,) = [i.id for i in registry.evalset_of("emoji").items]
    # JavaScript: the surrogate pair of 🙂 is the two code units `^\uD83D.$` asks for
    assert grade(registry, "emoji", item_id, "🙂")[1] == {"regex": True, "not-regex": True}
    assert grade(registry, "emoji", item_id, "🙂🙂")[1] == {"regex": False, "not-regex": False}


CLOSEDQA_LIKE = """\
relevance:
  prompt: |-
    [Task]: {input}
    [Submission]: {completion}
    [Criterion]: {criteria}
    Keep {{braces}} as written. Does the submission meet the criterion? Answer Y or N.
  eval_type: cot_classify
  choice_scores:
    "Y": 1.0
    "N": 0.0
  choice_strings: 'YN'
  input_outputs:
    input: completion
"""


def test_a_model_graded_spec_becomes_a_judge_criterion(tmp_path: Path, team: Repo, cli):
    spec = tmp_path / "relevance.yaml"
    spec.write_text(CLOSEDQA_LIKE, encoding="utf-8")
    samples = tmp_path / "samples.jsonl"
    rows = [
        {"input": [{"role": "user", "content": "Quote Hamlet"}], "criteria": "a real quote"},
        {"input": "Name a prime", "criteria": "a prime number"},
        {"input": "No criteria here"},
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_openai_evals(
        samples, team.root, name="quotes", pins=["mini"], modelgraded=spec, judge="rules"
    )
    registry = load_registry(team.root)
    (criterion,) = registry.rubrics["quotes"].criteria
    grader = criterion.grader
    assert (criterion.id, grader.type, grader.judge) == ("relevance", "llm_judge", "rules")
    assert grader.pass_threshold == 1.0
    assert criterion.description == (
        "The judge picks a best choice (\"Y\") of the OpenAI evals model-graded spec 'relevance'."
    )
    items = items_of(team.root, "evalsets/quotes.jsonl")
    assert items["sample-001"]["expected"] == {"criteria": "a real quote"}
    assert result.not_mapped == (
        "line 3: the spec's prompt reads criteria, which the sample lacks; the sample is not "
        "imported",
    )
    item = next(i for i in registry.evalset_of("quotes").items if i.id == "sample-002")
    prompt = render(
        grader.prompt,
        {
            "input": [m.model_dump() for m in item.messages],
            "output": "7",
            "expected": item.expected,
            "criterion": criterion.description,
        },
    )
    assert prompt == (
        "[Task]: Name a prime\n[Submission]: 7\n[Criterion]: a prime number\n"
        "Keep {braces} as written. Does the submission meet the criterion? Answer Y or N.\n\n"
        "Pick exactly one of the choices above. Then reply with the JSON verdict; its score "
        'is that of the choice you picked: "Y" scores 1, "N" scores 0.'
    )
    assert cli(team, "check").code == 0


def test_a_spec_needs_a_judge_and_scores(tmp_path: Path, team: Repo, cli):
    spec = tmp_path / "counts.yaml"
    spec.write_text("counts:\n  prompt: '{completion}?'\n  choice_strings: AB\n", encoding="utf-8")
    base = ("import", "openai-evals", str(SAMPLES), "--name", "c", "--pin", "mini")
    before = {k: v for k, v in team.snapshot().items() if not k.startswith(".evalreg/")}
    for extra, message in (
        (("--modelgraded", str(spec)), "a model-graded spec needs a judge model: --judge PIN"),
        (("--modelgraded", str(spec), "--judge", "rules"), "scores no choice (choice_scores)"),
        (("--judge", "rules"), "--judge grades a model-graded spec: give --modelgraded SPEC"),
        (
            ("--kind", "json_match"),
            "line 1: an ideal answer is not a JSON document; the sample is not imported",
        ),
    ):
        result = cli(team, *base, *extra)
        assert (result.code, "Traceback" in result.err) == (2, False)
        assert message in result.err
    after = {k: v for k, v in team.snapshot().items() if not k.startswith(".evalreg/")}
    assert after == before  # nothing written (the write lock aside)


def test_a_fact_spec_passes_every_choice_but_a_disagreement(tmp_path: Path, team: Repo):
    spec = tmp_path / "fact.yaml"
    spec.write_text(
        "fact:\n  prompt: 'Q {input} E {ideal} S {completion}'\n  choice_strings: ABCDE\n"
        "  input_outputs:\n    input: completion\n",
        encoding="utf-8",
    )
    import_openai_evals(
        SAMPLES, team.root, name="facts", pins=["mini"], modelgraded=spec, judge="rules"
    )
    (criterion,) = load_registry(team.root).rubrics["facts"].criteria
    assert criterion.grader.prompt.endswith(
        '"A" scores 1, "B" scores 1, "C" scores 1, "D" scores 0, "E" scores 1.'
    )
    assert '{{ expected["ideal"] }}' in criterion.grader.prompt


def test_system_only_conversations_import_as_one_user_turn(tmp_path: Path, team: Repo):
    samples = tmp_path / "logic.jsonl"
    rows = [
        {"input": [{"role": "system", "content": "If all A are B, is an A a B?"}], "ideal": "Yes"},
        {"input": [{"role": "user", "content": "2+2?"}], "ideal": "4"},
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_openai_evals(samples, team.root, name="logic", pins=["mini"])
    items = items_of(team.root, "evalsets/logic.jsonl")
    assert items["sample-001"]["messages"] == [
        {"role": "user", "content": "If all A are B, is an A a B?"}
    ]
    assert result.not_mapped == ()
    assert any("system messages only became one user turn" in n for n in result.notes)


def test_factuality_and_closedqa_are_judged_with_a_judge_pin(tmp_path: Path, team: Repo):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Q: {{q}}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {q: Capital of France?}
    assert:
      - {type: factuality, value: "Paris is the capital of {{ '{' }}France}"}
      - {type: model-graded-closedqa, value: names a city}
  - vars: {q: Capital of Peru?}
    assert:
      - {type: factuality, value: Lima}
      - {type: model-graded-closedqa, value: names a city}
""",
    )
    result = import_promptfoo(config, team.root, name="capitals-judged", judge="mini")
    assert result.not_mapped == ()
    registry = load_registry(team.root)
    criteria = {c.id: c for c in registry.rubrics["capitals-judged"].criteria}
    fact, closedqa = criteria["factuality"], criteria["model-graded-closedqa"]
    # A reference that differs per test is read from each item; one shared criterion is fixed.
    assert fact.description == (
        "The output agrees with the reference answer the test's value in expected.factuality "
        "(promptfoo factuality)."
    )
    assert closedqa.description == (
        'The output meets the criterion "names a city" (promptfoo model-graded-closedqa).'
    )
    item = next(i for i in registry.evalset_of("capitals-judged").items if i.id == "test-001")
    variables = {"output": "Paris.", "expected": item.expected, "criterion": ""}
    rendered = render(fact.grader.prompt, variables)  # type: ignore[union-attr]
    assert "Reference answer: Paris is the capital of {France}\n" in rendered
    assert "Output:\nParis.\n" in rendered and "Score 0 for (D) and 1 otherwise." in rendered
    assert "Criterion: names a city\n" in render(closedqa.grader.prompt, variables)  # type: ignore[union-attr]


def test_similarity_asserts_import_as_graders_and_say_how_their_metrics_differ(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["Summarise: {{text}}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {text: All day long the cat sat on the mat.}
    assert:
      - {type: levenshtein, value: The cat sat on the mat., threshold: 3}
      - {type: rouge-n, value: The cat sat on the mat.}
      - {type: bleu, value: [The cat sat on the mat., A cat was on the mat.], threshold: 0.4}
  - vars: {text: Paris is the capital and the largest city of France.}
    assert:
      - {type: rouge-n, value: Paris is the capital of France.}
      - {type: not-levenshtein, value: Paris}
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="summaries")
    assert result.not_mapped == ("tests[1].assert[1]: not-levenshtein has no evalreg grader",)
    assert result.notes[:2] == (ROUGE_NOTE, BLEU_NOTE)  # once each, however many asserts
    registry = load_registry(root)
    criteria = {
        c.id: c.grader.model_dump(exclude_defaults=True)
        for c in registry.rubrics["summaries"].criteria
    }
    assert criteria == {
        "levenshtein": {
            "type": "levenshtein",
            "value": "The cat sat on the mat.",
            "raw": True,
            "max_distance": 3,
            "utf16": True,
        },
        "rouge-n": {"type": "rouge", "expected_field": "rouge-n", "raw": True},
        "bleu": {
            "type": "bleu",
            "value": ["The cat sat on the mat.", "A cat was on the mat."],
            "raw": True,
            "threshold": 0.4,
            "tokenize": "none",
            "ignore_case": True,
        },
    }
    assert grade(registry, "summaries", "test-001", "The cat sat on a mat.") == (
        "correct",
        {"levenshtein": True, "rouge-n": True, "bleu": True},
    )
    assert grade(registry, "summaries", "test-002", "France's capital: Paris.") == (
        "unacceptable",
        {"rouge-n": False},
    )


def test_similar_asserts_import_as_cosine_on_a_pinned_embedding_model(tmp_path: Path):
    config = write_config(
        tmp_path / "pf",
        """\
prompts: ["{{ q }}"]
providers: [openai:gpt-4o-mini-2024-07-18]
tests:
  - vars: {q: refund}
    assert:
      - {type: similar, value: Refunds take five days., threshold: 0.8}
  - vars: {q: password}
    assert:
      - {type: similar, value: [Reset it from the sign-in page., Use the reset link.]}
  - vars: {q: shipping}
    options:
      provider: {embedding: openai:embedding:text-embedding-3-small}
    assert:
      - {type: "similar:cosine", value: We ship to Norway.}
      - {type: "similar:dot", value: We ship to Norway.}
      - {type: not-similar, value: We ship to Norway.}
""",
    )
    root = bare_registry(tmp_path)
    result = import_promptfoo(config, root, name="support")
    registry = load_registry(root)
    graders = [c.grader for c in registry.rubrics["support"].criteria]
    similar = [g for g in graders if g.type == "similar"]
    assert {(g.embedder, g.threshold) for g in similar} == {
        ("support-text-embedding-3-large", 0.8),
        ("support-text-embedding-3-large", 0.75),
        ("support-text-embedding-3-small", 0.75),
    }
    large = registry.pins["support-text-embedding-3-large"]
    assert (large.provider, large.model, large.api_key_env) == (
        "openai",
        "text-embedding-3-large",
        "OPENAI_API_KEY",
    )
    assert result.not_mapped == (
        "tests[2].assert[1]: similar:dot: evalreg's similar grader compares by cosine "
        "similarity, not by dot",
        "tests[2].assert[2]: not-similar has no evalreg grader",
    )
