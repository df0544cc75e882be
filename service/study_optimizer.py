"""The optimizer a study spec asks for, built the same way at submit time and at run time."""

from __future__ import annotations

from foldwise.spec import StudySpec
from optimizers import BaseOptimizer, create_optimizer


def build_optimizer(spec: StudySpec) -> BaseOptimizer:
    """A fresh optimizer for ``spec``; ``ValueError`` when its options are refused."""
    return create_optimizer(
        spec.optimizer.name,
        spec.space,
        direction=spec.objective.direction,
        seed=spec.seed if spec.optimizer.seed is None else spec.optimizer.seed,
        budget=spec.budget.trials,
        options=spec.optimizer.options,
    )
