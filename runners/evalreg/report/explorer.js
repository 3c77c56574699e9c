"use strict";
(function () {
  // Every string from the data (item text, model output, ids) is set with textContent:
  // nothing in it is ever parsed as HTML.
  const D = JSON.parse(document.getElementById("explorer-data").textContent);
  performance.mark("explorer-data-parsed");
  const ROW = 28;
  const SNIPPET = 80;
  // Candidates without a single record (pending: never run) get no column, only a mention.
  const withRecords = D.candidates.map((_, c) => c).filter((c) => D.samples[c].some((l) => l.length));
  const COLS = withRecords.length ? withRecords : D.candidates.map((_, c) => c);
  const NC = COLS.length;
  const NI = D.items.length;
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function option(select, value, text) {
    const o = el("option", null, text);
    o.value = value;
    select.appendChild(o);
  }
  const fmt = (n) => n.toLocaleString("en-US");
  const CRITERIA = Object.fromEntries(D.criteria.map((c) => [c.id, c]));
  // JSON values as the registry writes them (keys arrive sorted): indented, for reading.
  const json = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

  // ------------------------------------------------------------ filters
  const F = {
    slice: $("f-slice"), cand: $("f-cand"), level: $("f-level"), crit: $("f-crit"),
    verdict: $("f-verdict"), error: $("f-error"), flipA: $("f-flip-a"), flipB: $("f-flip-b"),
    flipDir: $("f-flip-dir"), rev: $("f-rev"), search: $("f-search"),
  };
  option(F.slice, "", "all items");
  D.slices.forEach((s) => option(F.slice, s, s));
  option(F.cand, "", "any candidate");
  COLS.forEach((c) => option(F.cand, String(c), D.candidates[c].id));
  option(F.level, "", "any level");
  D.levels.forEach((l) => option(F.level, l, l));
  option(F.level, "none", "no level (error or not run)");
  option(F.crit, "", "any criterion");
  D.criteria.forEach((c) => option(F.crit, c.id, c.id));
  option(F.verdict, "failed", "failed");
  option(F.verdict, "passed", "passed");
  option(F.error, "", "errors or not");
  option(F.error, "yes", "with an error");
  option(F.error, "no", "without errors");
  option(F.flipA, "", "no flip filter");
  option(F.flipB, "", "—");
  COLS.forEach((c) => {
    option(F.flipA, String(c), D.candidates[c].id);
    option(F.flipB, String(c), D.candidates[c].id);
  });
  option(F.flipDir, "either", "either way");
  option(F.flipDir, "a", "");
  option(F.flipDir, "b", "");
  function nameFlips() {
    const a = F.flipA.value === "" ? "the first" : D.candidates[Number(F.flipA.value)].id;
    const b = F.flipB.value === "" ? "the second" : D.candidates[Number(F.flipB.value)].id;
    F.flipDir.options[1].textContent = a + " passes, " + b + " fails";
    F.flipDir.options[2].textContent = b + " passes, " + a + " fails";
  }
  nameFlips();
  if (D.base_label) {
    option(F.rev, "", "no revision filter");
    option(F.rev, "either", "outcome changed");
    option(F.rev, "regressed", "passed there, fails here");
    option(F.rev, "improved", "failed there, passes here");
    $("rev-label").textContent = "since " + D.base_label;
  } else {
    $("rev-filter").hidden = true;
  }

  function sampleMatches(s, want) {
    if (want.level === "none" ? s.level !== null && s.error === null : want.level && s.level !== want.level) return false;
    if (want.error === "yes" && s.error === null) return false;
    if (want.error === "no" && s.error !== null) return false;
    if (want.crit) {
      const v = s.criteria.find((c) => c[0] === want.crit);
      if (!v || v[1] !== (want.verdict === "passed")) return false;
    }
    return true;
  }
  function candidateMatches(c, i, want) {
    const list = D.samples[c][i];
    if (!want.level && !want.error && !want.crit) return true;
    if (list.length === 0) return want.level === "none" && !want.crit && want.error !== "yes";
    return list.some((s) => sampleMatches(s, want));
  }
  function flipped(a, b, i, dir) {
    const pa = D.passes[a][i], pb = D.passes[b][i];
    if (pa === "." || pb === "." || pa === pb) return false;
    return dir === "either" || (dir === "a" ? pa === "1" : pb === "1");
  }
  function revChanged(c, i, dir) {
    const base = D.base_passes[c];
    if (!base) return false;
    const was = base[i], now = D.passes[c][i];
    if (was === "." || now === "." || was === now) return false;
    return dir === "either" || (dir === "regressed" ? now === "0" : now === "1");
  }

  // What the search looks in, per item, made once when first searched: its id, its input
  // (or conversation) and expected answer, and every candidate's outputs, lower-cased.
  let HAY = null;
  function haystack(i) {
    if (HAY === null) {
      HAY = D.items.map((item, k) => {
        const parts = [item.id];
        if (item.input !== undefined) parts.push(json(item.input));
        if (item.messages !== undefined) item.messages.forEach((m) => parts.push(m[1]));
        if (item.expected !== undefined) parts.push(json(item.expected));
        for (const c of COLS) D.samples[c][k].forEach((s) => { if (s.output !== undefined) parts.push(s.output); });
        return parts.join("\n").toLowerCase();
      });
    }
    return HAY[i];
  }

  let visible = [];
  function applyFilters() {
    const want = {
      level: F.level.value, error: F.error.value, crit: F.crit.value, verdict: F.verdict.value,
    };
    const slice = F.slice.value;
    const cand = F.cand.value === "" ? null : Number(F.cand.value);
    if (F.flipA.value !== "" && F.flipB.value === "") {
      // A flip needs two sides: the first other candidate, until another is chosen.
      const other = COLS.find((c) => String(c) !== F.flipA.value);
      if (other !== undefined) F.flipB.value = String(other);
    }
    const fa = F.flipA.value === "" ? null : Number(F.flipA.value);
    const fb = F.flipB.value === "" ? null : Number(F.flipB.value);
    const rev = D.base_label ? F.rev.value : "";
    const needle = F.search.value.trim().toLowerCase();
    F.verdict.disabled = !want.crit;
    nameFlips();
    const flipping = F.flipA.value !== "";
    F.flipB.disabled = F.flipDir.disabled = !flipping;
    const out = [];
    for (let i = 0; i < NI; i++) {
      const item = D.items[i];
      if (slice && item.tags.indexOf(slice) < 0) continue;
      if (needle && haystack(i).indexOf(needle) < 0) continue;
      if (cand !== null) {
        if (!candidateMatches(cand, i, want)) continue;
      } else {
        let any = false;
        for (let k = 0; k < NC && !any; k++) any = candidateMatches(COLS[k], i, want);
        if (!any) continue;
      }
      if (fa !== null && fb !== null && !flipped(fa, fb, i, F.flipDir.value)) continue;
      if (rev) {
        let any = false;
        for (let k = 0; k < NC && !any; k++) {
          if (cand === null || cand === COLS[k]) any = revChanged(COLS[k], i, rev);
        }
        if (!any) continue;
      }
      out.push(i);
    }
    visible = out;
    $("count").textContent = fmt(out.length) + " of " + fmt(NI) + " items";
    $("spacer").style.height = out.length * ROW + "px";
    $("empty").hidden = out.length > 0;
    renderRows(true);
    if (selected !== null) show(selected);
  }

  // ------------------------------------------------------------ the matrix
  const LEVEL_CLASS = { correct: "lv-c", acceptable: "lv-a", unacceptable: "lv-u" };
  function cellView(c, i) {
    const list = D.samples[c][i];
    if (list.length === 0) return ["lv-none", D.candidates[c].state === "pending" ? "pending" : "no record"];
    if (list.length === 1) {
      const s = list[0];
      if (s.error !== null) return ["lv-e", "error"];
      const level = s.level || "no level";
      return [LEVEL_CLASS[s.level] || "lv-none", s.output === undefined ? level : level + " · " + snippet(s.output)];
    }
    const passes = D.passes[c][i];
    const errors = list.filter((s) => s.error !== null).length;
    const ok = list.filter((s) => s.error === null && D.pass_levels.indexOf(s.level) >= 0).length;
    const text = ok + "/" + (list.length - errors) + " pass" + (errors ? ", " + errors + " err" : "");
    return [passes === "1" ? "lv-c" : passes === "0" ? "lv-u" : "lv-e", text];
  }

  // An output as the grid shows it: one line, its start (the cell cuts it to its width).
  function snippet(text) {
    const line = text.replace(/\s+/g, " ").trim();
    return line.length > SNIPPET ? line.slice(0, SNIPPET - 1) + "…" : line;
  }

  const body = $("rows");
  let selected = null;
  let drawn = [-1, -1];
  function renderRows(force) {
    const top = body.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - 10);
    const last = Math.min(visible.length, Math.ceil((top + body.clientHeight) / ROW) + 10);
    if (!force && first === drawn[0] && last === drawn[1]) return;
    drawn = [first, last];
    const layer = $("layer");
    layer.replaceChildren();
    for (let r = first; r < last; r++) {
      const i = visible[r];
      const item = D.items[i];
      const row = el("div", "row" + (i === selected ? " selected" : ""));
      row.style.top = r * ROW + "px";
      row.dataset.item = String(i);
      row.setAttribute("role", "row");
      row.appendChild(el("span", "c-id", item.id)).title = item.id;
      row.appendChild(el("span", "c-tags", item.tags.join(" ")));
      for (const c of COLS) {
        const [cls, text] = cellView(c, i);
        row.appendChild(el("span", "c-cand " + cls, text));
      }
      layer.appendChild(row);
    }
  }
  body.addEventListener("scroll", () => {
    $("matrix-head").scrollLeft = body.scrollLeft;
    renderRows(false);
  }, { passive: true });
  window.addEventListener("resize", () => renderRows(true));
  $("layer").addEventListener("click", (event) => {
    const row = event.target.closest(".row");
    if (row) show(Number(row.dataset.item));
  });
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement) return;
    if (event.key !== "j" && event.key !== "k") return;
    const at = visible.indexOf(selected);
    const next = visible[Math.min(visible.length - 1, Math.max(0, at + (event.key === "j" ? 1 : -1)))];
    if (next !== undefined) {
      show(next);
      const pos = visible.indexOf(next) * ROW;
      if (pos < body.scrollTop || pos + ROW > body.scrollTop + body.clientHeight) body.scrollTop = pos - ROW;
    }
  });

  // ------------------------------------------------------------ one item
  function pre(text, cls) {
    return el("pre", cls || "text", text);
  }
  function messages(list) {
    const box = el("div", "messages");
    list.forEach(([role, content]) => {
      const m = el("div", "message");
      m.appendChild(el("div", "role", role));
      m.appendChild(pre(content));
      box.appendChild(m);
    });
    return box;
  }
  function section(title) {
    const box = el("section", "part");
    box.appendChild(el("h3", null, title));
    return box;
  }

  function sampleView(c, s, many) {
    const box = el("div", "sample");
    const head = el("div", "sample-head");
    if (many) head.appendChild(el("span", "muted", "sample " + s.sample));
    const [cls, text] = s.error !== null ? ["lv-e", "error"] : [LEVEL_CLASS[s.level] || "lv-none", s.level || "no level"];
    head.appendChild(el("span", "badge " + cls, text));
    head.appendChild(el("span", "muted", "score " + s.score));
    box.appendChild(head);
    if (s.error !== null) box.appendChild(el("p", "error", s.error));
    if (s.output !== undefined) {
      box.appendChild(el("div", "label", "output"));
      box.appendChild(pre(s.output, "text output"));
    } else if (D.texts) {
      box.appendChild(el("p", "muted", "no stored response"));
    }
    if (s.tool_calls) {
      box.appendChild(el("div", "label", "tool calls"));
      box.appendChild(pre(s.tool_calls.join("\n"), "text output tool-calls"));
    }
    if (s.criteria.length || s.ungraded.length) {
      const table = el("table", "criteria");
      s.criteria.forEach(([cid, passed, score, detail]) => {
        const tr = el("tr", passed ? "pass" : "fail");
        tr.appendChild(el("td", "mark", passed ? "✓" : "✗"));
        const known = CRITERIA[cid];
        const name = tr.appendChild(el("td", "cid", cid));
        if (known) {
          name.title = known.description;
          if (known.critical) name.appendChild(el("span", "critical", "critical"));
        }
        tr.appendChild(el("td", "num", score));
        tr.appendChild(el("td", "detail", detail));
        table.appendChild(tr);
      });
      s.ungraded.forEach((cid) => {
        const tr = el("tr", "ungraded");
        tr.appendChild(el("td", "mark", "–"));
        tr.appendChild(el("td", "cid", cid));
        tr.appendChild(el("td", "num", ""));
        tr.appendChild(el("td", "detail", "not graded: too few human grades"));
        table.appendChild(tr);
      });
      box.appendChild(table);
    }
    if (s.judges) {
      Object.keys(s.judges).sort().forEach((cid) => {
        const j = el("div", "judge");
        j.appendChild(el("span", "label", "judge on " + cid + ": "));
        j.appendChild(el("span", null, s.judges[cid]));
        box.appendChild(j);
      });
    }
    if (s.human) {
      Object.keys(s.human).sort().forEach((cid) => {
        const h = el("div", "human");
        h.appendChild(el("span", "label", "human grades on " + cid + ": "));
        h.appendChild(el("span", null, s.human[cid].map(([r, ok]) => r + " " + (ok ? "pass" : "fail")).join(", ")));
        box.appendChild(h);
      });
    }
    const usage = [
      "latency " + s.latency,
      "tokens in " + s.tokens[0] + " / out " + s.tokens[1] + " / reasoning " + s.tokens[2],
      "cost " + s.cost,
    ];
    if (s.judge_cost !== undefined) usage.push("judges " + s.judge_cost);
    if (s.model) usage.push("model " + s.model);
    box.appendChild(el("div", "usage", usage.join(" · ")));
    return box;
  }

  // The candidates an item's detail puts side by side: a flip's two, else the candidate the
  // filters name with the declared one, else all of them.
  function sideBySide() {
    if (F.flipA.value !== "" && F.flipB.value !== "") {
      const pair = [Number(F.flipA.value), Number(F.flipB.value)];
      return pair[0] === pair[1] ? [pair[0]] : pair;
    }
    if (F.cand.value !== "") {
      const one = Number(F.cand.value);
      const declared = COLS.filter((c) => D.candidates[c].declared && c !== one);
      return [one, ...declared];
    }
    return COLS;
  }

  function show(i) {
    selected = i;
    renderRows(true);
    const item = D.items[i];
    const pane = $("detail");
    pane.replaceChildren();
    const head = el("div", "detail-head");
    head.appendChild(el("h2", null, item.id));
    item.tags.forEach((t) => head.appendChild(el("span", "tag", t)));
    pane.appendChild(head);
    if (D.texts) {
      const parts = el("div", "item-parts");
      const input = section(item.messages !== undefined ? "conversation" : "input");
      if (item.input !== undefined) input.appendChild(pre(json(item.input)));
      if (item.messages !== undefined) input.appendChild(messages(item.messages));
      parts.appendChild(input);
      if (item.expected !== undefined) {
        const expected = section("expected");
        expected.appendChild(pre(json(item.expected)));
        parts.appendChild(expected);
      }
      pane.appendChild(parts);
    }
    const side = sideBySide();
    if (side.length < NC) {
      pane.appendChild(el("p", "muted", "Side by side: " + side.map((c) => D.candidates[c].id).join(" and ") +
        ", as the filters name them (" + (NC - side.length) + " other candidates: clear the candidate and flip filters to see every one)."));
    }
    const grid = el("div", "columns");
    grid.style.gridTemplateColumns = "repeat(" + side.length + ", minmax(300px, 1fr))";
    side.forEach((c) => {
      const cand = D.candidates[c];
      const col = el("div", "column");
      const title = el("h3", null, cand.id);
      if (cand.declared) title.appendChild(el("span", "declared", "declared"));
      col.appendChild(title);
      col.appendChild(el("div", "muted", cand.provider + " · " + cand.model + (cand.state !== "fresh" ? " · " + cand.state : "")));
      const request = D.requests[cand.prompt][i];
      if (request !== null) {
        const det = el("details", "request");
        det.appendChild(el("summary", null, typeof request === "string" ? "request: cannot be rendered" : "request (" + request.length + (request.length === 1 ? " message)" : " messages)")));
        det.appendChild(typeof request === "string" ? el("p", "error", request) : messages(request));
        if (Object.keys(cand.params).length) {
          det.appendChild(el("div", "label", "params"));
          det.appendChild(pre(json(cand.params)));
        }
        col.appendChild(det);
      }
      const list = D.samples[c][i];
      if (list.length === 0) col.appendChild(el("p", "muted", cand.state === "pending" ? "pending: never run" : "no record for this item"));
      list.forEach((s) => col.appendChild(sampleView(c, s, list.length > 1)));
      grid.appendChild(col);
    });
    pane.appendChild(grid);
  }

  // ------------------------------------------------------------ the rows as CSV
  // The filtered rows as `evalreg export --format csv` writes the use case (its columns
  // come with the data): a line a sample of the candidate the filters name, else of every
  // candidate with results, candidate after candidate, each's items in id order.
  const ANSI = /(?:\x1b\[|\x9b)[0-?]*[ -\/]*[@-~]|(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)|\x1b[ -\/]*[0-~]/g;
  const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const LONE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
  const FORMULA = /^[=+\-@\t\r]/;
  // A text cell a spreadsheet shows rather than runs: no terminal controls (CSV has no
  // escapes), and a quote before a formula's first character.
  function neutralised(text) {
    const formula = FORMULA.test(text);
    const clean = text.replace(ANSI, "").replace(/\r\n?/g, "\n").replace(CONTROLS, "").replace(LONE, "\ufffd");
    return formula || FORMULA.test(clean) ? "'" + clean : clean;
  }
  const csvField = (text) => (/[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text);
  function usd(micro) {
    // Exact decimal dollars from integer micro-dollars, without trailing zeros.
    const digits = String(Math.abs(micro)).padStart(7, "0");
    const fraction = digits.slice(-6).replace(/0+$/, "");
    return (micro < 0 ? "-" : "") + digits.slice(0, -6) + (fraction ? "." + fraction : "");
  }
  function csv() {
    const names = D.export.columns;
    const numbers = new Set(D.export.numbers);
    const ids = D.criteria.map((c) => c.id);
    const line = (cells) => cells.map((c, k) => csvField(numbers.has(names[k]) ? c : neutralised(c))).join(",") + "\r\n";
    const out = [line(names)];
    const cands = F.cand.value === "" ? COLS : [Number(F.cand.value)];
    for (const c of cands) {
      for (const i of visible) {
        const item = D.items[i];
        for (const s of D.samples[c][i]) {
          const verdicts = Object.fromEntries(s.criteria.map(([cid, passed]) => [cid, passed ? "pass" : "fail"]));
          const [latency, input, output, cost] = s.usage;
          out.push(line([
            D.use_case, item.id, item.tags.join(" "), D.candidates[c].id, String(s.sample),
            s.output === undefined ? "" : s.output, s.level === null ? "" : s.level,
            ...ids.map((id) => verdicts[id] || ""),
            latency === null ? "" : String(latency), String(input), String(output), usd(cost),
            s.error === null ? "" : s.error,
          ]));
        }
      }
    }
    return out.join("");
  }

  // ------------------------------------------------------------ start
  const header = $("matrix-head");
  header.appendChild(el("span", "c-id", "item"));
  header.appendChild(el("span", "c-tags", "slices"));
  COLS.forEach((k) => {
    const c = D.candidates[k];
    const h = el("span", "c-cand", c.id + (c.declared ? " ★" : ""));
    h.title = c.id + (c.declared ? " (declared)" : "") + " · " + c.model;
    header.appendChild(h);
  });
  const pending = D.candidates.filter((_, c) => COLS.indexOf(c) < 0).map((c) => c.id);
  const declared = D.candidates.filter((c) => c.declared).map((c) => c.id);
  const notes = declared.length ? ["★ the declared candidate, " + declared.join(", ") + "."] : [];
  if (pending.length) notes.push("Without results (pending), not shown: " + pending.join(", ") + ".");
  $("pending").textContent = notes.join(" ");
  // Fixed widths: the header and the rows (two grids) line up whatever the window.
  const widths = "14rem 13rem repeat(" + NC + (D.texts ? ", 16rem)" : ", 9rem)");
  header.style.gridTemplateColumns = widths;
  const sheet = document.styleSheets[0];
  sheet.insertRule(".row { grid-template-columns: " + widths + "; }", sheet.cssRules.length);
  Object.values(F).forEach((f) => f.addEventListener(f === F.search ? "input" : "change", applyFilters));
  $("download").addEventListener("click", () => {
    const blob = new Blob([csv()], { type: "text/csv;charset=utf-8" });
    const link = el("a");
    link.href = URL.createObjectURL(blob);
    link.download = D.use_case + ".csv";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 0);
  });
  window.evalregExplorer = Object.freeze({ csv });
  $("reset").addEventListener("click", () => {
    Object.values(F).forEach((f) => { f.value = f === F.verdict ? "failed" : f === F.flipDir ? "either" : ""; });
    applyFilters();
  });
  applyFilters();
  if (visible.length) show(visible[0]);
  performance.mark("explorer-ready");
  document.body.dataset.ready = "1";
})();
