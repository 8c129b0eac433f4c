"""Regime detection: features, online clustering with stable ids, stability, paper mode, metrics."""
