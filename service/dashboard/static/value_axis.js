// The value axis of a plot: a log-scale switch (for positive values only) and a default range
// that leaves out the few far-off values (a diverged trial) so that they do not squash the rest.
"use strict";
import { el, fmt } from "./common.js";

const FAR = 3;  // Tukey's "far out": past the quartile on the worse side by 3 interquartile ranges
const MIN_VALUES = 8;  // fewer say too little about where the bulk of the values lies

function quantile(sorted, q) {
  const at = (sorted.length - 1) * q;
  const below = Math.floor(at);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (at - below);
}

/** The worst value that is not far out on the worse side (above the bulk when minimising,
 * below it when maximising), or null when no value is far out. The best values are never cut. */
export function bulkBound(values, maximize) {
  if (values.length < MIN_VALUES) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const q1 = quantile(sorted, 0.25);
  const q3 = quantile(sorted, 0.75);
  const spread = q3 - q1;
  if (!(spread > 0)) return null;
  const fence = maximize ? q1 - FAR * spread : q3 + FAR * spread;
  const inside = sorted.filter((v) => (maximize ? v >= fence : v <= fence));
  if (inside.length === sorted.length) return null;
  return maximize ? inside[0] : inside.at(-1);
}

/** Marker of a value drawn at the edge because it lies off the range. */
export const offSymbol = (maximize) => (maximize ? "triangle-down" : "triangle-up");

/** The switches above one plot and the axis they ask for.
 *
 * ``tools``: the element that holds the switches; ``note``: the element (or null) that says what
 * the range leaves out; ``redraw``: called when a switch changes; ``fit``: offer the bulk range
 * (off for learning curves, whose far values are the first epochs and belong on the plot). */
export class ValueAxis {
  constructor(tools, note, redraw, { name, fit = true }) {
    this.note = note;
    this.logBox = el("input", { type: "checkbox", id: `${name}-log`, onchange: redraw });
    this.logLabel = el("label", { class: "switch", for: `${name}-log` }, this.logBox, "log scale");
    this.allBox = fit ? el("input", { type: "checkbox", id: `${name}-all`, onchange: redraw }) : null;
    this.allLabel = fit ? el("label", { class: "switch", for: `${name}-all`, title: "Fit the axis to every value, far-off ones included" }, this.allBox, "show all values") : null;
    if (this.allLabel) this.allLabel.hidden = true;
    tools.replaceChildren(this.logLabel, ...(this.allLabel ? [this.allLabel] : []));
  }

  /** Enable the log switch only when every value is above 0, and say why when it is not. */
  allowLog(values) {
    const lowest = values.length ? Math.min(...values) : null;
    const allowed = lowest === null || lowest > 0;
    this.logBox.disabled = !allowed;
    this.logLabel.classList.toggle("disabled", !allowed);
    this.logLabel.title = allowed
      ? "Show the values on a log scale"
      : `A log scale needs every value above 0; the lowest here is ${fmt(lowest)}.`;
    return allowed && this.logBox.checked;
  }

  /** The axis for ``values`` (all that the plot shows; ``bulk``: those that say where the bulk
   * lies, by default the same). Returns ``{axis, off(v), pin, clipped}``: Plotly axis settings,
   * whether a value lies off the range, where such a value is drawn (at the worse edge), and
   * whether any does (else per-point marker arrays are not needed). */
  scale(values, maximize, bulk = values) {
    const finite = values.filter(Number.isFinite);
    const log = this.allowLog(finite);
    const t = log ? Math.log10 : (v) => v;
    const bound = this.allBox ? bulkBound(bulk.filter(Number.isFinite).map(t), maximize) : null;
    const isOff = (v) => bound !== null && (maximize ? t(v) < bound : t(v) > bound);
    const off = finite.filter(isOff);
    if (this.allLabel) this.allLabel.hidden = bound === null || !off.length;
    const clip = off.length > 0 && !this.allBox?.checked;
    this.say(clip ? off : [], maximize, log ? 10 ** bound : bound);
    if (!clip) return { axis: { type: log ? "log" : "linear" }, off: () => false, pin: null, clipped: false };
    const kept = finite.filter((v) => !isOff(v)).map(t);
    const lo = maximize ? bound : Math.min(...kept);
    const hi = maximize ? Math.max(...kept) : bound;
    const span = hi - lo || Math.abs(hi) * 0.1 || 1;
    const range = maximize ? [lo - 0.1 * span, hi + 0.05 * span] : [lo - 0.05 * span, hi + 0.1 * span];
    const edge = maximize ? lo - 0.06 * span : hi + 0.06 * span;
    return { axis: { type: log ? "log" : "linear", range }, off: isOff, pin: log ? 10 ** edge : edge, clipped: true };
  }

  /** "2 values worse than 0.52 (up to 1.88) are off the scale…", or nothing. */
  say(off, maximize, bound) {
    if (!this.note) return;
    this.note.hidden = !off.length;
    if (!off.length) { this.note.textContent = ""; return; }
    const worst = maximize ? Math.min(...off) : Math.max(...off);
    const n = off.length;
    const where = maximize ? "▼ on the bottom edge" : "▲ on the top edge";
    this.note.textContent = `${n} value${n > 1 ? "s" : ""} ${maximize ? "below" : "above"} ${fmt(bound)} (the worst ${fmt(worst)}) ${n > 1 ? "lie" : "lies"} far from the rest, drawn as ${where}; tick “show all values” to fit ${n > 1 ? "them" : "it"} in.`;
  }
}
