// The study page's plots, drawn from the compact arrays of /studies/{id}/insights/*.
"use strict";
import { baseLayout, draw, fmt, fmtValueSe, showEmpty } from "./common.js";

const BLUE = "#0969da";
const GREEN = "#1a7f37";
const GREY = "#6e7781";
const FOLD_COLORS = ["#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#1b7c83", "#57606a"];

const objectiveTitle = (study) =>
  `${study.spec.objective.metric} (${study.spec.objective.direction === "maximize" ? "higher" : "lower"} is better)`;

/** History: every shown trial with its fold s.e. as an error bar, the pruned trials as hollow
 * grey markers at their partial means, and the best-so-far steps (completed trials only). */
export function drawHistory(study, points, pruned, best, lastNumber) {
  if (!points.length && !pruned.length) return showEmpty("plot-history", "No completed trials yet.");
  const trials = {
    type: "scatter", mode: "markers", name: "trial value ± fold s.e.",
    x: points.map((p) => p.number), y: points.map((p) => p.value),
    error_y: { type: "data", array: points.map((p) => p.se ?? 0), visible: true, thickness: 1, width: 0, color: "rgba(9,105,218,0.35)" },
    marker: { color: BLUE, size: 5, opacity: 0.7 },
    customdata: points.map((p) => p.number),
    text: points.map((p) => fmtValueSe(p.value, p.se)),
    hovertemplate: "trial %{x}<br>%{text}<extra></extra>",
  };
  const folds = study.spec.parallel.folds;
  const stopped = {
    type: "scatter", mode: "markers", name: "pruned (partial mean)",
    x: pruned.map((p) => p.number), y: pruned.map((p) => p.value),
    marker: { symbol: "circle-open", color: GREY, size: 7, line: { width: 1.5 } },
    customdata: pruned.map((p) => p.number),
    text: pruned.map((p) => prunedHover(p, folds)),
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
    yaxis: { title: { text: objectiveTitle(study) }, zeroline: false },
  });
  const traces = [trials, ...(pruned.length ? [stopped] : []), ...(best.number.length ? [steps] : [])];
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

/** Parallel coordinates over every parameter plus the value, coloured by value.
 *
 * Drawn as SVG polylines (one trace per colour band) rather than Plotly's WebGL ``parcoords``:
 * without a GPU, software WebGL spent seconds compiling and drawing; SVG stays well under 0.5 s.
 */
export function drawParcoords(study, points) {
  if (points.length < 2) return showEmpty("plot-parcoords", "Needs two completed trials.");
  const space = study.spec.space;
  const names = Object.keys(space);
  const axes = names.map((name) => axis(name, space[name], points.map((p) => p.params[name])));
  axes.push(valueAxis(study, points.map((p) => p.value)));
  const maximize = study.spec.objective.direction === "maximize";
  const values = points.map((p) => p.value);
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const bandOf = (v) => Math.min(BANDS - 1, Math.floor(((v - lo) / (hi - lo || 1)) * BANDS));
  const bands = Array.from({ length: BANDS }, () => ({ x: [], y: [], text: [], number: [] }));
  // Worst bands first so that the best lines are drawn on top.
  points.forEach((p, i) => {
    const band = bands[bandOf(p.value)];
    axes.forEach((a, d) => {
      band.x.push(d); band.y.push(a.y[i]); band.text.push(`trial ${p.number}: ${fmt(p.value)}`); band.number.push(p.number);
    });
    band.x.push(null); band.y.push(null); band.text.push(null); band.number.push(null);
  });
  const order = [...bands.keys()].sort((a, b) => (maximize ? a - b : b - a));
  const traces = order.map((b) => ({
    type: "scatter", mode: "lines", x: bands[b].x, y: bands[b].y, text: bands[b].text, customdata: bands[b].number, hoverinfo: "text",
    line: { width: 1, color: viridis((b + 0.5) / BANDS, !maximize) }, opacity: 0.55, showlegend: false,
  }));
  traces.push({ type: "scatter", mode: "markers", x: [null], y: [null], hoverinfo: "skip", showlegend: false,
    marker: { color: [lo, hi], cmin: lo, cmax: hi, colorscale: "Viridis", reversescale: !maximize, showscale: true,
      colorbar: { title: { text: study.spec.objective.metric }, thickness: 12 } } });
  const layout = baseLayout({ margin: { l: 30, r: 20, t: 30, b: 20 }, hovermode: "closest",
    xaxis: { visible: false, range: [-0.3, axes.length - 0.7], fixedrange: true },
    yaxis: { visible: false, range: [-0.04, 1.04], fixedrange: true },
    shapes: axes.map((_, d) => ({ type: "line", x0: d, x1: d, y0: 0, y1: 1, line: { color: "#8c959f", width: 1 } })),
    annotations: axes.flatMap((a, d) => [
      { x: d, y: 1.04, yanchor: "bottom", text: `<b>${a.label}</b>`, showarrow: false, font: { size: 12 } },
      ...a.ticks.map(([y, label]) => ({ x: d, y, xanchor: "right", xshift: -3, text: label, showarrow: false,
        font: { size: 10, color: "#59636e" }, bgcolor: "rgba(255,255,255,0.7)" })),
    ]) });
  return draw("plot-parcoords", traces, layout);
}

const BANDS = 10;
const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
const viridis = (t, reverse) => VIRIDIS[Math.min(9, Math.floor((reverse ? 1 - t : t) * 10))];

