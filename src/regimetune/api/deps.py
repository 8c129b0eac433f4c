"""Annotated dependency aliases: routes ask for what they need, the app state provides it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from regimetune.api.metrics import Metrics
from regimetune.api.settings import Settings
from regimetune.api.store import Store
from regimetune.control.engine import Engine


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _store(request: Request) -> Store:
    return request.app.state.store


async def _engine(request: Request) -> Engine:
    return request.app.state.engine


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def _jobs(request: Request) -> Any:
    return request.app.state.jobs


SettingsDep = Annotated[Settings, Depends(_settings)]
StoreDep = Annotated[Store, Depends(_store)]
EngineDep = Annotated[Engine, Depends(_engine)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
JobsDep = Annotated[Any, Depends(_jobs)]
