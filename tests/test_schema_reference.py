"""The registry's JSON Schemas and reference: generated from the schema, committed, current,
and what every YAML file of the example and of the scaffold validates against."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from evalreg.registry import schema
from evalreg.report import reference

from conftest import Repo

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "runners/evalreg/scaffold/template"


def _yaml_files(base: Path) -> list[Path]:
    return sorted(p for p in base.glob("registry/**/*.yaml") if "schemas" not in p.parts)


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    document = json.loads(reference.json_schemas()[f"{reference.SCHEMA_DIR}/{kind}.schema.json"])
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document, format_checker=jsonschema.FormatChecker())


def _as_json(value: object) -> object:
    """What a YAML language server sees: dates as the ISO text they were written as."""
    return json.loads(json.dumps(value, default=str))


def test_the_committed_schemas_and_reference_are_current():
    for rel, data in reference.files().items():
        assert (ROOT / rel).read_bytes() == data, f"{rel} is stale: run `evalreg schema`"


@pytest.mark.parametrize("base", [ROOT, TEMPLATE], ids=["example", "scaffold"])
def test_every_registry_file_points_at_its_schema_and_validates(base: Path):
    files = _yaml_files(base)
    assert files
    for path in files:
        rel = path.relative_to(base).as_posix()
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first == reference.schema_comment(rel), rel
        target = (path.parent / first.partition("$schema=")[2]).resolve()
        assert target.relative_to(base.resolve()).as_posix().startswith(reference.SCHEMA_DIR)
        kind = target.name.removesuffix(".schema.json")
        data = _as_json(YAML(typ="safe").load(path.read_text(encoding="utf-8")))
        errors = [e.message for e in _validator(kind).iter_errors(data)]
        assert errors == [], f"{rel}: {errors}"


def test_every_eval_item_of_the_example_validates():
    validator = _validator("item")
    for path in sorted(ROOT.glob("evalsets/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[:200]:
            assert list(validator.iter_errors(json.loads(line))) == [], path


@pytest.mark.parametrize("kind", sorted(reference.GRADER_SUMMARY))
def test_each_grader_example_in_the_reference_is_valid(kind: str):
    _, example = reference.GRADER_SUMMARY[kind]
    grader = YAML(typ="safe").load(example)
    criterion = {"id": "c", "description": "d", "grader": grader}
    schema.Criterion.model_validate(criterion)  # what check accepts
    rubric = {"schema_version": 1, "description": "d", "version": "1", "criteria": [criterion]}
    assert list(_validator("rubric").iter_errors(rubric)) == []


def test_the_schema_rejects_what_check_rejects():
    validator = _validator("pin")
    assert list(validator.iter_errors({"schema_version": 1, "provider": "openai"})) == []
    assert any(validator.iter_errors({"schema_version": 1, "provider": "nope"}))
    assert any(validator.iter_errors({"schema_version": 1, "provider": "openai", "modle": "x"}))


def test_the_reference_lists_every_grader_option_and_metric():
    page = reference.reference()
    for kind in reference.GRADER_SUMMARY:
        assert f"### `{kind}`" in page
    assert "| `tolerance` | number ≥ 0.0 | `0.0` | Largest accepted difference" in page
    for metric in schema.BASE_METRICS:
        assert f"| `{metric}` |" in page
    assert "`coverage:<id>`" in page and "## Levels" in page


def test_evalreg_schema_writes_the_files_once(repo: Repo, cli):
    first = cli(repo.root, "schema")
    assert first.code == 0, first.err
    for rel, data in reference.files().items():
        assert (repo.root / rel).read_bytes() == data
    again = cli(repo.root, "schema")
    assert again.code == 0 and "registry/schemas/ is up to date" in again.out


def test_init_writes_the_schemas_its_files_point_at(tmp_path: Path, cli):
    target = tmp_path / "r"
    assert cli(None, "init", str(target)).code == 0
    for path in _yaml_files(target):
        pointer = path.read_text(encoding="utf-8").splitlines()[0].partition("$schema=")[2]
        assert (path.parent / pointer).is_file(), path
