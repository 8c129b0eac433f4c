"""Hooks the schemathesis command loads (``SCHEMATHESIS_HOOKS``) in the service fuzz test.

The compact ingest body is raw bytes, sent like application/octet-stream. And the schema
cannot say that parallel arrays have equal lengths or that a batch holds counts or events,
and random times are nearly never within the allowed lateness of the service's clock, so
random batches are nearly always refused with 422 and ingest is only exercised as far as
validation. Half of the generated JSON batches are therefore made consistent (counts only,
arrays cut to the shortest, dated now on the wall clock as a daemon would), and half of the
compact ones cut to whole 16-byte records and dated now, so they reach the store, the windows and the detector. (The hook
cannot tell negative cases from positive ones, so a few negative ingest cases made valid
show up as negative_data_rejection failures: expected, and not asserted.)"""

from __future__ import annotations

import time
import warnings
from typing import Any

from hypothesis import strategies as st

from regimetune.client.ingest import COUNTS_MEDIA_TYPE

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import schemathesis

schemathesis.serializer.alias(COUNTS_MEDIA_TYPE, "application/octet-stream")

_PARALLEL = {"counts": ("keys", "reads", "writes"), "buckets": ("ids", "load", "bytes")}


def _consistent(body: Any) -> Any:
    """The same batch with counts only (one key when it had none), each group's arrays cut to
    its shortest, dated now."""
    if not isinstance(body, dict):
        return body
    counts = body.get("counts") if isinstance(body.get("counts"), dict) else {"keys": [0], "reads": [1]}
    out = {k: v for k, v in body.items() if k != "events"} | {"window_start": time.time(), "counts": counts}
    for group, names in _PARALLEL.items():
        arrays = out.get(group)
        if isinstance(arrays, dict):
            present = [n for n in names if isinstance(arrays.get(n), list)]
            n = min((len(arrays[k]) for k in present), default=0)
            out[group] = {**arrays, **{k: arrays[k][:n] for k in present}}
    return out


@schemathesis.hook
def flatmap_body(context: schemathesis.HookContext, body: Any) -> Any:
    op = context.operation
    if op is not None and op.path == "/v1/ingest/counts":
        raw = getattr(body, "data", body)  # schemathesis' Binary, or bytes
        if isinstance(raw, bytes):  # whole 16-byte key records
            return st.sampled_from([body, raw[: len(raw) // 16 * 16]])
    if op is None or op.method.upper() != "POST" or op.path != "/v1/ingest":
        return st.just(body)
    return st.sampled_from([body, _consistent(body)])


@schemathesis.hook
def flatmap_query(context: schemathesis.HookContext, query: Any) -> Any:
    """The compact ingest body's window is a query parameter: dated now half the time."""
    op = context.operation
    if op is None or op.path != "/v1/ingest/counts" or not isinstance(query, dict):
        return st.just(query)
    return st.sampled_from([query, {**query, "window_start": time.time()}])
