"""Tuning: trace-driven simulators, objectives, optimizers and per-regime tuning sessions."""

from regimetune.tuner.rescale import plan_rescale as plan_rescale
