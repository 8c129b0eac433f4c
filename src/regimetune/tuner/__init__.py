"""Tuning: trace-driven simulators, objectives, optimizers and per-regime tuning sessions."""
