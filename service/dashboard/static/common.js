// Shared helpers of the dashboard pages: API calls, number and time formats, plots, elements.
"use strict";

export class ApiError extends Error {
  constructor(status, body) {
    super(typeof body?.detail === "string" ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** The CSRF token the sign-in gave this browser; requests that change something send it. */
function csrfToken() {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("foldwise_csrf="));
  return cookie ? decodeURIComponent(cookie.slice("foldwise_csrf=".length)) : "";
}

/** Set while signing out: a poll answered 401 then must not race sign-out's own navigation. */
let signingOut = false;

/** GET (or send) JSON to the service's API; a non-2xx answer throws ApiError with the body.
 * A 401 (the session ended, or the token was revoked) goes to the sign-in page. */
export async function api(path, options = {}) {
  const method = (options.method ?? "GET").toUpperCase();
  const headers = method === "GET" ? options.headers : { ...options.headers, "X-CSRF-Token": csrfToken() };
  const response = await fetch(path, { ...options, headers });
  const body = response.status === 204 ? null : await response.json().catch(() => null);
  if (response.status === 401 && !signingOut) location.assign(`/dashboard/sign-in?next=${encodeURIComponent(location.pathname)}`);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/** Sign out: the session's cookies go, and the sign-in page comes. A request that got no answer
 * (a dropped connection) is sent again; if none is answered, the button says so, as the session
 * is still open. */
export async function signOut(event) {
  const button = event?.currentTarget; // gone from the event once it has been dispatched
  signingOut = true;
  let said = "the service did not answer: try again";
  for (let attempt = 0; attempt < 3; attempt += 1) {
    let response;
    try {
      response = await fetch("/dashboard/session", { method: "DELETE" });
    } catch {
      continue; // no answer: ask again
    }
    if (response.ok) {
      location.assign("/dashboard/sign-in");
      return;
    }
    const body = await response.json().catch(() => ({}));
    said = `refused: ${body.detail ?? response.status}`; // the session is still open
    break;
  }
  signingOut = false;
  if (button) button.textContent = `Sign out (${said})`;
}

/** An element with attributes (class, text, href, …) and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

/** Text for Plotly, which reads <b>, <a href>, <br> and styles in labels as markup: a
 * categorical choice someone wrote is shown as the characters it is. */
export const plotlyText = (value) => String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export const badge = (status) => el("span", { class: `badge ${status}`, text: status });

/** A study's state for people: "stopping" while its stop request is being carried out. */
export const studyState = (study) => (study.stop_requested ? "stopping" : study.status);

/** Four significant digits, switching to exponent notation for very small or large values. */
export function fmt(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value) && Math.abs(value) < 1e6) return value.toLocaleString("en");
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(digits - 1);
  return Number(value.toPrecision(digits)).toString();
}

export function fmtValueSe(value, se) {
  if (value === null || value === undefined) return "—";
  return se === null || se === undefined ? fmt(value) : `${fmt(value)} ± ${fmt(se, 2)}`;
}

/** 42 s, 3 min 5 s, 2 h 04 min, 3 d 2 h. */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return seconds < 10 ? `${Number(seconds.toFixed(1))} s` : `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, "0")} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor(s / 3600) % 24} h`;
}

/** The API's timestamps are UTC; some backends drop the zone, so add it back. */
export function parseTime(text) {
  if (!text) return null;
  return new Date(/[zZ]|[+-]\d\d:\d\d$/.test(text) ? text : `${text}Z`);
}

export function fmtTime(text) {
  const date = parseTime(text);
  if (!date) return "—";
  return date.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" });
}

export function secondsBetween(start, end) {
  const a = parseTime(start);
  if (!a) return null;
  const b = parseTime(end) ?? new Date();
  return (b - a) / 1000;
}

export const PLOT_CONFIG = { displaylogo: false, responsive: true,
  modeBarButtonsToRemove: ["lasso2d", "select2d"] };

export function baseLayout(extra = {}) {
  return {
    margin: { l: 60, r: 20, t: 10, b: 45 },
    font: { family: "system-ui, sans-serif", size: 12, color: "#1f2328" },
    paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    legend: { orientation: "h", y: -0.2 },
    hoverlabel: { font: { family: "system-ui, sans-serif" } },
    ...extra,
  };
}

/** Draw (or redraw) a plot and mark its element drawn, which the browser tests wait for. */
export async function draw(id, traces, layout, config = PLOT_CONFIG) {
  const node = document.getElementById(id);
  if (node.querySelector(".empty")) node.replaceChildren();
  await Plotly.react(node, traces, layout, config);
  node.dataset.drawn = String(Number(node.dataset.drawn || 0) + 1);
}

export function showEmpty(id, message) {
  const node = document.getElementById(id);
  if (node.classList.contains("js-plotly-plot")) Plotly.purge(node);
  node.replaceChildren(el("div", { class: "empty", text: message }));
  node.dataset.drawn = String(Number(node.dataset.drawn || 0) + 1);
}

export function setLive(active, when = new Date()) {
  const node = document.getElementById("live");
  if (!node) return;
  node.className = active ? "live on" : "live";
  node.textContent = active ? `live · updated ${when.toLocaleTimeString("en-GB")}` : "";
}

/** The fold runs of each of a study's trials: parallel.folds of each of cv.repeats. */
export function foldCount(spec) {
  return spec.parallel.folds * (spec.cv?.repeats ?? 1);
}

export function card(label, value, attrs = {}) {
  return el("div", { class: "card", ...attrs }, el("div", { class: "label", text: label }),
    value instanceof Node ? el("div", { class: "value" }, value) : el("div", { class: "value", text: value }));
}
