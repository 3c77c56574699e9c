"""Every class of bad input: a precise ``path:line:col: message``, exit 2, nothing written."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import Repo, assert_refused, items_jsonl


def assert_rejected(repo: Repo, cli, *expected: str) -> str:
    """Run ``check`` on a committed tree; it must exit 2 with each expected line fragment
    and write nothing."""
    err = assert_refused(repo, cli, "check", expect=expected)
    assert repo.git("status", "--porcelain", "--ignored") == ""
    return err


def test_valid_registry_passes(repo, cli):
    result = cli(repo, "check")
    assert result.code == 0, result.err
    assert "check: ok" in result.out
    assert "labels" in result.out


def test_yaml_syntax_error(repo, cli):
    repo.write("registry/models/mini.yaml", "schema_version: 1\nprovider: [openai\n")
    repo.commit("broken")
    assert_rejected(repo, cli, "registry/models/mini.yaml:3:1: YAML syntax error")


def test_duplicate_key(repo, cli):
    text = repo.read("registry/models/mini.yaml") + "model: other\n"
    repo.write("registry/models/mini.yaml", text)
    repo.commit("dup")
    line = text.count("\n")
    assert_rejected(
        repo,
        cli,
        f"registry/models/mini.yaml:{line}:1: duplicate key 'model' (first defined at line 3)",
    )


def test_python_object_tag(repo, cli):
    repo.write(
        "registry/models/mini.yaml",
        repo.read("registry/models/mini.yaml").replace(
            "model: gpt-4o-mini-2024-07-18",
            "model: !!python/object/apply:os.system ['touch pwned']",
        ),
    )
    repo.commit("tag")
    assert_rejected(
        repo,
        cli,
        "registry/models/mini.yaml:3:8: YAML tag '!!python/object/apply:os.system' is not allowed",
    )
    assert not (repo.root / "pwned").exists()


def test_alias_bomb_is_refused_without_expanding(repo, cli):
    lines = ["schema_version: 1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 12):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    # Expanded, this is 9**12 (282 billion) strings: parsing only finishes if nothing expands.
    repo.write("registry/rubrics/labels.yaml", "\n".join(lines) + "\n")
    repo.commit("bomb")
    err = assert_rejected(repo, cli, "registry/rubrics/labels.yaml:2:5: anchor &a0 is not allowed")
    assert "registry/rubrics/labels.yaml:3:5: anchor &a1" in err
    assert "alias *a0 is not allowed" in err


def test_unknown_key_suggests_the_right_one(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("repeats: 1", "repeets: 1"),
    )
    repo.commit("typo")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:15:1: unknown key 'repeets' (did you mean 'repeats'?); "
        "expected one of:",
    )


def test_unknown_key_inside_a_grader(repo, cli):
    repo.write(
        "registry/rubrics/labels.yaml",
        repo.read("registry/rubrics/labels.yaml").replace(
            "      field: label", "      feild: label"
        ),
    )
    repo.commit("typo")
    assert_rejected(
        repo,
        cli,
        "registry/rubrics/labels.yaml:15:7: unknown key 'feild' (did you mean 'field'?)",
        "registry/rubrics/labels.yaml:14:7: missing required key 'field'",
    )


def test_wrong_type(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("repeats: 1", 'repeats: "3"'),
    )
    repo.commit("type")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:15:10: repeats: Input should be a valid integer (got '3')",
    )


def test_value_out_of_range(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("cost_usd: 2.5", "cost_usd: -1"),
    )
    repo.commit("range")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:20:15: failure_modes.0.cost_usd: Input should be greater than "
        "or equal to 0 (got -1)",
    )


def test_key_in_place_of_env_var_name(repo, cli):
    repo.write(
        "registry/models/mini.yaml",
        repo.read("registry/models/mini.yaml").replace("OPENAI_API_KEY", "sk-live-abc123"),
    )
    repo.commit("secret")
    err = assert_rejected(
        repo,
        cli,
        "registry/models/mini.yaml:5:14: api_key_env: must be the name of an environment variable",
    )
    assert "sk-live-abc123" not in err


@pytest.mark.parametrize("content", ["", "# only a comment\n", "---\n"])
def test_empty_document(repo, cli, content):
    repo.write("registry/rubrics/labels.yaml", content)
    repo.commit("empty")
    assert_rejected(
        repo, cli, "registry/rubrics/labels.yaml:1:1: file is empty: expected a YAML mapping"
    )


def test_non_mapping_document(repo, cli):
    repo.write("registry/rubrics/labels.yaml", "- schema_version: 1\n")
    repo.commit("list")
    assert_rejected(
        repo,
        cli,
        "registry/rubrics/labels.yaml:1:1: expected a YAML mapping at the top level, found a list",
    )


def test_non_utf8_bytes(repo, cli):
    repo.write("registry/models/mini.yaml", b"schema_version: 1\ndescription: caf\xe9\n")
    repo.commit("latin1")
    assert_rejected(repo, cli, "registry/models/mini.yaml:2:17: invalid UTF-8 byte 0xe9")


def test_missing_and_future_schema_version(repo, cli):
    repo.write(
        "registry/models/mini.yaml",
        repo.read("registry/models/mini.yaml").replace("schema_version: 1\n", ""),
    )
    repo.write(
        "registry/rubrics/labels.yaml",
        repo.read("registry/rubrics/labels.yaml").replace("schema_version: 1", "schema_version: 9"),
    )
    repo.commit("versions")
    assert_rejected(
        repo,
        cli,
        "registry/models/mini.yaml:1:1: missing 'schema_version' (this release writes 1)",
        "registry/rubrics/labels.yaml:1:17: schema_version 9 was written by a newer evalreg",
    )


@pytest.mark.parametrize(
    ("file", "old", "new", "where", "message"),
    [
        (
            "registry/selections/labels.yaml",
            "task: labels",
            "task: labelz",
            "3:7",
            "task 'labelz' does not exist (expected registry/tasks/labelz.yaml); known: labels",
        ),
        (
            "registry/tasks/labels.yaml",
            "rubric: labels",
            "rubric: nope",
            "14:9",
            "rubric 'nope' does not exist",
        ),
        (
            "registry/selections/labels.yaml",
            "pin: mini",
            "pin: maxi",
            "8:10",
            "model pin 'maxi' does not exist",
        ),
        (
            "registry/selections/labels.yaml",
            "selected: rules",
            "selected: gpt",
            "18:11",
            "selected candidate 'gpt' is not among the candidates (rules, mini)",
        ),
        (
            "registry/tasks/labels.yaml",
            "detected_by: [label]",
            "detected_by: [labl]",
            "21:19",
            "criterion 'labl' is not in rubric 'labels'",
        ),
        (
            "registry/selections/labels.yaml",
            "slice: common",
            "slice: rare",
            "12:14",
            "slice 'rare' has no items in the eval set (slices: common, edge)",
        ),
        (
            "registry/selections/labels.yaml",
            "maximize: pass_rate",
            "maximize: pass_rat",
            "16:19",
            "unknown metric 'pass_rat'",
        ),
    ],
)
def test_dangling_reference(repo, cli, file, old, new, where, message):
    text = repo.read(file)
    assert old in text
    repo.write(file, text.replace(old, new))
    repo.commit("dangling")
    assert_rejected(repo, cli, f"{file}:{where}: {message}")


def test_dangling_judge_pin(repo, cli):
    repo.write(
        "registry/rubrics/labels.yaml",
        repo.read("registry/rubrics/labels.yaml")
        + "".join(
            [
                "  - id: tone\n" if False else "",
            ]
        ),
    )
    text = repo.read("registry/rubrics/labels.yaml").replace(
        "levels:",
        "  - id: tone\n"
        "    description: Polite.\n"
        "    grader:\n"
        "      type: llm_judge\n"
        "      judge: judge-pin\n"
        "      prompt: Is it polite?\n"
        "      prompt_version: v1\n"
        "levels:",
    )
    repo.write("registry/rubrics/labels.yaml", text)
    repo.commit("judge")
    assert_rejected(
        repo, cli, "registry/rubrics/labels.yaml:20:14: model pin 'judge-pin' does not exist"
    )


def test_a_reference_to_a_broken_file_is_not_also_dangling(repo, cli):
    repo.write("registry/rubrics/labels.yaml", "schema_version: 1\ndescription: [\n")
    repo.commit("broken rubric")
    err = assert_rejected(repo, cli, "registry/rubrics/labels.yaml:")
    assert "rubric 'labels' does not exist" not in err


def test_duplicate_item_ids(repo, cli):
    lines = repo.read("evalsets/messages.jsonl").splitlines(keepends=True)
    lines.append(lines[0])
    repo.write("evalsets/messages.jsonl", "".join(lines))
    repo.commit("dup items")
    assert_rejected(
        repo, cli, "evalsets/messages.jsonl:5: duplicate item id 'm-000' (first at line 1)"
    )


def test_malformed_jsonl_lines_each_reported(repo, cli):
    lines = repo.read("evalsets/messages.jsonl").splitlines(keepends=True)
    lines[1] = '{"id": "m-001", "input": {"text": "x"},\n'
    lines[3] = '["not", "an", "object"]\n'
    lines.append(json.dumps({"id": "m-009", "input": {"text": "x"}, "tags": "common"}) + "\n")
    lines.append(
        json.dumps({"id": "m-010", "messages": [{"role": "assistant", "content": "hi"}]}) + "\n"
    )
    lines.append(
        json.dumps(
            {"id": "m-011", "messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]}
        )
        + "\n"
    )
    repo.write("evalsets/messages.jsonl", "".join(lines))
    repo.commit("bad lines")
    assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:2:40: invalid JSON: Expecting property name enclosed in double "
        "quotes",
        "evalsets/messages.jsonl:4:1: expected a JSON object",
        "evalsets/messages.jsonl:5: item 'm-009': tags: Input should be a valid list",
        "evalsets/messages.jsonl:6: item 'm-010': a conversation must end with a 'user' or "
        "'tool' message",
        "evalsets/messages.jsonl:7: item 'm-011': tool result 'c9' answers no earlier tool call",
    )


def test_template_field_missing_from_items(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace(
            '"Message: {{ text }}"', '"Message: {{ text }} from {{ sender }}"'
        ),
    )
    repo.commit("template")
    assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:1: item 'm-000' has no input field 'sender', which the prompt of "
        "registry/tasks/labels.yaml:6 uses",
    )


def test_json_schema_criterion_needs_a_schema(repo, cli):
    text = repo.read("registry/tasks/labels.yaml")
    start = text.index("  schema:")
    end = text.index("rubric:")
    repo.write("registry/tasks/labels.yaml", text[:start] + text[end:])
    repo.commit("no schema")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:8:3: rubric 'labels' criterion 'valid_json' checks the task's "
        "output schema, but this task has no output.schema",
    )


def test_template_syntax_error(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace(
            '"Message: {{ text }}"', '"Message: {{ text }"'
        ),
    )
    repo.commit("template")
    assert_rejected(repo, cli, "registry/tasks/labels.yaml:6:13: prompt template: unexpected '}'")


def test_prompt_variant_template_checked_against_items(repo, cli):
    repo.write(
        "registry/selections/labels.yaml",
        repo.read("registry/selections/labels.yaml").replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: mini-terse\n    pin: mini\n    prompt:\n"
            '      template: "{{ body }}"\n',
        ),
    )
    repo.commit("variant")
    assert_rejected(
        repo,
        cli,
        "item 'm-000' has no input field 'body', which the prompt of "
        "registry/selections/labels.yaml:12 uses",
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside.jsonl", "'../outside.jsonl' leaves the repository"),
        ("/etc/passwd", "'/etc/passwd' is absolute"),
        ("evalsets/../../outside.jsonl", "'evalsets/../../outside.jsonl' leaves the repository"),
    ],
)
def test_paths_leaving_the_repository(repo, cli, path, message):
    (repo.root.parent / "outside.jsonl").write_text(repo.read("evalsets/messages.jsonl"))
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("evalsets/messages.jsonl", path),
    )
    repo.commit("escape")
    assert_rejected(repo, cli, f"registry/tasks/labels.yaml:3:10: evalset: {message}")


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_symlink_leaving_the_repository(repo, cli):
    outside = repo.root.parent / "outside.jsonl"
    outside.write_text(repo.read("evalsets/messages.jsonl"))
    (repo.root / "evalsets" / "linked.jsonl").symlink_to(outside)
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("messages.jsonl", "linked.jsonl"),
    )
    repo.commit("symlink")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:3:10: evalset: 'evalsets/linked.jsonl' "
        "resolves outside the repository",
    )


def test_callable_path_leaving_the_repository(repo, cli):
    repo.write(
        "registry/models/rules.yaml",
        repo.read("registry/models/rules.yaml").replace("registry/systems/rules.py", "../evil.py"),
    )
    repo.commit("escape")
    assert_rejected(
        repo,
        cli,
        "registry/models/rules.yaml:4:11: callable module: '../evil.py' leaves the repository",
    )


def test_every_problem_reported_in_one_pass(repo, cli):
    repo.write("registry/models/mini.yaml", "schema_version: 1\nprovider: openai\nmodle: x\n")
    repo.write("registry/rubrics/labels.yaml", "schema_version: 1\nversion: [\n")
    repo.write("evalsets/messages.jsonl", "{\n" + items_tail())
    repo.commit("many")
    assert_rejected(
        repo,
        cli,
        "registry/models/mini.yaml:3:1: unknown key 'modle'",
        "registry/rubrics/labels.yaml:",
        "evalsets/messages.jsonl:1:2: invalid JSON",
    )


def items_tail() -> str:
    return json.dumps({"id": "z", "input": {"text": "t"}, "tags": ["common"]}) + "\n"


def test_json_output_lists_findings(repo, cli):
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("repeats: 1", "repeats: 0"),
    )
    repo.commit("zero")
    result = cli(repo, "check", "--json")
    assert result.code == 2
    data = json.loads(result.out)
    assert data["ok"] is False
    assert data["findings"] == [
        {
            "path": "registry/tasks/labels.yaml",
            "line": 15,
            "col": 10,
            "message": "repeats: Input should be greater than or equal to 1 (got 0)",
            "severity": "error",
        }
    ]


def test_oversized_file_is_refused_before_parsing(repo, cli):
    repo.write("registry/rubrics/labels.yaml", "description: " + "x" * (300 << 10) + "\n")
    repo.commit("huge")
    assert_rejected(
        repo, cli, "registry/rubrics/labels.yaml: file is 307214 bytes; registry files are limited"
    )


def test_scalars_resolve_by_the_yaml_core_schema():
    from evalreg.registry.yamlio import parse_yaml

    doc = parse_yaml(
        b"a: 1\nb: 2.5\nc: true\nd: null\ne: 2026-01-01\nf: '3'\ng: 0x1f\nh: yes\ni: !!str 5\n", "f"
    )
    assert doc.data == {
        "a": 1,
        "b": 2.5,
        "c": True,
        "d": None,
        "e": "2026-01-01",
        "f": "3",
        "g": 31,
        "h": "yes",
        "i": "5",
    }


def nested(depth: int) -> str:
    """An item line whose ``input.a`` holds lists ``depth`` deep."""
    return '{"id": "deep", "input": {"text": "x", "a": %s}, "expected": {"label": "a"}}\n' % (
        "[" * depth + "]" * depth
    )


def test_an_item_nested_10000_deep_is_refused_with_its_line(repo, cli):
    repo.write("evalsets/messages.jsonl", items_jsonl() + nested(10_000))
    repo.commit("deep item")
    # At the bracket that goes deeper than 100 levels: the 99th of input.a's.
    deep = "evalsets/messages.jsonl:5:142: objects and lists nested more than 100 levels deep"
    assert_rejected(repo, cli, deep)


def test_an_item_the_parser_reads_but_too_deep_to_use_is_refused(repo, cli):
    # 900 levels parse, then overflow the stack of whatever walks the item next.
    repo.write("evalsets/messages.jsonl", items_jsonl() + nested(900))
    repo.commit("deep item")
    assert_rejected(repo, cli, "evalsets/messages.jsonl:5:142: objects and lists nested more than")


def test_an_item_nested_to_the_limit_loads(repo, cli):
    # The item object, its input and 98 lists: 100 levels.
    repo.write("evalsets/messages.jsonl", items_jsonl() + nested(98))
    repo.commit("deep item")
    assert cli(repo, "check").code == 0


def test_a_lone_surrogate_escape_is_refused_with_its_line_and_column(repo, cli):
    line = '{"id": "s", "input": {"text": "caf\\ud800"}, "tags": ["common"]}\n'
    repo.write("evalsets/messages.jsonl", items_jsonl() + line)
    repo.commit("surrogate")
    assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:5:35: \\ud800 is half of a UTF-16 surrogate pair, not a character",
    )


def test_an_escaped_surrogate_pair_is_one_character(repo, cli):
    line = (
        '{"id": "s", "input": {"text": "\\ud83d\\ude00 and \\\\ud800"}, "tags": ["common"], '
        '"expected": {"label": "a"}}\n'
    )
    repo.write("evalsets/messages.jsonl", items_jsonl() + line)
    repo.commit("emoji")
    assert cli(repo, "check").code == 0


def set_template(repo: Repo, template: str) -> None:
    text = repo.read("registry/tasks/labels.yaml")
    repo.write(
        "registry/tasks/labels.yaml",
        text.replace('"Message: {{ text }}"', json.dumps(f"Message: {template}")),
    )
    repo.commit("template")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{% include '/etc/passwd' %}", "'{% include %}' is not available"),
        ("{% import 'macros' as m %}", "'{% import %}' is not available"),
        ("{% extends 'base' %}", "'{% extends %}' is not available"),
        ("{{ ''.__class__.__mro__ }}", "'__mro__' is not available"),
        ("{{ text|attr('__class__') }}", "'__class__' is not available"),
        ("{{ text['__init__'] }}", "'__init__' is not available"),
        ("{{ ['a', 'b']|random }}", "the filter 'random' renders differently every time"),
        ("{{ lipsum(2) }}", "the function 'lipsum' renders differently every time"),
        ("{{ text|no_such_filter }}", "No filter named 'no_such_filter'"),
    ],
)
def test_a_template_using_what_a_prompt_may_not_is_refused_where_it_is(
    repo, cli, template, message
):
    set_template(repo, template)
    assert_rejected(repo, cli, f"registry/tasks/labels.yaml:6:13: prompt template: {message}")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ range(10000000) }}", "range() of 10,000,000 numbers; at most 100,000"),
        ("{{ 'a' * 1000000000 }}", "a repeated value would be 1,000,000,000 characters long"),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "more than 250,000 loop iterations and calls",
        ),
    ],
)
def test_a_template_over_a_bound_is_refused_at_its_first_item_and_rendered_no_further(
    repo, cli, template, message
):
    set_template(repo, template)
    err = assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:1: item 'm-000': the prompt template of "
        f"registry/tasks/labels.yaml:6 cannot be rendered for it: {message}",
        "3 more items not rendered for labels/",
        "its template exceeded a bound on what rendering may cost",
    )
    assert "item 'm-001'" not in err  # as `run` does: the first item over a bound ends it


def test_check_renders_a_stalling_template_once_however_many_items(repo, cli):
    """Nested loops that exceed the per-item bound on every item: `check` pays the bound
    once, as `run` does, not once an item (120 items here)."""
    repo.write("evalsets/messages.jsonl", items_jsonl(120))
    set_template(
        repo, "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
    )
    err = assert_rejected(repo, cli, "119 more items not rendered for labels/")
    assert err.count("more than 250,000 loop iterations and calls") == 1  # one per template


def test_a_template_that_fails_for_one_item_names_only_that_item(repo, cli):
    set_template(repo, "{{ text }}{{ '!' * meta.emphasis }}")
    rows = [json.loads(line) for line in items_jsonl().splitlines()]
    for row in rows:
        row["input"]["meta"] = {"emphasis": 3}
    rows[2]["input"]["meta"]["emphasis"] = 10**9
    repo.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    repo.commit("emphasis")
    err = assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:3: item 'm-002': the prompt template of "
        "registry/tasks/labels.yaml:6 cannot be rendered for it: a repeated value would be",
    )
    assert "m-001" not in err and "m-003" not in err


def test_a_variant_template_that_cannot_render_names_the_selection(repo, cli):
    repo.write(
        "registry/selections/labels.yaml",
        repo.read("registry/selections/labels.yaml").replace(
            "  - id: mini\n    pin: mini\n",
            '  - id: mini\n    pin: mini\n    prompt:\n      template: "{{ text * 10**8 }}"\n',
        ),
    )
    repo.commit("variant")
    assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:1: item 'm-000': the prompt template of "
        "registry/selections/labels.yaml:10 cannot be rendered for it",
    )


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_a_registry_file_linking_outside_the_repository_is_refused(repo, cli):
    outside = repo.root.parent / "outside.yaml"
    outside.write_text(repo.read("registry/models/mini.yaml"))
    (repo.root / "registry/models/mini.yaml").unlink()
    (repo.root / "registry/models/mini.yaml").symlink_to(outside)
    repo.commit("linked pin")
    assert_rejected(
        repo,
        cli,
        "registry/models/mini.yaml: not read: 'registry/models/mini.yaml' resolves outside the "
        "repository (through a symlink)",
    )


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_a_registry_directory_linking_outside_the_repository_is_refused(repo, cli):
    outside = repo.root.parent / "rubrics"
    (repo.root / "registry/rubrics").rename(outside)
    (repo.root / "registry/rubrics").symlink_to(outside)
    repo.commit("linked rubrics")
    assert_rejected(
        repo,
        cli,
        "registry/rubrics: not read: 'registry/rubrics' resolves outside the repository",
    )


def test_a_problem_in_a_block_scalar_template_is_reported_on_its_own_line(repo, cli):
    text = repo.read("registry/tasks/labels.yaml")
    repo.write(
        "registry/tasks/labels.yaml",
        text.replace(
            '  template: "Message: {{ text }}"',
            "  template: |\n    Message:\n    {{ text }\n",
        ),
    )
    repo.commit("template")
    assert_rejected(repo, cli, "registry/tasks/labels.yaml:8: prompt template: unexpected '}'")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "NaN is not a finite number"),
        ("-Infinity", "-Infinity is not a finite number"),
        ("1e400", "1e400 is beyond the range of a double"),
        ("1" + "0" * 5000, "an integer of 5,001 digits (at most 4,300 are read)"),
    ],
)
def test_a_number_results_cannot_hold_is_refused_at_its_line(repo, cli, value, message):
    line = '{"id": "n", "input": {"text": "x", "n": ' + value + "}}\n"
    repo.write("evalsets/messages.jsonl", items_jsonl() + line)
    repo.commit("number")
    assert_rejected(
        repo,
        cli,
        f"evalsets/messages.jsonl:5: {message}: results hold finite numbers only; write null, "
        "or the number as a string",
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (".inf", "'.inf' is not a finite number: registry files hold finite numbers"),
        (".nan", "'.nan' is not a finite number"),
        ("1e999", "'1e999' is not a finite number"),
        ("9" * 5000, "a number of 5,000 characters is too large to read"),
    ],
)
def test_a_number_no_fingerprint_can_hold_is_refused_where_it_is(repo, cli, value, message):
    repo.write(
        "registry/models/mini.yaml",
        repo.read("registry/models/mini.yaml").replace(
            "input_per_mtok: 0.15", f"input_per_mtok: {value}"
        ),
    )
    repo.commit("price")
    assert_rejected(repo, cli, f"registry/models/mini.yaml:9:19: {message}")


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_a_loop_of_symlinks_is_refused(repo, cli):
    (repo.root / "evalsets" / "a.jsonl").symlink_to("b.jsonl")
    (repo.root / "evalsets" / "b.jsonl").symlink_to("a.jsonl")
    repo.write(
        "registry/tasks/labels.yaml",
        repo.read("registry/tasks/labels.yaml").replace("messages.jsonl", "a.jsonl"),
    )
    repo.commit("loop")
    assert_rejected(
        repo,
        cli,
        "registry/tasks/labels.yaml:3:10: evalset: 'evalsets/a.jsonl' is a loop of symbolic links",
    )


def test_an_item_lacking_the_expected_field_a_criterion_compares_is_an_error(repo, cli):
    rows = items_jsonl().splitlines()
    item = json.loads(rows[2])
    item["expected"] = {"lable": "b"}
    rows[2] = json.dumps(item, sort_keys=True)
    repo.write("evalsets/messages.jsonl", "\n".join(rows) + "\n")
    repo.commit("an item whose answer is misspelt")
    err = assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:3: item 'm-002' has no expected 'label', which criterion "
        "'label' of rubric labels (registry/rubrics/labels.yaml:14) compares with",
    )
    assert "m-001" not in err


def test_an_item_without_expected_is_an_error_only_for_criteria_that_apply_to_it(repo, cli):
    rubric = repo.read("registry/rubrics/labels.yaml")
    whole = (
        "  - id: whole\n    description: All of it.\n    slices: [edge]\n"
        "    grader: {type: exact}\nlevels:\n"
    )
    repo.write("registry/rubrics/labels.yaml", rubric.replace("levels:\n", whole, 1))
    rows = [json.loads(r) for r in items_jsonl().splitlines()]
    for row in rows[:2]:  # m-000 is tagged edge, m-001 common
        del row["expected"]
    repo.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    repo.commit("items without answers")
    err = assert_rejected(
        repo,
        cli,
        "evalsets/messages.jsonl:1: item 'm-000' has no expected value, which criterion 'whole'",
        "evalsets/messages.jsonl:2: item 'm-001' has no expected 'label'",
    )
    assert "item 'm-001' has no expected value" not in err


def test_a_literal_value_needs_nothing_from_expected(repo, cli):
    rubric = repo.read("registry/rubrics/labels.yaml").replace(
        "      type: field_exact\n      field: label\n",
        "      type: contains\n      value: label\n",
    )
    repo.write("registry/rubrics/labels.yaml", rubric)
    rows = [json.loads(r) for r in items_jsonl().splitlines()]
    for row in rows:
        del row["expected"]
    repo.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    repo.commit("no answers needed")
    result = cli(repo, "check")
    assert result.code == 0, result.err


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.jsonl", "other.jsonl"])
@pytest.mark.parametrize("data", ["present", "absent"])
def test_a_pointer_naming_another_file_is_refused_where_it_says_so(live, cli, path, data):
    pointer = "evalsets/messages.jsonl.dvc"
    text = live.read(pointer)
    assert "  path: messages.jsonl\n" in text
    live.write(pointer, text.replace("path: messages.jsonl", f"path: {path}"))
    if data == "absent":
        (live.root / "evalsets/messages.jsonl").unlink()
    live.commit("a pointer that names another file")
    message = f"{pointer}:5:3: the pointer names {path!r}, not 'messages.jsonl'"
    assert_refused(live, cli, "check", expect=(message,))
    assert_refused(live, cli, "run", "--offline", expect=(message,))
