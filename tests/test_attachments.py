"""Items that attach files (PNG, JPEG, PDF): tracked by DVC with the eval set, hashed into the
item and the request, sent in each provider's content-part form, checked before a run."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalreg.evalsets.evalset import item_content
from evalreg.prompting import as_text, render_messages
from evalreg.providers.attachments import LIMITS, limit_problem, sniff
from evalreg.registry.loader import load_registry

from conftest import LIVE_KEY, Repo, assert_refused
from support.cloud_servers import BedrockServer, GeminiServer
from support.llm_server import LLMServer
from support.runs import stored_records as stored

PIN = "registry/models/mini.yaml"
EVALSET = "evalsets/messages.jsonl"
TEMPLATE = "Message: {{ text }}\\n{{ attachment(0) }}\\nAnswer with the label."


def png(shade: int, size: int = 4) -> bytes:
    """A ``size``-pixel-square greyscale PNG of one shade, written by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    raw = b"".join(b"\x00" + bytes([shade]) * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"


def items(extra: dict[str, list[dict[str, str]]] | None = None) -> str:
    rows = []
    for i in range(4):
        attached = [{"path": "evalsets/files/scan.png" if i < 2 else "evalsets/files/letter.pdf"}]
        rows.append(
            {
                "id": f"m-{i:03d}",
                "input": {"text": f"message {i}"},
                "expected": {"label": "a" if i % 2 else "b"},
                "tags": ["common" if i % 2 else "edge"],
                "attachments": (extra or {}).get(f"m-{i:03d}", attached),
            }
        )
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


@pytest.fixture
def server(server_port: int) -> Iterator[LLMServer]:
    # On the session's port (the shared registry's pins point there); it answers a
    # constant label whatever the content parts.
    with LLMServer(
        api_key=LIVE_KEY, responder=lambda r: json.dumps({"label": "a"}), port=server_port
    ) as srv:
        yield srv


@pytest.fixture
def attached(live: Repo, cli) -> Repo:
    """The standard registry on DVC, its items attaching a PNG (two) and a PDF (two), the
    template placing the attachment mid-prompt."""
    live.write("evalsets/files/scan.png", png(200))
    live.write("evalsets/files/letter.pdf", PDF)
    live.write(EVALSET, items())
    task = live.read("registry/tasks/labels.yaml")
    live.write(
        "registry/tasks/labels.yaml",
        task.replace('template: "Message: {{ text }}"', f'template: "{TEMPLATE}"'),
    )
    result = cli(live, "evalset", "add", EVALSET)
    assert result.code == 0, result.err
    assert "Tracked 2 attached files with DVC too" in result.out
    live.commit("items attach a scan and a letter")
    return live


def _pin(provider: str, url: str, extra: str = "") -> str:
    return f"""\
schema_version: 1
provider: {provider}
model: vision-mini
base_url: {url}
api_key_env: OPENAI_API_KEY
{extra}params:
  temperature: 0
price:
  input_per_mtok: 0.15
  output_per_mtok: 0.6
  as_of: 2026-01-01
"""


def _data(payload: bytes) -> str:
    return base64.b64encode(payload).decode()


def _filled(part: object, data: str) -> str:
    """``part`` as JSON, its placeholder payload ("P" or "D", alone or after a data URL's
    comma) replaced by ``data``."""
    text = json.dumps(part)
    for placeholder in ("P", "D"):
        text = text.replace(f'"{placeholder}"', json.dumps(data))
        text = text.replace(f',{placeholder}"', f',{data}"')
    return text


def _user_content(body: dict) -> list:
    turns = body.get("messages", body.get("input"))
    return turns[-1]["content"]


# ---------------------------------------------------------------- providers' forms
def test_openai_chat_sends_image_url_and_file_parts(attached: Repo, cli, server):
    result = cli(attached, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    bodies = {r.body["messages"][-1]["content"][0]["text"]: r.body for r in server.requests}
    png_body = bodies["Message: message 0\n"]
    assert _user_content(png_body) == [
        {"type": "text", "text": "Message: message 0\n"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _data(png(200))}},
        {"type": "text", "text": "\nAnswer with the label."},
    ]
    pdf_body = bodies["Message: message 2\n"]
    assert _user_content(pdf_body)[1] == {
        "type": "file",
        "file": {
            "filename": "letter.pdf",
            "file_data": "data:application/pdf;base64," + _data(PDF),
        },
    }
    # The stored request is the request sent: the file's bytes are part of the evidence.
    assert all(_data(PDF) in json.dumps(r["request"]) for r in stored(attached)[2:])


@pytest.mark.parametrize(
    ("provider", "extra", "image", "document"),
    [
        (
            "anthropic",
            "",
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "P"}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "D"},
            },
        ),
        (
            "openai_responses",
            "",
            {"type": "input_image", "image_url": "data:image/png;base64,P"},
            {
                "type": "input_file",
                "filename": "letter.pdf",
                "file_data": "data:application/pdf;base64,D",
            },
        ),
        (
            "azure_openai",
            "azure:\n  deployment: vision\n  api_version: 2024-10-21\n",
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,P"}},
            {
                "type": "file",
                "file": {"filename": "letter.pdf", "file_data": "data:application/pdf;base64,D"},
            },
        ),
    ],
)
def test_each_http_provider_sends_the_file_in_its_own_part(
    attached: Repo, cli, server, provider, extra, image, document
):
    url = server.base_url if provider == "openai_responses" else server.root_url
    attached.write(PIN, _pin(provider, url, extra))
    attached.commit(f"mini on {provider}")
    result = cli(attached, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    sent = [_user_content(r.body) for r in server.requests]
    for part, payload in ((image, png(200)), (document, PDF)):
        want = json.loads(_filled(part, _data(payload)))
        assert sum(want in content for content in sent) == 2, (want, sent)


def test_gemini_sends_inline_data(attached: Repo, cli, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-loopback-key")
    with GeminiServer(
        api_key="gemini-loopback-key", responder=lambda r: json.dumps({"label": "a"})
    ) as gemini:
        attached.write(
            PIN,
            _pin("gemini", gemini.root_url).replace("OPENAI_API_KEY", "GEMINI_API_KEY"),
        )
        attached.commit("mini on gemini")
        result = cli(attached, "run", "--candidate", "mini")
        assert result.code == 0, result.out + result.err
        parts = [r.body["contents"][-1]["parts"] for r in gemini.requests]
    assert sorted(p[1]["inline_data"]["mime_type"] for p in parts) == [
        "application/pdf",
        "application/pdf",
        "image/png",
        "image/png",
    ]
    assert {"inline_data": {"mime_type": "image/png", "data": _data(png(200))}} in parts[0] + parts[
        1
    ] + parts[2] + parts[3]
    assert all(
        p[0] == {"text": p[0]["text"]} and p[0]["text"].startswith("Message:") for p in parts
    )


def test_bedrock_sends_image_and_document_blocks(attached: Repo, cli, monkeypatch):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKbedrock-loopback")
    with BedrockServer(
        access_key="AKIALOOPBACK",
        secret_key="unused",
        region="eu-west-1",
        api_key="ABSKbedrock-loopback",
        responder=lambda r: json.dumps({"label": "a"}),
    ) as bedrock:
        attached.write(
            PIN,
            _pin("bedrock", bedrock.root_url, "aws:\n  region: eu-west-1\n").replace(
                "OPENAI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK"
            ),
        )
        attached.commit("mini on bedrock")
        result = cli(attached, "run", "--candidate", "mini")
        assert result.code == 0, result.out + result.err
        blocks = [b for r in bedrock.requests for b in r.body["messages"][-1]["content"]]
    assert blocks.count({"image": {"format": "png", "source": {"bytes": _data(png(200))}}}) == 2
    assert (
        blocks.count(
            {"document": {"format": "pdf", "name": "letter", "source": {"bytes": _data(PDF)}}}
        )
        == 2
    )


def test_a_python_pin_receives_the_neutral_parts(attached: Repo, cli):
    attached.write(
        "registry/systems/rules.py",
        "import base64, json\n\n"
        "def answer(request):\n"
        "    part = request['messages'][-1]['content'][1]\n"
        "    size = len(base64.b64decode(part['data']))\n"
        "    return json.dumps({'label': 'a', 'seen': [part['path'], part['media_type'], size]})\n",
    )
    attached.commit("rules read the attachment")
    result = cli(attached, "run", "--candidate", "rules")
    assert result.code == 0, result.out + result.err
    texts = sorted(r["response"]["text"] for r in stored(attached))
    assert json.loads(texts[0])["seen"] == [
        "evalsets/files/letter.pdf",
        "application/pdf",
        len(PDF),
    ]
    assert json.loads(texts[-1])["seen"] == ["evalsets/files/scan.png", "image/png", len(png(200))]


# ---------------------------------------------------------------- identity and staleness
def test_a_changed_file_is_a_new_request_and_a_stale_cell(attached: Repo, cli, server):
    assert cli(attached, "run", "--candidate", "mini").code == 0
    before = {r["key"] for r in stored(attached)}
    registry = load_registry(attached.root)
    contents = {i.id: item_content(i) for i in registry.evalset_of("labels").items}
    assert len(server.requests) == 4

    attached.write("evalsets/files/scan.png", png(10))
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    attached.commit("a rescanned image")
    check = cli(attached, "check")
    assert "results of labels/mini are stale (changed: attachments)" in check.err
    changed = {
        i.id: item_content(i) for i in load_registry(attached.root).evalset_of("labels").items
    }
    assert [i for i in contents if contents[i] != changed[i]] == ["m-000", "m-001"]

    assert cli(attached, "run", "--candidate", "mini").code == 0
    # Only the two items attaching the changed scan are bought again, under new keys.
    assert len(server.requests) == 6
    after = {r["key"] for r in stored(attached)}
    assert len(after - before) == 2


def test_the_same_files_make_the_same_request_bytes(attached: Repo):
    registry = load_registry(attached.root)
    again = load_registry(attached.root)
    task = registry.tasks["labels"]
    for one, two in zip(
        registry.evalset_of("labels").items, again.evalset_of("labels").items, strict=True
    ):
        assert render_messages(task, None, one, cell="c") == render_messages(
            task, None, two, cell="c"
        )
    shown = as_text(render_messages(task, None, one, cell="c")[-1]["content"])
    assert shown == (
        "Message: message 3\n[attachment evalsets/files/letter.pdf (application/pdf)]\n"
        "Answer with the label."
    )


def test_attachments_the_template_does_not_place_follow_the_text(attached: Repo, cli):
    attached.write(
        EVALSET,
        items(
            {"m-003": [{"path": "evalsets/files/letter.pdf"}, {"path": "evalsets/files/scan.png"}]}
        ),
    )
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    registry = load_registry(attached.root)
    item = registry.evalset_of("labels").items[3]
    content = render_messages(registry.tasks["labels"], None, item, cell="c")[-1]["content"]
    assert [p["type"] for p in content] == ["text", "file", "text", "file"]
    assert [p.get("path") for p in content if p["type"] == "file"] == [
        "evalsets/files/letter.pdf",
        "evalsets/files/scan.png",
    ]


# ---------------------------------------------------------------- bad files
def _bad(attached: Repo, cli, rows: str, *expect: str) -> None:
    attached.write(EVALSET, rows)
    attached.git("add", "-A")
    assert_refused(attached, cli, "run", "--candidate", "mini", expect=expect)
    assert_refused(attached, cli, "check", expect=expect)


def test_a_missing_attachment_is_a_finding_at_its_line_and_column(attached: Repo, cli, server):
    rows = items({"m-002": [{"path": "evalsets/files/gone.pdf"}]})
    column = rows.splitlines()[2].index('"evalsets/files/gone.pdf"') + 1
    _bad(
        attached,
        cli,
        rows,
        f"evalsets/messages.jsonl:3:{column}",
        "attachment 'evalsets/files/gone.pdf' does not exist in the working tree",
    )
    assert server.requests == []


def test_a_file_whose_bytes_are_not_its_type_is_a_finding(attached: Repo, cli, server):
    attached.write("evalsets/files/fake.png", b"GIF89a not a png at all")
    attached.write("evalsets/files/misnamed.png", PDF)
    _bad(
        attached,
        cli,
        items(
            {
                "m-000": [{"path": "evalsets/files/fake.png"}],
                "m-001": [{"path": "evalsets/files/misnamed.png"}],
            }
        ),
        "evalsets/messages.jsonl:1:",
        "is not a PNG, JPEG or PDF file",
        "evalsets/messages.jsonl:2:",
        "is named .png but holds a PDF file",
    )
    assert server.requests == []


def test_an_attachment_outside_evalsets_is_a_finding(attached: Repo, cli):
    attached.write("registry/scan.png", png(1))
    _bad(
        attached,
        cli,
        items({"m-000": [{"path": "registry/scan.png"}]}),
        "is not under evalsets/",
    )


def test_a_file_too_large_for_the_provider_is_a_finding(attached: Repo, cli, server):
    # 4 MB is within OpenAI's limit and over Bedrock's 3.75 MB for an image.
    big = png(200) + b"\x00" * (4 * 1024 * 1024)
    attached.write("evalsets/files/big.png", big)
    attached.write(EVALSET, items({"m-001": [{"path": "evalsets/files/big.png"}]}))
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    attached.commit("a big scan")
    assert cli(attached, "check").code == 0
    attached.write(
        PIN,
        _pin("bedrock", server.root_url, "aws:\n  region: eu-west-1\n").replace(
            "OPENAI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK"
        ),
    )
    attached.git("add", "-A")
    assert_refused(
        attached,
        cli,
        "run",
        "--candidate",
        "mini",
        expect=(
            "evalsets/messages.jsonl:2:",
            f"{len(big):,} bytes is more than the 3,932,160 a PNG attachment may have for "
            "bedrock pins",
        ),
    )
    assert server.requests == []


def test_the_limits_table_and_the_magic_bytes():
    assert sniff(png(1)) == "image/png"
    assert sniff(b"\xff\xd8\xff\xe0\x00\x10JFIF") == "image/jpeg"
    assert sniff(PDF) == "application/pdf"
    assert sniff(b"PK\x03\x04") is None
    assert limit_problem("python", "application/pdf", 10**9) is None
    assert limit_problem("anthropic", "image/png", 5 * 1024 * 1024) is None
    assert "anthropic pins" in str(limit_problem("anthropic", "image/png", 5 * 1024 * 1024 + 1))
    assert set(LIMITS) == {
        "openai",
        "azure_openai",
        "openai_responses",
        "anthropic",
        "gemini",
        "bedrock",
    }


# ---------------------------------------------------------------- revisions and clones
def test_reproduce_reads_the_files_at_the_revision_on_a_clean_clone(
    attached: Repo, cli, server, tmp_path: Path
):
    assert cli(attached, "run", "--candidate", "mini").code == 0
    attached.commit("results")
    # A later revision changes the scan: the earlier results still reproduce at theirs.
    attached.write("evalsets/files/scan.png", png(10))
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    attached.commit("a rescanned image, not yet run")
    clone = Repo(tmp_path / "clone")
    subprocess.run(
        ["git", "clone", "-q", str(attached.root), str(clone.root)], check=True, capture_output=True
    )
    assert not (clone.root / "evalsets/files/scan.png").exists()  # DVC data, not in git
    result = cli(clone, "reproduce", "HEAD~1")
    assert result.code == 0, result.out + result.err
    assert "labels/mini: identical" in result.out
    assert len(server.requests) == 4  # reproduced from the store, nothing bought


def test_an_attachment_whose_data_is_not_here_leaves_its_eval_set_unchecked(
    attached: Repo, cli, tmp_path: Path
):
    clone = Repo(tmp_path / "clone")
    subprocess.run(
        ["git", "clone", "-q", str(attached.root), str(clone.root)], check=True, capture_output=True
    )
    md5 = hashlib.md5(png(200)).hexdigest()
    stored_copies = list(clone.root.glob(f"dvc-storage/files/md5/{md5[:2]}/{md5[2:]}"))
    assert len(stored_copies) == 1
    stored_copies[0].unlink()
    result = cli(clone, "check")
    assert result.code == 0, result.err
    assert "evalsets/messages.jsonl:1:" in result.err
    assert "not checked here: attachment 'evalsets/files/scan.png'" in result.err
    assert "eval data is not available here" in result.err
    # A run cannot send the items without their file: the eval set is an error there.
    assert_refused(clone, cli, "run", "--candidate", "mini", expect=("evalsets/files/scan.png",))


def test_a_file_is_estimated_as_a_file_not_as_its_base64():
    from evalreg.providers.attachments import FILE_TOKENS, estimated_input_tokens

    text = b'{"messages":[{"content":"Message: message 0","role":"user"}]}'
    assert estimated_input_tokens(text) == len(text) // 3
    photo = base64.b64encode(bytes(range(256)) * 400)  # 100 KB of image, 136 KB of base64
    body = text[:-3] + b',{"data":"' + photo + b'"}]}'
    assert estimated_input_tokens(body) == (len(body) - len(photo)) // 3 + FILE_TOKENS
    two = body[:-3] + b',{"data":"data:image/png;base64,' + photo + b'"}]}'
    assert estimated_input_tokens(two) == (len(two) - 2 * len(photo)) // 3 + 2 * FILE_TOKENS
    # Text is text, however long a run of letters it holds (a judge's stand-in output).
    long = b'{"messages":[{"content":"' + b"x" * 3000 + rb" \"data\":\"" + photo + b'"}]}'
    assert estimated_input_tokens(long) == len(long) // 3


def test_a_template_placing_an_attachment_the_item_lacks_is_a_finding(attached: Repo, cli):
    task = attached.read("registry/tasks/labels.yaml")
    attached.write("registry/tasks/labels.yaml", task.replace("attachment(0)", "attachment(1)"))
    attached.git("add", "-A")
    assert_refused(
        attached,
        cli,
        "check",
        expect=(
            "evalsets/messages.jsonl:1:",
            "attachment(1): the item has 1 attachment (attachment(0) is the first)",
        ),
    )


def test_a_conversation_attaches_its_files_to_the_last_user_turn(attached: Repo, cli):
    row = {
        "id": "c-001",
        "messages": [
            {"role": "user", "content": "Here is the scan."},
            {"role": "assistant", "content": "Which field?"},
            {"role": "user", "content": "The label."},
        ],
        "attachments": [{"path": "evalsets/files/scan.png"}],
        "expected": {"label": "a"},
    }
    attached.write(EVALSET, items() + json.dumps(row) + "\n")
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    registry = load_registry(attached.root)
    item = registry.evalset_of("labels").items[-1]
    turns = render_messages(registry.tasks["labels"], None, item, cell="c")
    assert [t["content"] for t in turns[:-1]] == [
        "Answer with JSON.",
        "Here is the scan.",
        "Which field?",
    ]
    assert turns[-1]["content"] == [
        {"type": "text", "text": "The label."},
        {
            "type": "file",
            "path": "evalsets/files/scan.png",
            "media_type": "image/png",
            "data": _data(png(200)),
        },
    ]


def test_evalset_add_refuses_an_item_attaching_a_missing_file(attached: Repo, cli):
    attached.write(EVALSET, items({"m-001": [{"path": "evalsets/files/gone.png"}]}))
    attached.git("add", "-A")
    assert_refused(
        attached,
        cli,
        "evalset",
        "add",
        EVALSET,
        expect=("evalsets/messages.jsonl:2:", "'evalsets/files/gone.png' does not exist"),
    )


def test_item_text_cannot_place_an_attachment(attached: Repo, cli):
    rows = items().replace('"message 1"', '"message \\u0000attachment-0:0\\u0000 1"')
    attached.write(EVALSET, rows)
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    registry = load_registry(attached.root)
    item = registry.evalset_of("labels").items[1]
    content = render_messages(registry.tasks["labels"], None, item, cell="c")[-1]["content"]
    assert content[0] == {"type": "text", "text": "Message: message \x00attachment-0:0\x00 1\n"}
    assert [p["type"] for p in content] == ["text", "file", "text"]


def test_more_documents_than_bedrock_takes_in_one_request_is_a_finding(attached: Repo, cli):
    six = [{"path": "evalsets/files/letter.pdf"}] * 6
    attached.write(EVALSET, items({"m-002": six}))
    assert cli(attached, "evalset", "add", EVALSET).code == 0
    attached.write(
        PIN,
        _pin("bedrock", "http://127.0.0.1:9", "aws:\n  region: eu-west-1\n").replace(
            "OPENAI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK"
        ),
    )
    attached.git("add", "-A")
    assert_refused(
        attached,
        cli,
        "check",
        expect=(
            "evalsets/messages.jsonl:3:",
            "6 documents are more than the 5 one bedrock request may carry",
        ),
    )
