// Study page: summary, plots and trial table; while the study is active it polls with cursors
// (history ?since=, curves ?after=) so each poll carries only what changed.
"use strict";
import { api, badge, card, el, fmtDuration, fmtTime, fmtValueSe, secondsBetween, setLive, studyState } from "./common.js";
import { drawParcoords } from "./parcoords.js";
import { drawCurves, drawFolds, drawHistory, drawPareto, drawSlices } from "./study_plots.js";
import { TrialTable } from "./trial_table.js";
import { ValueAxis } from "./value_axis.js";

const STUDY_ID = window.FOLDWISE.studyId;
const BASE = `/studies/${STUDY_ID}`;
const POLL_MS = 2000;
const DENSE_POINTS = 500;  // parallel coordinates and slices: past this, lines only add ink
const ACTIVE = new Set(["queued", "running"]);

const state = {
  study: null, points: new Map(), best: { number: [], value: [] }, count: 0, sampled: false,
  pruned: new Map(), prunedCount: 0, prunedSampled: false,
  historyCursor: null, curves: new Map(), curvesCursor: 0, running: [], metric: null, table: null,
  axes: {},
};

function renderSummary(study) {
  document.title = `${study.name} · foldwise`;
  document.getElementById("study-name").textContent = study.name;
  document.getElementById("study-status").replaceChildren(badge(studyState(study)));
  document.getElementById("stop").hidden = !ACTIVE.has(study.status) || study.stop_requested;
  const p = study.progress;
  const best = study.best_trial;
  const par = study.spec.parallel;
  const share = p.budget ? Math.min(100, (100 * p.finished) / p.budget) : 0;
  const progress = el("span", {}, `${p.finished.toLocaleString("en")} / ${p.budget.toLocaleString("en")}`,
    el("div", { class: "bar" }, el("span", { style: `width:${share}%` })));
  document.getElementById("cards").replaceChildren(
    card("Finished / budget", progress, { id: "card-progress" }),
    card("Running · pending", `${p.running} · ${p.pending}`, { id: "card-running" }),
    card("Failed · pruned", `${p.failed} · ${p.pruned}`),
    ...objectiveCards(study, best),
    card("Optimizer", study.spec.optimizer.name),
    card("Task", taskText(study), { id: "card-task" }),
    card("Folds × workers", foldsText(study.spec), { id: "card-folds" }),
    card("Created", fmtTime(study.created_at)),
    card("Elapsed", study.started_at ? fmtDuration(secondsBetween(study.started_at, study.finished_at)) : "not started"),
    ...(study.holdout ? [card(`Hold-out (trial ${study.holdout.trial ?? "—"})`, holdoutText(study), { id: "card-holdout" })] : []));
  const error = document.getElementById("study-error");
  error.replaceChildren(...(study.error ? [el("div", { class: "callout", text: study.error })] : []),
    ...(study.waiting ? [el("div", { class: "callout waiting", id: "study-waiting", text: study.waiting })] : []),
    ...(study.warnings ?? []).map((w) => warningCallout(study, w)));
}

/** The best trial and the objective; with several objectives, each of them and the front. */
function objectiveCards(study, best) {
  const objectives = study.spec.objectives ?? [];
  if (objectives.length > 1) {
    const named = objectives.map((o) => `${o.direction} ${o.metric}`).join(" · ");
    return [card("Objectives", named, { id: "card-objectives" }),
      card("Pareto front", state.frontText ?? "—", { id: "card-front" })];
  }
  return [card(`Best ${study.spec.objective.metric}`, best
    ? el("a", { href: `/dashboard/studies/${study.id}/trials/${best.number}`, text: `${fmtValueSe(best.value, best.std_error)}  (#${best.number})` })
    : "—", { id: "card-best" }),
  card("Objective", `${study.spec.objective.direction} ${study.spec.objective.metric}`)];
}

/** A study's warning: what its fold runs knew was suspect, with links to the trials it names. */
function warningCallout(study, warning) {
  const links = warning.trials.slice(0, 20).flatMap((n, i) => [i ? ", " : "",
    el("a", { href: `/dashboard/studies/${study.id}/trials/${n}`, text: `#${n}` })]);
  const more = warning.trials.length > 20 ? ` and ${warning.trials.length - 20} more` : "";
  const runs = `${warning.runs} fold run${warning.runs === 1 ? "" : "s"}`;
  return el("div", { class: "callout warning", "data-kind": warning.kind },
    el("strong", { text: "Warning: " }), warning.message,
    el("div", { class: "sub" }, `${runs}; trials `, ...links, more));
}

