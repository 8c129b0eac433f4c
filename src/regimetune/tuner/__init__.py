"""Tuning: trace-driven simulators, objectives, optimizers and per-regime tuning.

One entry point for both objectives, usable from a notebook:

    from regimetune.tuner import CacheConfig, Validation, Workload, tune

    work = Workload.read("run.csv")                 # windows, regimes (as the service labels them)
    cache = tune(work, "cache", config=CacheConfig(budget=40))
    weights = tune(work, "rescale", validation=Validation(holdout=0.5))
    again = tune(Workload.read("run2.csv"), "cache", warm_start=cache)
    cache.policy_file, cache.report["baselines"], cache.searches[0].best_so_far()
"""

from regimetune.tuner.optim import OptimizationResult as OptimizationResult
from regimetune.tuner.optim import Param as Param
from regimetune.tuner.optim import Space as Space
from regimetune.tuner.optim import minimize as minimize
from regimetune.tuner.rescale import plan_rescale as plan_rescale

# isort: split
# cache simulation and its objective
from regimetune.tuner.cache import CacheResult as CacheResult
from regimetune.tuner.cache import CacheTrace as CacheTrace
from regimetune.tuner.cache import CostModel as CostModel
from regimetune.tuner.cache import RegimePolicy as RegimePolicy
from regimetune.tuner.cache import StoreModel as StoreModel
from regimetune.tuner.cache import simulate as simulate
from regimetune.tuner.objectives import CacheObjective as CacheObjective

# isort: split
# the one tuning API
from regimetune.tuner.config import CacheConfig as CacheConfig
from regimetune.tuner.config import RescaleConfig as RescaleConfig
from regimetune.tuner.config import Validation as Validation
from regimetune.tuner.config import WarmStart as WarmStart
from regimetune.tuner.result import Search as Search
from regimetune.tuner.result import TuningResult as TuningResult
from regimetune.tuner.result import Verdict as Verdict
from regimetune.tuner.session import tune as tune
from regimetune.tuner.workload import Workload as Workload
from regimetune.tuner.workload import policy_labels as policy_labels
