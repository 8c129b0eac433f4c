"""The service: REST routes, the SQL store, the push wiring, metrics and the dashboard over
the application layer (:mod:`regimetune.control`).

>>> from regimetune.api import load_settings
>>> load_settings(store={"url": "sqlite://"}).push.backend
'none'
"""

from regimetune.api.app import create_app, make_backend
from regimetune.api.settings import Settings, load_settings

__all__ = ["Settings", "create_app", "load_settings", "make_backend"]
