"""Spec text to a document with the line of each field, and the endpoint the form posts to."""

from __future__ import annotations

import json

import pytest

from foldwise.spec_text import MAX_NODES, SpecTextError, parse_spec_text

SPEC = """name: demo
space:
  lr:
    type: float
    low: 0.1
  act: {type: categorical, choices: [relu, tanh]}
"""


def test_every_field_maps_to_its_line() -> None:
    document, lines = parse_spec_text(SPEC)
    assert document["space"]["lr"]["low"] == 0.1
    assert lines["name"] == 1 and lines["space.lr"] == 3 and lines["space.lr.low"] == 5
    assert lines["space.act.choices.1"] == 6


def test_json_is_yaml_too() -> None:
    document, lines = parse_spec_text('{\n  "name": "j",\n  "budget": {"trials": 3}\n}')
    assert document == {"name": "j", "budget": {"trials": 3}}
    assert lines["budget.trials"] == 3


def test_broken_text_names_its_line() -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("name: x\nspace: [a, b\nbudget: 3\n")
    assert info.value.line == 3 and "not valid YAML" in str(info.value)


def test_unprintable_characters_are_a_parse_error() -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("a: \x00", "nul.yaml")
    assert str(info.value).startswith("cannot parse nul.yaml: not valid YAML or JSON")


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for name, prev in zip("bcdefghi", "abcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")  # 9^9 values
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("\n".join(lines), "bomb.yaml")
    assert f"more than {MAX_NODES} values" in str(info.value)
    assert str(info.value).startswith("cannot parse bomb.yaml: it expands")


def test_aliases_within_the_budget_still_work() -> None:
    document, _ = parse_spec_text("base: &b {low: 1, high: 2}\nx: *b\ny: *b\n")
    assert document["x"] == document["y"] == {"low": 1, "high": 2}


@pytest.mark.parametrize("text", ["a: &a [*a]", "a: &a {b: *a}", "- &a [x, [*a]]"])
def test_an_alias_that_contains_itself_is_refused(text: str) -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text(text)
    assert "refers to a value that contains it" in str(info.value) and info.value.line == 1


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("a: " + "[" * 50_000 + "]" * 50_000)
    assert "nested more than 32 levels deep" in str(info.value) and info.value.line == 1
    with pytest.raises(SpecTextError) as info:  # in blocks, the composer's recursion stops it
        parse_spec_text("a:\n" + "".join(" " * i + f"a{i}:\n" for i in range(1, 600)))
    assert "nested too deeply" in str(info.value)


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_flow_nesting_is_refused_as_it_is_read_past_the_depth_limit(opening: str) -> None:
    # the scanner's work for every token grew with the depth: 3 kB of "[" cost a second of CPU
    closing = "]" if opening == "[" else "}"
    parse_spec_text("a: " + opening * 32 + "1" + closing * 32)
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("a: " + opening * 33 + "1" + closing * 33)
    assert "nested more than 32 levels deep" in str(info.value)


def test_syntax_errors_name_the_source_and_position() -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("name: x\nspace: [a, b\nbudget: 3\n", "study.yaml")
    assert str(info.value).startswith(
        "cannot parse study.yaml: not valid YAML or JSON at line 3, column"
    )
    assert "<unicode string>" not in str(info.value)


def test_unprintable_characters_are_placed_by_line_and_column_in_the_source() -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text("name: x\nspace:\n  lr\x1b: 1\n", "study.yaml")
    assert str(info.value) == (
        "cannot parse study.yaml: not valid YAML or JSON at line 3, column 5: "
        "unacceptable character #x001b: special characters are not allowed"
    )
    assert info.value.line == 3


def test_exponents_without_a_dot_are_numbers_as_in_json() -> None:
    document, _ = parse_spec_text("low: 1e-4\nhigh: 3E2\nname: 1e-4x\nplain: 1.5\n")
    assert document == {"low": 1e-4, "high": 300.0, "name": "1e-4x", "plain": 1.5}


