"""Where candidate evaluations run: a local pool or a Dask cluster, chosen by one string.

``open_executor("process", workers=2)`` is a ``ProcessPoolExecutor``; ``"thread"`` a thread
pool; ``"tcp://host:8786"`` (any Dask scheduler address) a ``distributed.Client`` on that
scheduler and its ``concurrent.futures``-style executor. Dask is an optional extra
(``pip install regimetune[dask]``), imported only when an address is given.

:func:`share` hands a large object (the trace behind an objective) to the workers once: on
Dask it is scattered to every worker and the tasks carry only a reference to it; a local
executor gets the object itself.

:func:`evaluator` is what a tuning session runs its candidates with: the executor a caller
names (or gives), and a task that carries the problem (the trace behind the objective) to
each local worker process once rather than with every candidate.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from regimetune.models.errors import ConfigError, TuningError

_DASK_SCHEMES = ("tcp://", "tls://", "ws://", "wss://", "inproc://", "ucx://")


def is_dask_address(spec: str) -> bool:
    """True for a Dask scheduler address such as ``tcp://127.0.0.1:8786``."""
    return isinstance(spec, str) and spec.startswith(_DASK_SCHEMES) and len(spec) > spec.index("//") + 2


def check_executor_spec(spec: str) -> str:
    """``spec`` itself when it names an executor (``process``, ``thread`` or a scheduler
    address); a ``ConfigError`` naming the choices otherwise."""
    if spec in ("process", "thread") or is_dask_address(spec):
        return spec
    raise ConfigError(
        f"unknown executor {spec!r}: use 'process', 'thread' or a Dask scheduler address such as "
        "'tcp://127.0.0.1:8786'"
    )


def dask_client(address: str, *, timeout_s: float = 30.0) -> Any:
    """A ``distributed.Client`` connected to ``address`` (``TuningError`` when unreachable,
    ``ConfigError`` when Dask is not installed)."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ConfigError(
            "a Dask scheduler address needs the dask extra: pip install 'regimetune[dask]'"
        ) from exc
    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise TuningError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc


@contextlib.contextmanager
def open_executor(
    spec: str,
    *,
    workers: int = 1,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    connect_timeout_s: float = 30.0,
) -> Iterator[cf.Executor]:
    """An executor for ``spec``, shut down on exit. ``workers`` sizes a local pool (a Dask
    cluster has its own); ``initializer`` runs in each local process or thread."""
    check_executor_spec(spec)
    if is_dask_address(spec):
        client = dask_client(spec, timeout_s=connect_timeout_s)
        try:
            yield client.get_executor(pure=False)
        finally:
            client.close()
        return
    cls = cf.ProcessPoolExecutor if spec == "process" else cf.ThreadPoolExecutor
    pool = cls(max_workers=max(workers, 1), initializer=initializer, initargs=initargs)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def dask_client_of(executor: cf.Executor | None) -> Any | None:
    """The ``distributed.Client`` behind a Dask executor, else None."""
    client = getattr(executor, "_client", None)
    return client if client is not None and hasattr(client, "scatter") else None


def share(executor: cf.Executor | None, obj: Any) -> Any:
    """``obj`` as the tasks of ``executor`` should receive it: scattered once to every Dask
    worker (a reference that Dask resolves in each task's arguments), or ``obj`` itself."""
    client = dask_client_of(executor)
    if client is None:
        return obj
    return client.scatter(obj, broadcast=True, hash=False)


_WORKER_PAYLOAD: Any = None


def _init_worker(payload: Any) -> None:
    global _WORKER_PAYLOAD
    _WORKER_PAYLOAD = payload


def _in_worker(fn: Callable[[Any, Any], Any], params: Any) -> Any:
    """``fn(payload, params)`` in a pool started with ``_init_worker``: the payload crossed once."""
    if _WORKER_PAYLOAD is None:  # pragma: no cover - a pool without the initializer
        raise TuningError("worker has no tuning problem")
    return fn(_WORKER_PAYLOAD, params)


def default_workers() -> int:
    """Local processes a session uses when not told: two, or one on a single core."""
    return min(2, os.cpu_count() or 1)


@contextlib.contextmanager
def evaluator(
    executor: cf.Executor | str | None,
    workers: int | None,
    payload: Any,
    fn: Callable[[Any, Any], Any],
) -> Iterator[tuple[cf.Executor | None, Callable[[Any], Any]]]:
    """The executor candidates run in and the task it runs (``fn(payload, params)``).

    ``executor`` is an executor, its name (``"process"``, ``"thread"``, a Dask scheduler
    address) or None: a local process pool of ``workers`` processes (default
    :func:`default_workers`), or this process when ``workers`` is 0. A process pool of our
    own receives ``payload`` once per worker (its initializer); a Dask cluster once per
    worker too (``minimize`` scatters the task); a given executor gets it with every task.
    ``fn`` must be a module-level function (it is pickled)."""
    n = default_workers() if workers is None else workers
    with_payload: Callable[[Any], Any] = partial(fn, payload)
    if executor is None and n <= 0:
        yield None, with_payload
    elif executor is None or executor == "process":
        with open_executor("process", workers=n, initializer=_init_worker, initargs=(payload,)) as pool:
            yield pool, partial(_in_worker, fn)
    elif isinstance(executor, str):
        with open_executor(executor, workers=n) as pool:
            yield pool, with_payload
    else:
        yield executor, with_payload


__all__ = [
    "check_executor_spec",
    "default_workers",
    "evaluator",
    "dask_client",
    "dask_client_of",
    "is_dask_address",
    "open_executor",
    "share",
]
