"""Random search: the baseline every other optimizer has to beat."""

from __future__ import annotations

from typing import Any

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
        count = check_count(count)
        return sample_unique(self.encoding, count, self.rng(), self.seen_keys())
