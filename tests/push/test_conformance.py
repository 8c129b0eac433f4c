"""Every adapter through the same checks (style.md #3). The REST adapters run against an
in-process fake that follows the push contract (httpx MockTransport) here; the reference
backend's own app joins the parametrisation in tests/backend."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from regimetune.push import Backend, RecordingBackend, ReferenceBackend, RestBackend
from regimetune.push.checks import BACKEND_CHECKS


def contract_transport() -> httpx.MockTransport:
    """A minimal backend that follows CONTRACT.md: 200 applied, 200 duplicate, 409 stale."""
    applied: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        n = int(request.headers["Idempotency-Key"])
        assert body["version"] == n
        if applied and n < applied[-1]["version"]:
            return httpx.Response(409, json={"detail": f"version {n} is older than {applied[-1]['version']}"})
        if applied and n == applied[-1]["version"]:
            if body != applied[-1]:
                return httpx.Response(409, json={"detail": f"version {n} differs from the one applied"})
            return httpx.Response(200, json={"status": "duplicate", "version": n})
        applied.append(body)
        return httpx.Response(200, json={"status": "applied", "version": n})

    return httpx.MockTransport(handler)


FACTORIES: dict[str, Callable[[], Backend]] = {
    "recording": RecordingBackend,
    "rest": lambda: RestBackend("http://fake/v1/policy", client=httpx.Client(transport=contract_transport())),
    "rest-mapped": lambda: RestBackend(
        "http://fake/weights",
        method="POST",
        payload={"weights.load": "policy.weights.w_load", "weights.time": "policy.weights.w_time"},
        client=httpx.Client(transport=contract_transport()),
    ),
    "reference": lambda: ReferenceBackend("http://fake", client=httpx.Client(transport=contract_transport())),
}


@pytest.mark.parametrize("check", BACKEND_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("factory", list(FACTORIES.values()), ids=list(FACTORIES))
def test_adapter_conformance(factory: Callable[[], Backend], check: Callable) -> None:
    check(factory)
