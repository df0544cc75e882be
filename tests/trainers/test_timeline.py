"""The trial timeline is a Chrome trace-event document Perfetto and chrome://tracing accept."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from foldwise.schemas import Trial
from foldwise.trainers.timeline import trial_trace

T0 = 1_700_000_000.0


def _epoch(number: int, start: float, restored: bool = False) -> dict:
    metrics = {
        "epoch_start": start,
        "train_seconds": 0.8,
        "val_seconds": 0.2,
        "epoch_seconds": 1.0,
        "val_loss": 1.0 / number,
    }
    return {"epoch": number, "metrics": metrics, "restored": restored}


def _trial() -> Trial:
    def at(seconds: float) -> str:
        return datetime.fromtimestamp(T0 + seconds, UTC).isoformat()

    folds = [
        {"fold": 0, "attempt": 0, "status": "completed", "value": 0.5, "started_at": at(0),
         "finished_at": at(3), "epochs": [_epoch(1, T0 + 0.5), _epoch(2, T0 + 1.5)]},
        {"fold": 1, "attempt": 0, "status": "failed", "error": "workers lost",
         "started_at": at(0), "finished_at": at(2), "epochs": [_epoch(1, T0 + 0.4)]},
        {"fold": 1, "attempt": 1, "status": "completed", "value": 0.6, "started_at": at(3),
         "finished_at": at(5), "epochs": [_epoch(1, T0 + 0.4, restored=True),
                                         _epoch(2, T0 + 3.5)]},
    ]  # fmt: skip
    return Trial.model_validate(
        {"id": 1, "number": 4, "status": "completed", "params": {"lr": 0.1}, "folds": folds}
    )


def test_trace_has_the_chrome_trace_event_shape() -> None:
    trace = json.loads(json.dumps(trial_trace(_trial())))  # plain JSON all the way down
    assert set(trace) == {"traceEvents", "displayTimeUnit", "otherData"}
    for event in trace["traceEvents"]:
        assert event["ph"] in ("X", "M")
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event["name"], str) and isinstance(event["args"], dict)
        if event["ph"] == "X":
            assert event["ts"] >= 0 and event["dur"] >= 0 and isinstance(event["cat"], str)


def test_trace_has_fold_spans_epochs_and_phases_on_the_right_tracks() -> None:
    events = trial_trace(_trial())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    names = {(e["pid"], e["tid"], e["cat"], e["name"]) for e in spans}
    assert (0, 0, "fold", "fold 0 attempt 0") in names
    assert (1, 1, "fold", "fold 1 attempt 1") in names
    assert (0, 0, "epoch", "epoch 2") in names and (0, 0, "validation", "validation") in names
    assert (1, 1, "epoch", "epoch 1") not in names  # restored: it belongs to attempt 0
    fold0 = next(e for e in spans if e["name"] == "fold 0 attempt 0")
    assert fold0["ts"] == 0 and fold0["dur"] == 3e6  # microseconds from the trial's start
    epoch2 = next(e for e in spans if e["pid"] == 0 and e["name"] == "epoch 2")
    assert epoch2["ts"] == 1.5e6 and epoch2["dur"] == 1e6
    validation = [e for e in spans if e["pid"] == 0 and e["cat"] == "validation"]
    assert sorted(e["ts"] for e in validation) == [1.3e6, 2.3e6]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {0: "fold 0", 1: "fold 1"}


def test_trial_json_says_a_timeline_and_models_exist() -> None:
    trial = _trial()
    assert trial.has_timeline and not trial.has_models
    assert trial.folds[2].resumed_epochs == 1
    assert (
        Trial.model_validate(
            {"id": 1, "number": 0, "status": "pending", "params": {}}
        ).model_dump()["has_timeline"]
        is False
    )
