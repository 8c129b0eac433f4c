"""Outbound: adapters that push policy versions to rescaling backends."""
