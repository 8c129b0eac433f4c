"""The service: REST API, persistent store, online engine, push wiring, metrics, dashboard.

>>> from regimetune.api import load_settings
>>> load_settings(store={"url": "sqlite://"}).push.backend
'none'
"""

from regimetune.api.app import create_app, make_backend
from regimetune.api.settings import Settings, load_settings
from regimetune.control.engine import Engine, check_bounds

__all__ = ["Engine", "Settings", "check_bounds", "create_app", "load_settings", "make_backend"]
