"""Telemetry in: trace readers, the workload generator, and the windowing aggregator."""
