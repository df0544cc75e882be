"""Random search: the baseline every other optimizer has to beat."""

from __future__ import annotations

from typing import Any

import numpy as np

from foldwise.optimizers.base import BaseOptimizer, check_count
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.sampling import sample_unique


class RandomOptimizer(BaseOptimizer):
    """Uniform (log-uniform on log scales) configurations that respect conditions.

    Never repeats a completed, pending or same-batch configuration while the space has room;
    takes no options.
    """

    def configure(self, **options: Any) -> None:
        super().configure(**options)
        self.encoding = SpaceEncoding(self.space)

    def suggest(self, count: int) -> list[dict[str, Any]]:
        """The study's next ``count`` configurations: the n-th trial's is drawn from a generator
        seeded by the seed and n alone, so the sequence is the same whatever the trials
        scored, however many are asked for at once and whichever were pruned (as one seeded
        stream is in Optuna's RandomSampler), and a rule that prunes trials is compared with
        full CV on the same configurations."""
        count = check_count(count)
        seen = self.seen_keys()
        first = self.started
        chosen: list[dict[str, Any]] = []
        for number in range(first, first + count):
            rng = np.random.default_rng([self.seed % 2**63, number])
            chosen += sample_unique(self.encoding, 1, rng, seen)
        return chosen
