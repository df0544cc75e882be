// The study page's plots, drawn from the compact arrays of /studies/{id}/insights/*.
"use strict";
import { baseLayout, draw, fmt, fmtValueSe, foldCount, plotlyText, showEmpty } from "./common.js";
import { offSymbol } from "./value_axis.js";

const BLUE = "#0969da";
const GREEN = "#1a7f37";
const GREY = "#6e7781";
const FOLD_COLORS = ["#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#1b7c83", "#57606a"];

const objectiveTitle = (study) =>
  `${study.spec.objective.metric} (${study.spec.objective.direction === "maximize" ? "higher" : "lower"} is better)`;

/** History: every shown trial with its fold s.e. as an error bar, those that break the study's
 * constraints as grey crosses, the pruned trials as hollow grey markers at their partial
 * means, and the best-so-far steps (completed trials that meet the constraints only).
 * ``axis`` (a ValueAxis) picks a log or linear scale and, by default, a range that leaves out
 * values far worse than the bulk: those are drawn on the edge, their true value on hover. */
export function drawHistory(study, allPoints, pruned, best, lastNumber, axis) {
  const points = allPoints.filter((p) => p.feasible !== false);
  const broken = allPoints.filter((p) => p.feasible === false);
  if (!allPoints.length && !pruned.length) {
    axis.scale([], false);
    return showEmpty("plot-history", "No completed trials yet.");
  }
  const maximize = study.spec.objective.direction === "maximize";
  const scale = axis.scale([...allPoints, ...pruned].map((p) => p.value), maximize, allPoints.map((p) => p.value));
  const y = (p) => (scale.off(p.value) ? scale.pin : p.value);
  // per-point marker arrays only when some value is off the scale: Plotly draws scalars faster
  const each = (list, f, plain) => (scale.clipped ? list.map(f) : plain);
  const symbol = (shape) => (p) => (scale.off(p.value) ? offSymbol(maximize) + (shape.endsWith("-open") ? "-open" : "") : shape);
  const offNote = (p) => (scale.off(p.value) ? " (off the scale)" : "");
  const trials = {
    type: "scatter", mode: "markers", name: "trial value ± fold s.e.",
    x: points.map((p) => p.number), y: points.map(y),
    error_y: { type: "data", array: points.map((p) => (scale.off(p.value) ? 0 : p.se ?? 0)), visible: true, thickness: 1, width: 0, color: "rgba(9,105,218,0.35)" },
    marker: { color: BLUE, size: each(points, (p) => (scale.off(p.value) ? 9 : 5), 5), opacity: 0.7, symbol: each(points, symbol("circle"), "circle") },
    customdata: points.map((p) => p.number),
    text: points.map((p) => fmtValueSe(p.value, p.se) + offNote(p)),
    hovertemplate: "trial %{x}<br>%{text}<extra></extra>",
  };
  const infeasible = {
    type: "scatter", mode: "markers", name: "breaks a constraint",
    x: broken.map((p) => p.number), y: broken.map(y),
    marker: { symbol: "x", color: GREY, size: 7 },
    customdata: broken.map((p) => p.number),
    text: broken.map((p) => fmtValueSe(p.value, p.se) + offNote(p)),
    hovertemplate: "trial %{x}, breaks a constraint<br>%{text}<extra></extra>",
  };
  const folds = foldCount(study.spec);
  const stopped = {
    type: "scatter", mode: "markers", name: "pruned (partial mean)",
    x: pruned.map((p) => p.number), y: pruned.map(y),
    marker: { symbol: each(pruned, symbol("circle-open"), "circle-open"), color: GREY, size: 7, line: { width: 1.5 } },
    customdata: pruned.map((p) => p.number),
    text: pruned.map((p) => prunedHover(p, folds) + offNote(p)),
    hovertemplate: "trial %{x}, pruned<br>%{text}<extra></extra>",
  };
  const steps = {
    type: "scatter", mode: "lines", name: "best so far", line: { color: GREEN, width: 2, shape: "hv" },
    x: [...best.number, Math.max(lastNumber, best.number.at(-1) ?? 0)],
    y: [...best.value, best.value.at(-1)],
    hovertemplate: "best so far: %{y:.4g}<extra></extra>",
  };
  const layout = baseLayout({
    xaxis: { title: { text: "trial number" }, zeroline: false },
    yaxis: { title: { text: objectiveTitle(study) }, zeroline: false, ...scale.axis },
  });
  const traces = [trials, ...(broken.length ? [infeasible] : []), ...(pruned.length ? [stopped] : []),
    ...(best.number.length ? [steps] : [])];
  return draw("plot-history", traces, layout);
}

