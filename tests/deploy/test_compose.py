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

from .conftest import compose, compose_raw

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
    assert all("profiles" not in s for n, s in svc.items() if not n.startswith("demo-"))
    assert svc["demo-daemon"]["command"][0] == "replay"
    assert svc["demo-daemon"]["depends_on"]["demo-trace"]["condition"] == "service_completed_successfully"
    assert svc["demo-daemon"]["depends_on"]["regimetune"]["condition"] == "service_healthy"
