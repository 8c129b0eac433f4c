"""Properties of delivery under arbitrary failure schedules (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regimetune.models import Policy, PolicyVersion
from regimetune.push import InMemoryOutboxStore, OutboxWorker, RecordingBackend, RetryPolicy
from regimetune.push.base import PermanentPushError, PushReceipt, TransientPushError


class ScriptedBackend(RecordingBackend):
    """Fails attempt k as the script says ("ok", "transient", "permanent"), then behaves."""

    def __init__(self, script: list[str]) -> None:
        super().__init__(name="scripted")
        self.script = list(script)

    def push(self, version: PolicyVersion) -> PushReceipt:
        what = self.script.pop(0) if self.script else "ok"
        if what == "transient":
            raise TransientPushError("flaky", version=version.version)
        if what == "permanent":
            raise PermanentPushError("refused", version=version.version)
        return super().push(version)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 8),
    script=st.lists(st.sampled_from(["ok", "transient", "transient", "permanent"]), max_size=30),
    supersede=st.booleans(),
)
def test_each_version_delivered_at_most_once_in_order_and_none_lost(
    n: int, script: list[str], supersede: bool
) -> None:
    now = [0.0]
    store = InMemoryOutboxStore()
    backend = ScriptedBackend(script)
    events = []
    worker = OutboxWorker(
        store,
        backend,
        retry=RetryPolicy(base=1.0, cap=10.0),
        on_event=events.append,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        seed=0,
        supersede=supersede,
    )
    for v in range(1, n + 1):
        store.append(PolicyVersion(version=v, policy=Policy(), created_at=float(v)))
    worker.drain()
    got = backend.received_versions
    assert got == sorted(set(got))  # in order, each once
    assert not [e for e in events if e.kind == "failed"]  # transient never gives up
    refused = {e.version for e in events if e.kind == "refused"}
    superseded = {e.version for e in events if e.kind == "superseded"}
    # none lost: each version delivered, refused or superseded, exactly one of them
    assert sorted([*got, *refused, *superseded]) == list(range(1, n + 1))
    # superseded only by a newer version that was delivered
    assert all(e.in_force in got and e.in_force > e.version for e in events if e.kind == "superseded")
    if not supersede:
        attempts = backend.attempted_versions
        assert attempts == sorted(attempts)  # never went back to an older version
        assert not superseded