/** "0.31 ± 0.02 over 2 of 5 folds" and the reason, wrapped: Plotly's hover box does not wrap. */
function prunedHover(point, folds) {
  const over = point.folds === null || point.folds === undefined ? "" : ` over ${point.folds} of ${folds} folds`;
  return `${fmtValueSe(point.value, point.se)}${over}<br>${wrapLines(escapeMarkup(point.reason ?? "no reason stored"), 72)}`;
}

/** Plotly reads a few HTML tags in hover text; a reason is plain text. */
const escapeMarkup = (text) => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

function wrapLines(text, width) {
  const lines = [];
  for (const word of text.split(" ")) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + word.length < width) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines.join("<br>");
}

/** Early trials light, late ones dark (never white, so that every dot shows). */
const TRIAL_SCALE = [[0, "#9ecae1"], [0.5, "#3182bd"], [1, "#08306b"]];

/** One small scatter per parameter: value against the parameter, shaded by trial number (the
 * colour bar says so), on the value axis ``axis`` asks for (log, far-off values on the edge). */
export function drawSlices(study, points, axis) {
  if (!points.length) {
    axis.scale([], false);
    return showEmpty("plot-slices", "No completed trials yet.");
  }
  const maximize = study.spec.objective.direction === "maximize";
  const scale = axis.scale(points.map((p) => p.value), maximize);
  const names = Object.keys(study.spec.space);
  const columns = Math.min(4, names.length);
  const rows = Math.ceil(names.length / columns);
  const numbers = points.map((p) => p.number);
  const [first, last] = [Math.min(...numbers), Math.max(...numbers)];
  const layout = baseLayout({ grid: { rows, columns, pattern: "independent", ygap: 0.35, xgap: 0.08 },
    showlegend: false, margin: { l: 60, r: 20, t: 10, b: 40 }, height: 230 * rows });
  const traces = names.map((name, i) => {
    const param = study.spec.space[name];
    const shown = points.filter((p) => p.params[name] !== null && p.params[name] !== undefined);
    const axisId = i === 0 ? "" : String(i + 1);
    layout[`xaxis${axisId}`] = { title: { text: name, standoff: 4 }, type: param.log ? "log" : param.type === "categorical" ? "category" : "linear", ...sliceTicks(param) };
    layout[`yaxis${axisId}`] = { title: { text: i % columns === 0 ? study.spec.objective.metric : "" }, ...scale.axis };
    return {
      type: "scatter", mode: "markers", xaxis: `x${axisId}`, yaxis: `y${axisId}`,
      x: shown.map((p) => (param.type === "categorical" ? plotlyText(p.params[name]) : p.params[name])), y: shown.map((p) => (scale.off(p.value) ? scale.pin : p.value)),
      customdata: shown.map((p) => p.number), text: shown.map((p) => fmt(p.value) + (scale.off(p.value) ? " (off the scale)" : "")),
      marker: { size: scale.clipped ? shown.map((p) => (scale.off(p.value) ? 8 : 5)) : 5,
        symbol: scale.clipped ? shown.map((p) => (scale.off(p.value) ? offSymbol(maximize) : "circle")) : "circle",
        color: shown.map((p) => p.number), cmin: first, cmax: Math.max(last, first + 1), colorscale: TRIAL_SCALE, opacity: 0.8,
        showscale: i === 0, colorbar: { title: { text: "trial number (darker = later)", side: "right" }, thickness: 12, len: Math.min(1, 300 / (230 * rows)), y: 1, yanchor: "top" } },
      hovertemplate: `trial %{customdata}<br>${name}=%{x}<br>value %{text}<extra></extra>`,
    };
  });
  document.getElementById("plot-slices").style.height = `${230 * rows}px`;
  return draw("plot-slices", traces, layout);
}

