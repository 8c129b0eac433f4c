"""One router module per resource."""

from regimetune.api.routes import dashboard, decisions, engine, health, ingest, policies, regimes, tuning

ROUTERS = (
    ingest.router,
    regimes.router,
    policies.router,
    decisions.router,
    engine.router,
    tuning.router,
    health.router,
    dashboard.router,
)

__all__ = ["ROUTERS"]
