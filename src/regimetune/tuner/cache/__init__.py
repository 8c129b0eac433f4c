"""Exact trace-driven simulation of a cache tier in front of a capacity-limited store.

``CacheTrace`` computes LRU stack distances once; ``simulate`` scores any capacity schedule
(unlimited, static LRU, Mantle two-phase, regime-keyed limits) with vectorised counts.
"""

from regimetune.tuner.cache.cost import DEFAULT_MISS_COST, DEFAULT_STORE_HEADROOM, CostModel
from regimetune.tuner.cache.schedule import (
    UNLIMITED,
    CachePolicyLike,
    CapacitySchedule,
    RegimePolicy,
    as_schedule,
    policy_schedule,
)
from regimetune.tuner.cache.sim import DEFAULT_VALUE_SIZE, CacheResult, CacheTrace, simulate
from regimetune.tuner.cache.stack import COLD, dense_ids, stack_distances
from regimetune.tuner.cache.store import DEFAULT_CAPACITY_OPS_S, StoreModel

__all__ = [
    "COLD",
    "DEFAULT_MISS_COST",
    "DEFAULT_STORE_HEADROOM",
    "CostModel",
    "DEFAULT_CAPACITY_OPS_S",
    "DEFAULT_VALUE_SIZE",
    "UNLIMITED",
    "CachePolicyLike",
    "CacheResult",
    "CacheTrace",
    "CapacitySchedule",
    "RegimePolicy",
    "StoreModel",
    "as_schedule",
    "dense_ids",
    "policy_schedule",
    "simulate",
    "stack_distances",
]