/** "5 × 2 (2 in parallel)", "5 ×3 repeats × 2 ...", the scheme under it ("time_series gap 10"). */
function foldsText(spec) {
  const cv = spec.cv ?? {};
  const par = spec.parallel;
  const repeats = (cv.repeats ?? 1) > 1 ? ` ×${cv.repeats} repeats` : "";
  const scheme = [cv.scheme ?? "by the task's kind", cv.gap ? `gap ${cv.gap}` : ""].filter(Boolean).join(" ");
  return el("span", {}, `${par.folds}${repeats} × ${par.workers_per_fold} (${par.trial_groups} in parallel)`,
    el("div", { class: "sub", text: scheme }));
}

/** The study's objective on the test data beside its CV value, or where the score is. */
function holdoutText(study) {
  const h = study.holdout;
  if (h.status !== "completed") return el("span", { title: h.error ?? "" }, h.status, ...(h.error ? [el("div", { class: "sub", text: h.error })] : []));
  const o = h.objective;
  const lines = [];
  for (const [name, metrics] of [["ensemble", h.ensemble], ["refit", h.refit]]) {
    if (!metrics) continue;
    const shown = Object.entries(metrics).map(([k, v]) => `${k} ${fmtValueSe(v, null)}`).join(", ");
    lines.push(el("div", { class: "sub", text: `${name}: ${shown}` }));
  }
  const head = o ? `test ${o.test_metric} ${[o.ensemble, o.refit].filter((v) => v !== null && v !== undefined).map((v) => fmtValueSe(v, null)).join(" / ")} · CV ${fmtValueSe(o.cv, o.cv_std_error)}` : "scored";
  if (o && o.folds !== null && o.folds !== undefined) {
    lines.push(el("div", { class: "sub", text: `fold models on the test data: ${o.test_metric} ${fmtValueSe(o.folds, null)} (CV ${fmtValueSe(o.cv, null)})` }));
  }
  return el("span", {}, head, ...lines);
}

/** The study's task, and for a user's task the hash of the copy of its package the study runs. */
function taskText(study) {
  const task = study.spec.trainer.task;
  if (!study.code_hash) return task;
  const code = el("div", { class: "sub code", title: `code ${study.code_hash}`, text: `code ${study.code_hash.slice(0, 12)}` });
  return el("span", {}, task, code);
}

/** Merge history rows (full or since a cursor); the best steps merge exactly from both sets. */
function mergeHistory(body, full) {
  if (full) { state.points = new Map(); state.pruned = new Map(); state.best = { number: [], value: [] }; }
  mergePruned(body.pruned, full);
  const maximize = state.study.spec.objective.direction === "maximize";
  body.number.forEach((number, i) => {
    const params = Object.create(null);  // a parameter may be named __proto__
    for (const [name, column] of Object.entries(body.params)) params[name] = column[i];
    state.points.set(number, { number, value: body.value[i], se: body.std_error[i], params, feasible: body.feasible[i] });
  });
  const candidates = [...state.best.number.map((n, i) => [n, state.best.value[i]]),
    ...body.best.number.map((n, i) => [n, body.best.value[i]])].sort((a, b) => a[0] - b[0]);
  const best = { number: [], value: [] };
  for (const [n, v] of candidates) {
    const last = best.value.at(-1);
    if (last === undefined || (maximize ? v > last : v < last)) { best.number.push(n); best.value.push(v); }
  }
  state.best = best;
  state.count = body.count;
  if (full) state.sampled = body.sampled;
  state.historyCursor = body.cursor ?? state.historyCursor;
  const note = state.sampled
    ? `${state.points.size.toLocaleString("en")} of ${body.count.toLocaleString("en")} completed trials shown (the best quarter and each range's extremes); the best-so-far line uses all of them${state.study.spec.constraints?.length ? " that meet the constraints" : ""}.`
    : `${body.count.toLocaleString("en")} completed trials. Error bars: standard error over folds.`;
  document.getElementById("history-note").textContent = `${note}${prunedNote()}`;
}

/** Pruned trials: their partial means, the folds those rest on and why they stopped. */
function mergePruned(pruned, full) {
  pruned.number.forEach((number, i) => {
    state.pruned.set(number, { number, value: pruned.value[i], se: pruned.std_error[i],
      folds: pruned.value_folds[i], reason: pruned.reason[i] });
  });
  state.prunedCount = pruned.count;
  if (full) state.prunedSampled = pruned.sampled;
}

