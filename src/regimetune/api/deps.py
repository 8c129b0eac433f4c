"""Annotated dependency aliases: routes ask for what they need, the app state provides it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from regimetune.api.metrics import Metrics
from regimetune.api.settings import Settings
from regimetune.api.store import SqlStore
from regimetune.control.controller import Controller
from regimetune.control.engine import Engine
from regimetune.control.jobs import JobManager


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _store(request: Request) -> SqlStore:
    return request.app.state.store


async def _control(request: Request) -> Controller:
    return request.app.state.control


async def _engine(request: Request) -> Engine:
    return request.app.state.engine


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def _jobs(request: Request) -> JobManager:
    return request.app.state.jobs


SettingsDep = Annotated[Settings, Depends(_settings)]
StoreDep = Annotated[SqlStore, Depends(_store)]
ControlDep = Annotated[Controller, Depends(_control)]
EngineDep = Annotated[Engine, Depends(_engine)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
JobsDep = Annotated[JobManager, Depends(_jobs)]
