"""regimetune: detect the workload regimes of an elastic storage service online, tune its
cache thresholds and rescaling weights per regime, and push the chosen policy.

Flow, one package per step: ``collectors`` -> ``regimes`` -> ``tuner`` -> ``api`` (store,
engine) -> ``push``; ``models`` is the shared vocabulary.
"""

__version__ = "0.1.0"