/** Readable slice ticks: categories in spec order, whole numbers, five ticks on a log axis. */
function sliceTicks(param) {
  if (param.type === "categorical") return { categoryorder: "array", categoryarray: param.choices.map(plotlyText) };
  if (param.type === "int" && !param.log) return { dtick: Math.max(1, Math.ceil((param.high - param.low) / 6)) };
  if (!param.log) return {};
  const lo = Math.log10(param.low);
  const hi = Math.log10(param.high);
  const tickvals = [0, 0.25, 0.5, 0.75, 1].map((t) => 10 ** (lo + t * (hi - lo)));
  return { tickvals, ticktext: tickvals.map((v) => fmt(v, 2)) };
}

/** The best trial's value beside what to expect of it on new data, above the fold plot. */
function showSelection(selection) {
  const note = document.getElementById("folds-selection");
  note.hidden = !selection;
  if (!selection) return;
  const trials = `${selection.trials} trial${selection.trials === 1 ? "" : "s"}`;
  note.textContent = `Best trial #${selection.number}: ${fmt(selection.value)} over its folds; expect `
    + `${fmt(selection.corrected)} on new data (${fmt(selection.bias)} worse, for being the best of ${trials} `
    + "on the same folds; Tibshirani & Tibshirani 2009).";
}

/** The top trials: each fold's value as a coloured dot, the mean ± s.e. as a black bar, and
 * the best trial's selection-corrected estimate as a hollow diamond. */
export function drawFolds(study, top) {
  showSelection(top.selection);
  if (!top.number.length) return showEmpty("plot-folds", "No completed trials yet.");
  const x = top.number.map((n) => `#${n}`);
  const traces = [];
  for (let fold = 0; fold < top.folds; fold += 1) {
    traces.push({ type: "scatter", mode: "markers", name: `fold ${fold}`, x, y: top.fold_values.map((v) => v[fold]),
      marker: { color: FOLD_COLORS[fold % FOLD_COLORS.length], size: 8, opacity: 0.85 },
      hovertemplate: `trial %{x}, fold ${fold}: %{y:.4g}<extra></extra>` });
  }
  traces.push({ type: "scatter", mode: "markers", name: "mean ± s.e.", x, y: top.value,
    error_y: { type: "data", array: top.std_error.map((s) => s ?? 0), thickness: 2, width: 8, color: "#1f2328" },
    marker: { symbol: "line-ew-open", size: 16, color: "#1f2328", line: { width: 2 } },
    hovertemplate: "trial %{x}: %{y:.4g}<extra>mean</extra>" });
  const selection = top.selection;
  if (selection && selection.number === top.number[0]) {
    traces.push({ type: "scatter", mode: "markers", name: "expected on new data", x: [x[0]], y: [selection.corrected],
      marker: { symbol: "diamond-open", size: 11, color: "#9a6700", line: { width: 2 } },
      hovertemplate: `trial %{x}: %{y:.4g} expected on new data<extra>best of ${selection.trials}</extra>` });
  }
  const layout = baseLayout({ xaxis: { title: { text: "trial (best first)" }, type: "category" },
    yaxis: { title: { text: study.spec.objective.metric } }, legend: { orientation: "h", y: -0.3 } });
  return draw("plot-folds", traces, layout);
}

/** Learning curves of the running trials: a colour per trial, one line per fold. ``running``:
 * the running trials' numbers, some of which may have no epoch yet. */
