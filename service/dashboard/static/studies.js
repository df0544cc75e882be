// Studies page: the table from GET /studies (refreshed while any study is active) and the form
// that parses a YAML/JSON spec (POST /dashboard/spec) and submits it to POST /studies.
"use strict";
import { api, ApiError, badge, el, fmtDuration, fmtTime, fmtValueSe, secondsBetween, setLive, studyState } from "./common.js";

const ACTIVE = new Set(["queued", "running"]);

function progressCell(p) {
  const share = p.budget ? Math.min(100, (100 * p.finished) / p.budget) : 0;
  const extra = [];
  if (p.running) extra.push(`${p.running} running`);
  if (p.failed) extra.push(`${p.failed} failed`);
  if (p.pruned) extra.push(`${p.pruned} pruned`);
  return el("td", {},
    el("div", { class: "num", style: "text-align:left", text: `${p.finished.toLocaleString("en")} / ${p.budget.toLocaleString("en")}` }),
    el("div", { class: "bar" }, el("span", { style: `width:${share}%` })),
    extra.length ? el("div", { class: "muted small", text: extra.join(" · ") }) : null);
}

function row(study) {
  const link = `/dashboard/studies/${study.id}`;
  const best = study.best_trial;
  const objective = study.spec.objective;
  const elapsed = study.started_at ? secondsBetween(study.started_at, study.finished_at) : null;
  return el("tr", { "data-study": study.id },
    el("td", { class: "num" }, el("a", { href: link, text: String(study.id) })),
    el("td", {}, el("a", { href: link, text: study.name })),
    el("td", {}, badge(studyState(study))),
    progressCell(study.progress),
    el("td", { class: "num" }, best
      ? el("a", { href: `${link}/trials/${best.number}`, text: fmtValueSe(best.value, best.std_error) })
      : "—"),
    el("td", { class: "muted", text: `${objective.direction === "maximize" ? "max" : "min"} ${objective.metric}` }),
    el("td", { text: study.spec.optimizer.name }),
    el("td", { class: "nowrap", text: fmtTime(study.created_at) }),
    el("td", { class: "num", text: fmtDuration(elapsed) }));
}

async function refresh() {
  let active = false;
  try {
    const page = await api("/studies?limit=200");
    const body = document.querySelector("#studies tbody");
    body.replaceChildren(...page.data.map(row));
    if (!page.data.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "muted", text: "No studies yet: submit one above." })));
    active = page.data.some((s) => ACTIVE.has(s.status));
    setLive(active);
    document.body.dataset.ready = "true";
  } finally {
    setTimeout(refresh, active ? 2000 : 10000);
  }
}

// --- The spec editor: line numbers in a gutter, errors marked at the line of their field. ---

const editor = document.getElementById("spec");
const gutter = document.getElementById("gutter");
let badLines = new Map();

function renderGutter() {
  const count = editor.value.split("\n").length;
  const lines = [];
  for (let n = 1; n <= count; n += 1) {
    lines.push(badLines.has(n) ? el("span", { class: "bad", title: badLines.get(n), text: String(n) }) : String(n));
    lines.push("\n");
  }
  gutter.replaceChildren(...lines);
  gutter.scrollTop = editor.scrollTop;
}

/** The line of the deepest part of ``loc`` that the text has (``space.lr`` for ``space.lr.low``). */
function lineOf(loc, lines) {
  const path = loc.filter((part) => part !== "body").map(String);
  for (let n = path.length; n > 0; n -= 1) {
    const line = lines[path.slice(0, n).join(".")];
    if (line) return line;
  }
  return null;
}

function showErrors(detail, lines = {}) {
  const items = Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail) }];
  badLines = new Map();
  const list = document.getElementById("spec-errors");
  list.replaceChildren(...items.map((error) => {
    const line = error.line ?? lineOf(error.loc || [], lines);
    const field = (error.loc || []).filter((p) => p !== "body").join(".") || "spec";
    if (line) badLines.set(line, error.msg);
    return el("li", { "data-field": field, "data-line": line ?? "" },
      el("span", { class: "where", text: line ? `line ${line} · ${field}` : field }), error.msg);
  }));
  renderGutter();
}

async function submit() {
  const status = document.getElementById("submit-status");
  status.textContent = "Submitting…";
  showErrors([]);
  let parsed;
  try {
    parsed = await api("/dashboard/spec", { method: "POST", headers: { "content-type": "text/plain" }, body: editor.value });
    const study = await api("/studies", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(parsed.spec) });
    status.textContent = `Created study ${study.id}.`;
    window.location.href = `/dashboard/studies/${study.id}`;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    status.textContent = error.status === 422 ? "The spec has errors:" : `Failed: ${error.message}`;
    showErrors(error.body?.detail ?? error.message, parsed?.lines);
  }
}

editor.addEventListener("input", renderGutter);
editor.addEventListener("scroll", () => { gutter.scrollTop = editor.scrollTop; });
document.getElementById("submit-spec").addEventListener("click", submit);
document.getElementById("spec-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) { editor.value = await file.text(); showErrors([]); }
});
renderGutter();
refresh();
