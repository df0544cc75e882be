"""Random configurations that respect conditions, and duplicate detection.

Sampling goes through :class:`~optimizers.encoding.SpaceEncoding`: a uniform point of the
encoded box decodes to a uniform (or log-uniform) float, a uniform integer (both bounds
included, each value equally likely; log-scale integers log-uniformly), a uniform choice, and
only the parameters its own values activate.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import qmc

from foldwise.optimizers.encoding import SpaceEncoding

RETRIES = 20
"""Fresh draws per configuration before a duplicate is accepted (the space may be exhausted)."""


def config_key(config: Mapping[str, Any]) -> tuple:
    """A hashable identity of a configuration, so duplicates are found in constant time.

    Numbers compare by value (an integer 3 read back from JSON as 3.0 is the same), anything
    else by ``repr``.
    """
    return tuple(sorted((name, _normal(value)) for name, value in config.items()))


def _normal(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return repr(value)
    return float(value)


def sample_configs(
    encoding: SpaceEncoding, count: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """``count`` independent random configurations."""
    return encoding.decode(encoding.sample(count, rng)) if count else []


def sample_unique(
    encoding: SpaceEncoding,
    count: int,
    rng: np.random.Generator,
    seen: set[tuple],
    *,
    retries: int = RETRIES,
) -> list[dict[str, Any]]:
    """``count`` random configurations whose keys are not in ``seen`` nor repeated.

    Draws ``retries`` candidates per configuration at once. When the space is too small, the
    remaining slots repeat what was seen, still avoiding repeats within the batch if they can.
    ``seen`` is extended with the keys of the returned configurations.
    """
    candidates = sample_configs(encoding, count * retries, rng)
    chosen = _pick_new(candidates, count, seen)
    if len(chosen) < count:
        batch_keys = {config_key(c) for c in chosen}
        chosen += _pick_new(candidates, count - len(chosen), batch_keys)
        chosen += candidates[: count - len(chosen)]
    seen.update(map(config_key, chosen))
    return chosen


def _pick_new(
    candidates: list[dict[str, Any]], count: int, taken: set[tuple]
) -> list[dict[str, Any]]:
    """Up to ``count`` candidates whose keys are not in ``taken`` (which grows with them)."""
    picked: list[dict[str, Any]] = []
    for config in candidates:
        if len(picked) == count:
            break
        key = config_key(config)
        if key not in taken:
            taken.add(key)
            picked.append(config)
    return picked


def sobol_unique(
    encoding: SpaceEncoding,
    count: int,
    *,
    start: int,
    seed: int,
    rng: np.random.Generator,
    seen: set[tuple],
) -> list[dict[str, Any]]:
    """Points ``start`` .. ``start + count − 1`` of a scrambled Sobol sequence fixed by
    ``seed``, as configurations; one already seen is replaced by a random unseen one.

    The i-th initial trial is always the same point for a seed, so a restarted study continues
    the design where it was; together the first points cover the space more evenly than
    independent draws, so fewer studies start with no trial near a good region.
    """
    if count <= 0:
        return []
    sobol = qmc.Sobol(len(encoding.names), scramble=True, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance properties want powers of two; not needed
        points = sobol.random(start + count)[start:]
    chosen = []
    for config in encoding.decode(encoding.from_unit_cube(points)):
        key = config_key(config)
        if key in seen:
            config = sample_unique(encoding, 1, rng, seen)[0]
        else:
            seen.add(key)
        chosen.append(config)
    return chosen
