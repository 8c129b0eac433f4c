#!/bin/sh
# Compile every numba kernel once, into numba's cache (NUMBA_CACHE_DIR): the detector's, then
# the hashing, cache-simulation and rescaling kernels through a small run of the commands that
# use them. The image runs it at build time, as its runtime user; tests/deploy runs it too.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python -c "from regimetune.regimes.detector import compile_kernel; compile_kernel()"
regimetune generate "$work/run.parquet" --duration 3600 --sim-workers 4 --seed 1 --buckets 8 >/dev/null
for objective in cache rescale; do
    regimetune tune "$work/run.parquet" --objective "$objective" --budget 2 --jobs 0 \
        --param min_regime_s=300 --json >/dev/null
done
