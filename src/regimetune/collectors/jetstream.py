"""Per-window telemetry batches from a NATS JetStream subject, at least once.

Each message is one batch in the JSON of ``POST /v1/ingest`` (see
:func:`~regimetune.collectors.base.window_from_ingest`). The collector pulls through a durable
consumer and acknowledges a message only once the batch has been handed on, that is when the
consumer asks for the next one: a crash in between leaves it unacknowledged, and JetStream
delivers it again. So a batch may arrive twice; the message id (the ``Nats-Msg-Id`` header,
which JetStream also uses to drop duplicate publishes) is the idempotency key: an id seen in
the last ``dedup_window`` messages is acknowledged and dropped, and every batch carries its id
as ``source_id`` so the service's ``Idempotency-Key`` check catches redeliveries after a
restart of the collector too. A message published without an id is known by its stream and
stream sequence (``STREAM#42``), which a redelivery keeps. A malformed message is terminated (never redelivered) and stops
the read with its stream sequence and reason, unless ``skip_bad`` allows dropping it.

Needs the ``nats`` extra (``nats-py``), imported when a collector starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from regimetune.collectors.base import BaseCollector, WindowBatch, window_from_ingest
from regimetune.models.errors import ConfigError, InputError, SourceError

MSG_ID = "Nats-Msg-Id"


async def _quiet(exc: Exception) -> None:
    """nats-py logs every failed attempt through its error callback; the collector raises
    one :class:`SourceError` instead."""


class JetStreamCollector(BaseCollector):
    """Pull ``subject`` through the durable consumer ``durable`` (of ``stream``, found from the
    subject when ``None``), ``batch`` messages at a time. ``max_idle_s``: stop once no message
    came for that long (``None``: run until closed). ``window_s`` fills each batch's
    ``length``. ``duplicates`` and ``bad_messages`` count what was dropped."""

    name = "nats"
    window_option = "window_s"

    def __init__(
        self,
        subject: str,
        *,
        url: str = "nats://127.0.0.1:4222",
        stream: str | None = None,
        durable: str = "regimetune",
        batch: int = 64,
        max_idle_s: float | None = None,
        fetch_timeout_s: float = 1.0,
        connect_timeout_s: float = 2.0,
        dedup_window: int = 100_000,
        window_s: float = 0.0,
        skip_bad: int = 0,
    ) -> None:
        self.subject = subject
        self.url = url
        self.stream = stream
        self.durable = durable
        self.batch = batch
        self.max_idle_s = max_idle_s
        self.fetch_timeout_s = fetch_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.dedup_window = dedup_window
        self.window_s = window_s
        self.skip_bad = skip_bad
        self.duplicates = 0
        self.bad_messages = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._nc: Any = None

    # -- connection ------------------------------------------------------------------------
    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return self._loop.run_until_complete(coro)

    def _connect(self) -> Any:
        try:
            import nats
            import nats.errors
            import nats.js.errors
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError("the nats collector needs nats-py: pip install 'regimetune[nats]'") from exc
        self._loop = asyncio.new_event_loop()
        try:
            self._nc = self._run(
                asyncio.wait_for(
                    nats.connect(
                        self.url,
                        connect_timeout=self.connect_timeout_s,
                        max_reconnect_attempts=1,  # 0 would mean "no limit" to nats-py
                        allow_reconnect=False,
                        error_cb=_quiet,
                    ),
                    timeout=2 * self.connect_timeout_s,
                )
            )
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            self.close()
            raise SourceError(f"cannot connect to NATS at {self.url}: {exc!r}") from exc
        js = self._nc.jetstream()
        try:
            return self._run(js.pull_subscribe(self.subject, durable=self.durable, stream=self.stream))
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            self.close()
            raise SourceError(
                f"cannot consume {self.subject!r} from JetStream at {self.url}: {exc!r}"
            ) from exc

    def close(self) -> None:
        if self._loop is None:
            return
        if self._nc is not None:
            with contextlib.suppress(Exception):  # a close that fails leaves nothing to release
                self._run(self._nc.close())
            self._nc = None
        self._loop.close()
        self._loop = None

    # -- reading ---------------------------------------------------------------------------
    def collect(self) -> Iterator[WindowBatch]:
        if self.batch < 1 or self.dedup_window < 0 or self.skip_bad < 0:
            raise ConfigError("need batch >= 1, dedup_window >= 0 and skip_bad >= 0")
        import nats.errors

        sub = self._connect()
        idle = 0.0
        try:
            while self.max_idle_s is None or idle < self.max_idle_s:
                try:
                    msgs = self._run(sub.fetch(batch=self.batch, timeout=self.fetch_timeout_s))
                except (TimeoutError, nats.errors.TimeoutError):  # fetch raises either
                    idle += self.fetch_timeout_s
                    continue
                except nats.errors.Error as exc:
                    raise SourceError(f"lost NATS while reading {self.subject!r}: {exc!r}") from exc
                idle = 0.0
                for i, msg in enumerate(msgs):
                    try:
                        window = self._window(msg)
                    except BaseException:
                        self._nak(msgs[i + 1 :])
                        raise
                    if window is None:
                        continue
                    try:
                        yield window
                    except BaseException:  # the consumer failed or stopped: redeliver
                        self._nak(msgs[i:])
                        raise
                    self._run(msg.ack())  # handed on: now it is done
                    self._remember(window.source_id)
        finally:
            self.close()

    def _window(self, msg: Any) -> WindowBatch | None:
        """The message's batch, or ``None`` (acknowledged) for a duplicate or a skipped bad one."""
        msg_id = (msg.headers or {}).get(MSG_ID) or _stream_position(msg)
        if msg_id is not None and msg_id in self._seen:
            self.duplicates += 1
            self._run(msg.ack())
            return None
        try:
            return window_from_ingest(json.loads(msg.data), source_id=msg_id, length=self.window_s)
        except (ValueError, InputError) as exc:
            self.bad_messages += 1
            self._run(msg.term())
            seq = getattr(getattr(msg, "metadata", None), "sequence", None)
            where = f"nats {self.subject!r} stream seq {getattr(seq, 'stream', '?')} (id {msg_id})"
            if self.bad_messages > self.skip_bad:
                raise InputError(f"{where}: bad telemetry batch: {exc}") from exc
            return None

    def _remember(self, msg_id: str | None) -> None:
        if msg_id is None or not self.dedup_window:
            return
        self._seen[msg_id] = None
        while len(self._seen) > self.dedup_window:
            self._seen.popitem(last=False)

    def _nak(self, msgs: list[Any]) -> None:
        for m in msgs:
            with contextlib.suppress(Exception):  # the server redelivers after ack_wait anyway
                self._run(m.nak())


def _stream_position(msg: Any) -> str | None:
    """``STREAM#seq``: what identifies a message published without a ``Nats-Msg-Id``."""
    meta = getattr(msg, "metadata", None)
    seq = getattr(getattr(meta, "sequence", None), "stream", None)
    return None if meta is None or seq is None else f"{meta.stream}#{seq}"


__all__ = ["MSG_ID", "JetStreamCollector"]
