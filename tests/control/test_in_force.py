"""The regime in force as routes and metrics read it: published by the engine's thread after
each window, so a reader on another thread never looks into a detector that is moving."""

from __future__ import annotations

import threading
from typing import Any

from .test_owed_windows import feed, open_app


class Watched:
    """The engine's detector, its ``update`` held at a gate, and every other thread's look
    into it counted."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.owner: int | None = None  # the thread that applies the windows
        self.inside, self.go = threading.Event(), threading.Event()
        self.foreign_reads: list[str] = []

    def update(self, w: Any) -> Any:
        self.inside.set()
        assert self.go.wait(30)
        return self._inner.update(w)

    def __getattr__(self, name: str) -> Any:
        if threading.get_ident() != self.owner:
            self.foreign_reads.append(name)
        return getattr(self._inner, name)


def test_a_reader_sees_the_last_window_regime_while_the_detector_moves(tmp_path, workload) -> None:  # type: ignore[no-untyped-def]
    control, store = open_app(tmp_path / "rt.db")
    engine = control.engine
    try:
        feed(control, workload[:60])
        before = (engine.current_regime, engine.current_kind)
        assert before[0] is not None and before[1] in ("level", "transition")
        watched = engine._detector = Watched(engine._detector)

        def apply_rest() -> None:
            watched.owner = threading.get_ident()
            feed(control, workload[60:])

        t = threading.Thread(target=apply_rest)
        t.start()
        assert watched.inside.wait(30)
        during = (engine.current_regime, engine.current_kind)
        watched.go.set()
        t.join(60)
        assert during == before
        assert watched.foreign_reads == []
        inner = watched._inner
        assert engine.current_regime == inner.current
        assert engine.current_kind == inner.regimes[inner.current].kind
    finally:
        control.stop()
        store.close()
