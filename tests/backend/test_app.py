"""The reference backend in process (TestClient): push contract, placement, rescale, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from regimetune.backend import demo_placement
from regimetune.models import Policy, PolicyVersion, PufferscaleWeights
from regimetune.push import PermanentPushError, ReferenceBackend, RestBackend
from regimetune.push.checks import BACKEND_CHECKS

if TYPE_CHECKING:
    from fastapi.testclient import TestClient


def pv(n: int, *, w_time: float = 1.0, w_data: float = 1.0) -> dict[str, Any]:
    return PolicyVersion(
        version=n,
        policy=Policy(weights=PufferscaleWeights(w_load=1.0, w_data=w_data, w_time=w_time)),
        created_at=100.0 + n,
    ).model_dump(mode="json")


def init(client: TestClient, *, servers: int = 4, buckets: int = 24, seed: int = 0) -> dict[str, Any]:
    body = demo_placement(servers=servers, buckets=buckets, seed=seed).model_dump(mode="json")
    r = client.post("/v1/placement", json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.mark.parametrize("check", BACKEND_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("kind", ["reference", "rest"])
def test_adapters_conform_against_the_app(make_client: Callable, check: Callable, kind: str) -> None:
    counter = iter(range(100))

    def factory():
        client = make_client(f"c{next(counter)}")
        if kind == "reference":
            return ReferenceBackend("http://testserver", client=client)
        return RestBackend("http://testserver/v1/policy", method="POST", client=client)

    check(factory)


def test_same_version_twice_changes_nothing(client: TestClient) -> None:
    assert client.put("/v1/policy", json=pv(1)).json() == {
        "status": "applied",
        "version": 1,
        "current_version": 1,
    }
    again = client.put("/v1/policy", json=pv(1), headers={"Idempotency-Key": "1"})
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    log = client.get("/v1/policies").json()
    assert [e["version"]["version"] for e in log["entries"]] == [1]
    assert log["entries"][0]["duplicates"] == 1
    assert client.get("/v1/policy").json() == pv(1)


def test_older_and_conflicting_versions_refused_with_reason(client: TestClient) -> None:
    for n in (1, 2, 3):
        assert client.put("/v1/policy", json=pv(n)).status_code == 200
    stale = client.put("/v1/policy", json=pv(2))
    assert stale.status_code == 409
    assert stale.json() == {
        "detail": "version 2 is older than version 3 in force",
        "code": "stale_version",
        "current_version": 3,
    }
    other = client.put("/v1/policy", json=pv(3, w_time=5.0))
    assert other.status_code == 409 and other.json()["code"] == "version_conflict"
    assert client.get("/v1/policy").json() == pv(3)
    assert client.get("/v1/policies").json()["current_version"] == 3
    tail = client.get("/v1/policies", params={"after": 1}).json()
    assert [e["version"]["version"] for e in tail["entries"]] == [2, 3] and tail["current_version"] == 3


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"version": 1, "created_at": 0, "policy": {"weights": {"w_load": 0.5, "w_data": 0.5}}},
            "max(W_L, W_D) must be 1",
        ),
        ({"version": 1, "created_at": 0, "policy": {"weights": {"w_load": -1}}}, "greater than 0"),
        ({"version": 0, "created_at": 0, "policy": {}}, "version"),
        ({"version": 1, "created_at": 0, "policy": {"cache": {"mode": "lru"}}}, "needs limit_keys"),
        ({"version": 1}, "policy"),
        ({"version": 2**63, "created_at": 0, "policy": {}}, "version must be <="),
    ],
)
def test_invalid_policy_is_422_with_reason(client: TestClient, body: dict, reason: str) -> None:
    r = client.put("/v1/policy", json=body)
    assert r.status_code == 422
    assert reason in r.json()["detail"]
    assert client.get("/v1/policy").status_code == 404


def test_idempotency_key_must_match(client: TestClient) -> None:
    r = client.put("/v1/policy", json=pv(2), headers={"Idempotency-Key": "3"})
    assert r.status_code == 422 and "differs" in r.json()["detail"]


def test_token_required_when_configured(make_client: Callable) -> None:
    client = make_client(token="s3cret")
    assert client.put("/v1/policy", json=pv(1)).status_code == 401
    assert client.get("/healthz").status_code == 200
    with pytest.raises(PermanentPushError, match="401"):
        ReferenceBackend("http://testserver", token="wrong", client=client).push(PolicyVersion(**pv(1)))
    good = ReferenceBackend("http://testserver", token="s3cret", client=client)
    assert good.push(PolicyVersion(**pv(1))).status == "applied"
    assert good.current() == PolicyVersion(**pv(1))


def test_placement_init_and_summary(client: TestClient) -> None:
    assert client.get("/v1/placement").status_code == 404
    view = init(client, servers=3, buckets=9)
    assert view["revision"] == 0 and view["servers"] == [0, 1, 2]
    assert [s["buckets"] for s in view["summary"]] == [3, 3, 3]
    total = sum(b["load"] for b in view["buckets"])
    assert sum(s["load"] for s in view["summary"]) == pytest.approx(total)
    again = client.post("/v1/placement", json={"servers": [0], "buckets": []})
    assert again.status_code == 409 and "replace" in again.json()["detail"]
    replaced = client.post("/v1/placement", json={"servers": [5], "buckets": [], "replace": True})
    assert replaced.status_code == 201 and replaced.json()["revision"] == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"servers": [0, 1], "buckets": [{"id": 0, "load": 1, "size": 1}], "placement": {"0": 7}},
            "unknown server",
        ),
        ({"servers": [], "buckets": []}, "at least one server"),
        ({"servers": [0, 0], "buckets": []}, "distinct"),
        ({"servers": [0], "buckets": [{"id": 0, "load": -1, "size": 1}]}, "greater than or equal to 0"),
        (
            {"servers": [0], "buckets": [{"id": j, "load": 1, "size": 1e308} for j in range(3)]},
            "total size overflows",
        ),
    ],
)
def test_invalid_placement_is_422(client: TestClient, body: dict, reason: str) -> None:
    r = client.post("/v1/placement", json=body)
    assert r.status_code == 422, r.text
    assert reason in r.json()["detail"]


def test_commission_applies_and_persists(client: TestClient) -> None:
    before = init(client)
    r = client.post("/v1/rescale", json={"kind": "commission", "count": 2})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["applied"] and res["revision"] == 1
    assert res["servers_after"] == [0, 1, 2, 3, 4, 5]
    plan = res["plan"]
    assert set(plan["placement"].values()) <= set(res["servers_after"])
    assert {4, 5} & set(plan["placement"].values())  # new servers receive data
    moved = {m["bucket"] for m in plan["migrations"]}
    old = {int(k): v for k, v in before["placement"].items()}
    assert moved == {int(b) for b, s in plan["placement"].items() if old[int(b)] != s}
    m = plan["metrics"]
    assert m["l_target"] == pytest.approx(sum(b["load"] for b in before["buckets"]) / 6)
    assert m["bytes_moved"] == pytest.approx(sum(x["bytes"] for x in plan["migrations"]))
    now = client.get("/v1/placement").json()
    assert now["revision"] == 1 and now["servers"] == res["servers_after"]
    assert now["placement"] == plan["placement"]


def test_decommission_dry_run_then_apply(client: TestClient) -> None:
    init(client)
    dry = client.post("/v1/rescale", json={"kind": "decommission", "servers": [1], "dry_run": True}).json()
    assert not dry["applied"] and dry["revision"] == 0
    assert 1 not in dry["plan"]["placement"].values()
    assert client.get("/v1/placement").json()["revision"] == 0
    real = client.post("/v1/rescale", json={"kind": "decommission", "servers": [1], "expected_revision": 0})
    assert real.status_code == 200 and real.json()["servers_after"] == [0, 2, 3]
    placement = client.get("/v1/placement").json()
    assert 1 not in placement["placement"].values() and placement["servers"] == [0, 2, 3]
    stale = client.post("/v1/rescale", json={"kind": "commission", "count": 1, "expected_revision": 0})
    assert stale.status_code == 409 and stale.json()["code"] == "stale_revision"


def test_rescale_uses_weights_in_force_or_the_orders(client: TestClient) -> None:
    init(client)
    client.put("/v1/policy", json=pv(1, w_data=0.001, w_time=0.001))
    res = client.post("/v1/rescale", json={"kind": "commission", "count": 1, "dry_run": True}).json()
    assert res["policy_version"] == 1 and res["weights"]["w_data"] == 0.001
    own = {"w_load": 0.2, "w_data": 1.0, "w_time": 1.0}
    res2 = client.post(
        "/v1/rescale", json={"kind": "commission", "count": 1, "dry_run": True, "weights": own}
    ).json()
    assert res2["weights"] == own


@pytest.mark.parametrize(
    ("order", "status", "reason"),
    [
        ({"kind": "decommission", "servers": [9]}, 404, "unknown server(s) [9]"),
        ({"kind": "decommission", "servers": [0, 1, 2, 3]}, 409, "every server"),
        ({"kind": "commission", "count": 0}, 422, "count >= 1"),
        ({"kind": "decommission", "servers": []}, 422, "names the servers"),
        ({"kind": "explode"}, 422, "kind"),
        ({"kind": "commission", "count": 10**9}, 422, "count"),
        ({"kind": "decommission", "servers": [2**40]}, 422, "servers"),
        ({"kind": "commission", "count": 1, "weights": {"w_load": 0.3, "w_data": 0.3}}, 422, "max(W_L, W_D)"),
    ],
)
def test_bad_orders_are_4xx_and_change_nothing(
    client: TestClient, order: dict, status: int, reason: str
) -> None:
    before = init(client)
    r = client.post("/v1/rescale", json=order)
    assert r.status_code == status, r.text
    assert reason in r.json()["detail"]
    after = client.get("/v1/placement").json()
    assert after["revision"] == 0 and after["placement"] == before["placement"]


def test_capacity_that_cannot_hold_the_data_is_409(make_client: Callable) -> None:
    client = make_client(capacity=1.5e9)
    init(client, servers=4, buckets=4)
    r = client.post("/v1/rescale", json={"kind": "decommission", "servers": [0, 1, 2]})
    assert r.status_code == 409 and r.json()["code"] == "infeasible"


def test_rescale_without_placement_is_404(client: TestClient) -> None:
    r = client.post("/v1/rescale", json={"kind": "commission", "count": 1})
    assert r.status_code == 404 and "placement" in r.json()["detail"]


def test_state_survives_a_new_app(make_client: Callable) -> None:
    first = make_client("same")
    init(first)
    first.post("/v1/rescale", json={"kind": "commission", "count": 1})
    first.put("/v1/policy", json=pv(4))
    placement = first.get("/v1/placement").json()
    second = make_client("same")
    assert second.get("/v1/placement").json() == placement
    assert second.get("/v1/policy").json() == pv(4)
    assert second.put("/v1/policy", json=pv(3)).status_code == 409


def test_openapi_documents_the_contract(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    put = spec["paths"]["/v1/policy"]["put"]
    assert {"200", "409", "422"} <= set(put["responses"])
    assert "Idempotency-Key" in {p["name"] for p in put["parameters"]}
    assert "push contract" in spec["info"]["description"]
    assert put["requestBody"]["content"]["application/json"]["examples"]
    assert {"/v1/placement", "/v1/rescale", "/v1/policies", "/healthz"} <= set(spec["paths"])


def test_commission_past_the_last_server_id_is_422(client: TestClient) -> None:
    # found by the fuzz test: new servers take ids after the largest, which may be the last one
    last = 2**31 - 1
    body = {"servers": [last - 1], "buckets": [{"id": 0, "load": 1, "size": 1}], "placement": {"0": last - 1}}
    assert client.post("/v1/placement", json=body).status_code == 201
    assert client.post("/v1/rescale", json={"kind": "commission", "count": 1}).status_code == 200
    r = client.post("/v1/rescale", json={"kind": "commission", "count": 2})
    assert r.status_code == 422 and "ids end at" in r.json()["detail"], r.text
    assert client.get("/v1/placement").json()["servers"] == [last - 1, last]


@pytest.mark.parametrize("given", ["Bearer s3crét".encode(), "Bearer ☃".encode(), b"Bearer \xff\xfe"])
def test_non_ascii_token_is_401_not_500(make_client: Callable, given: bytes) -> None:
    # issue 13, finding 8: compare_digest raised TypeError on a non-ASCII str (a 500)
    client = make_client(token="s3cret")
    r = client.put("/v1/policy", json=pv(1), headers={"Authorization": given})
    assert r.status_code == 401 and "bearer token" in r.json()["detail"]
    r = client.get("/v1/policy", headers={"Authorization": given})
    assert r.status_code == 401


def test_service_and_backend_map_errors_to_the_same_status() -> None:
    # one error-to-status table (issue 13, Build): the service said 422 for an infeasible
    # request where the backend said 409
    from regimetune.api.errors import status_of
    from regimetune.backend.app import _error
    from regimetune.models import (
        BoundsError,
        ConfigError,
        ConflictError,
        InfeasibleError,
        InputError,
        NotFoundError,
    )

    for exc in (
        NotFoundError("x"),
        ConflictError("x"),
        InfeasibleError("x"),
        InputError("x"),
        BoundsError("x"),
        ConfigError("x"),
    ):
        assert _error(exc).status_code == status_of(exc), exc
    assert status_of(InfeasibleError("x")) == 409
