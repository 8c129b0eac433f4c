"""The Redis Cluster backend's durable state, in the reference backend's SQLite file: the
policies pushed (as the reference backend), the server id given to each node (stable across
runs; new nodes get the next ids, the planner's convention), the journal of the rescale
in flight, written before any change and cleared when it is done, so a run that was killed
is finished by the next one, and the batches the mover timed (the duration model's fit)."""

from __future__ import annotations

import sqlite3

from pydantic import BaseModel, ConfigDict

from regimetune.backend.redis_cluster.costs import BatchTiming, timings_of
from regimetune.backend.state import StateStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS redis_servers (
    node_id TEXT PRIMARY KEY,
    server INTEGER UNIQUE NOT NULL
);
CREATE TABLE IF NOT EXISTS redis_journal (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS redis_move_timings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    slots INTEGER NOT NULL,
    keys INTEGER NOT NULL,
    bytes REAL NOT NULL,
    seconds REAL NOT NULL
);
"""

#: Timed batches kept for the cost fit (the latest).
KEEP_TIMINGS = 2000


class Journal(BaseModel):
    """A rescale in flight: the nodes to add (addresses) and remove (ids), each moving slot's
    target node and bytes, and each master's ``cluster-allow-replica-migration`` before."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    targets: dict[int, str]
    sizes: dict[int, float]
    replica_migration: dict[str, str] = {}
    predicted_s: float = 0.0


class RedisStateStore(StateStore):
    def _open(self) -> sqlite3.Connection:
        fresh = self._con is None
        con = super()._open()
        if fresh:
            con.executescript(_SCHEMA)
        return con

    def server_ids(self, node_ids: list[str]) -> dict[str, int]:
        """The server id of each node; nodes seen for the first time get the next ids, in
        the order given."""
        with self._connect(write=True) as con:
            known = dict(con.execute("SELECT node_id, server FROM redis_servers").fetchall())
            top = max(known.values(), default=-1)
            for nid in node_ids:
                if nid not in known:
                    top += 1
                    con.execute("INSERT INTO redis_servers (node_id, server) VALUES (?, ?)", (nid, top))
                    known[nid] = top
        return {nid: int(known[nid]) for nid in node_ids}

    def bind(self, node_id: str, server: int) -> None:
        """Give a joining node the id the plan gave it (taken from a node that left)."""
        with self._connect(write=True) as con:
            con.execute("DELETE FROM redis_servers WHERE server = ? AND node_id != ?", (server, node_id))
            con.execute(
                "INSERT INTO redis_servers (node_id, server) VALUES (?, ?) "
                "ON CONFLICT(node_id) DO UPDATE SET server = excluded.server",
                (node_id, server),
            )

    def journal(self) -> Journal | None:
        with self._connect() as con:
            row = con.execute("SELECT body FROM redis_journal WHERE id = 1").fetchone()
        return Journal.model_validate_json(row[0]) if row else None

    def set_journal(self, journal: Journal | None) -> None:
        with self._connect(write=True) as con:
            if journal is None:
                con.execute("DELETE FROM redis_journal")
            else:
                con.execute(
                    "INSERT INTO redis_journal (id, body) VALUES (1, ?) "
                    "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
                    (journal.model_dump_json(),),
                )

    def add_timings(self, timings: list[BatchTiming]) -> None:
        with self._connect(write=True) as con:
            con.executemany(
                "INSERT INTO redis_move_timings (slots, keys, bytes, seconds) VALUES (?, ?, ?, ?)",
                [(t.slots, t.keys, t.bytes, t.seconds) for t in timings],
            )
            con.execute(
                "DELETE FROM redis_move_timings WHERE id <= (SELECT MAX(id) FROM redis_move_timings) - ?",
                (KEEP_TIMINGS,),
            )

    def timings(self) -> list[BatchTiming]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT slots, keys, bytes, seconds FROM redis_move_timings ORDER BY id"
            ).fetchall()
        return timings_of(rows)


__all__ = ["Journal", "RedisStateStore"]
