"""Encoding configurations as vectors, random sampling and duplicate keys."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from foldwise.optimizers.encoding import INACTIVE, SpaceEncoding
from foldwise.optimizers.sampling import config_key, sample_configs, sample_unique
from foldwise.space import contains
from tests.optimizers.problems import CONDITIONAL, TINY, make_space

SHALLOW = {"lr": 1e-3, "depth": 1, "width_1": 64, "act": "tanh"}
DEEP = {"lr": 0.2, "depth": 3, "width_1": 16, "width_2": 256, "act": "relu", "slope": 0.1}


def test_configurations_survive_a_round_trip() -> None:
    encoding = SpaceEncoding(CONDITIONAL)
    back = encoding.decode(encoding.encode([SHALLOW, DEEP]))
    for original, decoded in zip([SHALLOW, DEEP], back, strict=True):
        assert decoded.keys() == original.keys()
        for name, value in original.items():
            assert decoded[name] == pytest.approx(value)
            assert type(decoded[name]) is type(value)


def test_inactive_parameters_sit_at_the_centre() -> None:
    encoding = SpaceEncoding(CONDITIONAL)
    row = encoding.encode([SHALLOW])[0]
    assert row[encoding.columns["width_2"]] == pytest.approx([INACTIVE])
    assert row[encoding.columns["slope"]] == pytest.approx([INACTIVE])
    assert row[encoding.columns["act"]] == pytest.approx([0, 1, 0])
    # a value given for an inactive parameter is ignored, so each configuration has one vector
    stray = encoding.encode([{**SHALLOW, "width_2": 99}])[0]
    assert stray == pytest.approx(row)


def test_decoding_drops_what_the_values_switch_off() -> None:
    encoding = SpaceEncoding(CONDITIONAL)
    row = encoding.encode([DEEP])[0]
    row[encoding.columns["depth"]] = 0.0  # depth 1: width_2 no longer applies
    row[encoding.columns["act"]] = [0, 0, 1]  # gelu: slope no longer applies
    config = encoding.decode(row)[0]
    assert "width_2" not in config and "slope" not in config
    assert contains(CONDITIONAL, config)


def test_samples_respect_ranges_and_conditions() -> None:
    configs = sample_configs(SpaceEncoding(CONDITIONAL), 3000, np.random.default_rng(0))
    assert all(contains(CONDITIONAL, c) for c in configs)
    depths = Counter(c["depth"] for c in configs)
    assert set(depths) == {1, 2, 3} and min(depths.values()) > 900
    assert Counter(c["act"] for c in configs).most_common()[-1][1] > 900
    assert sum("width_2" in c for c in configs) == depths[2] + depths[3]
    log_lr = np.log10([c["lr"] for c in configs])  # log-uniform over [-4, log10(0.3)]
    assert np.median(log_lr) == pytest.approx((-4 + math.log10(0.3)) / 2, abs=0.1)


def test_integer_bounds_are_as_likely_as_inner_values() -> None:
    space = make_space({"k": {"type": "int", "low": 0, "high": 4}})
    counts = Counter(
        c["k"] for c in sample_configs(SpaceEncoding(space), 5000, np.random.default_rng(1))
    )
    assert set(counts) == {0, 1, 2, 3, 4}
    assert all(900 < n < 1100 for n in counts.values())


def test_unit_scale_reaches_both_integer_bounds() -> None:
    scale = SpaceEncoding(make_space({"k": {"type": "int", "low": 2, "high": 9, "log": True}}))
    assert scale.scales["k"].from_unit([0.0, 1.0, -3.0, 7.0]) == [2, 9, 2, 9]


def test_keys_compare_values_not_spelling() -> None:
    assert config_key({"a": 3, "b": "x"}) == config_key({"b": "x", "a": 3.0})
    assert config_key({"a": 1}) != config_key({"a": True})
    assert config_key({"a": "x"}) != config_key({"a": "y"})


def test_choices_match_by_repr_then_by_number() -> None:
    space = make_space({"c": {"type": "categorical", "choices": [True, 1, 2, "2"]}})
    encoding = SpaceEncoding(space)
    assert [encoding.choice_index("c", v) for v in (True, 1, 2, "2", 2.0, "3")] == [
        0,
        1,
        2,
        3,
        2,
        None,
    ]


def test_unique_samples_avoid_the_seen_until_the_space_runs_out() -> None:
    encoding = SpaceEncoding(TINY)
    seen = {config_key({"n": 1, "act": "relu"})}
    fresh = sample_unique(encoding, 3, np.random.default_rng(0), seen)
    assert len({config_key(c) for c in fresh}) == 3
    assert config_key({"n": 1, "act": "relu"}) not in {config_key(c) for c in fresh}
    assert len(seen) == 4
    assert len(sample_unique(encoding, 2, np.random.default_rng(0), seen)) == 2
