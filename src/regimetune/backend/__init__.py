"""The reference rescaling backend: a small REST service that holds a bucket placement and
applies Pufferscale plans; it documents the push contract other backends implement
(``CONTRACT.md``). Run it with ``regimetune backend``; build it with :func:`create_app`."""

from regimetune.backend.app import create_app
from regimetune.backend.service import ReferenceService, demo_placement
from regimetune.backend.settings import BackendSettings, load_settings
from regimetune.backend.state import StateStore

__all__ = [
    "BackendSettings",
    "ReferenceService",
    "StateStore",
    "create_app",
    "demo_placement",
    "load_settings",
]
