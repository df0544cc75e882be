"""JSON read strictly: nesting past the parser's own depth is refused at the place it starts."""

from __future__ import annotations

import pytest

from foldwise.limits import MAX_DEPTH
from foldwise.strict_json import StrictJSONError, loads_strict

VERY_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (VERY_DEEP, [0] * (MAX_DEPTH + 1)),
        # strings holding quotes, brackets, commas and colons are not structure
        (
            '{"a\\"[": ["x,]:{", {"b": 1}, 2, {"c": [' + VERY_DEEP + "]}]}",
            ['a"[', 3, "c", 0] + [0] * (MAX_DEPTH - 3),
        ),
        # keys and indexes after finished lists and mappings, and a deep chain of mappings
        (
            '{"j": {"i": 0}, "k": [[1, 2], {"y": []}, '
            + '{"z": ' * 5000
            + "1"
            + "}" * 5000
            + "]}",
            ["k", 2] + ["z"] * (MAX_DEPTH - 1),
        ),
    ],
)
def test_a_value_past_the_parsers_depth_is_refused_where_it_passes_the_limit(
    text: str, path: list[str | int]
) -> None:
    with pytest.raises(StrictJSONError) as refused:
        loads_strict(text)
    assert refused.value.kind == "too_deep"
    assert refused.value.path == path