def test_numbers_and_booleans_read_as_yaml_1_2_and_json_read_them() -> None:
    """YAML 1.1's base-60 numbers, leading-zero octals and yes/no/on/off booleans are text:
    a limit of ``1:20`` is not 80, and ``choices: [on, off]`` stays two words."""
    text = "a: 1:20\nb: 010\nc: [on, off, yes, no, true, False]\nd: 0x10\ne: 2.5\nf: -.5\n"
    doc, _ = parse_spec_text(text)
    assert doc == {
        "a": "1:20",
        "b": "010",
        "c": ["on", "off", "yes", "no", True, False],
        "d": 16,
        "e": 2.5,
        "f": -0.5,
    }


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: a\nbudget: {trials: 3}\nname: b\n", 3),
        ('{\n  "space": {\n    "lr": {"low": 1, "low": 2}\n  }\n}', 3),
        ("base: &b {x: 1}\nuse:\n  - {y: 1, y: 2}\n", 3),
    ],
)
def test_a_key_given_twice_is_refused_at_its_second_line(text: str, line: int) -> None:
    with pytest.raises(SpecTextError) as info:
        parse_spec_text(text, "twice.yaml")
    assert info.value.line == line and "is given twice" in str(info.value)


def test_a_key_given_again_over_a_merge_overrides_it() -> None:
    document, _ = parse_spec_text("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 5\n")
    assert document["use"] == {"x": 5, "y": 2}


def test_the_merge_key_given_twice_is_refused_and_a_list_of_merges_taken() -> None:
    anchors = "a: &a {x: 1}\nc: &c {x: 2, y: 3}\n"
    with pytest.raises(SpecTextError) as info:  # PyYAML kept the first merge silently
        parse_spec_text(anchors + "b:\n  <<: *a\n  <<: *c\n")
    assert info.value.line == 5 and "the merge key << is given twice" in str(info.value)
    document, _ = parse_spec_text(anchors + "b:\n  <<: [*a, *c]\n")
    assert document["b"] == {"x": 1, "y": 3}


def test_escaped_surrogate_pairs_are_one_character_as_in_json() -> None:
    spec = {"name": "party \U0001f389", "space": {"w\U0001f389": {"type": "int"}}}
    text = json.dumps(spec)  # ASCII: the emoji written as "\ud83c\udf89"
    assert "\\ud83c\\udf89" in text
    document, lines = parse_spec_text(text)
    assert document == spec and "space.w\U0001f389" in lines
    lone, _lines = parse_spec_text('{"name": "\\ud800 \\ud83c\\udf89"}')
    assert lone == {"name": "\ud800 \U0001f389"}  # refused later, where the spec is checked


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: x\n1: a\n", 2),
        ('1: a\n"1": b\n', 1),
        ("space:\n  ~: a\n", 2),
        ("true: a\n", 1),
        ("a:\n  1.0: b\n", 2),
        ("? [a, b]\n: c\n", 1),
    ],
)
def test_a_key_that_is_not_text_is_refused_at_its_line(text: str, line: int) -> None:
    # JSON keys are text: `~` became the key "None", and `1` and "1" two copies of one key
    with pytest.raises(SpecTextError, match="is not text") as refused:
        parse_spec_text(text)
    assert refused.value.line == line


def test_quoted_keys_and_json_keys_are_text() -> None:
    document, _lines = parse_spec_text('"1": a\n"true": b\n\'~\': c\n')
    assert document == {"1": "a", "true": "b", "~": "c"}
    assert parse_spec_text('{"1": {"2": 3}}')[0] == {"1": {"2": 3}}


@pytest.mark.parametrize(
    "text",
    [
        "x: [" + ",".join(["1"] * 120_000) + "]",
        "x:\n" + "- 1\n" * 120_000,
    ],
    ids=["flow", "block"],
)
def test_a_huge_document_stops_being_read_at_the_limit(text: str) -> None:
    # it was composed whole (10 s of CPU for 240 kB) before its size was checked
    with pytest.raises(SpecTextError, match=f"holds more than {MAX_NODES} values"):
        parse_spec_text(text)
