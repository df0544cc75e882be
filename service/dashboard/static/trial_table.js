// The study page's trial table: sorted, filtered and paged by GET /studies/{id}/trials.
"use strict";
import { api, badge, el, fmt, fmtDuration, fmtTime, fmtValueSe, foldCount, secondsBetween } from "./common.js";

export class TrialTable {
  constructor(study) {
    this.study = study;
    this.params = Object.keys(study.spec.space);
    this.sort = "number";
    this.offset = 0;
    this.count = 0;
    this.status = document.getElementById("filter-status");
    this.size = document.getElementById("page-size");
    this.status.addEventListener("change", () => { this.offset = 0; this.load(); });
    this.size.addEventListener("change", () => { this.offset = 0; this.load(); });
    document.getElementById("prev").addEventListener("click", () => this.move(-1));
    document.getElementById("next").addEventListener("click", () => this.move(1));
    this.renderHead();
  }

  get limit() { return Number(this.size.value); }

  numeric(param) { return this.study.spec.space[param].type !== "categorical"; }

  move(step) {
    this.offset = Math.max(0, this.offset + step * this.limit);
    this.load();
  }

  /** Click a sortable header: ascending first, then descending. */
  toggle(key) {
    this.sort = this.sort === key ? `-${key}` : key;
    this.offset = 0;
    this.renderHead();
    this.load();
  }

  renderHead() {
    const sortable = (label, key, cls = "") => {
      const state = this.sort === key ? "sorted-asc" : this.sort === `-${key}` ? "sorted-desc" : "";
      return el("th", { class: `sortable ${cls} ${state}`, "data-sort": key, text: label, onclick: () => this.toggle(key) });
    };
    const head = el("tr", {}, sortable("#", "number", "num"), el("th", { text: "Status" }),
      sortable(`${this.study.spec.objective.metric} ± s.e.`, "value", "num"),
      ...this.params.map((p) => sortable(p, `params.${p}`, this.numeric(p) ? "num" : "")),
      sortable("Duration", "duration", "num"), el("th", { text: "Finished" }));
    document.querySelector("#trials thead").replaceChildren(head);
  }

  async load() {
    const query = new URLSearchParams({ sort: this.sort, limit: this.limit, offset: this.offset });
    if (this.status.value) query.set("status", this.status.value);
    const request = (this.requests = (this.requests ?? 0) + 1);
    const page = await api(`/studies/${this.study.id}/trials?${query}`);
    if (request !== this.requests) return; // a newer sort, filter or page is on its way
    this.count = page.count;
    const body = document.querySelector("#trials tbody");
    body.replaceChildren(...page.data.map((t) => this.row(t)));
    if (!page.data.length) body.replaceChildren(el("tr", {}, el("td", { colspan: this.params.length + 5, class: "muted", text: "No trials match." })));
    const last = Math.min(this.offset + this.limit, page.count);
    const range = page.count ? `${(this.offset + 1).toLocaleString("en")}–${last.toLocaleString("en")} of ${page.count.toLocaleString("en")}` : "0 trials";
    document.getElementById("table-range").textContent = range;
    document.getElementById("page-label").textContent = range;
    document.getElementById("prev").disabled = this.offset === 0;
    document.getElementById("next").disabled = last >= page.count;
  }

  row(trial) {
    const link = `/dashboard/studies/${this.study.id}/trials/${trial.number}`;
    const pruned = trial.status === "pruned";
    const why = trial.pruned_reason ?? trial.error ?? "";
    return el("tr", { "data-trial": trial.number, class: pruned ? "pruned" : null },
      el("td", { class: "num" }, el("a", { href: link, text: String(trial.number) })),
      el("td", { class: pruned ? "reason" : null, title: pruned ? why : null }, badge(trial.status),
        trial.feasible === false ? badge("infeasible") : null),
      el("td", { class: "num value", title: why, text: fmtValueSe(trial.value, trial.std_error) }, this.foldsNote(trial)),
      ...this.params.map((p) => el("td", { class: this.numeric(p) ? "num" : "", text: trial.params[p] === undefined ? "—" : fmt(trial.params[p], 3) })),
      el("td", { class: "num", text: trial.started_at ? fmtDuration(secondsBetween(trial.started_at, trial.finished_at)) : "—" }),
      el("td", { class: "nowrap", text: fmtTime(trial.finished_at) }));
  }

  /** "2/5 folds" under a value that rests on fewer than all K folds (a pruned trial's). */
  foldsNote(trial) {
    const k = foldCount(this.study.spec);
    const folds = trial.value_folds;
    if (folds === null || folds === undefined || (folds >= k && trial.status !== "pruned")) return null;
    return el("span", { class: "value-folds", text: `${folds}/${k} folds` });
  }
}
