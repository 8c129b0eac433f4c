"""A Redis Cluster as a rescaling backend: its masters are the planner's servers, its 16,384
hash slots the buckets. :class:`RedisClusterRescaler` reads the cluster, plans with
Pufferscale and moves slots with Redis's own resharding protocol; ``regimetune backend
--redis-cluster HOST:PORT`` serves it under the push contract (``../CONTRACT.md``).
The ``redis`` client is imported on first use."""

from regimetune.backend.redis_cluster.rescaler import (
    PlannedRescale,
    RedisClusterRescaler,
    RedisExecution,
    Snapshot,
)
from regimetune.backend.redis_cluster.store import Journal, RedisStateStore
from regimetune.backend.redis_cluster.topology import ClusterUnhealthy, Topology, read_topology

__all__ = [
    "ClusterUnhealthy",
    "Journal",
    "PlannedRescale",
    "RedisClusterRescaler",
    "RedisExecution",
    "RedisStateStore",
    "Snapshot",
    "Topology",
    "read_topology",
]
