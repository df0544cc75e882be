// Trial page: params, value ± s.e., each fold attempt with its curves, errors and timings, and
// links to the timeline and checkpoints when the trial's JSON names them (issue #4 adds them).
"use strict";
import { api, badge, baseLayout, card, draw, el, fmt, fmtDuration, fmtTime, fmtValueSe, foldCount, secondsBetween, setLive, showEmpty } from "./common.js";
import { ValueAxis } from "./value_axis.js";

const { studyId, number } = window.FOLDWISE;
const URL_ = `/studies/${studyId}/trials/${number}`;
const COLORS = ["#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#1b7c83", "#57606a"];
const UNFINISHED = new Set(["pending", "running"]);
let study = null;
let trial = null;
let curvesAxis = null;

const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
const epochValues = (key) => trial.folds.flatMap((f) => f.epochs.map((e) => e.metrics[key])).filter((v) => typeof v === "number");

/** Files the trial's JSON says exist: ``has_timeline`` / a fold's ``model_saved`` flags (issue
 * #4's routes), or any ``links: {name: url}`` a later API version adds. Nothing is probed. */
function linksOf(item, extra = {}) {
  const links = { ...extra, ...(item.links ?? {}) };
  if (item.timeline_url) links.timeline = item.timeline_url;
  if (item.checkpoint_url) links.checkpoint = item.checkpoint_url;
  return Object.entries(links).filter(([, href]) => typeof href === "string" && href);
}

/** With several objectives, a card for each after the first; with constraints, one for each
 * (its fold mean against its limit) and whether the trial is feasible. */
function scoredCards() {
  const objectives = study.spec.objectives ?? [];
  const constraints = study.spec.constraints ?? [];
  const cards = objectives.slice(1).map((o, i) => {
    const [mean, se] = trial.objective_values?.[i + 1] ?? [null, null];
    return card(`${o.metric} ± s.e. (${o.direction})`, fmtValueSe(mean, se), { id: `card-objective-${i + 1}` });
  });
  constraints.forEach((c, i) => {
    const mean = trial.constraint_values?.[i];
    cards.push(card(`${c.metric} ${c.op} ${fmt(c.value, 6)}`, mean === null || mean === undefined ? "—" : fmt(mean, 6), { id: `card-constraint-${i}` }));
  });
  if (constraints.length) {
    const feasible = trial.feasible === null || trial.feasible === undefined ? "—" : trial.feasible ? "yes" : "no: breaks a constraint";
    cards.push(card("Feasible", feasible, { id: "card-feasible" }));
  }
  return cards;
}

function renderHeader() {
  document.title = `Trial ${number} · ${study.name} · foldwise`;
  document.getElementById("study-link").textContent = study.name;
  document.getElementById("trial-status").replaceChildren(badge(trial.status));
  const k = foldCount(study.spec);
  const done = new Set(trial.folds.filter((f) => f.status === "completed").map((f) => f.fold)).size;
  const value = fmtValueSe(trial.value, trial.std_error);
  const partial = trial.value !== null && trial.value_folds !== null && trial.value_folds !== undefined
    && (trial.status === "pruned" || trial.value_folds < k);
  document.getElementById("cards").replaceChildren(
    card(`${study.spec.objective.metric} ± s.e.`, partial
      ? el("span", {}, value, el("div", { class: "sub", text: `value over ${trial.value_folds} of ${k} folds` }))
      : value, { id: "card-value" }),
    ...scoredCards(),
    card("Folds completed", `${done} / ${k}`),
    card("Fold attempts", String(trial.folds.length)),
    card("Wall time", trial.started_at ? fmtDuration(secondsBetween(trial.started_at, trial.finished_at)) : "—"));
  document.getElementById("trial-error").replaceChildren(...(trial.error ? [el("div", { class: "callout", text: trial.error })] : []));
  document.getElementById("trial-pruned").replaceChildren(...(trial.status === "pruned"
    ? [el("div", { class: "callout pruned" }, el("b", { text: "Pruned: " }), trial.pruned_reason ?? "no reason stored")] : []));
  const links = linksOf(trial, trial.has_timeline ? { "timeline (Chrome trace JSON)": `${URL_}/timeline` } : {});
  document.getElementById("links").replaceChildren(...links.map(([name, href]) => el("a", { href, text: `⤓ ${name}` })));
}

