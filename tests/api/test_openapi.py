"""The OpenAPI document is complete, and a schemathesis run against it finds no 5xx and no
response that violates it (bounded examples, in process)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from regimetune.api import create_app
from regimetune.client.ingest import COUNTS_MEDIA_TYPE

from .conftest import TOKEN, TestClient, settings_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import schemathesis
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    # the compact ingest body is raw bytes, like application/octet-stream
    schemathesis.serializer.alias(COUNTS_MEDIA_TYPE, "application/octet-stream")

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp: Path = tmp_path_factory.mktemp("openapi")
    app = create_app(
        settings_for(tmp, ingest={"max_body_bytes": 1 << 20}, tuning={"executor": "thread"}),
        jobs_runner=lambda *a, **k: {"policy_file": {}, "report": {}},
    )
    with TestClient(app):  # the lifespan starts the engine, so ingest is exercised too
        yield app


@pytest.fixture(scope="module")
def api_schema(app: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_every_route_documents_its_responses(app: Any) -> None:
    doc = app.openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            assert "200" in codes or "202" in codes, (method, path)
            if op.get("security") or (path.startswith("/v1/") and method != "get"):
                assert {"401", "403"} <= codes, (method, path)
    assert "bearer" in str(doc["components"]["securitySchemes"]).lower()
    assert not any("400" in op["responses"] for ops in doc["paths"].values() for op in ops.values())


AUTH_JSON = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def test_a_body_that_cannot_be_parsed_is_a_documented_422_with_the_reason(app: Any) -> None:
    """Found by schemathesis: JSON that is not UTF-8 was FastAPI's undocumented 400 with no
    reason, on every route with a JSON body."""
    c = TestClient(app)
    tried = 0
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            if "application/json" not in op.get("requestBody", {}).get("content", {}):
                continue
            r = c.request(method, path.replace("{regime}", "0"), content=b"\xc1\xbd", headers=AUTH_JSON)
            assert r.status_code == 422, (method, path, r.text)
            assert "not text in UTF-8" in r.json()["detail"], r.text
            assert "422" in op["responses"], (method, path)
            tried += 1
    assert tried >= 4


def test_a_reused_idempotency_key_is_a_documented_409(app: Any) -> None:
    c = TestClient(app)
    doc = app.openapi()["paths"]
    import time

    body = {"window_start": float(int(time.time()) // 60 * 60), "counts": {"keys": [1], "reads": [1]}}
    key = {**AUTH_JSON, "Idempotency-Key": "openapi-409"}
    assert c.post("/v1/ingest", json=body, headers=key).status_code == 200
    body["counts"]["reads"] = [2]
    r = c.post("/v1/ingest", json=body, headers=key)
    assert r.status_code == 409 and "already used for another batch" in r.json()["detail"]
    assert "409" in doc["/v1/ingest"]["post"]["responses"]
    assert "409" in doc["/v1/ingest/counts"]["post"]["responses"]


def test_reads_say_their_token_is_optional_unless_protected(app: Any, tmp_path: Path) -> None:
    read = app.openapi()["paths"]["/v1/decisions"]["get"]
    assert read["security"][0] == {} and len(read["security"]) == 2  # optional: reads are open
    assert TestClient(app).get("/v1/decisions").status_code == 200
    write = app.openapi()["paths"]["/v1/ingest"]["post"]
    assert {} not in write["security"]
    protected = create_app(settings_for(tmp_path, auth={"protect_reads": True}))
    assert {} not in protected.openapi()["paths"]["/v1/decisions"]["get"]["security"]
    protected.state.store.close()


def test_api_conforms(api_schema: Any) -> None:
    """Every operation: 8 generated requests each, authenticated: no 5xx, every status,
    content type and body as documented. (Schema-valid requests may still be refused with
    a reason, e.g. arrays of unequal lengths, so "positive data acceptance" is not checked.)"""
    failures = []
    n_ops = 0
    for result in api_schema.get_all_operations():
        op = result.ok()
        n_ops += 1

        @given(case=op.as_strategy())
        @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: Any) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)

        try:
            run()
        except Exception as exc:
            failures.append(f"{op.method.upper()} {op.path}: {exc}")
    assert n_ops >= 15
    assert not failures, "\n\n".join(failures)
