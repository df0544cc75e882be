"""Learning-rate scaling by world size with warm-up, the plan a fold run follows, and the
steps it watches."""

from __future__ import annotations

import math

import pytest
import torch

from foldwise.trainers.lr_schedule import RatePlan, default_settings, lr_factor, scale_factor
from foldwise.trainers.optimizer_steps import StepWatch


@pytest.mark.parametrize(("scaling", "expected"), [("linear", 4.0), ("sqrt", 2.0), ("none", 1.0)])
def test_scale_factor(scaling: str, expected: float) -> None:
    assert scale_factor(4, scaling) == expected


def test_scale_factor_rejects_unknown_rule() -> None:
    with pytest.raises(ValueError, match="linear, sqrt or none"):
        scale_factor(2, "cubic")


def test_warmup_ramps_per_step_from_base_to_target() -> None:
    kw = {"world_size": 4, "scaling": "linear", "warmup_epochs": 2, "steps_per_epoch": 10}
    assert lr_factor(epoch=0, step=0, **kw) == 1.0
    assert lr_factor(epoch=0, step=5, **kw) == pytest.approx(1.75)
    assert lr_factor(epoch=1, step=0, **kw) == pytest.approx(2.5)
    assert lr_factor(epoch=2, step=0, **kw) == 4.0
    assert lr_factor(epoch=7, step=3, **kw) == 4.0
    factors = [lr_factor(epoch=e, step=s, **kw) for e in range(3) for s in range(10)]
    assert factors == sorted(factors)


def test_no_warmup_starts_at_target() -> None:
    factor = lr_factor(
        world_size=9, scaling="sqrt", warmup_epochs=0, epoch=0, step=0, steps_per_epoch=5
    )
    assert factor == 3.0


def test_single_rank_is_never_scaled() -> None:
    for epoch in range(3):
        assert (
            lr_factor(
                world_size=1,
                scaling="linear",
                warmup_epochs=2,
                epoch=epoch,
                step=1,
                steps_per_epoch=4,
            )
            == 1.0
        )
    assert math.isclose(scale_factor(1, "sqrt"), 1.0)


@pytest.mark.parametrize(
    ("scaling", "target"), [("linear", 8.0), ("sqrt", math.sqrt(8)), ("none", 1.0)]
)
def test_every_rule_warms_up_linearly_to_its_own_target(scaling: str, target: float) -> None:
    kw = {"world_size": 8, "scaling": scaling, "warmup_epochs": 4, "steps_per_epoch": 5}
    assert lr_factor(epoch=0, step=0, **kw) == 1.0  # starts at the single-process rate
    assert lr_factor(epoch=2, step=0, **kw) == pytest.approx(1.0 + (target - 1.0) / 2)
    assert lr_factor(epoch=4, step=0, **kw) == pytest.approx(target)
    assert lr_factor(epoch=9, step=4, **kw) == pytest.approx(target)


def test_a_plan_says_in_one_line_what_a_loop_left_unapplied() -> None:
    plan = RatePlan(world_size=2, scaling="linear", warmup_epochs=1)
    assert plan.asks and "lr_scaling: linear asks for 2x" in (plan.unapplied() or "")
    assert plan.scale == 2.0  # read: the scaling is the loop's to apply ...
    assert "warmup_epochs: 1" in (plan.unapplied() or "")  # ... but not the warm-up
    plan.factor(0, 0, 10)
    assert plan.unapplied() is None
    for quiet in (
        RatePlan(world_size=1, scaling="linear", warmup_epochs=3),  # one rank: 1x
        RatePlan(world_size=4, scaling="none", warmup_epochs=3),
    ):
        assert not quiet.asks and quiet.unapplied() is None


def test_a_study_that_leaves_the_rate_open_gets_its_loops_default() -> None:
    assert default_settings(own_loop=True) == ("none", 0)
    assert default_settings(own_loop=False) == ("linear", 1)


def test_a_step_watch_scales_only_the_step_and_records_the_rate_it_used() -> None:
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    with StepWatch(factor=lambda: 3.0) as watch:
        for _ in range(2):
            weight.grad = torch.ones(1)
            optimizer.step()  # at 3x the scheduler's rate ...
            scheduler.step()  # ... which steps its own value, as without the watch
    assert watch.steps == 2 and watch.take_rate() == pytest.approx(0.15)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    assert weight.item() == pytest.approx(1 - 0.3 - 0.15)
    assert watch.take_rate() is None  # no step since
    weight.grad = torch.ones(1)
    optimizer.step()  # not watched any more
    assert watch.steps == 2
