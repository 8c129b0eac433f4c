"""Schemathesis over the backend's own OpenAPI: whatever a client sends, the answer is never
a 5xx (refusals are 4xx with a reason)."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from regimetune.backend import create_app, demo_placement, load_settings
from regimetune.backend.schemas import RescaleOrder

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import schemathesis

_STATE = Path(tempfile.mkdtemp(prefix="rt-backend-fuzz-")) / "fuzz.db"
_APP = create_app(load_settings(state=_STATE))
_APP.state.service.init_placement(demo_placement(servers=4, buckets=16, seed=0))
_APP.state.service.rescale(RescaleOrder(kind="commission", count=1, dry_run=True))  # load the planner
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_never_a_server_error(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text[:300])
    if response.status_code >= 400:  # every refusal says why
        assert response.json().get("detail"), response.text[:300]
