"""regimetune: detect the workload regimes of an elastic storage service online, tune its
cache thresholds and rescaling weights per regime, and push the chosen policy.

Flow, one package per step: ``collectors`` -> ``regimes`` -> ``tuner`` -> ``control`` (the
online engine and tuning jobs) -> ``push``, with ``api`` (the service: routes, the SQL store,
metrics) over ``control``; ``client`` is a storage daemon's side; ``models`` is the shared
vocabulary.
"""

__version__ = "0.1.0"
