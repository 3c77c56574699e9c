"""GitHub's own OpenAPI description of the operations the GitHub stand-in serves, vendored.

``github-openapi-subset.json`` beside this file holds, for each operation
``support.github_api.GitHubAPI`` answers, the JSON schema of every response body GitHub
describes (by status), taken from GitHub's REST API description as the npm package
``@octokit/openapi`` publishes it (``generated/api.github.com.json``). The subset keeps
what a validator needs and nothing else: the schemas GitHub's ``$ref``s name are copied into
``definitions`` (the file refers to nothing outside itself), OpenAPI 3.0's
``nullable: true`` becomes JSON Schema (``"type": [..., "null"]``, or ``anyOf`` with
``{"type": "null"}``), and descriptions and examples are dropped.

``Description.problems(operation, status, body)`` says how a body departs from the schema
for that operation and status. An error status the operation does not describe is checked
against GitHub's general error body (``basic-error``), which is what GitHub answers with for
a bad token, a rate limit or an unknown path.

Regenerate (Node 20 and Python 3.11+), then commit the JSON::

    mkdir -p /tmp/oa && cd /tmp/oa && npm init -y && npm install @octokit/openapi@23.0.2
    .venv/bin/python tests/support/github_openapi.py /tmp/oa/node_modules/@octokit/openapi

The output is deterministic: the same package version gives the same bytes.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

__all__ = ["OPERATIONS", "SUBSET", "Description", "description"]

SUBSET = Path(__file__).with_name("github-openapi-subset.json")
#: The operations the stand-in serves: GitHub's operation id → (method, path template).
OPERATIONS: dict[str, tuple[str, str]] = {
    "issues/list-comments": ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    "issues/create-comment": ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    "issues/update-comment": ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    "repos/list-pull-requests-associated-with-commit": (
        "GET",
        "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
    ),
    "pulls/list": ("GET", "/repos/{owner}/{repo}/pulls"),
    "pulls/get": ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    "pulls/list-reviews": ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    "pulls/create": ("POST", "/repos/{owner}/{repo}/pulls"),
    "pulls/update": ("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}"),
}
#: GitHub's general error body, for error statuses an operation does not describe.
GENERAL_ERROR = "basic-error"

_URI = "urn:evalreg:github-openapi-subset"
# The JSON Schema keywords a validator reads; OpenAPI's annotations are left behind.
_KEYWORDS = {
    "$ref",
    "additionalProperties",
    "allOf",
    "anyOf",
    "const",
    "enum",
    "format",
    "items",
    "maxItems",
    "maxLength",
    "maximum",
    "minItems",
    "minLength",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "properties",
    "required",
    "type",
    "uniqueItems",
}
_COMPONENT = "#/components/schemas/"


class Description:
    """The vendored subset, ready to validate response bodies."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.source = str(document["source"])
        resource = referencing.jsonschema.DRAFT4.create_resource(document)
        self._registry: referencing.Registry[Any] = referencing.Registry().with_resource(
            _URI, resource
        )
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    def statuses(self, operation: str) -> list[int]:
        """The statuses GitHub describes a body for, for ``operation``."""
        return sorted(int(s) for s in self.document["operations"][operation]["responses"])

    def problems(self, operation: str | None, status: int, body: Any) -> list[str]:
        """How ``body``, answered with ``status`` to ``operation`` (None: a path GitHub has
        no operation for), departs from GitHub's description; empty when it conforms."""
        pointer = self._pointer(operation, status)
        if pointer is None:
            return [f"{operation} answers no {status} in GitHub's description"]
        if pointer not in self._validators:
            self._validators[pointer] = jsonschema.Draft4Validator(
                {"$ref": f"{_URI}{pointer}"},
                registry=self._registry,
                format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER,
            )
        errors = self._validators[pointer].iter_errors(body)
        return [
            f"{operation or 'unknown path'} {status}: "
            f"{'/'.join(map(str, error.absolute_path)) or '(body)'}: {error.message}"
            for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path)))
        ]

    def _pointer(self, operation: str | None, status: int) -> str | None:
        responses = {} if operation is None else self.document["operations"][operation]["responses"]
        if str(status) in responses:
            return f"#/operations/{_escape(operation or '')}/responses/{status}"
        if status >= 400:
            return f"#/definitions/{GENERAL_ERROR}"
        return None


@functools.cache
def description() -> Description:
    """The vendored subset (read once)."""
    return Description(json.loads(SUBSET.read_text(encoding="utf-8")))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# Extraction


def extract(spec: dict[str, Any], source: str) -> dict[str, Any]:
    """The subset of ``spec`` (GitHub's description, ``$ref``s not resolved) for
    ``OPERATIONS``, as JSON Schema."""
    operations: dict[str, Any] = {}
    wanted: set[str] = {GENERAL_ERROR}
    for op_id, (method, path) in OPERATIONS.items():
        operation = spec["paths"][path][method.lower()]
        if operation["operationId"] != op_id:
            raise SystemExit(f"{method} {path} is {operation['operationId']}, not {op_id}")
        responses = {}
        for status, response in sorted(operation["responses"].items()):
            while "$ref" in response:
                response = _follow(spec, response["$ref"])
            content = response.get("content", {}).get("application/json")
            if content is not None:
                responses[status] = _schema(content["schema"])
        operations[op_id] = {"method": method, "path": path, "responses": responses}
        wanted |= set(_refs(operations[op_id]))
    definitions: dict[str, Any] = {}
    while missing := sorted(wanted - set(definitions)):
        for name in missing:
            definitions[name] = _schema(spec["components"]["schemas"][name])
            wanted |= set(_refs(definitions[name]))
    return {
        "source": source,
        "operations": operations,
        "definitions": dict(sorted(definitions.items())),
    }


def _follow(spec: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = spec
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return dict(node)


def _schema(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with only validation keywords, component references renamed and
    ``nullable`` made JSON Schema."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEYWORDS:
            continue
        if key == "$ref":
            out[key] = "#/definitions/" + value.removeprefix(_COMPONENT)
        elif key == "properties":
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_schema(sub) for sub in value]
        elif key in ("items", "not", "additionalProperties") and isinstance(value, dict):
            out[key] = _schema(value)
        else:
            out[key] = value
    if not node.get("nullable"):
        return out
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if isinstance(out.get("type"), str) and not ({"$ref", "allOf", "anyOf", "oneOf"} & set(out)):
        out["type"] = [out["type"], "null"]
        return out
    return {"anyOf": [{"type": "null"}, out]} if out else out


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.removeprefix("#/definitions/")
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="node_modules/@octokit/openapi")
    parser.add_argument("--out", type=Path, default=SUBSET)
    args = parser.parse_args(argv)
    version = json.loads((args.package / "package.json").read_text(encoding="utf-8"))["version"]
    generated = "generated/api.github.com.json"
    spec = json.loads((args.package / generated).read_text(encoding="utf-8"))
    source = f"@octokit/openapi {version}, {generated}"
    subset = extract(spec, source)
    text = json.dumps(subset, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(subset['definitions'])} schemas, {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