function renderDetails() {
  document.getElementById("params").replaceChildren(...Object.entries(trial.params).flatMap(([name, value]) =>
    [el("dt", { text: name }), el("dd", { class: "mono", text: typeof value === "number" ? fmt(value, 6) : String(value) })]));
  const train = trial.folds.map((f) => f.train_seconds).filter((s) => typeof s === "number");
  const rows = [
    ["Started", fmtTime(trial.started_at)], ["Finished", fmtTime(trial.finished_at)],
    ["Wall time", trial.started_at ? fmtDuration(secondsBetween(trial.started_at, trial.finished_at)) : "—"],
    ["Training time (all folds)", train.length ? fmtDuration(train.reduce((a, b) => a + b, 0)) : "—"],
    ["Mean epoch time", epochValues("epoch_seconds").length ? `${fmt(mean(epochValues("epoch_seconds")), 3)} s` : "—"],
    ["Mean throughput", epochValues("samples_per_second").length ? `${fmt(Math.round(mean(epochValues("samples_per_second"))))} samples/s` : "—"],
  ];
  document.getElementById("timings").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
}

/** Stopped by the pruning rule, or because its trial ended: the error field holds why. */
const STOPPED = new Set(["pruned", "cancelled"]);

function errorCell(fold) {
  if (!fold.error && !fold.traceback) return el("td", { class: "muted", text: "—" });
  if (STOPPED.has(fold.status)) return el("td", { class: "error-cell" }, el("div", { class: "small reason-text", text: fold.error }));
  const open = (event) => event.currentTarget.classList.toggle("open");
  return el("td", { class: "error-cell" },
    el("div", { class: "small error-text", title: fold.error ?? "", text: fold.error ?? "", onclick: open }),
    fold.traceback ? el("details", {}, el("summary", { class: "small", text: "traceback" }), el("pre", { class: "trace", text: fold.traceback })) : null);
}

/** Where the fold run's ranks ran: each node once (short id, IP), with the GPUs it used. */
function placementCell(fold) {
  if (!fold.placement?.length) return el("td", { class: "muted", text: "—" });
  const nodes = new Map();
  for (const rank of fold.placement) {
    const entry = nodes.get(rank.node_id) ?? { ip: rank.node_ip, ranks: [], gpus: [] };
    entry.ranks.push(rank.rank);
    entry.gpus.push(...rank.gpu_ids);
    nodes.set(rank.node_id, entry);
  }
  return el("td", { class: "small placement" }, ...[...nodes].map(([id, n]) => el("div", {
    title: `node ${id}, ranks ${n.ranks.join(", ")}`,
    text: `${id.slice(0, 8)} (${n.ip ?? "?"})${n.gpus.length ? ` GPU ${n.gpus.join(", ")}` : ""}`,
  })));
}

function renderFolds() {
  const rows = trial.folds.map((f) => {
    const sps = mean(f.epochs.map((e) => e.metrics.samples_per_second).filter((v) => typeof v === "number"));
    const files = linksOf(f, f.model_saved ? { model: `${URL_}/folds/${f.fold}/model` } : {});
    const resumed = f.resumed_epochs ? ` (${f.resumed_epochs} resumed)` : "";
    return el("tr", { "data-fold": f.fold, "data-attempt": f.attempt, class: STOPPED.has(f.status) ? f.status : null },
      el("td", { class: "num", text: String(f.fold) }), el("td", { class: "num", text: String(f.attempt) }),
      el("td", {}, badge(f.status)),
      el("td", { class: "num", title: f.status === "pruned" ? "the value it had reached when pruned" : null, text: fmt(f.value) }),
      el("td", { class: "num", title: f.checkpoint_epoch ? `last checkpoint: epoch ${f.checkpoint_epoch}` : "", text: `${f.epochs.length}${resumed}` }), el("td", { class: "num", text: fmtDuration(f.train_seconds) }),
      el("td", { class: "num", text: sps === null ? "—" : fmt(Math.round(sps)) }), el("td", { class: "nowrap", text: fmtTime(f.started_at) }),
      placementCell(f),
      errorCell(f),
      el("td", {}, ...(files.length ? files.map(([name, href]) => el("a", { href, text: name })) : [el("span", { class: "muted", text: "—" })])));
  });
  document.querySelector("#folds tbody").replaceChildren(...rows);
}

