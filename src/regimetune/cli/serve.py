"""``regimetune serve``: run the service (REST API, online engine, push worker, dashboard)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

LOOPS = ("auto", "asyncio", "uvloop")
PARSERS = ("auto", "h11", "httptools")
SWITCH_INTERVAL_MS = 1.0


def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8080, min=0, max=65535, help="Port to listen on."),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="TOML or JSON settings file (else $REGIMETUNE_CONFIG)."
    ),
    store_url: str | None = typer.Option(None, help="Store URL (default sqlite:///regimetune.db)."),
    mode: str | None = typer.Option(None, help="Engine mode: off, recommend or auto."),
    push_backend: str | None = typer.Option(None, help="Push adapter: none, reference or rest."),
    push_url: str | None = typer.Option(None, help="URL of the backend the adapter pushes to."),
    policy_file: Path | None = typer.Option(
        None,
        help="Policy file from 'regimetune tune --out': its default is in force until the first "
        "change, and its detector state names the regimes.",
    ),
    detector_from: str | None = typer.Option(
        None,
        help="When the policy file's detector state is not the one the store's detector started "
        "from: refuse (default), policy-file (restart detection from the file) or store.",
    ),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    loop: str = typer.Option("auto", help="Event loop: auto (uvloop when installed), asyncio or uvloop."),
    http: str = typer.Option("auto", help="HTTP parser: auto (httptools when installed), h11 or httptools."),
    switch_interval_ms: float = typer.Option(
        SWITCH_INTERVAL_MS,
        min=0.05,
        help="Python's thread switch interval (sys.setswitchinterval) in ms: how long the event "
        "loop may wait for the GIL while ingest is applied in the background.",
    ),
) -> None:
    """Run the service. Settings come from --config, REGIMETUNE_* variables (nested with
    __, e.g. REGIMETUNE_AUTH__WRITE_TOKENS='["s3cret"]') and these options."""
    import uvicorn

    from regimetune.api import create_app

    if loop not in LOOPS:
        raise typer.BadParameter(f"one of {', '.join(LOOPS)}", param_hint="--loop")
    if http not in PARSERS:
        raise typer.BadParameter(f"one of {', '.join(PARSERS)}", param_hint="--http")

    over: dict[str, Any] = {}
    if store_url is not None:
        over["store"] = {"url": store_url}
    if mode is not None:
        over["engine"] = {"mode": mode}
    if push_backend is not None or push_url is not None:
        over["push"] = {k: v for k, v in (("backend", push_backend), ("url", push_url)) if v is not None}
    if policy_file is not None:
        over["policy_file"] = str(policy_file)
    if detector_from is not None:
        over["detector_from"] = detector_from
    settings = _merged(config, over)
    app = create_app(settings)
    Console(stderr=True).print(
        f"regimetune service on http://{host}:{port} (store {_safe_url(settings.store.url)}, "
        f"mode {settings.engine.mode}, push {settings.push.backend}); dashboard at /dashboard"
    )
    sys.setswitchinterval(switch_interval_ms / 1e3)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        # uvloop and httptools (uvicorn[standard]) when installed: a fraction of the CPU per
        # request of asyncio and h11, which matters when GET /v1/policy is polled at 1k/s
        loop=loop,
        http=http,
        # an access log line per request only where it is printed
        access_log=log_level.lower() in ("trace", "debug", "info"),
    )


def _merged(config: Path | None, over: dict[str, Any]) -> Any:
    """Options override the file and environment section by section, key by key."""
    from regimetune.api import load_settings

    base = load_settings(config)
    if not over:
        return base
    data = base.model_dump()
    for section, values in over.items():
        if isinstance(values, dict):
            data[section] = {**data[section], **values}
        else:
            data[section] = values
    for section in ("auth", "push"):  # secrets: hand over the real values, not the masks
        sec = getattr(base, section)
        for name in ("write_tokens", "read_tokens", "token"):
            if hasattr(sec, name):
                v = getattr(sec, name)
                data[section][name] = (
                    [t.get_secret_value() for t in v]
                    if isinstance(v, tuple)
                    else (None if v is None else v.get_secret_value())
                )
    return load_settings(config, **data)


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="serve")(serve)
