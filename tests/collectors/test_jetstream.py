"""The NATS JetStream collector against the real server at 127.0.0.1:4222 (skipped without it):
batches in the ingest JSON, at least once, the message id as the idempotency key."""

from __future__ import annotations

import time

import pytest

from regimetune.collectors.jetstream import JetStreamCollector
from regimetune.models import InputError
from regimetune.models.errors import SourceError


def _body(start: float, keys: list[int], reads: list[int]) -> dict[str, object]:
    return {"window_start": start, "counts": {"keys": keys, "reads": reads}}


def _collector(js, **kw) -> JetStreamCollector:  # type: ignore[no-untyped-def]
    kw.setdefault("durable", "rt")
    return JetStreamCollector(
        js.subject, url=js.url, stream=js.stream, max_idle_s=0.6, fetch_timeout_s=0.2, **kw
    )


def test_batches_arrive_in_order_and_a_redelivered_id_is_dropped(jetstream) -> None:  # type: ignore[no-untyped-def]
    jetstream.publish(_body(0, [1, 2], [5, 1]), msg_id="d1-w0")
    jetstream.publish(_body(10, [1], [3]), msg_id="d1-w1")
    time.sleep(0.7)  # past the stream's duplicate window: JetStream stores the resend again
    jetstream.publish(_body(0, [1, 2], [5, 1]), msg_id="d1-w0")
    jetstream.publish(
        {"window_start": 20, "events": {"ts": [20.5, 21.0], "key": [7, 8], "op": [0, 1]}}, msg_id="d1-w2"
    )
    c = _collector(jetstream, window_s=10)
    got = list(c.collect())
    assert [(w.window_start, w.source_id, w.requests) for w in got] == [
        (0.0, "d1-w0", 6),
        (10.0, "d1-w1", 3),
        (20.0, "d1-w2", 2),
    ]
    assert c.duplicates == 1
    assert got[2].events is not None and got[2].writes_total == 1 and got[0].length == 10
    assert jetstream.pending("rt") == 0  # everything handed on was acknowledged


def test_a_batch_not_handed_on_is_delivered_again(jetstream) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        jetstream.publish(_body(10 * i, [i], [1]), msg_id=f"w{i}")
    first = _collector(jetstream).collect()
    assert next(first).source_id == "w0"
    assert next(first).source_id == "w1"  # w0 is acknowledged now, w1 is not yet
    first.close()  # the consumer stops (or dies) while holding w1
    again = [w.source_id for w in _collector(jetstream).collect()]
    assert again == ["w1", "w2"]


def test_a_malformed_message_names_its_sequence_and_is_not_redelivered(jetstream) -> None:  # type: ignore[no-untyped-def]
    jetstream.publish(_body(0, [1], [1]), msg_id="ok")
    jetstream.publish(
        None, raw=b'{"window_start": 5, "counts": {"keys": [1, 2], "reads": [1]}}', msg_id="bad"
    )
    jetstream.publish(_body(20, [1], [1]), msg_id="ok2")
    c = _collector(jetstream)
    with pytest.raises(InputError, match=r"stream seq 2 \(id bad\).*equal lengths"):
        list(c.collect())
    # the bad one was terminated; reading on (with a budget) finds only what is left
    rest = _collector(jetstream, skip_bad=1)
    assert [w.source_id for w in rest.collect()] == ["ok2"]


def test_skip_bad_drops_bad_messages_within_the_budget(jetstream) -> None:  # type: ignore[no-untyped-def]
    jetstream.publish(None, raw=b"not json", msg_id="x")
    jetstream.publish(_body(0, [1], [2]), msg_id="y")
    c = _collector(jetstream, skip_bad=1)
    assert [w.source_id for w in c.collect()] == ["y"]
    assert c.bad_messages == 1


def test_unreachable_server_is_a_source_error() -> None:
    pytest.importorskip("nats")
    c = JetStreamCollector("x", url="nats://127.0.0.1:9", connect_timeout_s=0.5, max_idle_s=0.1)
    with pytest.raises(SourceError, match="cannot connect to NATS"):
        list(c.collect())
    c.close()


def test_a_message_without_an_id_is_known_by_its_stream_position(jetstream) -> None:  # type: ignore[no-untyped-def]
    jetstream.publish(_body(0, [1], [2]))
    jetstream.publish(_body(10, [1], [3]), msg_id="named")
    ids = [w.source_id for w in _collector(jetstream).collect()]
    assert ids == [f"{jetstream.stream}#1", "named"]  # a redelivery keeps the same position
