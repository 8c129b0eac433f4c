"""The service: FastAPI app, persistence, the online engine, metrics and dashboard."""
