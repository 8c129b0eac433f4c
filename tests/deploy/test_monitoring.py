"""The Prometheus config and alert rules pass promtool (check config, check rules, and the
alerts' unit tests); every query of the Grafana board is valid PromQL (checked by promtool as
recording rules) naming metrics the service or the backend really exports, with real labels."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from regimetune.api.metrics import Metrics
from regimetune.backend.routes.metrics import BackendCollector

from .conftest import ROOT

PROM = ROOT / "deploy" / "prometheus"
BOARD = ROOT / "deploy" / "grafana" / "dashboards" / "regimes.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: prometheus)")
# Grafana's interval variables, as Grafana would substitute them
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
# labels Prometheus adds to every scraped series
TARGET_LABELS = {"job", "instance"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


class _FakeEngine:
    paused = False
    mode = "auto"
    current_regime = None
    owed_windows = 0


class _FakeService:
    class store:
        @staticmethod
        def current_policy() -> None:
            return None

        @staticmethod
        def placement() -> None:
            return None


def _series_names(name: str, kind: str) -> list[str]:
    return {
        "counter": [name + "_total"],
        "histogram": [name + s for s in ("_bucket", "_sum", "_count")],
    }.get(kind, [name])


def exported() -> set[str]:
    """Every series name the service (with its engine gauges) and the backend expose."""
    m = Metrics.create(CollectorRegistry())
    m.watch_engine(_FakeEngine())
    backend = CollectorRegistry()
    backend.register(BackendCollector(_FakeService()))  # type: ignore[arg-type]
    return {
        n for reg in (m.registry, backend) for fam in reg.collect() for n in _series_names(fam.name, fam.type)
    }


def series_labels() -> dict[str, set[str]]:
    """Label names per series: the service's metrics as declared, the backend's (none)."""
    out: dict[str, set[str]] = {}
    for metric in vars(Metrics.create(CollectorRegistry())).values():
        if hasattr(metric, "_labelnames"):
            for n in _series_names(metric._name, metric._type):
                out[n] = set(metric._labelnames) | ({"le"} if n.endswith("_bucket") else set())
    for fam in BackendCollector(_FakeService()).collect():  # type: ignore[arg-type]
        out[fam.name] = set()
    return out


def board_queries() -> list[tuple[str, str]]:
    board = json.loads(BOARD.read_text())
    out = []
    for p in board["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            out.append((p["title"], expr))
    return out


def alert_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load((PROM / "alerts.yml").read_text())
    return [(r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"]]


_IDENT = re.compile(r"\b(regimetune_[a-z0-9_]+)\b(\s*\{[^}]*\})?")
_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def check_names(where: str, expr: str, series: dict[str, set[str]]) -> list[str]:
    """The regimetune series an expression names, each exported, with labels it has."""
    named = []
    for name, selector in _IDENT.findall(expr):
        assert name in series, f"{where}: {name} is not exported"
        named.append(name)
        for label in re.findall(r"([a-z_]+)\s*[!=]~?", selector or ""):
            assert label in series[name] | TARGET_LABELS, f"{where}: {name} has no label {label}"
    grouped = {x.strip() for g in _BY.findall(expr) for x in g.split(",") if x.strip()}
    known = set().union(*(series[n] for n in named)) | TARGET_LABELS if named else TARGET_LABELS
    assert grouped <= known, f"{where}: grouping by unknown labels {grouped - known}"
    return named


def test_queries_name_exported_metrics_with_real_labels() -> None:
    series = series_labels()
    assert set(series) == exported()
    assert series["regimetune_engine_mode"] == {"mode"}
    for title, expr in board_queries():
        assert check_names(title, expr, series), f"{title}: {expr} names no regimetune metric"
    for alert, expr in alert_queries():
        if alert != "RegimetuneDown":
            assert check_names(alert, expr, series), alert


def test_a_misspelt_metric_or_label_is_caught() -> None:
    series = series_labels()
    with pytest.raises(AssertionError, match="not exported"):
        check_names("x", "rate(regimetune_ingest_batch_total[1m])", series)
    with pytest.raises(AssertionError, match="no label"):
        check_names("x", 'regimetune_pushes_total{result="failed"}', series)
    with pytest.raises(AssertionError, match="unknown labels"):
        check_names("x", "sum by (regime) (regimetune_pushes_total)", series)


def test_board_shows_what_an_operator_needs() -> None:
    board = json.loads(BOARD.read_text())
    titles = " | ".join(p["title"].lower() for p in board["panels"])
    for want in ("current regime", "regime timeline", "policy versions", "ingest rate", "outbox"):
        assert want in titles
    timeline = next(p for p in board["panels"] if p["title"] == "Regime timeline")
    assert timeline["type"] == "state-timeline"
    ds = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = ds["datasources"][0]["uid"]
    for p in board["panels"]:
        assert p["datasource"]["uid"] == uid
        assert all(t["datasource"]["uid"] == uid for t in p["targets"])
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


@needs_promtool
def test_promtool_check_config() -> None:
    r = promtool("check", "config", str(PROM / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_promtool_check_rules() -> None:
    r = promtool("check", "rules", str(PROM / "alerts.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alert_queries())} rules found" in r.stdout


@needs_promtool
def test_alerts_fire_on_their_series() -> None:
    r = promtool("test", "rules", str(PROM / "alerts_test.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    alerts = {a for a, _ in alert_queries()}
    tested = set(re.findall(r"alertname: (\w+)", (PROM / "alerts_test.yml").read_text()))
    assert alerts == tested, f"alerts without a unit test: {alerts - tested}"


def _rules_file(tmp_path: Path, queries: list[tuple[str, str]]) -> Path:
    rules: dict[str, Any] = {
        "groups": [
            {
                "name": "board",
                "rules": [{"record": f"board:query_{i}", "expr": e} for i, (_, e) in enumerate(queries)],
            }
        ]
    }
    path = tmp_path / "board-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    return path


@needs_promtool
def test_board_queries_are_valid_promql(tmp_path: Path) -> None:
    queries = board_queries()
    assert len(queries) >= 10
    r = promtool("check", "rules", str(_rules_file(tmp_path, queries)))
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_promtool_rejects_invalid_promql(tmp_path: Path) -> None:
    r = promtool(
        "check", "rules", str(_rules_file(tmp_path, [("bad", "sum(rate(regimetune_windows_total[1m])")]))
    )
    assert r.returncode != 0