function prunedNote() {
  const count = state.prunedCount;
  if (!count) return "";
  const shown = state.prunedSampled ? `${state.pruned.size.toLocaleString("en")} of ` : "";
  return ` Hollow grey: ${shown}${count.toLocaleString("en")} pruned trial${count > 1 ? "s" : ""} at the mean of the folds they ran, not in the best-so-far line.`;
}

/** What the parallel coordinates show; ``range`` is what drawParcoords answered (or nothing). */
function noteDense(range) {
  const shown = state.denseShown ?? 0;
  const of = state.count > shown ? `${shown.toLocaleString("en")} of ${state.count.toLocaleString("en")} completed trials (the best quarter and an even spread)` : "Every completed trial";
  const maximize = state.study.spec.objective.direction === "maximize";
  const n = range?.off ?? 0;
  const far = n ? ` ${n} value${n > 1 ? "s" : ""} far ${maximize ? "below" : "above"} the rest sit${n > 1 ? "" : "s"} at the ${maximize ? "bottom" : "top"} of the ${state.study.spec.objective.metric} axis, in the worst colour.` : "";
  document.getElementById("parcoords-note").textContent = `${of}, coloured by value: the darker, the better.${far} Click a line or point to open its trial.`;
}

function mergeCurves(body) {
  state.metric = body.metric;
  state.running = body.running;
  state.curvesCursor = body.cursor;
  body.trial.forEach((trial, i) => {
    const key = `${trial}/${body.fold[i]}`;
    let s = state.curves.get(key);
    if (!s || s.attempt < body.attempt[i]) {
      s = { trial, fold: body.fold[i], attempt: body.attempt[i], epoch: [], value: [] };
      state.curves.set(key, s);
    }
    if (s.attempt === body.attempt[i]) { s.epoch.push(body.epoch[i]); s.value.push(body.value[i]); }
  });
  const running = new Set(body.running);
  for (const [key, s] of state.curves) if (!running.has(s.trial)) state.curves.delete(key);
  const count = running.size;
  const reporting = new Set([...state.curves.values()].map((s) => s.trial)).size;
  const waiting = count - reporting;
  const wait = waiting && reporting ? ` (${waiting} waiting for ${waiting > 1 ? "their" : "its"} first epoch)` : waiting ? `, waiting for ${count > 1 ? "their" : "its"} first epoch` : "";
  document.getElementById("curves-note").textContent = count
    ? `${count} running trial${count > 1 ? "s" : ""}${wait}; metric ${body.metric}, latest attempt of each fold.`
    : `Metric ${body.metric}.`;
}

/** At most ``n`` points for the denser plots: the best quarter, then an even spread of the rest. */
function thin(points, n) {
  if (points.length <= n) return points;
  const sign = state.study.spec.objective.direction === "maximize" ? -1 : 1;
  const best = [...points].sort((a, b) => sign * (a.value - b.value)).slice(0, Math.floor(n / 4));
  const keep = new Set(best.map((p) => p.number));
  const step = points.length / (n - keep.size);
  for (let i = 0; i < points.length && keep.size < n; i += step) keep.add(points[Math.floor(i)].number);
  return points.filter((p) => keep.has(p.number));
}

const completedPoints = () => [...state.points.values()].sort((a, b) => a.number - b.number);

function redrawHistory() {
  const points = completedPoints();
  const pruned = [...state.pruned.values()].sort((a, b) => a.number - b.number);
  const last = Math.max(points.at(-1)?.number ?? 0, pruned.at(-1)?.number ?? 0, ...state.running);
  return drawHistory(state.study, points, pruned, state.best, last, state.axes.history);
}

const redrawSlices = () => drawSlices(state.study, state.dense, state.axes.slices);

async function drawAll() {
  state.dense = thin(completedPoints(), DENSE_POINTS);
  state.denseShown = state.dense.length;
  const [, range] = await Promise.all([redrawHistory(), drawParcoords(state.study, state.dense), redrawSlices()]);
  noteDense(range);
}

const drawRunning = () => drawCurves(state.metric, [...state.curves.values()], state.running, state.axes.curves);

/** The log and range switches above the plots that have a value axis. */
function makeAxes() {
  const tools = (id) => document.getElementById(id);
  state.axes = {
    history: new ValueAxis(tools("history-tools"), tools("history-clip"), redrawHistory, { name: "history" }),
    slices: new ValueAxis(tools("slices-tools"), tools("slices-clip"), redrawSlices, { name: "slices" }),
    curves: new ValueAxis(tools("curves-tools"), null, drawRunning, { name: "curves", fit: false }),
  };
}

