"""``regimetune backend``: run the reference rescaling backend (FastAPI under uvicorn)."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

import typer
from rich.console import Console


def backend(
    host: str | None = typer.Option(None, help="Interface to bind (default 127.0.0.1)."),
    port: int | None = typer.Option(None, help="Port to listen on (default 8081)."),
    state: Path | None = typer.Option(
        None, help="SQLite file holding placement and policies (default backend.db)."
    ),
    token: str | None = typer.Option(None, help="Require this bearer token on /v1 calls."),
    servers: int | None = typer.Option(
        None, min=1, help="Initialise a demo placement with this many servers."
    ),
    buckets: int = typer.Option(64, min=1, help="Buckets of the demo placement."),
    seed: int = typer.Option(0, help="Seed of the demo placement."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
) -> None:
    """Run the reference rescaling backend: it takes pushed policy versions and answers rescale
    orders with Pufferscale plans. Settings also come from REGIMETUNE_BACKEND_* variables."""
    import uvicorn

    from regimetune.backend import create_app, demo_placement, load_settings

    settings = load_settings(host=host, port=port, state=state, token=token)
    app = create_app(settings)
    console = Console(stderr=True)
    service = app.state.service
    if servers is not None:
        existing = service.store.placement()
        if existing is None:
            service.init_placement(demo_placement(servers=servers, buckets=buckets, seed=seed))
            console.print(f"demo placement: {servers} servers, {buckets} buckets (seed {seed})")
        else:
            console.print(
                f"keeping the placement in {settings.state} (revision {existing.revision}, "
                f"{len(existing.servers)} servers); --servers is ignored"
            )
    # Load the planner (numba, and the tuner package) in the background: /healthz answers at
    # once, and the first rescale order does not pay for the import.
    threading.Thread(target=importlib.import_module, args=("regimetune.tuner.rescale",), daemon=True).start()
    console.print(f"reference backend on http://{settings.host}:{settings.port} (state {settings.state})")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="backend")(backend)
