"""``regimetune backend``: run the reference rescaling backend (FastAPI under uvicorn), or,
with ``--redis-cluster``, the backend of a real Redis Cluster (once with ``--rescale``)."""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from regimetune.models import ConfigError, PufferscaleWeights


def parse_weights(text: str) -> PufferscaleWeights:
    """A preset name (L, LT, DT, LDT) or ``W_L,W_D,W_T``.

    >>> parse_weights("0.5,1,2").w_time
    2.0
    """
    try:
        if "," in text:
            w_l, w_d, w_t = (float(x) for x in text.split(","))
            return PufferscaleWeights(w_load=w_l, w_data=w_d, w_time=w_t)
        return PufferscaleWeights.preset(text)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        first = errors()[0]["msg"] if callable(errors) else str(exc)
        raise ConfigError(f"--weights {text!r}: {first} (a preset L, LT, DT, LDT or W_L,W_D,W_T)") from None


def parse_order(text: str) -> dict[str, Any]:
    """``commission:N`` or ``decommission:ID[,ID...]`` as a rescale order's fields.

    >>> parse_order("decommission:3,4")
    {'kind': 'decommission', 'servers': (3, 4)}
    """
    kind, _, arg = text.partition(":")
    try:
        if kind == "commission":
            return {"kind": kind, "count": int(arg)}
        if kind == "decommission":
            return {"kind": kind, "servers": tuple(int(s) for s in arg.split(","))}
    except ValueError:
        pass
    raise ConfigError(f"--rescale {text!r}: expected commission:N or decommission:ID[,ID...]")


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
    redis_cluster: str | None = typer.Option(
        None,
        help="HOST:PORT of a Redis Cluster node: rescale that cluster (masters = servers, slots = buckets).",
    ),
    spare: list[str] = typer.Option(
        [], help="HOST:PORT of an empty cluster-enabled Redis a commission may add (repeat)."
    ),
    recommend: bool = typer.Option(False, help="Redis: plan and report every order, move nothing."),
    load_source: str = typer.Option(
        "auto", help="Redis: per-slot load from 'lfu' (OBJECT FREQ), 'keys' (key counts) or 'auto'."
    ),
    rescale: str | None = typer.Option(
        None, help="Redis: carry out one order and exit: commission:N or decommission:ID[,ID...]."
    ),
    dry_run: bool = typer.Option(False, help="With --rescale: print the plan, change nothing."),
    key_batch: int = typer.Option(200, min=1, help="Redis: keys per MIGRATE command."),
    redis_cache: str | None = typer.Option(
        None,
        help="HOST:PORT of a Redis used as a cache: pushed cache policies set its maxmemory (allkeys-lru).",
    ),
    bytes_per_key: float | None = typer.Option(
        None, min=1, help="Redis cache: bytes a key takes (default: measured on the server)."
    ),
    weights: str | None = typer.Option(
        None, help="With --rescale: weights L, LT, DT, LDT or W_L,W_D,W_T (default: the policy in force)."
    ),
) -> None:
    """Run the reference rescaling backend: it takes pushed policy versions and answers rescale
    orders with Pufferscale plans. Settings also come from REGIMETUNE_BACKEND_* variables."""
    from regimetune.backend import create_app, demo_placement, load_settings

    settings = load_settings(host=host, port=port, state=state, token=token)
    console = Console(stderr=True)
    if redis_cluster is not None:
        _redis(
            settings, console, redis_cluster, spare, recommend, load_source, rescale, dry_run, weights,
            key_batch, log_level,
        )  # fmt: skip
        return
    if redis_cache is not None:
        _redis_cache(settings, console, redis_cache, bytes_per_key, log_level)
        return
    if rescale is not None or spare or recommend:
        raise ConfigError(
            "--rescale, --spare and --recommend act on a Redis Cluster: add --redis-cluster HOST:PORT"
        )
    app = create_app(settings)
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
    _serve(app, settings, console, f"reference backend (state {settings.state})", log_level)


def _serve(app: Any, settings: Any, console: Console, what: str, log_level: str) -> None:
    import uvicorn

    # Load the planner (numba, and the tuner package) in the background: /healthz answers at
    # once, and the first rescale order does not pay for the import.
    threading.Thread(target=importlib.import_module, args=("regimetune.tuner.rescale",), daemon=True).start()
    console.print(f"{what} on http://{settings.host}:{settings.port}")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level)


def _redis_cache(
    settings: Any, console: Console, address: str, bytes_per_key: float | None, log_level: str
) -> None:
    from regimetune.backend import create_app
    from regimetune.backend.redis_cache import RedisCache, RedisCacheService

    cache = RedisCache(address, bytes_per_key=bytes_per_key)
    service = RedisCacheService(settings, cache)
    current = service.store.current_policy()
    if current is not None:
        cache.apply(current.policy.cache)
        console.print(f"cache policy of version {current.version} applied to {address}")
    stop = threading.Event()

    def watch() -> None:  # the two-phase switch and the maxmemory correction
        while not stop.wait(1.0):
            try:
                cache.watch()
            except Exception as exc:  # a Redis that went away: report, keep watching
                console.print(f"watching {address}: {exc}", highlight=False)

    threading.Thread(target=watch, daemon=True).start()
    app = create_app(settings, service=service)
    try:
        _serve(
            app, settings, console, f"Redis cache backend for {address} (state {settings.state})", log_level
        )
    finally:
        stop.set()


def _redis(
    settings: Any,
    console: Console,
    address: str,
    spares: list[str],
    recommend: bool,
    load_source: str,
    rescale: str | None,
    dry_run: bool,
    weights: str | None,
    key_batch: int,
    log_level: str,
) -> None:
    from regimetune.backend import create_app
    from regimetune.backend.redis_cluster import RedisClusterRescaler, RedisStateStore
    from regimetune.backend.redis_cluster.routes import router
    from regimetune.backend.redis_cluster.service import RedisClusterService, RedisRescaleOrder
    from regimetune.backend.redis_cluster.topology import parse_address

    for a in (address, *spares):
        parse_address(a)
    if load_source not in ("auto", "lfu", "keys"):
        raise ConfigError(f"--load-source {load_source!r}: choose auto, lfu or keys")
    if (dry_run or weights) and rescale is None:
        raise ConfigError("--dry-run and --weights go with --rescale")
    store = RedisStateStore(settings.state)
    rescaler = RedisClusterRescaler(
        address,
        store,
        spares=spares,
        load_source=load_source,  # type: ignore[arg-type]
        key_batch=key_batch,
        log=lambda msg: console.print(msg, highlight=False),
    )
    service = RedisClusterService(settings, rescaler, mode="recommend" if recommend else "apply")
    done = None if recommend else rescaler.resume()
    if done is not None:
        console.print(
            f"finished the rescale in flight: {done.slots_moved} slot(s), {done.keys_moved} key(s) moved"
        )
    if rescale is not None:
        order = RedisRescaleOrder(
            **parse_order(rescale), dry_run=dry_run, weights=parse_weights(weights) if weights else None
        )
        result = service.rescale(order)
        body = result.model_dump(mode="json", exclude={"plan": {"placement"}})
        typer.echo(json.dumps(body, indent=1))
        rescaler.close()
        return
    app = create_app(settings, service=service, rescale_router=router)
    mode = "recommend mode" if recommend else "apply mode"
    _serve(
        app,
        settings,
        console,
        f"Redis Cluster backend for {address} ({mode}, state {settings.state})",
        log_level,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command(name="backend")(backend)