/** Clicking a trial's point (history) or line (parallel coordinates) opens the trial page. */
function linkClicks() {
  for (const id of ["plot-history", "plot-parcoords", "plot-pareto"]) {
    document.getElementById(id).on?.("plotly_click", (event) => {
      const number = event.points?.[0]?.customdata;
      if (typeof number === "number") window.location.href = `/dashboard/studies/${STUDY_ID}/trials/${number}`;
    });
  }
}

/** A study of several objectives: the Pareto plot, redrawn whole (the front moves as trials end). */
const severalObjectives = () => (state.study.spec.objectives ?? []).length > 1;

async function loadPareto() {
  if (!severalObjectives()) return;
  const body = await api(`${BASE}/insights/objectives`);
  const front = body.front.filter(Boolean).length;
  state.frontText = `${front} trial${front === 1 ? "" : "s"} on the front`;
  const frontCard = document.querySelector("#card-front .value");
  if (frontCard) frontCard.textContent = state.frontText;
  const infeasible = body.feasible.filter((f) => f === false).length;
  const shown = body.sampled ? `${body.number.length.toLocaleString("en")} of ` : "";
  document.getElementById("pareto-note").textContent = `${shown}${body.count.toLocaleString("en")} completed trials; ${front} on the front (red: no other feasible trial is better on every objective)${infeasible ? `, ${infeasible} infeasible (grey crosses)` : ""}. Click a point to open its trial.`;
  await drawPareto(body);
}

async function loadAll() {
  document.getElementById("pareto-panel").hidden = !severalObjectives();
  const [history, folds, curves] = await Promise.all([
    api(`${BASE}/insights/history`), api(`${BASE}/insights/folds`), api(`${BASE}/insights/curves`),
  ]);
  const table = state.table.load();  // its request runs while the plots draw
  mergeHistory(history, true);
  mergeCurves(curves);
  await Promise.all([drawAll(), drawFolds(state.study, folds), drawRunning(), table, loadPareto()]);
}

/** One live step: only the deltas since the cursors, and the table page when counts move. */
async function poll() {
  const before = state.study;
  state.study = await api(BASE);
  renderSummary(state.study);
  const [history, curves] = await Promise.all([
    api(`${BASE}/insights/history?since=${encodeURIComponent(state.historyCursor ?? "1970-01-01T00:00:00Z")}`),
    api(`${BASE}/insights/curves?after=${state.curvesCursor}`),
  ]);
  const fresh = [...history.number.filter((n) => !state.points.has(n)),
    ...history.pruned.number.filter((n) => !state.pruned.has(n))];
  if (fresh.length) { mergeHistory(history, false); await drawAll(); }
  const runningChanged = curves.running.join() !== state.running.join();
  if (curves.trial.length || runningChanged) { mergeCurves(curves); await drawRunning(); }
  const p = state.study.progress;
  const changed = JSON.stringify(p) !== JSON.stringify(before.progress) || state.study.status !== before.status;
  if (fresh.length || changed) {
    await Promise.all([api(`${BASE}/insights/folds`).then((f) => drawFolds(state.study, f)), state.table.load(), loadPareto()]);
  }
}

async function live() {
  const active = ACTIVE.has(state.study.status);
  if (active) {
    try { await poll(); setLive(ACTIVE.has(state.study.status)); } catch (error) { console.warn("poll failed", error); }
    setTimeout(live, POLL_MS);
  } else {
    setLive(false);
  }
}

async function stop() {
  if (!window.confirm(`Stop study ${STUDY_ID}? Running trials are cancelled.`)) return;
  const button = document.getElementById("stop");
  button.disabled = true;
  const callout = document.getElementById("study-error");
  try {
    state.study = await api(`${BASE}/stop`, { method: "POST" });
    callout.replaceChildren();
  } catch (error) {  // a 403 for a study of someone else's, say: say why, keep the page
    callout.replaceChildren(el("div", { class: "callout", text: error.message }));
    return;
  } finally {
    button.disabled = false;
  }
  renderSummary(state.study);
  await state.table.load();
}

async function main() {
  try {
    state.study = await api(BASE);
  } catch (error) {
    document.getElementById("study-error").replaceChildren(el("div", { class: "callout", text: error.message }));
    document.body.dataset.ready = "true";
    return;
  }
  renderSummary(state.study);
  state.table = new TrialTable(state.study);
  makeAxes();
  document.getElementById("stop").addEventListener("click", stop);
  await loadAll();
  linkClicks();
  document.body.dataset.ready = "true";
  setLive(ACTIVE.has(state.study.status));
  setTimeout(live, POLL_MS);
}

main();
