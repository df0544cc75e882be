"""A study's warnings: what its fold runs knew was suspect, kept once per distinct message.

The scheduler adds them as fold runs report them (``record_warning``); each entry keeps the
trials whose runs said it (the first ``MAX_TRIALS_NAMED``) and how many runs did. Functions
take the caller's session and never commit.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from foldwise.service.db.models import StudyRow, utcnow

MAX_WARNINGS = 50
"""Distinct warnings a study keeps (later ones are dropped: the first already say a lot)."""
MAX_TRIALS_NAMED = 100
"""Trials a warning names; ``runs`` counts every run that said it."""


def record_warning(
    session: Session, study_id: int, kind: str, message: str, trial: int | None
) -> bool:
    """Add that fold run of ``trial`` (its number; None: of no trial) warned ``message``;
    False when the study is gone or keeps as many warnings as it may."""
    study = session.get(StudyRow, study_id)
    if study is None:
        return False
    now = utcnow().isoformat()
    kept = [dict(entry) for entry in study.warnings or []]
    entry = next((e for e in kept if e["kind"] == kind and e["message"] == message), None)
    if entry is None:
        if len(kept) >= MAX_WARNINGS:
            return False
        entry = {"kind": kind, "message": message, "trials": [], "runs": 0, "first_seen": now}
        kept.append(entry)
    entry["runs"] += 1
    entry["last_seen"] = now
    trials = list(entry["trials"])
    if trial is not None and trial not in trials and len(trials) < MAX_TRIALS_NAMED:
        entry["trials"] = sorted([*trials, trial])
    study.warnings = kept  # a new list: the JSON column is written again
    return True