/** One axis scaled to [0, 1]: log parameters on a log scale, categories and absent values labelled. */
function axis(name, param, raw) {
  const absent = (v) => v === null || v === undefined;
  const missing = raw.some(absent);
  const floor = missing ? 0.1 : 0;  // absent values sit at the bottom, labelled "n/a"
  const scaleTo = (t) => floor + t * (1 - floor);
  const ticks = missing ? [[0, "n/a"]] : [];
  if (param.type === "categorical") {
    const choices = param.choices.map(String);
    const at = (i) => scaleTo(choices.length > 1 ? i / (choices.length - 1) : 0.5);
    choices.forEach((c, i) => ticks.push([at(i), c]));
    return { label: name, ticks, y: raw.map((v) => (absent(v) ? 0 : at(choices.indexOf(String(v))))) };
  }
  const f = param.log ? Math.log10 : (v) => v;
  const lo = f(param.low);
  const hi = f(param.high);
  const unit = (v) => (hi > lo ? (f(v) - lo) / (hi - lo) : 0.5);
  if (param.type === "int" && !param.log && hi - lo <= 8) {
    for (let v = lo; v <= hi; v += 1) ticks.push([scaleTo(unit(v)), String(v)]);
  } else {
    for (const t of [0, 0.25, 0.5, 0.75, 1]) ticks.push([scaleTo(t), fmt(param.log ? 10 ** (lo + t * (hi - lo)) : lo + t * (hi - lo), 2)]);
  }
  return { label: name, ticks, y: raw.map((v) => (absent(v) ? 0 : scaleTo(unit(v)))) };
}

function valueAxis(study, values) {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => [t, fmt(lo + t * (hi - lo), 3)]);
  return { label: study.spec.objective.metric, ticks, y: values.map((v) => (hi > lo ? (v - lo) / (hi - lo) : 0.5)) };
}

/** One small scatter per parameter: value against the parameter, coloured by trial number. */
export function drawSlices(study, points) {
  if (!points.length) return showEmpty("plot-slices", "No completed trials yet.");
  const names = Object.keys(study.spec.space);
  const columns = Math.min(4, names.length);
  const rows = Math.ceil(names.length / columns);
  const layout = baseLayout({ grid: { rows, columns, pattern: "independent", ygap: 0.35, xgap: 0.08 },
    showlegend: false, margin: { l: 60, r: 20, t: 10, b: 40 }, height: 230 * rows });
  const traces = names.map((name, i) => {
    const param = study.spec.space[name];
    const shown = points.filter((p) => p.params[name] !== null && p.params[name] !== undefined);
    const axis = i === 0 ? "" : String(i + 1);
    layout[`xaxis${axis}`] = { title: { text: name, standoff: 4 }, type: param.log ? "log" : param.type === "categorical" ? "category" : "linear", ...sliceTicks(param) };
    layout[`yaxis${axis}`] = { title: { text: i % columns === 0 ? study.spec.objective.metric : "" } };
    return {
      type: "scatter", mode: "markers", xaxis: `x${axis}`, yaxis: `y${axis}`,
      x: shown.map((p) => p.params[name]), y: shown.map((p) => p.value),
      marker: { size: 4, color: shown.map((p) => p.number), colorscale: "Blues", opacity: 0.75 },
      hovertemplate: `${name}=%{x}<br>value %{y:.4g}<extra></extra>`,
    };
  });
  document.getElementById("plot-slices").style.height = `${230 * rows}px`;
  return draw("plot-slices", traces, layout);
}

/** Readable slice ticks: categories in spec order, whole numbers, five ticks on a log axis. */
function sliceTicks(param) {
  if (param.type === "categorical") return { categoryorder: "array", categoryarray: param.choices };
  if (param.type === "int" && !param.log) return { dtick: Math.max(1, Math.ceil((param.high - param.low) / 6)) };
  if (!param.log) return {};
  const lo = Math.log10(param.low);
  const hi = Math.log10(param.high);
  const tickvals = [0, 0.25, 0.5, 0.75, 1].map((t) => 10 ** (lo + t * (hi - lo)));
  return { tickvals, ticktext: tickvals.map((v) => fmt(v, 2)) };
}

/** The top trials: each fold's value as a coloured dot, the mean ± s.e. as a black bar. */
export function drawFolds(study, top) {
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
  const layout = baseLayout({ xaxis: { title: { text: "trial (best first)" }, type: "category" },
    yaxis: { title: { text: study.spec.objective.metric } }, legend: { orientation: "h", y: -0.3 } });
  return draw("plot-folds", traces, layout);
}

/** Learning curves of the running trials: a colour per trial, one line per fold. */
export function drawCurves(metric, series) {
  if (!series.length) return showEmpty("plot-curves", "No trial is running.");
  const trials = [...new Set(series.map((s) => s.trial))].sort((a, b) => a - b);
  const traces = series.map((s) => ({
    type: "scatter", mode: "lines+markers", x: s.epoch, y: s.value,
    name: `#${s.trial}`, legendgroup: `#${s.trial}`, showlegend: s.fold === Math.min(...series.filter((o) => o.trial === s.trial).map((o) => o.fold)),
    line: { color: FOLD_COLORS[trials.indexOf(s.trial) % FOLD_COLORS.length], width: 1.5 }, marker: { size: 4 },
    hovertemplate: `trial ${s.trial}, fold ${s.fold}, epoch %{x}: %{y:.4g}<extra></extra>`,
  }));
  const layout = baseLayout({ xaxis: { title: { text: "epoch" }, dtick: 1 }, yaxis: { title: { text: metric } },
    legend: { orientation: "h", y: -0.3 } });
  return draw("plot-curves", traces, layout);
}
