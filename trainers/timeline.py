"""A trial's timeline as Chrome trace-event JSON (like NNLO's `--timeline`), from stored timings.

One process per fold ("fold k"), one thread per attempt; a span per fold run, and inside it a
span per epoch with its training and validation phases. Epochs replayed from a checkpoint are
left out (they appear under the attempt that trained them). Open the file in
https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from foldwise.schemas import EpochMetrics, FoldRun, Trial


def trial_trace(trial: Trial) -> dict[str, Any]:
    """The trace document: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}."""
    events: list[dict[str, Any]] = []
    for fold in sorted({run.fold for run in trial.folds}):
        events.append(_meta("process_name", fold, 0, f"fold {fold}"))
        events.append(_meta("process_sort_index", fold, 0, fold, key="sort_index"))
    for run in trial.folds:
        events.append(_meta("thread_name", run.fold, run.attempt, f"attempt {run.attempt}"))
        events.extend(_run_events(run))
    origin = min((e["ts"] for e in events if "ts" in e), default=0.0)
    for event in events:
        if "ts" in event:
            event["ts"] = round(event["ts"] - origin, 3)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"trial": trial.number, "params": trial.params, "value": trial.value},
    }


def _run_events(run: FoldRun) -> list[dict[str, Any]]:
    timed = [
        e
        for e in run.epochs
        if not e.restored and "epoch_start" in e.metrics and "epoch_seconds" in e.metrics
    ]
    events = [_epoch_event(run, e) for e in timed]
    events += [span for e in timed for span in _phase_events(run, e.metrics)]
    start = _micros(run.started_at) if run.started_at else None
    if start is None and timed:
        start = min(e["ts"] for e in events)
    if start is not None:
        ends = [e["ts"] + e["dur"] for e in events]
        end = _micros(run.finished_at) if run.finished_at else max(ends, default=start)
        args = {"status": run.status.value, "value": run.value, "error": run.error}
        name = f"fold {run.fold} attempt {run.attempt}"
        events.insert(0, _span(name, "fold", run, start, max(end, *ends, start) - start, args))
    return events


def _epoch_event(run: FoldRun, epoch: EpochMetrics) -> dict[str, Any]:
    m = epoch.metrics
    args = {k: v for k, v in m.items() if k not in ("epoch_start",)}
    start, dur = m["epoch_start"] * 1e6, m["epoch_seconds"] * 1e6
    return _span(f"epoch {epoch.epoch}", "epoch", run, start, dur, args)


def _phase_events(run: FoldRun, m: dict[str, float]) -> list[dict[str, Any]]:
    start = m["epoch_start"] * 1e6
    train = m.get("train_seconds", 0.0) * 1e6
    val = m.get("val_seconds", 0.0) * 1e6
    return [
        _span("train", "train", run, start, train, {}),
        _span("validation", "validation", run, start + train, val, {}),
    ]


def _span(
    name: str, cat: str, run: FoldRun, ts: float, dur: float, args: dict[str, Any]
) -> dict[str, Any]:
    """A complete ("X") event on the fold's process and the attempt's thread."""
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts,
        "dur": max(dur, 0.0),
        "pid": run.fold,
        "tid": run.attempt,
        "args": args,
    }


def _meta(name: str, pid: int, tid: int, value: Any, key: str = "name") -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}


def _micros(moment: datetime) -> float:
    if moment.tzinfo is None:  # SQLite hands back naive UTC datetimes
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() * 1e6
