// Fills the studies table from GET /studies and refreshes it while any study is active.
"use strict";

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function formatValue(trial) {
  if (!trial || trial.value === null) return "—";
  const se = trial.std_error ? ` ± ${trial.std_error.toPrecision(2)}` : "";
  return `${trial.value.toPrecision(4)}${se}`;
}

function row(study) {
  const tr = document.createElement("tr");
  const p = study.progress;
  tr.append(
    cell(String(study.id), "num"), cell(study.name), cell(study.status, `status ${study.status}`),
    cell(`${p.finished} / ${p.budget}` + (p.running ? ` (${p.running} running)` : ""), "num"),
    cell(String(p.failed), "num"), cell(formatValue(study.best_trial), "num"),
    cell(study.spec.optimizer.name), cell(new Date(study.created_at).toLocaleString()),
  );
  return tr;
}

async function refresh() {
  const body = document.querySelector("#studies tbody");
  const response = await fetch("/studies?limit=200");
  const page = await response.json();
  body.replaceChildren(...page.data.map(row));
  if (!page.data.length) body.innerHTML = '<tr><td colspan="8" class="muted">No studies yet.</td></tr>';
  const active = page.data.some((s) => s.status === "running" || s.status === "queued");
  setTimeout(refresh, active ? 2000 : 10000);
}

refresh();
