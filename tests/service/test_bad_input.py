"""Bad input of every kind is a short 4xx naming the field and stores nothing, on both backends.

What an attacker or a careless script sends: JSON's NaN and infinities, numbers past float or
BIGINT, NUL bytes and lone surrogates, nesting deep enough to exhaust a stack, ids and offsets
past 2^63, bodies past the limit. Every case is checked against every route it can reach.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from foldwise.limits import MAX_PARAMS
from foldwise.service.hardening.strict_json import StrictJSONRoute
from tests.service.study_specs import study_spec

JSON = {"content-type": "application/json"}
MARK = 123456.789
"""A float that the raw JSON of a case replaces (NaN and Infinity are not JSON Python writes)."""

STUDY_ROUTES = [
    ("GET", "/studies/{id}"),
    ("POST", "/studies/{id}/stop"),
    ("DELETE", "/studies/{id}"),
    ("GET", "/studies/{id}/trials"),
    ("GET", "/studies/{id}/trials/0"),
    ("GET", "/studies/{id}/trials/0/timeline"),
    ("GET", "/studies/{id}/trials/0/folds/0/model"),
    ("GET", "/studies/{id}/best/folds/0/model"),
    ("GET", "/studies/{id}/insights/history"),
    ("GET", "/studies/{id}/insights/folds"),
    ("GET", "/studies/{id}/insights/curves"),
]


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    spec = study_spec(early_stopping={"patience": 2})
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return spec


def _post_raw(api: TestClient, body: str) -> Any:
    return api.post("/studies", content=body.encode("utf-8", "surrogatepass"), headers=JSON)


def _untagged(loc: list[Any]) -> list[Any]:
    """A location without the parameter type pydantic adds inside ``space`` (its union tag)."""
    if loc[1:2] == ["space"] and len(loc) > 3 and loc[3] in ("float", "int", "categorical"):
        return loc[:3] + loc[4:]
    return loc


def _assert_refused(response: Any, loc: list[Any], api: TestClient) -> None:
    assert response.status_code == 422, response.text
    locs = [_untagged(error["loc"]) for error in response.json()["detail"]]
    assert ["body", *loc] in locs, locs
    assert len(response.content) < 4000
    assert api.get("/studies").json()["count"] == 0  # nothing stored


NUMERIC_FIELDS = [
    ("space", "lr", "low"),
    ("space", "lr", "high"),
    ("resources", "cpus_per_worker"),
    ("resources", "gpus_per_worker"),
    ("budget", "max_minutes"),
    ("early_stopping", "min_delta"),
    ("trainer", "fold_timeout"),
    ("space", "width_2", "when", "depth", "gte"),
    ("trainer", "options", "scale"),
]


@pytest.mark.parametrize("field", NUMERIC_FIELDS, ids=".".join)
@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_refused_by_field(
    api: TestClient, field: tuple[str, ...], raw: str
) -> None:
    body = json.dumps(_with(field, MARK)).replace(str(MARK), raw)
    _assert_refused(_post_raw(api, body), list(field), api)


TEXT_FIELDS = [
    ("name",),
    ("description",),
    ("trainer", "task"),
    ("objective", "metric"),
    ("trainer", "options", "path"),
    ("space", "act", "choices", 0),
]


@pytest.mark.parametrize("field", TEXT_FIELDS, ids=lambda f: ".".join(map(str, f)))
@pytest.mark.parametrize("bad", ["a\x00b", "\\ud800", "bell\x07"], ids=["nul", "surrogate", "ctl"])
def test_strings_that_are_not_text_are_refused_by_field(
    api: TestClient, field: tuple[Any, ...], bad: str
) -> None:
    spec = _with(field[:-1], {}) if isinstance(field[-1], int) else _with(field, "PLACEHOLDER")
    if isinstance(field[-1], int):
        spec["space"]["act"]["choices"] = ["PLACEHOLDER", "tanh"]
    body = json.dumps(spec).replace("PLACEHOLDER", bad.replace("\x00", "\\u0000"))
    body = body.replace("\x07", "\\u0007")
    _assert_refused(_post_raw(api, body), list(field), api)


def test_odd_keys_are_refused_where_they_are(api: TestClient) -> None:
    body = json.dumps(_with(("trainer", "options"), {"KEY": 1})).replace("KEY", "\\udc00")
    _assert_refused(_post_raw(api, body), ["trainer", "options", "\\udc00"], api)
    spec = study_spec()
    spec["space"]["bad name"] = spec["space"].pop("act")
    _assert_refused(api.post("/studies", json=spec), ["space", "bad name"], api)


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        (("name",), '"a", "name": "b"'),  # the same key twice: which one meant is unknowable
        (("space", "lr", "low"), '1e-4, "low": 0.5'),
        (("trainer", "options", "k"), '1, "k": 2'),
        (("trainer", "options", "k"), '{"x": 1, "x": 2}, "k": 3'),  # the first copy held one
        (("trainer", "options", "k"), '1, "pad": "' + "x" * 100_000 + '", "k": 2'),  # 100 kB
        (("seed",), "9" * 5000),  # an integer longer than Python reads (a 400 naming nothing)
        (("trainer", "options", "n"), "-" + "1" * 4301),
    ],
)
def test_repeated_keys_and_endless_integers_are_refused_where_they_are(
    api: TestClient, field: tuple[str, ...], raw: str
) -> None:
    body = json.dumps(_with(field, MARK)).replace(str(MARK), raw)
    _assert_refused(_post_raw(api, body), list(field), api)


def test_many_replaced_copies_with_repeats_are_found_in_one_walk(api: TestClient) -> None:
    # each replaced copy was looked for with a walk of the whole body: this 64 kB body held
    # the event loop (every other request) for 31 s before its 422
    copies = ", ".join(['"k": {"x": 1, "x": 1}'] * 1800)
    raw = "[" + ",".join(["0"] * 16000) + "], " + copies
    body = json.dumps(_with(("trainer", "options", "k"), MARK)).replace(str(MARK), raw)
    _assert_refused(_post_raw(api, body), ["trainer", "options", "k", "x"], api)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "latin-1"])
def test_a_body_not_in_utf_8_is_400_and_stores_nothing(api: TestClient, encoding: str) -> None:
    # Python's json.loads reads UTF-16 and UTF-32 bytes too: such a spec was accepted
    body = json.dumps(study_spec(name="caf\u00e9"), ensure_ascii=False).encode(encoding)
    response = api.post("/studies", content=body, headers=JSON)
    assert response.status_code == 400 and "not UTF-8" in response.json()["detail"]
    assert api.get("/studies").json()["count"] == 0
    with_bom = b"\xef\xbb\xbf" + json.dumps(study_spec()).encode()  # a reader may skip it
    assert api.post("/studies", content=with_bom, headers=JSON).status_code == 201


def test_the_byte_not_in_utf_8_is_named_where_it_lies_in_the_body(api: TestClient) -> None:
    for prefix in (b"", b"\xef\xbb\xbf"):  # counted in the body as sent, a BOM included
        body = prefix + b'{"name": "caf\xe9"}'
        response = api.post("/studies", content=body, headers=JSON)
        assert response.status_code == 400
        assert response.json()["detail"].endswith(f"byte 0xe9 at {len(prefix) + 13}")


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/dashboard/session", b'{"token": "\\ud800"}', "application/json"),
        ("/dashboard/spec", b'["\\ud800"]', "application/json"),
        ("/dashboard/spec", b'{"\\udfff": 1}', "application/json"),
        ("/dashboard/spec", b"\xff\xfe name: x", "text/plain"),
        ("/dashboard/spec", b"name: \xed\xa0\x80", "text/plain"),
    ],
)
def test_what_an_error_echoes_is_always_utf_8(
    api: TestClient, path: str, body: bytes, content_type: str
) -> None:
    # a lone surrogate or raw bytes echoed as the input made the error answer itself fail (500)
    response = api.post(path, content=body, headers={"content-type": content_type})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][0] == "body"


def test_repeated_keys_are_refused_in_every_json_body(api: TestClient) -> None:
    session = api.post("/dashboard/session", content=b'{"token": "a", "token": "b"}', headers=JSON)
    assert session.status_code == 422 and session.json()["detail"][0]["loc"] == ["body", "token"]
    routers = [getattr(route, "original_router", None) for route in api.app.router.routes]
    routes = [route for router in routers if router is not None for route in router.routes]
    read_bodies = [r for r in routes if isinstance(r, APIRoute) and r.body_field is not None]
    assert {r.path for r in read_bodies} >= {"/studies", "/dashboard/session"}
    for route in read_bodies:  # each reads its body strictly, those added later too
        assert isinstance(route, StrictJSONRoute), route.path


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("seed",), 2**64),
        (("seed",), -1),
        (("seed",), 2**32),
        (("optimizer", "seed"), 2**40),
        (("space", "depth", "low"), -(10**30)),
        (("space", "depth", "high"), 10**16),
        (("space", "lr", "high"), 1e300),
        (("budget", "max_minutes"), 1e12),
        (("trainer", "fold_timeout"), 1e9),
        (("trainer", "fold_timeout"), 1e-9),
        (("trainer", "fold_timeout"), 4.9),
        (("resources", "cpus_per_worker"), 64_000),
        (("resources", "gpus_per_worker"), 1.5),
        (("parallel", "workers_per_fold"), 10**6),
        (("trainer", "options", "n"), 10**30),
        (("early_stopping", "min_delta"), True),
        (("trainer", "epochs"), "3"),
    ],
)
def test_numbers_out_of_range_or_of_the_wrong_type_are_refused(
    api: TestClient, field: tuple[str, ...], value: Any
) -> None:
    _assert_refused(api.post("/studies", json=_with(field, value)), list(field), api)


@pytest.mark.parametrize("fraction", [1.5, -0.5, 0.999, 1, "x", True, [0.2]])
def test_a_test_fraction_that_cannot_run_is_refused_at_the_option(
    api: TestClient, fraction: Any
) -> None:
    """The built-in digits tasks check ``trainer.options`` at submit (``check_options``): a
    fraction that keeps no test data, or leaves no training data, would fail every trial."""
    spec = _with(("trainer", "options", "test_fraction"), fraction)
    spec["holdout"] = {"score": "ensemble"}
    response = api.post("/studies", json=spec)
    _assert_refused(response, ["trainer", "options", "test_fraction"], api)
    assert "test_fraction must" in response.json()["detail"][0]["msg"]
    accepted = _with(("trainer", "options", "test_fraction"), 0.25)
    accepted["holdout"] = {"score": "ensemble"}
    assert api.post("/studies", json=accepted).status_code == 201


def test_deep_nesting_is_refused_at_its_depth(api: TestClient) -> None:
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    response = api.post("/studies", json=_with(("trainer", "options", "a"), deep))
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "too_deep"
    assert response.json()["detail"][0]["loc"][:5] == ["body", "trainer", "options", "a", 0]
    deeper = "[" * 600 + "]" * 600  # parsed, then refused: echoing it must not exhaust a stack
    body = f'{{"token": {deeper}}}'.encode()
    response = api.post("/dashboard/session", content=body, headers=JSON)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "token"]
    very_deep = "[" * 100_000 + "]" * 100_000  # past the JSON parser's own recursion limit
    flat = json.dumps(_with(("trainer", "options", "a"), 0)).replace('"a": 0', f'"a": {very_deep}')
    too_deep = _post_raw(api, flat)  # a 400 naming nothing, then a 422 at ["body"]
    assert too_deep.status_code == 422 and too_deep.json()["detail"][0]["type"] == "too_deep"
    assert too_deep.json()["detail"][0]["loc"] == ["body", "trainer", "options", "a"] + [0] * 30
    # a too-long integer first makes the parser read the body again: a 400 naming nothing, before
    long_first = flat.replace('"epochs": ', '"epochs": ' + "9" * 5000 + ', "x": ', 1)
    assert long_first != flat
    too_deep = _post_raw(api, long_first)
    assert too_deep.status_code == 422 and too_deep.json()["detail"][0]["type"] == "too_deep"
    assert too_deep.json()["detail"][0]["loc"][:5] == ["body", "trainer", "options", "a", 0]
    session = api.post("/dashboard/session", content=very_deep.encode(), headers=JSON)
    assert session.status_code == 422
    assert api.get("/studies").json()["count"] == 0


def test_too_many_parameters_and_oversized_bodies(api: TestClient) -> None:
    space = {f"p{i}": {"type": "float", "low": 0, "high": 1} for i in range(MAX_PARAMS + 1)}
    _assert_refused(api.post("/studies", json=study_spec(space=space)), ["space"], api)
    huge_name = api.post("/studies", json=study_spec(name="x" * 2_000_000))
    assert huge_name.status_code == 413  # past the body limit: never parsed
    long_name = api.post("/studies", json=study_spec(name="x" * 500_000))
    _assert_refused(long_name, ["name"], api)  # and the 422 does not echo it


def test_errors_summarise_large_inputs() -> None:
    from foldwise.service.hardening.errors import compact_error

    error = compact_error(
        {"type": "t", "loc": ("body", "x" * 1000), "msg": "m" * 5000, "input": "y" * 10**6}
    )
    assert len(json.dumps(error)) < 1000 and error["input"].endswith("(1000000 characters)")


@pytest.mark.parametrize(("method", "route"), STUDY_ROUTES)
def test_ids_past_the_range_are_422_and_unknown_ids_404(
    api: TestClient, method: str, route: str
) -> None:
    too_big = api.request(method, route.format(id=2**63))
    assert too_big.status_code == 422 and "study_id" in too_big.json()["detail"][0]["loc"]
    unknown = api.request(method, route.format(id=2**63 - 2))
    assert unknown.status_code == 404, unknown.text
    for bad in ("-1", "0", "1e3", "x"):
        assert api.request(method, route.format(id=bad)).status_code == 422


@pytest.mark.parametrize(
    "url",
    [
        "/studies?offset=100000000000000000000",
        "/studies?limit=0",
        "/studies?limit=1001",
        "/studies/1/trials?offset=9223372036854775808",
        "/studies/1/trials/2147483648",
        "/studies/1/trials?sort=params.%00",
        "/studies/1/insights/curves?after=9223372036854775808",
        "/studies/1/insights/curves?metric=",
        "/studies/1/insights/curves?metric=val%00loss",
        "/studies/1/insights/curves?metric=a%0Ab",
        "/studies/1/insights/history?since=0.5",
        "/studies/1/insights/history?since=2026-11-23",
        "/studies/1/trials/0/folds/100/model",
    ],
)
def test_query_and_path_values_out_of_range_are_422(api: TestClient, url: str) -> None:
    api.post("/studies", json=study_spec())
    assert api.get(url).status_code == 422


@pytest.mark.parametrize(
    "url",
    [
        "/studies/{id}x",
        "/studies/+{id}",
        "/studies/0{id}",
        "/studies/%20{id}",
        "/studies/{id}.0",
        "/studies/{id}_0",
        "/studies/{id}/trials/+0",
        "/studies/{id}/trials/0_0/timeline",
        "/studies/{id}/trials?limit=1_0",
        "/studies/{id}/trials?offset=%2B1",
        "/studies/{id}/best/folds/00/model",
        "/studies/{id}/insights/folds?top=1.0",
        "/dashboard/studies/+{id}",
    ],
)
def test_integers_in_paths_and_queries_are_plain_decimal_digits(api: TestClient, url: str) -> None:
    # lax parsing read each as a valid number: one study had many URLs
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    response = api.get(url.format(id=study_id))
    assert response.status_code == 422, response.text
    assert "decimal digits" in response.json()["detail"][0]["msg"]


def test_model_routes_check_the_fold_against_k(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]  # K = 3
    response = api.get(f"/studies/{study_id}/best/folds/5/model")
    assert response.status_code == 404  # no completed trial yet: checked first
    assert "no completed trial" in response.json()["detail"]


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/studies?limit=1&limit=2", "limit"),
        ("/studies?status=running&status=failed", "status"),
        ("/studies/{id}/trials?status=failed&status=pending", "status"),
        ("/studies/{id}/trials?sort=value&limit=3&sort=params.lr", "sort"),
        ("/studies/{id}/trials.csv?sort=value&sort=value", "sort"),
        ("/studies/{id}/insights/folds?top=1&top=2", "top"),
    ],
)
def test_a_query_parameter_given_twice_is_422_at_it(api: TestClient, url: str, name: str) -> None:
    # the last copy was read silently: an answer to a question the client may not have asked
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    response = api.get(url.format(id=study_id))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", name]
    assert api.get(url.format(id=study_id).split("&")[0]).status_code == 200
    for other in (f"/studies/{study_id}?x=1&x=2", "/health?x=1&x=2"):  # takes none: ignored
        assert api.get(other).status_code == 200


def test_the_openapi_document_keeps_every_integer_bound(api: TestClient) -> None:
    # a validator in front of the bounds turned them into raw ge/le keys that no client reads:
    # schemathesis then sent limit=-5 as valid and took the 422 for a defect
    document = api.get("/openapi.json").json()
    integers = [
        (path, param["name"], param["schema"])
        for path, item in document["paths"].items()
        for operation in item.values()
        for param in operation.get("parameters", [])
        if param["schema"].get("type") == "integer"
    ]
    assert len(integers) >= 10
    for path, name, schema in integers:
        assert "minimum" in schema and "maximum" in schema, (path, name, schema)
        assert not {"ge", "le"} & set(schema), (path, name, schema)
