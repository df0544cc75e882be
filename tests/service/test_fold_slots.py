"""Which folds free slots go to: waves under racing, every fold at once without; and how often
a waiting study's note is written."""

from __future__ import annotations

import pytest

from foldwise.service.scheduler import slot_meter
from foldwise.service.scheduler.fold_slots import WAITING_REFRESH_S, FoldSlots, WaitingNote
from foldwise.service.scheduler.store import TrialHandle
from foldwise.service.scheduler.trial_progress import TrialProgress, folds_to_start
from foldwise.spec import StudySpec
from tests.service.study_specs import study_spec


def trial(number: int, done: tuple[int, ...] = (), running: tuple[int, ...] = ()) -> TrialProgress:
    progress = TrialProgress(TrialHandle(id=100 + number, number=number, params={}))
    progress.values = dict.fromkeys(done, 0.5)
    progress.running = dict.fromkeys(running)  # type: ignore[arg-type]
    return progress


def picked(trials: list[TrialProgress], free: int, min_folds: int | None = 2) -> list[tuple]:
    ready = folds_to_start(trials, folds=5, min_folds=min_folds, free=free)
    return [(t.handle.number, fold) for t, fold in ready]


def test_without_racing_the_oldest_trial_takes_every_fold_first() -> None:
    trials = [trial(1), trial(0, done=(0,), running=(1,))]
    assert picked(trials, 4, min_folds=None) == [(0, 2), (0, 3), (0, 4), (1, 0)]


def test_racing_runs_min_folds_first_then_the_rest() -> None:
    trials = [trial(0), trial(1)]
    assert picked(trials, 5) == [(0, 0), (0, 1), (1, 0), (1, 1)]  # one slot stays free
    waiting = trial(2, done=(0,), running=(1,))  # its first wave is not over
    passed = trial(3, done=(0, 1), running=(3,))  # not pruned after two folds: the rest
    assert picked([waiting, passed], 5) == [(3, 2), (3, 4)]


def test_a_trial_stepping_runs_one_more_fold_at_a_time() -> None:
    stepping = trial(0, done=(0, 1))
    stepping.stepping = True
    other = trial(1, done=(0, 1))
    assert picked([stepping, other], 5) == [(0, 2), (1, 2), (1, 3), (1, 4)]
    stepping.running = dict.fromkeys((2,))  # type: ignore[arg-type]
    assert picked([stepping], 5) == []  # its next fold waits for the one it runs
    first = trial(2)
    first.stepping = True  # its first wave is min_folds whatever it says
    assert picked([first], 5) == [(2, 0)]


def test_no_free_slot_starts_nothing() -> None:
    assert picked([trial(0)], 0) == [] and picked([trial(0)], -2) == []
    assert picked([trial(0, done=(0, 1, 2), running=(3, 4))], 3) == []


def _slots(slots: int, running: int, racing: str = "off", min_folds: int = 1):
    """A study of 5 folds with ``slots`` fold slots, ``running`` of them held."""
    document = study_spec(
        parallel={"trial_groups": 2, "folds": 5, "workers_per_fold": 1},
        racing={"rule": racing, "min_folds": min_folds} if racing != "off" else {"rule": "off"},
    )
    fold_slots = FoldSlots(1, None, None, None, lambda: None)  # type: ignore[arg-type]
    fold_slots.slots = slots
    fold_slots.folds = {object(): None for _ in range(running)}  # type: ignore[misc]
    return StudySpec.model_validate(document), fold_slots


@pytest.mark.parametrize(
    ("racing", "min_folds", "trials", "running", "wanted"),
    [
        ("off", 1, [], 0, 2),  # an empty study: N_G trials fill N_G x K slots
        ("off", 1, [trial(0)], 5, 1),  # without racing: N_G trials in flight
        ("off", 1, [trial(0), trial(1)], 0, 0),
        # a trial's last fold runs and four slots are free: still N_G trials, as full CV has it
        (
            "off",
            1,
            [trial(0, done=(0, 1, 2, 3), running=(4,)), trial(1, running=(0, 1, 2, 3, 4))],
            6,
            0,
        ),
        ("forgiving", 1, [], 0, 10),  # racing, one fold first: ten trials for ten slots
        ("forgiving", 1, [trial(0, running=(0,)), trial(1, running=(0,))], 2, 8),
        ("posterior", 2, [trial(0, running=(0, 1))], 2, 4),  # two folds first: four more
        ("posterior", 2, [trial(0, running=(0,))], 2, 4),  # 8 free, one fold of it waits: 7/2
        # a trial that passed its first wave has its last three folds waiting: they go first
        ("forgiving", 1, [trial(0, done=(0,), running=(1,)), trial(1, running=(0,))], 5, 2),
        ("forgiving", 1, [trial(0, done=(0,), running=(1,)), trial(1, running=(0,))], 7, 0),
        # fewer than N_G in flight: up to N_G, though their folds wait for slots
        ("forgiving", 1, [trial(0, done=(0,), running=(1, 2, 3, 4))], 10, 1),
    ],
)
def test_n_g_trials_in_flight_and_with_racing_more_for_the_slots_their_first_folds_leave(
    racing: str, min_folds: int, trials: list[TrialProgress], running: int, wanted: int
) -> None:
    spec, fold_slots = _slots(10, running, racing, min_folds)
    assert fold_slots.trials_wanted(spec, trials) == wanted


def test_the_slot_meter_integrates_running_folds_against_the_slots(monkeypatch) -> None:
    clock = iter([0.0, 10.0, 15.0, 25.0])
    monkeypatch.setattr(slot_meter.time, "monotonic", lambda: next(clock))
    meter = slot_meter.SlotMeter(4)  # t = 0, nothing running
    assert meter.update(3) == (0.0, 40.0)  # t = 10: 0 of 4 busy for 10 s; 3 from now
    assert meter.update(5) == (15.0, 5.0)  # t = 15: 3 busy, 1 idle for 5 s
    assert meter.update(0) == (40.0, 0.0)  # t = 25: 5 running (one winding down) count as 4
    assert meter.utilisation() == 55.0 / 100.0


def test_a_waiting_note_is_written_at_once_when_its_reason_changes_else_at_most_every_refresh():
    busy = "waiting for cluster resources: 3 fold runs ready; 0.5 of 2 CPUs are free"
    busier = "waiting for cluster resources: 2 fold runs ready; 0 of 2 CPUs are free"
    no_node = "no alive node can run its folds: the cluster's alive nodes hold 0 CPUs in all"
    note = WaitingNote()
    assert not note.due(None, 0.0)  # nothing to say, nothing said
    assert note.due(busy, 0.0)  # a note appears
    note.written(busy, 0.0)
    assert not note.due(busy, 1.0)
    assert not note.due(busier, WAITING_REFRESH_S - 0.1)  # only its figures changed
    assert note.due(busier, WAITING_REFRESH_S)
    assert note.due(no_node, 0.1)  # another reason
    assert note.due(None, 0.1)  # the folds start: the note goes at once
    note.written(None, 0.1)
    assert note.due(busy, 0.2)
