"""Where candidate evaluations run: a local pool or a Dask cluster, chosen by one string.

``open_executor("process", workers=2)`` is a ``ProcessPoolExecutor``; ``"thread"`` a thread
pool; ``"tcp://host:8786"`` (any Dask scheduler address) a ``distributed.Client`` on that
scheduler and its ``concurrent.futures``-style executor. Dask is an optional extra
(``pip install regimetune[dask]``), imported only when an address is given.

:func:`share` hands a large object (the trace behind an objective) to the workers once: on
Dask it is scattered to every worker and the tasks carry only a reference to it; a local
executor gets the object itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
from collections.abc import Callable, Iterator
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


__all__ = [
    "check_executor_spec",
    "dask_client",
    "dask_client_of",
    "is_dask_address",
    "open_executor",
    "share",
]
