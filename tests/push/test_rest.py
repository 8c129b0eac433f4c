"""How the REST adapter builds requests and reads responses."""

from __future__ import annotations

import json

import httpx
import pytest

from regimetune.models import BackendError, ConfigError, Policy, PolicyVersion, PufferscaleWeights
from regimetune.push import PermanentPushError, RestBackend, TransientPushError


def pv(n: int) -> PolicyVersion:
    return PolicyVersion(
        version=n, policy=Policy(weights=PufferscaleWeights(w_load=0.5, w_time=2.0)), created_at=7.0
    )


def answering(status: int, body: object = None, headers: dict | None = None, seen: list | None = None):
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers=headers)
        return httpx.Response(status, json=body if body is not None else {}, headers=headers)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_request_carries_mapping_key_and_token() -> None:
    seen: list[httpx.Request] = []
    rb = RestBackend(
        "http://b/api",
        method="POST",
        payload={"cfg.wl": "policy.weights.w_load", "cfg.wt": "policy.weights.w_time", "id": "version"},
        version_field="id",
        headers={"X-Tenant": "hep"},
        token="s3cret",
        client=answering(201, seen=seen),
    )
    receipt = rb.push(pv(9))
    assert (receipt.version, receipt.status) == (9, "applied")
    (req,) = seen
    assert req.method == "POST" and str(req.url) == "http://b/api"
    assert json.loads(req.content) == {"cfg": {"wl": 0.5, "wt": 2.0}, "id": 9}
    assert req.headers["Idempotency-Key"] == "9"
    assert req.headers["Authorization"] == "Bearer s3cret"
    assert req.headers["X-Tenant"] == "hep"


def test_default_body_is_whole_version() -> None:
    seen: list[httpx.Request] = []
    RestBackend("http://b/p", client=answering(204, seen=seen)).push(pv(3))
    assert PolicyVersion.model_validate_json(seen[0].content) == pv(3)


def test_bad_mapping_is_config_error_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"policy\.nope"):
        RestBackend("http://b/p", payload={"x": "policy.nope"}, client=answering(200))


def test_non_http_url_is_config_error_at_construction() -> None:
    with pytest.raises(ConfigError, match="http"):
        RestBackend("ftp://user:secret@b/p")
    try:
        RestBackend("ftp://user:secret@b/p")
    except ConfigError as exc:
        assert "secret" not in str(exc)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, {"status": "duplicate"}, "duplicate"),
        (200, {"ok": True}, "applied"),
        (409, {"detail": "version 4 already applied"}, "duplicate"),
        (409, {"status": "already_applied"}, "duplicate"),
        (409, "Already applied", "duplicate"),
    ],
)
def test_duplicates_are_delivered(status: int, body: object, expected: str) -> None:
    assert RestBackend("http://b/p", client=answering(status, body)).push(pv(4)).status == expected


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 301])
def test_other_refusals_are_permanent(status: int) -> None:
    rb = RestBackend("http://b/p", client=answering(status, {"detail": {"reason": "weights invalid"}}))
    with pytest.raises(PermanentPushError, match="weights invalid") as info:
        rb.push(pv(4))
    assert info.value.status_code == status and not info.value.retryable
    assert isinstance(info.value, BackendError)


@pytest.mark.parametrize("status", [500, 502, 503, 429, 408])
def test_server_trouble_is_transient(status: int) -> None:
    rb = RestBackend("http://b/p", client=answering(status, "busy", headers={"Retry-After": "7"}))
    with pytest.raises(TransientPushError, match="busy") as info:
        rb.push(pv(4))
    assert info.value.retryable and info.value.retry_after == 7.0


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
def test_transport_errors_are_transient(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    rb = RestBackend("http://b/p", client=httpx.Client(transport=httpx.MockTransport(handler)))
    with pytest.raises(TransientPushError, match=type(exc).__name__):
        rb.push(pv(1))


def test_unreachable_port_is_transient() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        RestBackend(f"http://127.0.0.1:{port}/v1/policy", timeout=2.0) as rb,
        pytest.raises(TransientPushError),
    ):
        rb.push(pv(1))


def test_build_backend_by_name() -> None:
    from regimetune.push import ReferenceBackend, build_backend

    ref = build_backend("reference", "http://127.0.0.1:8081/", token="t")
    assert isinstance(ref, ReferenceBackend) and ref.url == "http://127.0.0.1:8081/v1/policy"
    with pytest.raises(ConfigError, match="unknown backend adapter 'grpc'"):
        build_backend("grpc", "x")
    with pytest.raises(ConfigError, match="'rest'"):
        build_backend("rest", "http://x", colour="blue")