export function drawCurves(metric, series, running, axis) {
  const values = series.flatMap((s) => s.value).filter(Number.isFinite);
  const scale = axis.scale(values, false);
  if (!series.length) {
    const n = running.length;
    return showEmpty("plot-curves", n ? `${n} running trial${n > 1 ? "s" : ""}, waiting for ${n > 1 ? "their" : "its"} first epoch.` : "No trial is running.");
  }
  const trials = [...new Set(series.map((s) => s.trial))].sort((a, b) => a - b);
  const traces = series.map((s) => ({
    type: "scatter", mode: "lines+markers", x: s.epoch, y: s.value,
    name: `#${s.trial}`, legendgroup: `#${s.trial}`, showlegend: s.fold === Math.min(...series.filter((o) => o.trial === s.trial).map((o) => o.fold)),
    line: { color: FOLD_COLORS[trials.indexOf(s.trial) % FOLD_COLORS.length], width: 1.5 }, marker: { size: 4 },
    hovertemplate: `trial ${s.trial}, fold ${s.fold}, epoch %{x}: %{y:.4g}<extra></extra>`,
  }));
  const layout = baseLayout({ xaxis: { title: { text: "epoch" }, dtick: 1 }, yaxis: { title: { text: metric }, ...scale.axis },
    legend: { orientation: "h", y: -0.3 } });
  return draw("plot-curves", traces, layout);
}

const RED = "#cf222e";

/** The Pareto plot of a study with several objectives: for two, one scatter of every completed
 * trial with the front joined as a staircase; for three or four, a scatter per pair of
 * objectives. Front trials are red, other feasible ones blue, infeasible ones grey crosses. */
export function drawPareto(body) {
  const n = body.number.length;
  if (!n) return showEmpty("plot-pareto", "No completed trials yet.");
  const objectives = body.objectives;
  const pairs = [];
  for (let a = 0; a < objectives.length; a += 1) for (let b = a + 1; b < objectives.length; b += 1) pairs.push([a, b]);
  const columns = Math.min(3, pairs.length);
  const rows = Math.ceil(pairs.length / columns);
  const layout = baseLayout({ legend: { orientation: "h", y: -0.15 }, height: pairs.length > 1 ? 300 * rows : 420 });
  if (pairs.length > 1) layout.grid = { rows, columns, pattern: "independent", ygap: 0.3, xgap: 0.1 };
  const label = (j) => `${objectives[j].metric} (${objectives[j].direction === "maximize" ? "higher" : "lower"} is better)`;
  const groups = [
    ["Pareto front", (i) => body.front[i], { color: RED, size: 8, symbol: "circle" }],
    ["feasible", (i) => !body.front[i] && body.feasible[i] !== false, { color: BLUE, size: 6, symbol: "circle", opacity: 0.6 }],
    ["infeasible (breaks a constraint)", (i) => body.feasible[i] === false, { color: GREY, size: 7, symbol: "x-thin-open", line: { width: 1.5 } }],
  ];
  const traces = [];
  pairs.forEach(([a, b], k) => {
    const id = k === 0 ? "" : String(k + 1);
    layout[`xaxis${id}`] = { title: { text: label(a), standoff: 4 }, zeroline: false };
    layout[`yaxis${id}`] = { title: { text: label(b), standoff: 4 }, zeroline: false };
    for (const [name, member, marker] of groups) {
      const index = [...Array(n).keys()].filter(member);
      if (!index.length) continue;
      traces.push({ type: "scatter", mode: "markers", name, legendgroup: name, showlegend: k === 0, xaxis: `x${id}`, yaxis: `y${id}`,
        x: index.map((i) => body.values[a][i]), y: index.map((i) => body.values[b][i]), marker,
        customdata: index.map((i) => body.number[i]),
        hovertemplate: `trial %{customdata}<br>${objectives[a].metric} %{x:.4g}<br>${objectives[b].metric} %{y:.4g}<extra>${name}</extra>` });
    }
    if (objectives.length === 2) traces.push(staircase(body, a, b, objectives));
  });
  document.getElementById("plot-pareto").style.height = `${layout.height}px`;
  return draw("plot-pareto", traces, layout);
}

/** The two-objective front joined in the order of the first objective, as a staircase: the
 * region it bounds is what the front dominates. */
function staircase(body, a, b, objectives) {
  const front = body.number.map((_, i) => i).filter((i) => body.front[i]).sort((i, j) => body.values[a][i] - body.values[a][j]);
  const shape = (objectives[a].direction === "maximize") === (objectives[b].direction === "maximize") ? "vh" : "hv";
  return { type: "scatter", mode: "lines", name: "front", showlegend: false, hoverinfo: "skip",
    x: front.map((i) => body.values[a][i]), y: front.map((i) => body.values[b][i]), line: { color: RED, width: 1.5, shape } };
}
