from __future__ import annotations

import math

import pytest

from foldwise.trainers.lr_schedule import lr_factor, scale_factor


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
