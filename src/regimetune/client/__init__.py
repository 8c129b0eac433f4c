"""The storage daemon's side of the service: count events per window and key, and send them
to ``POST /v1/ingest`` (:mod:`~regimetune.client.ingest`; used by ``regimetune replay``,
``collect``, the demo and the benchmark)."""
