"""Spec text to a document with the line of each field, and the endpoint the form posts to."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.dashboard.spec_text import SpecTextError, parse_spec_text

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


def test_endpoint_answers_spec_and_lines_or_a_422(api: TestClient) -> None:
    ok = api.post("/dashboard/spec", content=SPEC, headers={"content-type": "text/plain"})
    assert ok.status_code == 200 and ok.json()["lines"]["space.lr.type"] == 4
    bad = api.post("/dashboard/spec", content="a: [", headers={"content-type": "text/plain"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["line"] == 1
    scalar = api.post("/dashboard/spec", content="42", headers={"content-type": "text/plain"})
    assert scalar.status_code == 422 and "mapping" in scalar.json()["detail"][0]["msg"]
