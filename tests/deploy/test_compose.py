"""docker-compose.yml against the Compose Specification's JSON schema (vendored, see
compose_spec.NOTICE.md), and the topology it must describe (Docker is not on these machines)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .conftest import compose, compose_raw, option

SCHEMA = Path(__file__).with_name("compose_spec.json")
SCHEMA_SHA256 = "0dc04bd346dcfee1b1419628fff79937bbf076925f298f272a2b490e2b112bac"


def _validator() -> Any:
    schema = json.loads(SCHEMA.read_text())
    # the schema names draft 2019-09 (its $schema URI with a trailing '#', unknown to jsonschema)
    cls = jsonschema.Draft201909Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_vendored_schema_is_unchanged() -> None:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert Path(__file__).with_name("compose_spec.LICENSE").read_text().startswith("\n" + " " * 33 + "Apache")


def test_compose_file_validates_against_the_compose_spec() -> None:
    errors = sorted(_validator().iter_errors(compose_raw()), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["services"]["regimetune"].update(healthchek={"test": ["CMD", "true"]}),
        lambda d: d["services"]["regimetune"]["depends_on"]["migrate"].update(condition="finished"),
        lambda d: d["services"]["postgres"].update(ports="5432"),
    ],
    ids=["misspelt-key", "unknown-condition", "ports-not-a-list"],
)
def test_the_schema_check_catches_mistakes(mutate: Any) -> None:
    doc = copy.deepcopy(compose_raw())
    mutate(doc)
    assert list(_validator().iter_errors(doc))


def test_topology() -> None:
    svc = compose()["services"]
    assert {"postgres", "migrate", "regimetune", "backend", "dask-scheduler", "dask-worker"} <= set(svc)
    assert {"prometheus", "grafana", "demo-trace", "demo-daemon"} <= set(svc)
    # PostgreSQL is healthy when pg_isready says so
    assert svc["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    # the migration runs once, after PostgreSQL is healthy; the service waits for both
    assert svc["migrate"]["command"] == ["migrate"]
    assert svc["migrate"]["restart"] == "no"
    assert svc["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    deps = svc["regimetune"]["depends_on"]
    assert deps["postgres"]["condition"] == "service_healthy"
    assert deps["migrate"]["condition"] == "service_completed_successfully"
    assert svc["regimetune"]["command"][0] == "serve"
    assert "/readyz" in " ".join(svc["regimetune"]["healthcheck"]["test"])
    assert svc["backend"]["command"][0] == "backend"
    # a Dask scheduler and two workers
    assert svc["dask-scheduler"]["command"][0] == "scheduler"
    assert svc["dask-worker"]["command"][0] == "worker"
    assert svc["dask-worker"]["deploy"]["replicas"] == 2
    # the demo daemon only in the demo profile, after its trace is generated and the service is ready
    for name in ("demo-trace", "demo-daemon"):
        assert svc[name]["profiles"] == ["demo"]
    assert all("profiles" not in s for n, s in svc.items() if not n.startswith(("demo-", "redis-")))
    assert svc["demo-daemon"]["command"][0] == "replay"
    assert svc["demo-daemon"]["depends_on"]["demo-trace"]["condition"] == "service_completed_successfully"
    assert svc["demo-daemon"]["depends_on"]["regimetune"]["condition"] == "service_healthy"


def test_the_redis_profile_runs_the_demo_loop_on_a_cluster_of_containers() -> None:
    """Three cluster-enabled masters and an empty node on fixed addresses of one subnet, made
    a cluster once they answer; the backend on it in recommend mode, and the demo's loop
    commissioning the empty node (both commands parse: test_references)."""
    import ipaddress

    doc = compose()
    svc = doc["services"]
    redis = {n: s for n, s in svc.items() if n.startswith("redis-")}
    assert all(s["profiles"] == ["redis"] for s in redis.values())
    subnet = ipaddress.ip_network(doc["networks"]["redis"]["ipam"]["config"][0]["subnet"])
    nodes = ("redis-1", "redis-2", "redis-3", "redis-spare")
    address = {}
    for name in nodes:
        cmd = svc[name]["command"]
        assert cmd[0] == "redis-server" and cmd[cmd.index("--cluster-enabled") + 1] == "yes"
        assert cmd[cmd.index("--maxmemory-policy") + 1] == "allkeys-lfu"  # per-slot load
        ip = ipaddress.ip_address(svc[name]["networks"]["redis"]["ipv4_address"])
        assert ip in subnet
        address[name] = f"{ip}:6379"
        assert svc[name]["healthcheck"]["test"][-1] == "ping"
    assert len(set(address.values())) == 4
    create = svc["redis-cluster-create"]
    script = create["command"][-1]
    masters = [address[n] for n in ("redis-1", "redis-2", "redis-3")]
    assert "--cluster create " + " ".join(masters) in script and address["redis-spare"] not in script
    assert all(create["depends_on"][n]["condition"] == "service_healthy" for n in nodes)
    backend, demo = svc["redis-backend"]["command"], svc["redis-demo"]["command"]
    assert backend[0] == "backend" and "--recommend" in backend
    assert (
        option(backend, "--redis-cluster") in masters and option(backend, "--spare") == address["redis-spare"]
    )
    assert demo[:3] == ["demo", "--backend", "redis"]
    assert (
        option(demo, "--redis-cluster") in masters and option(demo, "--redis-spare") == address["redis-spare"]
    )
    for name in ("redis-backend", "redis-demo"):
        assert (
            svc[name]["depends_on"]["redis-cluster-create"]["condition"] == "service_completed_successfully"
        )
        assert "redis" in svc[name]["networks"]
    port = option(backend, "--port")
    assert f"127.0.0.1:{port}/healthz" in " ".join(svc["redis-backend"]["healthcheck"]["test"])