const NOT_CURVES = new Set(["epoch", "epoch_start", "epoch_end"]);

/** Metrics worth a curve: numbers, not timestamps or flags. */
function metricNames() {
  const names = new Set(trial.folds.flatMap((f) => f.epochs.flatMap((e) =>
    Object.keys(e.metrics).filter((k) => typeof e.metrics[k] === "number" && !NOT_CURVES.has(k)))));
  return [...names].sort();
}

function renderMetricChoice() {
  const select = document.getElementById("metric");
  const names = metricNames();
  const current = select.value || study.spec.objective.metric;
  select.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
  select.value = names.includes(current) ? current : names[0] ?? "";
  select.hidden = !names.length;
}

/** The first line of a text, at most ``n`` characters. */
const firstLine = (text, n = 200) => {
  const line = (text ?? "").split("\n")[0];
  return line.length > n ? `${line.slice(0, n - 1)}…` : line;
};

/** Why there is no curve to draw, true to the trial's state. */
function noEpochs() {
  if (trial.status === "pending") return "This trial has not started yet.";
  if (trial.status === "running") {
    return trial.folds.length ? "No epoch reported yet: the folds are training their first epoch." : "No epoch reported yet: the folds are waiting to start.";
  }
  const failed = trial.folds.find((f) => f.status === "failed" && f.error);
  const why = {
    failed: trial.folds.length
      ? `it failed before any fold finished an epoch (${firstLine(trial.error ?? (failed && `fold ${failed.fold}: ${failed.error}`)) || "no error stored"}).`
      : `it failed before any fold started (${firstLine(trial.error) || "no error stored"}).`,
    pruned: `it was pruned before any fold finished an epoch (${firstLine(trial.pruned_reason) || "no reason stored"}).`,
  }[trial.status];
  return `This trial reported no epochs${why ? `: ${why}` : "."}`;
}

function drawCurves() {
  const metric = document.getElementById("metric").value;
  const runs = trial.folds.filter((f) => f.epochs.length);
  const scale = curvesAxis.scale(runs.flatMap((f) => f.epochs.map((e) => e.metrics[metric])).filter((v) => typeof v === "number"), false);
  document.getElementById("curves-tools").hidden = !runs.length || !metric;
  if (!runs.length) return showEmpty("plot-curves", noEpochs());
  if (!metric) return showEmpty("plot-curves", "Its epochs reported no metric to plot.");
  const latest = new Map(trial.folds.map((f) => [f.fold, f.attempt]));
  const traces = runs.map((f) => ({
    type: "scatter", mode: "lines+markers", name: `fold ${f.fold}${f.attempt ? ` (attempt ${f.attempt})` : ""}`,
    x: f.epochs.map((e) => e.epoch), y: f.epochs.map((e) => e.metrics[metric] ?? null),
    line: { color: COLORS[f.fold % COLORS.length], width: 1.5, dash: f.attempt < latest.get(f.fold) ? "dot" : "solid" },
    marker: { size: 4 }, hovertemplate: `fold ${f.fold}, epoch %{x}: %{y:.4g}<extra></extra>`,
  }));
  const layout = baseLayout({ xaxis: { title: { text: "epoch" } }, yaxis: { title: { text: metric }, ...scale.axis } });
  return draw("plot-curves", traces, layout);
}

async function render() {
  renderHeader();
  renderDetails();
  renderFolds();
  renderMetricChoice();
  await drawCurves();
}

async function poll() {
  try {
    trial = await api(URL_);
    await render();
  } catch (error) {
    console.warn("poll failed", error);
  }
  const live = UNFINISHED.has(trial.status);
  setLive(live);
  if (live) setTimeout(poll, 2000);
}

async function main() {
  try {
    [study, trial] = await Promise.all([api(`/studies/${studyId}`), api(URL_)]);
  } catch (error) {
    document.getElementById("trial-error").replaceChildren(el("div", { class: "callout", text: error.message }));
    document.body.dataset.ready = "true";
    return;
  }
  document.getElementById("metric").addEventListener("change", drawCurves);
  curvesAxis = new ValueAxis(document.getElementById("curves-tools"), null, drawCurves, { name: "curves", fit: false });
  await render();
  document.body.dataset.ready = "true";
  setLive(UNFINISHED.has(trial.status));
  if (UNFINISHED.has(trial.status)) setTimeout(poll, 2000);
}

main();
