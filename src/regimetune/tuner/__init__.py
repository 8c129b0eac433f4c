"""Tuning: trace-driven simulators, objectives, optimizers and per-regime tuning sessions."""

from regimetune.tuner.optim import OptimizationResult as OptimizationResult
from regimetune.tuner.optim import Param as Param
from regimetune.tuner.optim import Space as Space
from regimetune.tuner.optim import minimize as minimize
from regimetune.tuner.rescale import plan_rescale as plan_rescale

# isort: split
# cache simulation, objectives and per-regime cache tuning
from regimetune.tuner.cache import CacheResult as CacheResult
from regimetune.tuner.cache import CacheTrace as CacheTrace
from regimetune.tuner.cache import RegimePolicy as RegimePolicy
from regimetune.tuner.cache import StoreModel as StoreModel
from regimetune.tuner.cache import simulate as simulate
from regimetune.tuner.objectives import CacheObjective as CacheObjective
from regimetune.tuner.sessions import CacheTuning as CacheTuning
from regimetune.tuner.sessions import tune_cache as tune_cache
from regimetune.tuner.sessions import tune_cache_batches as tune_cache_batches
