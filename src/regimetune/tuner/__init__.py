"""Tuning: trace-driven simulators, objectives, optimizers and per-regime tuning sessions."""

from regimetune.tuner.optim import OptimizationResult as OptimizationResult
from regimetune.tuner.optim import Param as Param
from regimetune.tuner.optim import Space as Space
from regimetune.tuner.optim import minimize as minimize
from regimetune.tuner.rescale import plan_rescale as plan_rescale
