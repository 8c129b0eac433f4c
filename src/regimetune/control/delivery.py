"""What became of a policy version's push, as the decision log says it: the push worker's
delivery events (:class:`~regimetune.push.DeliveryEvent`, whose ``outcome`` is the
decision-log outcome) turned into that outcome and a reason on the decision that made the
version."""

from __future__ import annotations

from regimetune.control.store import Store
from regimetune.push import DeliveryEvent


def record_delivery(store: Store, ev: DeliveryEvent) -> None:
    """Record ``ev`` on the decision that made its version (other events than delivered,
    superseded, failed, refused and stalled change nothing there)."""
    detail = _reason(ev)
    if detail is not None:
        store.set_outcome(ev.version, ev.outcome, detail)


def _reason(ev: DeliveryEvent) -> str | None:
    if ev.kind == "delivered":
        return "delivered" + (" (backend already held it)" if ev.duplicate else "")
    if ev.kind == "superseded":
        return f"not delivered: {ev.error}"
    if ev.kind in ("failed", "refused"):
        kept = "none" if ev.in_force is None else f"version {ev.in_force}"
        what = "refused by the backend" if ev.kind == "refused" else "push failed"
        return f"{what} ({ev.error}); later versions go on; the backend keeps {kept}"
    if ev.kind == "stalled":
        return f"backend behind: {ev.attempts} failed attempts ({ev.error}); still retrying"
    return None


__all__ = ["record_delivery"]
