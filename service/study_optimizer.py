"""The optimizer a study spec asks for, built the same way at submit time and at run time."""

from __future__ import annotations

from foldwise.optimizers import BaseOptimizer, create_optimizer
from foldwise.spec import StudySpec


def build_optimizer(spec: StudySpec, *, warm_observations: int = 0) -> BaseOptimizer:
    """A fresh optimizer for ``spec``; ``ValueError`` when its options are refused.

    A warm-started study's optimizer is told its ``warm_observations`` prior observations
    before the study's own trials, as if they were the first trials of one longer study: its
    budget grows by as many, so what an optimizer plans by the budget (the GP's annealed
    exploration, the generations of evolution) spans the whole of that longer study."""
    return create_optimizer(
        spec.optimizer.name,
        spec.space,
        direction=spec.objective.direction,
        directions=[o.direction for o in spec.all_objectives],
        seed=spec.seed if spec.optimizer.seed is None else spec.optimizer.seed,
        budget=spec.budget.trials + warm_observations,
        options=spec.optimizer.options,
    )
