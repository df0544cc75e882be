// The study page's parallel coordinates: one polyline per trial across the parameters and the
// value, the best trials darkest and drawn on top.
"use strict";
import { baseLayout, draw, fmt, plotlyText, showEmpty } from "./common.js";
import { bulkBound } from "./value_axis.js";

/** Ten bands from the best (dark violet) to the worst (yellow-green): a cut of Viridis that
 * stops before its palest yellow, so that on white the best lines stand out most and the worst
 * still show. */
const BANDS = ["#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70", "#7ad151", "#bddf26"];
const CHAR_PX = 7;  // about one character of a 12 px label

/** Parallel coordinates over every parameter plus the value, coloured by value.
 *
 * Drawn as SVG polylines (one trace per colour band) rather than Plotly's WebGL ``parcoords``:
 * without a GPU, software WebGL spent seconds compiling and drawing; SVG stays well under 0.5 s.
 * Values far worse than the bulk (a diverged trial) are pinned to the worse end of the value
 * axis and take the worst colour, so that they do not squash the others into one band.
 */
export function drawParcoords(study, points) {
  if (points.length < 2) return showEmpty("plot-parcoords", "Needs two completed trials.");
  const space = study.spec.space;
  const maximize = study.spec.objective.direction === "maximize";
  const values = points.map((p) => p.value);
  const range = valueRange(values, maximize);
  const axes = Object.keys(space).map((name) => axis(name, space[name], points.map((p) => p.params[name])));
  axes.push(valueAxis(study, values, range));
  // quality: 0 for the worst value in range, 1 for the best
  const quality = (v) => {
    const t = range.hi > range.lo ? (Math.min(range.hi, Math.max(range.lo, v)) - range.lo) / (range.hi - range.lo) : 1;
    return maximize ? t : 1 - t;
  };
  const bands = BANDS.map(() => ({ x: [], y: [], text: [], number: [] }));
  points.forEach((p, i) => {
    const band = bands[Math.min(BANDS.length - 1, Math.floor((1 - quality(p.value)) * BANDS.length))];
    axes.forEach((a, d) => {
      band.x.push(d); band.y.push(a.y[i]); band.text.push(`trial ${p.number}: ${fmt(p.value)}`); band.number.push(p.number);
    });
    band.x.push(null); band.y.push(null); band.text.push(null); band.number.push(null);
  });
  // Worst band first, so that the best lines are drawn on top; the best also a little bolder.
  const traces = [...bands.keys()].reverse().map((b) => ({
    type: "scatter", mode: "lines", x: bands[b].x, y: bands[b].y, text: bands[b].text, customdata: bands[b].number, hoverinfo: "text",
    line: { width: b < 3 ? 1.6 : 1, color: BANDS[b] }, opacity: b < 3 ? 0.85 : 0.55, showlegend: false,
  }));
  traces.push(colourScale(study, range, maximize));
  const width = document.getElementById("plot-parcoords").clientWidth || 1000;
  const room = Math.max(4, Math.floor((width - 140) / axes.length / CHAR_PX));
  const layout = baseLayout({ margin: { l: 30, r: 20, t: 30, b: 20 }, hovermode: "closest",
    xaxis: { visible: false, range: [-0.3, axes.length - 0.7], fixedrange: true },
    yaxis: { visible: false, range: [-0.04, 1.04], fixedrange: true },
    shapes: axes.map((_, d) => ({ type: "line", x0: d, x1: d, y0: 0, y1: 1, line: { color: "#8c959f", width: 1 } })),
    annotations: axes.flatMap((a, d) => [
      { x: d, y: 1.04, yanchor: "bottom", text: `<b>${shorten(a.label, room)}</b>`, hovertext: a.label, showarrow: false, font: { size: 12 } },
      ...a.ticks.map(([y, label]) => ({ x: d, y, xanchor: "right", xshift: -3, text: label, showarrow: false,
        font: { size: 10, color: "#59636e" }, bgcolor: "rgba(255,255,255,0.7)" })),
    ]) });
  return draw("plot-parcoords", traces, layout).then(() => range);
}

/** A long parameter name cut to ``room`` characters (the full name shows on hover). */
const shorten = (name, room) => (name.length <= room ? name : `${name.slice(0, room - 1)}…`);

/** The values' range, without those far worse than the bulk: ``{lo, hi, off}``. */
function valueRange(values, maximize) {
  const bound = bulkBound(values, maximize);
  const kept = bound === null ? values : values.filter((v) => (maximize ? v >= bound : v <= bound));
  return { lo: Math.min(...kept), hi: Math.max(...kept), off: values.length - kept.length, bound };
}

/** An invisible trace that carries the colour bar: what the colour means, which end is best. */
function colourScale(study, range, maximize) {
  const stops = BANDS.map((c, i) => [i / (BANDS.length - 1), c]);
  const scale = maximize ? stops.map(([t], i) => [t, BANDS[BANDS.length - 1 - i]]) : stops;
  const mid = [0.25, 0.5, 0.75].map((t) => range.lo + t * (range.hi - range.lo));
  const atLo = `${fmt(range.lo, 3)} ${maximize ? "worst" : "best"}`;
  const atHi = `${range.off && !maximize ? "≥ " : ""}${fmt(range.hi, 3)} ${maximize ? "best" : "worst"}`;
  return { type: "scatter", mode: "markers", x: [null], y: [null], hoverinfo: "skip", showlegend: false,
    marker: { color: [range.lo, range.hi], cmin: range.lo, cmax: range.hi, colorscale: scale, showscale: true,
      colorbar: { title: { text: `${study.spec.objective.metric}: darker is better`, side: "right" }, thickness: 12,
        tickvals: [range.lo, ...mid, range.hi], ticktext: [range.off && maximize ? `≤ ${atLo}` : atLo, ...mid.map((v) => fmt(v, 3)), atHi] } } };
}

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
    choices.forEach((c, i) => ticks.push([at(i), plotlyText(c)]));
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

/** The value's axis over its range; values off the range sit at its end, labelled "≥ x". */
function valueAxis(study, values, { lo, hi, off }) {
  const maximize = study.spec.objective.direction === "maximize";
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => [t, fmt(lo + t * (hi - lo), 3)]);
  if (off) ticks[maximize ? 0 : 4][1] = `${maximize ? "≤" : "≥"} ${ticks[maximize ? 0 : 4][1]}`;
  const at = (v) => (hi > lo ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0.5);
  return { label: study.spec.objective.metric, ticks, y: values.map(at) };
}
