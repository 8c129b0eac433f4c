"""``/metrics``: what the reference backend holds, for Prometheus (unauthenticated, as
``/healthz``). Read from the state store at each scrape, so a restart loses nothing."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from regimetune.backend.deps import ServiceDep
from regimetune.backend.service import ReferenceService

router = APIRouter(tags=["health"])


class BackendCollector(Collector):
    """The policy version in force, the placement revision and its server count (-1 / 0
    before the first policy or placement)."""

    def __init__(self, service: ReferenceService) -> None:
        self.service = service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        policy = self.service.store.current_policy()
        placement = self.service.store.placement()
        yield GaugeMetricFamily(
            "regimetune_backend_policy_version",
            "Policy version in force at the backend (-1: none yet).",
            value=-1 if policy is None else policy.version,
        )
        yield GaugeMetricFamily(
            "regimetune_backend_placement_revision",
            "Revision of the bucket placement (-1: none yet).",
            value=-1 if placement is None else placement.revision,
        )
        yield GaugeMetricFamily(
            "regimetune_backend_servers",
            "Servers in the current placement.",
            value=0 if placement is None else len(placement.servers),
        )


@router.get("/metrics", response_class=Response, summary="Prometheus metrics")
def metrics(service: ServiceDep) -> Response:
    registry = CollectorRegistry()
    registry.register(BackendCollector(service))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
