"""POST /dashboard/spec: the spec form's text to a document with lines, or a short 422."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.foldwise.test_spec_text import SPEC

TEXT = {"content-type": "text/plain"}


def test_endpoint_answers_spec_and_lines_or_a_422(api: TestClient) -> None:
    ok = api.post("/dashboard/spec", content=SPEC, headers=TEXT)
    assert ok.status_code == 200 and ok.json()["lines"]["space.lr.type"] == 4
    bad = api.post("/dashboard/spec", content="a: [", headers={"content-type": "text/plain"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["line"] == 1
    scalar = api.post("/dashboard/spec", content="42", headers={"content-type": "text/plain"})
    assert scalar.status_code == 422 and "mapping" in scalar.json()["detail"][0]["msg"]


def test_bombs_loops_and_floods_are_short_422s_or_413(api: TestClient) -> None:
    bomb = "\n".join(
        ["a: &a [x, x, x, x, x, x, x, x, x]"]
        + [
            f"{n}: &{n} [{', '.join(['*' + p] * 9)}]"
            for n, p in zip("bcdefg", "abcdef", strict=True)
        ]
    )
    for text in (bomb, "a: &a [*a]", "[" * 3000 + "]" * 3000):
        response = api.post("/dashboard/spec", content=text, headers=TEXT)
        assert response.status_code == 422 and len(response.content) < 1000, response.text
    flood = api.post("/dashboard/spec", content="a: " + "x" * 300_000, headers=TEXT)
    assert flood.status_code == 413


def test_values_yaml_cannot_build_or_json_cannot_carry_are_422s_at_their_line(
    api: TestClient,
) -> None:
    # PyYAML's constructors raise ValueError and the like (not YAMLError) for these, and a date,
    # bytes, NaN or a deep list parse but cannot go back as the JSON the form posts on
    cases = {
        "name: x\nseed: 2001-13-01": (2, "not a valid timestamp"),
        "seed: !!int x": (1, "not a valid int"),
        "seed: !!float abc": (1, "not a valid float"),
        "seed: !!bool x": (1, "not a valid bool"),
        "name: x\nstarted: 2001-01-01": (2, "is a date"),
        "blob: !!binary /w==": (1, "is a bytes"),
        "tags: !!set {a}": (1, "is a set"),
        "name: x\nlow: .nan": (2, "finite"),
        "seed: " + "9" * 30: (1, "must lie within"),
        "deep: " + "[" * 300 + "]" * 300: (1, "nested more than"),
    }
    for text, (line, fragment) in cases.items():
        response = api.post("/dashboard/spec", content=text, headers=TEXT)
        assert response.status_code == 422, (text[:40], response.text)
        (problem, *_) = response.json()["detail"]
        assert fragment in problem["msg"] and problem["line"] == line, (text[:40], problem)
        assert len(response.content) < 2000


def test_json_with_an_escaped_emoji_is_read_as_json_reads_it(api: TestClient) -> None:
    # json.dumps writes an emoji as a surrogate pair of \u escapes: it was a "lone surrogate"
    text = json.dumps({"name": "party \U0001f389"})
    response = api.post("/dashboard/spec", content=text, headers=TEXT)
    assert response.status_code == 200 and response.json()["spec"]["name"] == "party \U0001f389"
