"""``regimetune demo --backend redis``: the demo's loop with a real Redis Cluster as the
rescaling backend. A local cluster (3 masters and one empty node to commission), or the
cluster and empty node given (``--redis-cluster``, ``--redis-spare``: the docker compose
profile's containers), takes the demo's workload through a cluster client, window by window
(scaled down to at most ``MAX_OPS_PER_WINDOW`` requests); the Redis Cluster backend takes the
policy versions the service pushes; at the end one commission is ordered with the weights in
force and carried out on the cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Console

MAX_OPS_PER_WINDOW = 400
VALUE = b"v" * 512


class RedisDemo:
    """The local cluster and the client of the demo."""

    def __init__(self, console: Console, *, seed: str | None = None, spare: str | None = None) -> None:
        from regimetune.backend.redis_cluster.local import LocalCluster, LocalRedis
        from regimetune.models import ConfigError

        if (seed is None) != (spare is None):
            raise ConfigError("--redis-cluster and --redis-spare go together (a cluster and an empty node)")
        if seed is None and not LocalRedis.available():
            raise ConfigError("--backend redis needs redis-server (e.g. apt-get install redis-server)")
        self.console = console
        self.cluster = (
            LocalCluster(3, spares=1, config=("maxmemory-policy allkeys-lfu", "lfu-log-factor 0"))
            if seed is None
            else None
        )
        self.seed = seed or ""
        self.spare = spare or ""
        self.client: Any = None
        self.requests = 0

    def start(self) -> RedisDemo:
        import redis

        from regimetune.backend.redis_cluster.topology import parse_address

        if self.cluster is not None:
            with self.console.status("starting a local Redis Cluster (3 masters, 1 spare)..."):
                self.cluster.start()
            self.seed, self.spare = self.cluster.address, self.cluster.spares[0].address
        host, port = parse_address(self.seed)
        self.client = redis.RedisCluster(host=host, port=port)
        masters = len(self.client.get_primaries())
        self.console.print(f"Redis Cluster      {self.seed} ({masters} masters), spare {self.spare}")
        return self

    def backend_args(self) -> list[str]:
        """``regimetune backend`` options that serve this cluster."""
        return ["--redis-cluster", self.seed, "--spare", self.spare]

    def replay(self, wc: Any) -> None:
        """One window's requests through the cluster client (reads of absent keys fill them)."""
        total = int(wc.reads.sum() + wc.writes.sum())
        if not total:
            return
        scale = min(1.0, MAX_OPS_PER_WINDOW / total)
        pipe = self.client.pipeline()
        for key, r, w in zip(wc.keys.tolist(), wc.reads.tolist(), wc.writes.tolist(), strict=True):
            name = f"k:{key}"
            for _ in range(int(np.ceil(w * scale))):
                pipe.set(name, VALUE)
            for _ in range(int(np.ceil(r * scale))):
                pipe.get(name)
        got = pipe.execute()
        self.requests += len(got)

    def rescale(self, http: Any, burl: str, headers: dict[str, str]) -> None:
        """Commission the spare with the weights in force, and show what moved."""
        self.console.rule("[bold]rescaling the Redis Cluster")
        self.console.print(f"{self.requests} requests replayed through the cluster client")
        with self.console.status("commission of 1 node: plan, join, move slots..."):
            r = http.post(
                f"{burl}/v1/rescale", json={"kind": "commission", "count": 1}, headers=headers, timeout=600
            )
        if r.status_code != 200:
            self.console.print(f"[red]rescale refused ({r.status_code}):[/] {r.json().get('detail')}")
            return
        body = r.json()
        w, ex, m = body["weights"], body["execution"], body["plan"]["metrics"]
        self.console.print(
            f"weights W_L={w['w_load']:.3g} W_D={w['w_data']:.3g} W_T={w['w_time']:.3g} "
            f"(policy version {body['policy_version']})"
        )
        self.console.print(
            f"moved {ex['slots_moved']} slots, {ex['keys_moved']} keys, {ex['bytes_moved'] / 2**20:.1f} MiB "
            f"in {ex['wall_s']:.1f} s; largest master {ex['max_bytes_over_mean']:.2f}x the mean bytes, "
            f"{ex['max_load_over_mean']:.2f}x the mean load (plan: {m['d_max'] / m['d_target']:.2f}x, "
            f"{m['l_max'] / m['l_target']:.2f}x)"
        )

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:  # only what it started
            self.cluster.stop()


__all__ = ["RedisDemo"]
